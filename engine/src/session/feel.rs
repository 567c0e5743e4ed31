//! What a player sees, frame by frame: a meter fed one peer's world after every step, which records the faults a
//! person notices on screen (a body drawn below the floor, a flying object stepping backward, a rendered pose
//! jumping). Session tests and the `peer_feel` benchmark share it, so both measure the same thing.

use nalgebra::Vector3;
use serde::Serialize;

use crate::world::authority::PlayerIndex;
use crate::world::scene::ObjectId;
use crate::world::smoothing::MAX_WAIT_SECONDS;
use crate::world::{AppliedState, FLOOR_TOP, World, lowest_point};

/// Depth (m) below the floor's top a body may be drawn at before it counts as sinking: the position quantum
/// (1/512 m) with rounding.
pub const FLOOR_TOLERANCE_M: f32 = 0.002;

/// A rendered pose moving further than this (m) in one frame beyond what the object's speed covers is a snap.
pub const SNAP_M: f32 = 0.05;

/// A rendered pose that moved less than this (m) in a frame stood still.
const STILL_M: f32 = 1e-4;
/// Steps shorter than this (m) give no direction of motion to step back from.
const MIN_STEP_M: f32 = 0.001;

/// A backstep longer than this (m) is logged by a meter built with [`FeelMeter::logging`] (the goal of the
/// `peer_feel` benchmark).
pub const LOGGED_BACKSTEP_M: f32 = 0.01;

/// Which pose a fault was seen in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FeelFault {
    /// The rendered pose stepped against the object's motion.
    RenderBackstep,
    /// The physics pose stepped against the object's motion.
    PhysicsBackstep,
    /// The rendered pose jumped more than [`SNAP_M`] beyond what its speed covers.
    Snap,
}

/// One fault a peer showed, with what the peer knew of the object on that frame: what a person debugging the
/// figures needs to tell one cause from another.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FeelEvent {
    /// The peer's frame count (after the step that showed it).
    pub frame: u64,
    /// The object.
    pub object: ObjectId,
    /// What was seen.
    pub fault: FeelFault,
    /// How far (m).
    pub metres: f32,
    /// The authority this peer gave the object.
    pub authority: PlayerIndex,
    /// Whether that authority was confirmed by the host.
    pub confirmed: bool,
    /// The player holding it, if any.
    pub holder: Option<PlayerIndex>,
    /// What it touched on the previous step: object ids, `None` for the level.
    pub contacts_before: Vec<Option<ObjectId>>,
    /// What it touches after this step.
    pub contacts: Vec<Option<ObjectId>>,
    /// Frames since this peer last wrote a received state into the object (1: just before this step).
    pub frames_since_applied: Option<u64>,
    /// How far that state moved the physics pose (m).
    pub applied_jump_m: Option<f32>,
    /// The physics velocity that state replaced, and the one after this step (m/s).
    pub velocity_replaced: Option<[f32; 3]>,
    /// The physics velocity after this step (m/s).
    pub velocity: [f32; 3],
    /// The physics position after this step.
    pub position: [f32; 3],
    /// Distance of the rendered pose from the physics pose after this step (m).
    pub render_offset_m: f32,
}

/// A step of a free-flying object against its own direction of motion on a peer without authority over it, with
/// the received states written into the object before it: what [`crate::session::flight`] needs to tell a
/// backstep the authority's own trajectory made (it touched something there) from one the sync made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backstep {
    /// The peer's frame count (after the step that showed it).
    pub frame: u64,
    /// The object.
    pub object: ObjectId,
    /// How far it stepped back (m).
    pub metres: f32,
    /// The authority this peer gave the object.
    pub authority: PlayerIndex,
    /// The last received state written into the object before this frame's step.
    pub applied: Option<AppliedState>,
    /// The received state the pose two frames earlier came from (the step compared against starts there).
    pub origin: Option<AppliedState>,
    /// Whether this peer saw the object's authority change hands within [`MAX_WAIT_SECONDS`] before: a new
    /// authority's first states come from its own copy, which trails the old authority's by a trip and a play-out
    /// delay when it took the object by touch in flight.
    pub after_handover: bool,
}

