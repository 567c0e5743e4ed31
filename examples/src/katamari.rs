//! The katamari game script, as in the published 901-cube scene: the player cube rolls through the grid under
//! applied forces, *attracts* every cube within a radius toward its centre (they gather into a ball of simulated
//! cubes that rolls along with it) and, on a timer, *blows* them away.
//!
//! This is game code on top of the engine's force API ([`World::apply_force`] and friends, on objects the
//! authority peer holds authority over); the engine knows nothing of katamaris. The benchmarks run it to get the
//! scene statistics the published codec figures were measured on (about 8% of the cubes changing each frame).

use nalgebra::Vector3;
use physync_engine::world::World;
use physync_engine::world::drive::katamari_lanes;
use physync_engine::world::forces::ForceError;
use physync_engine::world::scene::ObjectId;

/// What the script is doing this frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Rolling and pulling nearby cubes into the ball.
    Attract,
    /// Pushing every cube within the blow radius away, up and out.
    Blow,
    /// Rolling only: the blown cubes fly, tumble and settle.
    Roll,
}

/// The script's tuning; the defaults give the published scene's statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KatamariTuning {
    /// Player cube's cruising speed (m/s).
    pub speed: f32,
    /// Acceleration of the player's speed controller (m/s² per m/s of speed error), capped at `max_drive`.
    pub drive_gain: f32,
    /// Largest acceleration the player's drive applies (m/s²).
    pub max_drive: f32,
    /// Cubes within this distance of the player's centre are attracted (m).
    pub attract_radius: f32,
    /// Acceleration toward the player's centre (m/s²).
    pub attract_accel: f32,
    /// Damping of an attracted cube's velocity relative to the player (1/s), so the ball holds together.
    pub attract_damping: f32,
    /// Cubes within this distance are blown (m).
    pub blow_radius: f32,
    /// Outward and upward acceleration while blowing (m/s²).
    pub blow_accel: f32,
    /// Frames of each phase in one cycle: attract, blow, roll.
    pub frames: [u32; 3],
}

impl Default for KatamariTuning {
    fn default() -> Self {
        Self {
            speed: 5.0,
            drive_gain: 4.0,
            max_drive: 12.0,
            attract_radius: 4.0,
            attract_accel: 25.0,
            attract_damping: 2.0,
            blow_radius: 6.0,
            blow_accel: 30.0,
            frames: [180, 20, 400],
        }
    }
}

/// Distance (m) at which a waypoint counts as reached.
const REACHED: f32 = 1.5;

/// The script's state: the lawnmower path over the grid, the frame within the phase cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct KatamariScript {
    player: ObjectId,
    tuning: KatamariTuning,
    waypoints: Vec<Vector3<f32>>,
    next: usize,
    frame: u64,
}

impl KatamariScript {
    /// A script for the world's player object, or `None` when the scene has none.
    pub fn new(world: &World, tuning: KatamariTuning) -> Option<Self> {
        let player = world.player_object()?;
        let waypoints = katamari_lanes(7, 12.0);
        Some(Self {
            player,
            tuning,
            waypoints,
            next: 0,
            frame: 0,
        })
    }

    /// The phase the next [`KatamariScript::apply`] runs.
    pub fn phase(&self) -> Phase {
        let [a, b, r] = self.tuning.frames;
        let t = (self.frame % u64::from((a + b + r).max(1))) as u32;
        if t < a {
            Phase::Attract
        } else if t < a + b {
            Phase::Blow
        } else {
            Phase::Roll
        }
    }

    /// Waypoints reached so far.
    pub fn waypoints_reached(&self) -> usize {
        self.next
    }

    /// Applies this frame's forces (call before [`World::step`]). Cubes this peer may not push (another player's
    /// authority, held) are left alone; any other refusal is returned.
    pub fn apply(&mut self, world: &mut World) -> Result<Phase, ForceError> {
        let phase = self.phase();
        self.frame += 1;
        let t = self.tuning;
        let centre = world.physics_pose(self.player).translation.vector;
        let flat = Vector3::new(centre.x, 0.0, centre.z);
        let waypoint = self.waypoints[self.next % self.waypoints.len()];
        if (waypoint - flat).norm() < REACHED {
            self.next += 1;
        }
        let to = self.waypoints[self.next % self.waypoints.len()] - flat;
        let wanted = if to.norm() > 1e-6 {
            to.normalize() * t.speed
        } else {
            Vector3::zeros()
        };
        let velocity = world.linear_velocity(self.player);
        let mut accel = (wanted - Vector3::new(velocity.x, 0.0, velocity.z)) * t.drive_gain;
        if accel.norm() > t.max_drive {
            accel = accel.normalize() * t.max_drive;
        }
        let mass = world.mass(self.player).unwrap_or(0.0);
        if world.can_push(self.player) {
            world.apply_force(self.player, accel * mass)?;
        }
        if phase == Phase::Roll {
            return Ok(phase);
        }
        let radius = match phase {
            Phase::Attract => t.attract_radius,
            _ => t.blow_radius,
        };
        for id in 0..world.object_count() as ObjectId {
            if id == self.player || !world.can_push(id) {
                continue;
            }
            let offset = centre - world.physics_pose(id).translation.vector;
            let distance = offset.norm();
            if distance > radius || distance < 1e-4 {
                continue;
            }
            let m = world.mass(id).unwrap_or(0.0);
            let a = match phase {
                Phase::Attract => {
                    let relative = world.linear_velocity(id) - velocity;
                    offset / distance * t.attract_accel - relative * t.attract_damping
                }
                _ => (-offset / distance + Vector3::y()) * t.blow_accel,
            };
            world.apply_force(id, a * m)?;
        }
        Ok(phase)
    }
}
