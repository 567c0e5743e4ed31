//! How far two peers' worlds are apart: what session tests assert and benchmarks report after a session settles.

use std::time::Duration;

use crate::world::World;
use crate::world::authority::{PlayerIndex, RETURN_TO_DEFAULT_FRAMES};
use crate::world::scene::ObjectId;

/// The differences between a replica's world and the reference (the host's).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Divergence {
    /// Largest distance between an object's position on the two sides (m).
    pub max_position_m: f32,
    /// Largest angle between an object's orientations on the two sides (rad).
    pub max_rotation_rad: f32,
    /// Objects whose authority view (player and both sequences) differs.
    pub authority_mismatches: usize,
    /// Objects held by different players (or held on one side only).
    pub holder_mismatches: usize,
}

/// Compares every object of `replica` with the same object in `reference` (the worlds must share a scene).
pub fn divergence(reference: &World, replica: &World) -> Divergence {
    let mut d = Divergence::default();
    let count = reference.object_count().min(replica.object_count());
    for id in 0..count as ObjectId {
        let (a, b) = (reference.physics_pose(id), replica.physics_pose(id));
        d.max_position_m = d
            .max_position_m
            .max((a.translation.vector - b.translation.vector).norm());
        d.max_rotation_rad = d.max_rotation_rad.max(a.rotation.angle_to(&b.rotation));
        if reference.authority(id).view != replica.authority(id).view {
            d.authority_mismatches += 1;
        }
        let holder = |w: &World| w.holder(id).map(|h| h.player);
        if holder(reference) != holder(replica) {
            d.holder_mismatches += 1;
        }
    }
    d
}

/// Objects a world still has under `player`'s authority or in `player`'s hands.
pub fn objects_of(world: &World, player: PlayerIndex) -> Vec<ObjectId> {
    (0..world.object_count() as ObjectId)
        .filter(|&id| {
            world.authority(id).view.authority == player
                || world.holder(id).is_some_and(|h| h.player == player)
        })
        .collect()
}

/// Whether `world` stands still: every object at rest and in no hand.
pub fn is_still(world: &World) -> bool {
    (0..world.object_count() as ObjectId)
        .all(|id| world.is_at_rest(id) && world.holder(id).is_none())
}

/// How long every peer's world has stood still (see [`is_still`]). Authority over an object returns to default
/// only after it has rested for [`RETURN_TO_DEFAULT_FRAMES`], and the return then takes a
/// trip through the host to reach the other peers: worlds compared sooner than that after the last object came to
/// rest differ by a return still on its way, not by a fault. Benchmarks read their settled figures once this has
/// lasted [`settle_time`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stillness {
    since: Option<Duration>,
}

impl Stillness {
    /// Nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records whether every world stood still at `now` (call once a frame, after every peer stepped).
    pub fn observe(&mut self, now: Duration, still: bool) {
        if !still {
            self.since = None;
        } else if self.since.is_none() {
            self.since = Some(now);
        }
    }

    /// How long every world has stood still without a break, as of `now`.
    pub fn still_for(&self, now: Duration) -> Duration {
        self.since.map_or(Duration::ZERO, |s| now.saturating_sub(s))
    }
}

/// How long every world must stand still before peers are compared as settled, on a session whose one-way `trip`
/// (half the round trip, the jitter and the play-out delay) is the longest a frame takes from one peer's world into
/// another's: the return to default after [`RETURN_TO_DEFAULT_FRAMES`] frames at rest at `frame_rate`, then two
/// trips, from its authority to the host and from the host to every other guest.
pub fn settle_time(frame_rate: u32, trip: Duration) -> Duration {
    Duration::from_secs(1) / frame_rate.max(1) * RETURN_TO_DEFAULT_FRAMES + trip * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stillness_counts_from_the_last_motion_on_any_peer() {
        let ms = Duration::from_millis;
        let mut s = Stillness::new();
        assert_eq!(s.still_for(ms(0)), Duration::ZERO);
        s.observe(ms(0), true);
        s.observe(ms(500), true);
        assert_eq!(s.still_for(ms(500)), ms(500));
        // A cube that tumbles off a pile on one peer starts the count again.
        s.observe(ms(600), false);
        assert_eq!(s.still_for(ms(600)), Duration::ZERO);
        s.observe(ms(700), true);
        s.observe(ms(2700), true);
        assert_eq!(s.still_for(ms(2700)), ms(2000));
    }
}