/// The worst of what one peer showed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FeelFigures {
    /// Frames observed.
    pub frames: u64,
    /// Deepest any rendered body sank below the floor's top beyond [`FLOOR_TOLERANCE_M`] (m).
    pub max_render_below_floor_m: f32,
    /// Largest step of a free-flying object against its own direction of motion, on a peer without authority
    /// over it, render or physics pose (m).
    pub max_backstep_m: f32,
    /// The same, rendered pose only (m).
    pub max_render_backstep_m: f32,
    /// The same, physics pose only (m).
    pub max_physics_backstep_m: f32,
    /// Rendered poses that jumped more than [`SNAP_M`] in one frame beyond what the speed covers.
    pub snaps: u64,
    /// The largest such jump (m), counted or not.
    pub worst_jump_m: f32,
    /// The longest a free object's rendered pose stood still while its physics pose moved, on a peer
    /// without authority over it (s): what waiting for a late timeline (`world::smoothing`) costs on screen.
    pub longest_render_wait_s: f32,
}

impl FeelFigures {
    /// The worst of two sets of figures (frames added).
    pub fn merge(self, other: FeelFigures) -> FeelFigures {
        FeelFigures {
            frames: self.frames + other.frames,
            max_render_below_floor_m: self
                .max_render_below_floor_m
                .max(other.max_render_below_floor_m),
            max_backstep_m: self.max_backstep_m.max(other.max_backstep_m),
            max_render_backstep_m: self.max_render_backstep_m.max(other.max_render_backstep_m),
            max_physics_backstep_m: self
                .max_physics_backstep_m
                .max(other.max_physics_backstep_m),
            snaps: self.snaps + other.snaps,
            worst_jump_m: self.worst_jump_m.max(other.worst_jump_m),
            longest_render_wait_s: self.longest_render_wait_s.max(other.longest_render_wait_s),
        }
    }
}

/// One object as the peer showed it on the previous frame.
#[derive(Debug, Clone)]
struct Seen {
    render: Vector3<f32>,
    physics: Vector3<f32>,
    render_step: Vector3<f32>,
    physics_step: Vector3<f32>,
    speed: f32,
    flying: bool,
    /// How long (s) its rendered pose has stood still, neither held nor at rest, while its physics pose moved.
    waited: f32,
    contacts: Vec<Option<ObjectId>>,
    /// The last received states written into the object, newest first.
    applied: [Option<AppliedState>; 3],
    /// The authority this peer gave it.
    authority: PlayerIndex,
    /// The frame on which that authority last changed here.
    handover_frame: Option<u64>,
}

/// The meter of one peer. Call [`FeelMeter::observe`] after each of its steps.
#[derive(Debug, Clone, Default)]
pub struct FeelMeter {
    seen: Vec<Option<Seen>>,
    figures: FeelFigures,
    log: Option<Vec<FeelEvent>>,
    backsteps: Vec<Backstep>,
}

impl FeelMeter {
    /// A meter that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A meter that also logs every snap and every backstep over [`LOGGED_BACKSTEP_M`] with its context.
    pub fn logging() -> Self {
        Self {
            log: Some(Vec::new()),
            ..Self::default()
        }
    }

    /// What the peer showed so far.
    pub fn figures(&self) -> FeelFigures {
        self.figures
    }

    /// The faults logged so far (none unless built with [`FeelMeter::logging`]).
    pub fn events(&self) -> &[FeelEvent] {
        self.log.as_deref().unwrap_or_default()
    }

    /// Every backstep over 1 mm seen so far, render or physics pose.
    pub fn backsteps(&self) -> &[Backstep] {
        &self.backsteps
    }

    /// Reads every object's render and physics pose of one frame of `world`.
    pub fn observe(&mut self, world: &World) {
        let count = world.object_count();
        self.seen.resize(count, None);
        self.figures.frames += 1;
        let dt = world.dt();
        for id in 0..count as ObjectId {
            let seen = self.observe_object(world, id, dt);
            self.seen[usize::from(id)] = Some(seen);
        }
    }

