//! What a player sees, frame by frame: a meter fed one peer's world after every step, which records the faults a
//! person notices on screen (a body drawn below the floor, a flying object stepping backward, a rendered pose
//! jumping). Session tests and the `peer_feel` benchmark share it, so both measure the same thing.

use nalgebra::Vector3;

use crate::world::scene::ObjectId;
use crate::world::{FLOOR_TOP, World, lowest_point};

/// Depth (m) below the floor's top a body may be drawn at before it counts as sinking: the position quantum
/// (1/512 m) with rounding.
pub const FLOOR_TOLERANCE_M: f32 = 0.002;

/// A rendered pose moving further than this (m) in one frame beyond what the object's speed covers is a snap.
pub const SNAP_M: f32 = 0.05;

/// Steps shorter than this (m) give no direction of motion to step back from.
const MIN_STEP_M: f32 = 0.001;

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
    /// Rendered poses that jumped more than [`SNAP_M`] in one frame beyond what the speed covers.
    pub snaps: u64,
    /// The largest such jump (m), counted or not.
    pub worst_jump_m: f32,
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
            snaps: self.snaps + other.snaps,
            worst_jump_m: self.worst_jump_m.max(other.worst_jump_m),
        }
    }
}

/// One object as the peer showed it on the previous frame.
#[derive(Debug, Clone, Copy)]
struct Seen {
    render: Vector3<f32>,
    physics: Vector3<f32>,
    render_step: Vector3<f32>,
    physics_step: Vector3<f32>,
    speed: f32,
    flying: bool,
}

/// The meter of one peer. Call [`FeelMeter::observe`] after each of its steps.
#[derive(Debug, Clone, Default)]
pub struct FeelMeter {
    seen: Vec<Option<Seen>>,
    figures: FeelFigures,
}

impl FeelMeter {
    /// A meter that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the peer showed so far.
    pub fn figures(&self) -> FeelFigures {
        self.figures
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
        let ours = world.authority(id).view.authority == local
            || world.holder(id).is_some_and(|h| h.player == local);
        let flying = world.holder(id).is_none() && !world.in_contact(id) && !world.is_at_rest(id);
        let Some(before) = self.seen[usize::from(id)] else {
            return Seen {
                render,
                physics,
                render_step: Vector3::zeros(),
                physics_step: Vector3::zeros(),
                speed,
                flying,
            };
        };
        let (render_step, physics_step) = (render - before.render, physics - before.physics);
        let jump = render_step.norm() - before.speed.max(speed) * dt;
        f.worst_jump_m = f.worst_jump_m.max(jump);
        if jump > SNAP_M {
            f.snaps += 1;
        }
        if flying && before.flying && !ours {
            for (step, previous) in [
                (render_step, before.render_step),
                (physics_step, before.physics_step),
            ] {
                if previous.norm() >= MIN_STEP_M {
                    let back = -step.dot(&previous.normalize());
                    f.max_backstep_m = f.max_backstep_m.max(back);
                }
            }
        }
        Seen {
            render,
            physics,
            render_step,
            physics_step,
            speed,
            flying,
        }
    }
}
