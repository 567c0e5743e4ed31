//! At-rest detection by a ring buffer of recent poses, replacing rapier's sleep heuristics.
//!
//! Quantization leaves bodies a hair inside or above their supports, and the solver keeps nudging them; the
//! physics engine's own sleep never quite fires. Instead an object is declared at rest when, over the last
//! [`REST_WINDOW`] frames, no sample strayed from the newest by more than [`REST_POSITION_THRESHOLD`] and no
//! orientation axis turned further than a dot product of [`REST_AXIS_DOT`].
//!
//! Quantize-both-sides adds a second way to be at rest: a quantization fixed point. A cube lying on a face
//! often has no exactly flat orientation on the rotation grid (a cube turned 90° about a horizontal axis sits
//! exactly where two smallest-three components are equal, and the nearest grid orientations tilt it by about
//! half a degree). Balanced on an edge, it tips toward flat during a step, the write-back snaps the rotation
//! back to the same tilted grid point, and the velocity change of one step rounds away: rotation and velocities
//! stay on the same integers (or flicker by a step) frame after frame while the position creeps one grid step
//! per frame, far enough to fail the pose test forever. Physics cannot do that on its own: friction and contacts
//! change a slow supported body's velocity by many steps a frame. So a body that was settling (see
//! [`Sample::settling`]) on every frame of the window, whose orientation passed the pose test's axis threshold
//! and whose quantized velocities stayed within [`FIXED_POINT_VELOCITY_SPREAD`] steps, is at rest too.

use nalgebra::{Isometry3, UnitQuaternion, Vector3};

/// Frames of history the decision looks at.
pub const REST_WINDOW: usize = 16;

/// Largest distance (metres) a sample may be from the newest one; compared squared.
pub const REST_POSITION_THRESHOLD: f32 = 0.01;

/// Smallest dot product between each local axis of a sample and of the newest orientation.
pub const REST_AXIS_DOT: f32 = 0.9999;

/// Widest spread, in quantization steps, of each velocity component over the window that still counts as
/// frozen by rounding. Two steps over 16 frames is an acceleration of 0.03 m/s² (0.06 rad/s²) at the default
/// quantization, far below anything friction or a contact does to a moving body.
pub const FIXED_POINT_VELOCITY_SPREAD: i32 = 2;

/// Whether two poses are within the rest thresholds of each other ([`REST_POSITION_THRESHOLD`],
/// [`REST_AXIS_DOT`]): as far apart as two samples of one resting window may be.
pub fn poses_close(a: &Isometry3<f32>, b: &Isometry3<f32>) -> bool {
    positions_close(&a.translation.vector, &b.translation.vector)
        && orientations_close(&a.rotation, &b.rotation)
}

fn positions_close(a: &Vector3<f32>, b: &Vector3<f32>) -> bool {
    (a - b).norm_squared() <= REST_POSITION_THRESHOLD * REST_POSITION_THRESHOLD
}

/// Each local axis turned by the rotation between `a` and `b` keeps a dot product of at least [`REST_AXIS_DOT`]
/// with itself. `(a * e) · (b * e)` is the diagonal entry for `e` of the matrix of `a⁻¹ b`, `1 - 2 (u² + v²)` over
/// that quaternion's other two vector components: one quaternion product instead of six rotated axes (this runs
/// for every sample of every moving object's window, every step).
fn orientations_close(a: &UnitQuaternion<f32>, b: &UnitQuaternion<f32>) -> bool {
    let turn = a.inverse() * b;
    let (x, y, z) = (turn.i * turn.i, turn.j * turn.j, turn.k * turn.k);
    let limit = (1.0 - REST_AXIS_DOT) / 2.0;
    y + z <= limit && x + z <= limit && x + y <= limit
}

/// One frame of an object's state, as the detector sees it.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Position (the quantized one, dequantized).
    pub position: Vector3<f32>,
    /// Orientation (the quantized one, dequantized).
    pub rotation: UnitQuaternion<f32>,
    /// Quantized linear then angular velocity indices.
    pub velocities: [i32; 6],
    /// The object touches something, nothing held touches it, and it moves slower than what would wake a
    /// resting object: frozen velocities then mean a quantization fixed point, not real motion.
    pub settling: bool,
}

/// The recent history of one object.
#[derive(Debug, Clone)]
pub struct RestDetector {
    positions: [Vector3<f32>; REST_WINDOW],
    rotations: [UnitQuaternion<f32>; REST_WINDOW],
    velocities: [[i32; 6]; REST_WINDOW],
    settling: [bool; REST_WINDOW],
    len: usize,
    next: usize,
}