    fn observe_object(&mut self, world: &World, id: ObjectId, dt: f32) -> Seen {
        let half = world.half_extents(id);
        let render_pose = world.render_pose(id);
        let render = render_pose.translation.vector;
        let physics = world.physics_pose(id).translation.vector;
        let speed = world.linear_velocity(id).norm();
        let sink = FLOOR_TOP - FLOOR_TOLERANCE_M - lowest_point(&render_pose, &half);
        let f = &mut self.figures;
        f.max_render_below_floor_m = f.max_render_below_floor_m.max(sink);
        let local = world.local_player();
        let authority = world.authority(id).view.authority;
        let ours = authority == local || world.holder(id).is_some_and(|h| h.player == local);
        let flying = world.holder(id).is_none() && !world.in_contact(id) && !world.is_at_rest(id);
        let contacts = if self.log.is_some() {
            world.contacts(id).collect()
        } else {
            Vec::new()
        };
        let applied = world.last_applied(id);
        let Some(before) = self.seen[usize::from(id)].take() else {
            return Seen {
                render,
                physics,
                render_step: Vector3::zeros(),
                physics_step: Vector3::zeros(),
                speed,
                flying,
                waited: 0.0,
                contacts,
                applied: [applied, None, None],
                authority,
                handover_frame: None,
            };
        };
        let history = if applied.map(|a| a.frame) == before.applied[0].map(|a| a.frame) {
            before.applied
        } else {
            [applied, before.applied[0], before.applied[1]]
        };
        let handover_frame = if authority == before.authority {
            before.handover_frame
        } else {
            Some(world.frame())
        };
        let after_handover = handover_frame
            .is_some_and(|f| world.frame().saturating_sub(f) as f32 * dt <= MAX_WAIT_SECONDS);
        let (render_step, physics_step) = (render - before.render, physics - before.physics);
        let jump = render_step.norm() - before.speed.max(speed) * dt;
        f.worst_jump_m = f.worst_jump_m.max(jump);
        let still = render_step.norm() < STILL_M && physics_step.norm() >= MIN_STEP_M;
        let free = world.holder(id).is_none() && !world.is_at_rest(id);
        let waited = if free && !ours && still {
            before.waited + dt
        } else {
            0.0
        };
        f.longest_render_wait_s = f.longest_render_wait_s.max(waited);
        let mut faults = Vec::new();
        if jump > SNAP_M {
            f.snaps += 1;
            faults.push((FeelFault::Snap, jump));
        }
        if flying && before.flying && !ours {
            for (fault, step, previous) in [
                (FeelFault::RenderBackstep, render_step, before.render_step),
                (
                    FeelFault::PhysicsBackstep,
                    physics_step,
                    before.physics_step,
                ),
            ] {
                if previous.norm() >= MIN_STEP_M {
                    let back = -step.dot(&previous.normalize());
                    f.max_backstep_m = f.max_backstep_m.max(back);
                    let by_pose = match fault {
                        FeelFault::RenderBackstep => &mut f.max_render_backstep_m,
                        _ => &mut f.max_physics_backstep_m,
                    };
                    *by_pose = by_pose.max(back);
                    if back > MIN_STEP_M {
                        self.backsteps.push(Backstep {
                            frame: world.frame(),
                            object: id,
                            metres: back,
                            authority,
                            applied,
                            origin: history
                                .into_iter()
                                .flatten()
                                .find(|a| a.frame + 3 <= world.frame()),
                            after_handover,
                        });
                    }
                    if back > LOGGED_BACKSTEP_M {
                        faults.push((fault, back));
                    }
                }
            }
        }
        if let Some(log) = &mut self.log {
            for (fault, metres) in faults {
                log.push(event(world, id, fault, metres, &before.contacts, &contacts));
            }
        }
        Seen {
            render,
            physics,
            render_step,
            physics_step,
            speed,
            flying,
            waited,
            contacts,
            applied: history,
            authority,
            handover_frame,
        }
    }
}

/// A fault of `id` on `world`'s latest frame, with its context.
fn event(
    world: &World,
    id: ObjectId,
    fault: FeelFault,
    metres: f32,
    contacts_before: &[Option<ObjectId>],
    contacts: &[Option<ObjectId>],
) -> FeelEvent {
    let authority = world.authority(id);
    let applied = world.last_applied(id);
    let physics = world.physics_pose(id).translation.vector;
    let render = world.render_pose(id).translation.vector;
    FeelEvent {
        frame: world.frame(),
        object: id,
        fault,
        metres,
        authority: authority.view.authority,
        confirmed: authority.confirmed,
        holder: world.holder(id).map(|h| h.player),
        contacts_before: contacts_before.to_vec(),
        contacts: contacts.to_vec(),
        frames_since_applied: applied.map(|a| world.frame() - a.frame),
        applied_jump_m: applied.map(|a| a.jump_m),
        velocity_replaced: applied.map(|a| a.velocity_before.into()),
        velocity: world.linear_velocity(id).into(),
        position: physics.into(),
        render_offset_m: (render - physics).norm(),
    }
}
