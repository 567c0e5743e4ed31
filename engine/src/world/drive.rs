//! Scripted input for the katamari scene: the player cube rolls back and forth through the whole grid.

use nalgebra::Vector3;

use super::World;
use super::scene::{KATAMARI_SPACING, ObjectId};

/// A lawnmower path over the katamari grid, followed at a fixed speed.
#[derive(Debug, Clone, PartialEq)]
pub struct KatamariDrive {
    object: ObjectId,
    waypoints: Vec<Vector3<f32>>,
    next: usize,
    speed: f32,
}

/// A lawnmower path over the katamari grid: `lanes` lanes (at least 2) across it, from outside one edge to outside
/// the other, spread in z over `±half_width_cells` grid spacings. Scripts that roll the player cube follow it.
pub fn katamari_lanes(lanes: usize, half_width_cells: f32) -> Vec<Vector3<f32>> {
    let outside = 15.0 * KATAMARI_SPACING + 2.0;
    let inside = half_width_cells * KATAMARI_SPACING;
    let last = lanes.max(2) - 1;
    (0..=last)
        .flat_map(|lane| {
            let z = -inside + 2.0 * inside * lane as f32 / last as f32;
            let (from, to) = if lane % 2 == 0 {
                (-outside, outside)
            } else {
                (outside, -outside)
            };
            [Vector3::new(from, 0.0, z), Vector3::new(to, 0.0, z)]
        })
        .collect()
}

/// Distance (m) at which a waypoint counts as reached.
const REACHED: f32 = 1.5;

impl KatamariDrive {
    /// A drive for the world's player object at `speed` m/s, or `None` when the scene has no player object.
    pub fn new(world: &World, speed: f32) -> Option<Self> {
        let object = world.player_object()?;
        Some(Self {
            object,
            waypoints: katamari_lanes(8, 13.0),
            next: 0,
            speed,
        })
    }

    /// Index of the waypoint being driven to.
    pub fn next_waypoint(&self) -> usize {
        self.next
    }

    /// Steers the player object toward the next waypoint for this frame (call before [`World::step`]).
    pub fn apply(&mut self, world: &mut World) {
        let position = world.physics_pose(self.object).translation.vector;
        let flat = Vector3::new(position.x, 0.0, position.z);
        if (self.waypoints[self.next] - flat).norm() < REACHED {
            self.next = (self.next + 1) % self.waypoints.len();
        }
        let to = self.waypoints[self.next] - flat;
        let velocity = if to.norm() > 1e-6 {
            to.normalize() * self.speed
        } else {
            Vector3::zeros()
        };
        world.drive_object(self.object, velocity);
    }
}
