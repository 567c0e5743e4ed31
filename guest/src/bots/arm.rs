//! A bot's right hand: a point moved at a bounded speed.

use nalgebra::{Isometry3, Point3, Vector3};
use physync_engine::session::PlayerControls;
use physync_engine::world::avatar::Hand;

/// Where a bot's hand is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Arm {
    position: Point3<f32>,
}

impl Arm {
    /// The hand where the avatar currently has it.
    pub(crate) fn at_rest(controls: &dyn PlayerControls) -> Self {
        let pose = controls.world().avatar_pose(controls.player()).hands[Hand::Right.index()];
        Self {
            position: Point3::from(pose.translation.vector),
        }
    }

    /// The hand's position.
    pub(crate) fn position(&self) -> Point3<f32> {
        self.position
    }

    /// The hand's pose (upright).
    pub(crate) fn pose(&self) -> Isometry3<f32> {
        Isometry3::translation(self.position.x, self.position.y, self.position.z)
    }

    /// Moves toward `target` by at most `speed * dt`; true once there.
    pub(crate) fn move_toward(&mut self, target: Point3<f32>, speed: f32, dt: f32) -> bool {
        let to: Vector3<f32> = target - self.position;
        let step = speed * dt;
        let distance = to.norm();
        if distance <= step.max(1e-4) {
            self.position = target;
            true
        } else {
            self.position += to / distance * step;
            false
        }
    }
}