impl Default for RestDetector {
    fn default() -> Self {
        Self {
            positions: [Vector3::zeros(); REST_WINDOW],
            rotations: [UnitQuaternion::identity(); REST_WINDOW],
            velocities: [[0; 6]; REST_WINDOW],
            settling: [false; REST_WINDOW],
            len: 0,
            next: 0,
        }
    }
}

impl RestDetector {
    /// Records this frame and says whether the window is full and the object is at rest: its orientation held
    /// still over the window, and either its position did too or it sat in a quantization fixed point.
    pub fn push(&mut self, sample: &Sample) -> bool {
        self.positions[self.next] = sample.position;
        self.rotations[self.next] = sample.rotation;
        self.velocities[self.next] = sample.velocities;
        self.settling[self.next] = sample.settling;
        self.next = (self.next + 1) % REST_WINDOW;
        self.len = (self.len + 1).min(REST_WINDOW);
        self.len == REST_WINDOW
            && self.orientation_still(sample.rotation)
            && (self.position_still(sample.position) || self.frozen_by_rounding())
    }

    /// Forgets the history, so a woken object needs a full window before it rests again.
    pub fn clear(&mut self) {
        self.len = 0;
        self.next = 0;
    }

    fn position_still(&self, position: Vector3<f32>) -> bool {
        self.positions[..self.len]
            .iter()
            .all(|p| positions_close(p, &position))
    }

    fn orientation_still(&self, rotation: UnitQuaternion<f32>) -> bool {
        self.rotations[..self.len]
            .iter()
            .all(|r| orientations_close(r, &rotation))
    }

