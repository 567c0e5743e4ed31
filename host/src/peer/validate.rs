//! The host's checks on a guest's update before the arbitration rules see it: what no honest guest can send.

use nalgebra::Vector3;
use physync_codec::{AvatarState, ObjectState, QuantConfig, seq_newer};
use physync_engine::world::World;
use physync_engine::world::authority::{
    AuthorityView, DEFAULT_AUTHORITY, Direction, PlayerIndex, Verdict, judge_update,
};

use super::config::{Plausibility, WorldBounds};

/// The furthest an honest guest's ownership sequence can run ahead of the host's: each grab it makes before
/// hearing back adds one.
pub const MAX_OWNERSHIP_LEAD: u16 = 4;
/// The furthest an honest guest's authority sequence can run ahead of the host's at equal ownership: touches
/// and returns to default add one each.
pub const MAX_AUTHORITY_LEAD: u16 = 64;

/// Why an update was refused before arbitration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// It claims another player's authority or avatar, or snatches an object another player holds.
    NoAuthority,
    /// Its sequences run further ahead than an honest guest's can.
    ForgedSequence,
    /// It places something outside the world bounds.
    OutOfBounds,
    /// It moves an object further or faster than physics can.
    Implausible,
}

fn lead(update: u16, local: u16) -> u16 {
    if seq_newer(update, local) {
        update.wrapping_sub(local)
    } else {
        0
    }
}

/// Whether sequences claimed by `sender` could come from an honest guest, given the host's view.
fn check_sequences(
    local: AuthorityView,
    ownership_seq: u16,
    authority_seq: u16,
) -> Result<(), Bad> {
    if lead(ownership_seq, local.ownership_seq) > MAX_OWNERSHIP_LEAD {
        return Err(Bad::ForgedSequence);
    }
    if ownership_seq == local.ownership_seq
        && lead(authority_seq, local.authority_seq) > MAX_AUTHORITY_LEAD
    {
        return Err(Bad::ForgedSequence);
    }
    Ok(())
}

/// What the host knows when it checks one object update: its world, its limits, and how long (s) it has been
/// since it last accepted this object's state from the sender.
pub struct ObjectCheck<'a> {
    /// The host's world.
    pub world: &'a World,
    /// Where objects may be.
    pub bounds: &'a WorldBounds,
    /// Speed, spin and displacement limits.
    pub limits: &'a Plausibility,
    /// Seconds since the host last accepted this object from the sender (or since it took authority).
    pub since_accepted_s: f32,
}

/// Checks one object update from `sender`: authority, bounds, sequences, and, for an update that would win the
/// arbitration, that the motion is physically plausible from the host's own copy of the object. An update that
/// loses (an object in another player's hand, older sequences) never moves the host's world, whatever it
/// claims: it is an honest race (a guest still simulating what another player just caught, until the host's
/// word reaches it) or a snatch, and the arbitration refuses it as a conflict (see
/// `World::receive_object_state`). Checking its motion would only compare two players' versions of the object.
pub fn check_object(
    check: &ObjectCheck<'_>,
    sender: PlayerIndex,
    id: u16,
    state: &ObjectState,
) -> Result<(), Bad> {
    let world = check.world;
    if state.authority != sender && state.authority != DEFAULT_AUTHORITY {
        return Err(Bad::NoAuthority);
    }
    let quant = &world.config().quant;
    let position = Vector3::from(state.body.position_f32(quant));
    if !check.bounds.contains(position.into()) {
        return Err(Bad::OutOfBounds);
    }
    check_sequences(
        world.authority(id).view,
        state.ownership_seq,
        state.authority_seq,
    )?;
    let update = AuthorityView {
        authority: state.authority,
        authority_seq: state.authority_seq,
        ownership_seq: state.ownership_seq,
    };
    let held_by_other = world.holder(id).is_some_and(|h| h.player != sender);
    let wins = judge_update(
        Direction::GuestToHost { sender },
        world.authority(id).view,
        update,
    ) == Verdict::Accept;
    if held_by_other || !wins {
        return Ok(());
    }
    let limits = check.limits;
    let velocity = Vector3::from(state.body.linear_velocity_f32(quant));
    let spin = Vector3::from(state.body.angular_velocity_f32(quant));
    if velocity.norm() > limits.max_speed || spin.norm() > limits.max_spin {
        return Err(Bad::Implausible);
    }
    let here = world.physics_pose(id).translation.vector;
    let speed = velocity.norm().max(world.linear_velocity(id).norm());
    let gap = check.since_accepted_s.clamp(0.0, limits.max_gap_s) + world.dt();
    if (position - here).norm() > limits.slack_m + speed * gap {
        return Err(Bad::Implausible);
    }
    Ok(())
}

/// Checks an avatar from `sender` and strips held objects it may not claim; returns the avatar to apply, the
/// bad claims found (each with the object concerned, if any), or the reason to drop it whole.
pub fn check_avatar(
    world: &World,
    bounds: &WorldBounds,
    sender: PlayerIndex,
    avatar: &AvatarState,
) -> Result<(AvatarState, Vec<(Bad, u16)>), Bad> {
    if avatar.player != sender {
        return Err(Bad::NoAuthority);
    }
    let quant: &QuantConfig = &world.config().quant;
    let poses = std::iter::once(&avatar.head).chain(avatar.hands.iter().map(|h| &h.pose));
    if poses
        .into_iter()
        .any(|p| !bounds.contains(quant.position.dequantize(p.position)))
    {
        return Err(Bad::OutOfBounds);
    }
    let mut clean = *avatar;
    let mut bad = Vec::new();
    for hand in &mut clean.hands {
        let Some(held) = hand.held else { continue };
        if usize::from(held.object) >= world.object_count() {
            hand.held = None;
            continue;
        }
        let view = world.authority(held.object).view;
        let held_by_other = world
            .holder(held.object)
            .is_some_and(|h| h.player != sender);
        let verdict = if held_by_other && seq_newer(held.ownership_seq, view.ownership_seq) {
            Err(Bad::NoAuthority)
        } else {
            check_sequences(view, held.ownership_seq, held.authority_seq)
        };
        if let Err(b) = verdict {
            bad.push((b, held.object));
            hand.held = None;
        }
    }
    Ok((clean, bad))
}
