//! At-rest detection by a ring buffer of recent poses, replacing rapier's sleep heuristics.
//!
//! Quantization leaves bodies a hair inside or above their supports, and the solver keeps nudging them; the
//! physics engine's own sleep never quite fires. Instead an object is declared at rest when, over the last
//! [`REST_WINDOW`] frames, no sample strayed from the newest by more than [`REST_POSITION_THRESHOLD`] and no
//! orientation axis turned further than a dot product of [`REST_AXIS_DOT`].

use nalgebra::{UnitQuaternion, Vector3};

/// Frames of history the decision looks at.
pub const REST_WINDOW: usize = 16;

/// Largest distance (metres) a sample may be from the newest one; compared squared.
pub const REST_POSITION_THRESHOLD: f32 = 0.01;

/// Smallest dot product between each local axis of a sample and of the newest orientation.
pub const REST_AXIS_DOT: f32 = 0.9999;

/// The pose history of one object.
#[derive(Debug, Clone)]
pub struct RestDetector {
    positions: [Vector3<f32>; REST_WINDOW],
    rotations: [UnitQuaternion<f32>; REST_WINDOW],
    len: usize,
    next: usize,
}

impl Default for RestDetector {
    fn default() -> Self {
        Self {
            positions: [Vector3::zeros(); REST_WINDOW],
            rotations: [UnitQuaternion::identity(); REST_WINDOW],
            len: 0,
            next: 0,
        }
    }
}

impl RestDetector {
    /// Records this frame's pose and says whether the window is full and nothing moved over it.
    pub fn push(&mut self, position: Vector3<f32>, rotation: UnitQuaternion<f32>) -> bool {
        self.positions[self.next] = position;
        self.rotations[self.next] = rotation;
        self.next = (self.next + 1) % REST_WINDOW;
        self.len = (self.len + 1).min(REST_WINDOW);
        self.len == REST_WINDOW && self.still_around(position, rotation)
    }

    /// Forgets the history, so a woken object needs a full window before it rests again.
    pub fn clear(&mut self) {
        self.len = 0;
        self.next = 0;
    }

    fn still_around(&self, position: Vector3<f32>, rotation: UnitQuaternion<f32>) -> bool {
        let limit = REST_POSITION_THRESHOLD * REST_POSITION_THRESHOLD;
        let axes = [Vector3::x(), Vector3::y(), Vector3::z()].map(|a| rotation * a);
        (0..self.len).all(|i| {
            (self.positions[i] - position).norm_squared() <= limit
                && [Vector3::x(), Vector3::y(), Vector3::z()]
                    .iter()
                    .zip(axes.iter())
                    .all(|(a, current)| (self.rotations[i] * a).dot(current) >= REST_AXIS_DOT)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rests_only_after_a_full_still_window() {
        let mut d = RestDetector::default();
        let p = Vector3::new(1.0, 0.5, 0.0);
        for i in 0..REST_WINDOW - 1 {
            assert!(!d.push(p, UnitQuaternion::identity()), "frame {i}");
        }
        assert!(d.push(p, UnitQuaternion::identity()));
    }

    #[test]
    fn small_jitter_rests_large_motion_does_not() {
        let mut d = RestDetector::default();
        for i in 0..REST_WINDOW {
            let jitter = if i % 2 == 0 { 0.004 } else { -0.004 };
            d.push(Vector3::new(jitter, 0.0, 0.0), UnitQuaternion::identity());
        }
        assert!(d.push(Vector3::zeros(), UnitQuaternion::identity()));
        assert!(!d.push(Vector3::new(0.02, 0.0, 0.0), UnitQuaternion::identity()));
    }

    #[test]
    fn rotation_beyond_the_axis_threshold_is_motion() {
        let mut d = RestDetector::default();
        for _ in 0..REST_WINDOW {
            d.push(Vector3::zeros(), UnitQuaternion::identity());
        }
        // acos(0.9999) is about 0.81 degrees.
        let small = UnitQuaternion::from_axis_angle(&Vector3::z_axis(), 0.5f32.to_radians());
        assert!(d.push(Vector3::zeros(), small));
        let large = UnitQuaternion::from_axis_angle(&Vector3::z_axis(), 2.0f32.to_radians());
        assert!(!d.push(Vector3::zeros(), large));
    }

    #[test]
    fn clear_restarts_the_window() {
        let mut d = RestDetector::default();
        for _ in 0..REST_WINDOW {
            d.push(Vector3::zeros(), UnitQuaternion::identity());
        }
        d.clear();
        assert!(!d.push(Vector3::zeros(), UnitQuaternion::identity()));
    }
}