    fn frozen_by_rounding(&self) -> bool {
        let window = &self.velocities[..self.len];
        self.settling[..self.len].iter().all(|&s| s)
            && (0..6).all(|k| {
                let lo = window.iter().map(|v| v[k]).min().unwrap_or(0);
                let hi = window.iter().map(|v| v[k]).max().unwrap_or(0);
                hi - lo <= FIXED_POINT_VELOCITY_SPREAD
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-product test says what turning each local axis says, on both sides of the threshold (about
    /// 0.81° for a turn about one axis) and for any starting orientation.
    #[test]
    fn the_orientation_test_matches_turning_each_axis() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let mut outcomes = [0usize; 2];
        for _ in 0..20_000 {
            let mut unit = || {
                Vector3::new(
                    rng.random_range(-1.0f32..1.0),
                    rng.random_range(-1.0..1.0),
                    rng.random_range(-1.0..1.0),
                )
            };
            let a = UnitQuaternion::from_scaled_axis(unit() * 3.0);
            let axis = unit();
            let angle = rng.random_range(0.0f32..0.03);
            let b = a * UnitQuaternion::from_scaled_axis(axis.normalize() * angle);
            let by_axes = [Vector3::x(), Vector3::y(), Vector3::z()]
                .iter()
                .map(|e| (a * e).dot(&(b * e)))
                .fold(f32::MAX, f32::min);
            if (by_axes - REST_AXIS_DOT).abs() < 2e-6 {
                continue;
            }
            let close = orientations_close(&a, &b);
            assert_eq!(close, by_axes >= REST_AXIS_DOT, "{a:?} {b:?}: {by_axes}");
            outcomes[usize::from(close)] += 1;
        }
        assert!(outcomes.iter().all(|&n| n > 1000), "{outcomes:?}");
    }

    /// A frame that only the pose test can call rest.
    fn pose(position: Vector3<f32>, rotation: UnitQuaternion<f32>) -> Sample {
        Sample {
            position,
            rotation,
            velocities: [0; 6],
            settling: false,
        }
    }

    /// A frame of the creep the module doc describes: one 1/512 m grid step a frame along z.
    fn creeping(frame: usize, velocities: [i32; 6], settling: bool) -> Sample {
        Sample {
            position: Vector3::new(0.0, 0.25, -(frame as f32) / 512.0),
            rotation: UnitQuaternion::identity(),
            velocities,
            settling,
        }
    }

    /// The velocity indices of the reproduction in the world tests.
    fn rolling() -> [i32; 6] {
        [6, 0, -18, -36, 0, -11]
    }

    #[test]
    fn rests_only_after_a_full_still_window() {
        let mut d = RestDetector::default();
        let p = Vector3::new(1.0, 0.5, 0.0);
        for i in 0..REST_WINDOW - 1 {
            assert!(!d.push(&pose(p, UnitQuaternion::identity())), "frame {i}");
        }
        assert!(d.push(&pose(p, UnitQuaternion::identity())));
    }

    #[test]
    fn small_jitter_rests_large_motion_does_not() {
        let mut d = RestDetector::default();
        for i in 0..REST_WINDOW {
            let jitter = if i % 2 == 0 { 0.004 } else { -0.004 };
            d.push(&pose(
                Vector3::new(jitter, 0.0, 0.0),
                UnitQuaternion::identity(),
            ));
        }
        assert!(d.push(&pose(Vector3::zeros(), UnitQuaternion::identity())));
        assert!(!d.push(&pose(
            Vector3::new(0.02, 0.0, 0.0),
            UnitQuaternion::identity()
        )));
    }

    #[test]
    fn rotation_beyond_the_axis_threshold_is_motion() {
        let mut d = RestDetector::default();
        for _ in 0..REST_WINDOW {
            d.push(&pose(Vector3::zeros(), UnitQuaternion::identity()));
        }
        // acos(0.9999) is about 0.81 degrees.
        let small = UnitQuaternion::from_axis_angle(&Vector3::z_axis(), 0.5f32.to_radians());
        assert!(d.push(&pose(Vector3::zeros(), small)));
        let large = UnitQuaternion::from_axis_angle(&Vector3::z_axis(), 2.0f32.to_radians());
        assert!(!d.push(&pose(Vector3::zeros(), large)));
    }

    #[test]
    fn clear_restarts_the_window() {
        let mut d = RestDetector::default();
        for _ in 0..REST_WINDOW {
            d.push(&pose(Vector3::zeros(), UnitQuaternion::identity()));
        }
        d.clear();
        assert!(!d.push(&pose(Vector3::zeros(), UnitQuaternion::identity())));
    }

    #[test]
    fn frozen_velocities_while_settling_are_rest() {
        let mut d = RestDetector::default();
        for frame in 0..REST_WINDOW - 1 {
            assert!(!d.push(&creeping(frame, rolling(), true)), "frame {frame}");
        }
        assert!(d.push(&creeping(REST_WINDOW - 1, rolling(), true)));
    }

    #[test]
    fn a_fixed_point_needs_settling_on_every_frame_of_the_window() {
        let mut d = RestDetector::default();
        let unsettled = REST_WINDOW / 2;
        for frame in 0..REST_WINDOW * 3 {
            let rest = d.push(&creeping(frame, rolling(), frame != unsettled));
            assert_eq!(rest, frame >= unsettled + REST_WINDOW, "frame {frame}");
        }
    }

    #[test]
    fn drifting_velocities_are_not_a_fixed_point() {
        let mut d = RestDetector::default();
        for frame in 0..REST_WINDOW * 4 {
            let mut velocities = rolling();
            // Friction taking a velocity step off every fifth frame: slow, but a real deceleration.
            velocities[2] += (frame / 5) as i32;
            assert!(!d.push(&creeping(frame, velocities, true)), "frame {frame}");
        }
    }

    #[test]
    fn clear_restarts_the_fixed_point_window() {
        let mut d = RestDetector::default();
        for frame in 0..REST_WINDOW {
            d.push(&creeping(frame, rolling(), true));
        }
        d.clear();
        for frame in 0..REST_WINDOW - 1 {
            assert!(!d.push(&creeping(frame, rolling(), true)), "frame {frame}");
        }
    }

    #[test]
    fn velocities_flickering_by_a_step_are_a_fixed_point() {
        let mut d = RestDetector::default();
        let mut rest = false;
        for frame in 0..REST_WINDOW {
            let mut velocities = rolling();
            velocities[2] += (frame % 2) as i32;
            velocities[5] -= (frame % 3 == 0) as i32;
            rest = d.push(&creeping(frame, velocities, true));
        }
        assert!(rest);
    }

    #[test]
    fn a_turning_body_is_not_a_fixed_point() {
        let mut d = RestDetector::default();
        for frame in 0..REST_WINDOW * 2 {
            let mut sample = creeping(frame, rolling(), true);
            // 0.2 degrees a frame: the window spans more than the axis threshold.
            let angle = (frame as f32 * 0.2).to_radians();
            sample.rotation = UnitQuaternion::from_axis_angle(&Vector3::x_axis(), angle);
            assert!(!d.push(&sample), "frame {frame}");
        }
    }
}
