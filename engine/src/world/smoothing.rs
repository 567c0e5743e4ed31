//! Visual smoothing: corrections go into physics at once, and the rendered pose blends the jump out.
//!
//! The error between the pose shown before a correction and the corrected physics pose is kept as an offset
//! and shrunk every frame: by [`SMALL_ERROR_FACTOR`] while it is at most [`SMALL_ERROR`], by
//! [`LARGE_ERROR_FACTOR`] from [`LARGE_ERROR`] on, and by a factor interpolated between the two in between.
//! Whatever physics does in a step, the rendered position moves no further than the body's speed covers plus
//! [`MAX_BLEND_STEP`] ([`RenderError::follow_at_most`]). A shown position ahead of the physics one along the
//! body's motion (a late authority's state put physics back along a path the object already travelled) never
//! turns back to meet it: it stands still, up to [`MAX_WAIT_SECONDS`], until physics reaches it
//! ([`RenderError::wait_for_physics`]).

use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector3};

/// Errors up to this distance (m) shrink slowly.
pub const SMALL_ERROR: f32 = 0.25;
/// Errors from this distance (m) on shrink fast.
pub const LARGE_ERROR: f32 = 1.0;
/// Per-frame factor for small errors.
pub const SMALL_ERROR_FACTOR: f32 = 0.95;
/// Per-frame factor for large errors.
pub const LARGE_ERROR_FACTOR: f32 = 0.85;
/// The most (m) the rendered position closes on the physics one in a frame: a large correction glides in at up
/// to 2.4 m/s rather than jumping the first few frames of its blend.
pub const MAX_BLEND_STEP: f32 = 0.04;
/// A shown position more than this (m) ahead of the physics one along its motion waits for physics to come to it
/// (see [`RenderError::wait_for_physics`]).
pub const REWIND: f32 = 0.01;
/// The longest (s) a shown position waits for physics at a stretch: a slow body far behind would keep it still
/// for too long, and then it blends back as usual.
pub const MAX_WAIT_SECONDS: f32 = 0.5;
/// Physics steps shorter than this (m) give no direction of motion to wait along.
const MIN_PACE_STEP: f32 = 1e-4;
/// Position errors below this (m) snap to zero.
const SNAP: f32 = 1e-5;

/// The visual offset of one object from its physics pose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RenderError {
    /// Added to the physics position.
    pub position: Vector3<f32>,
    /// Applied before the physics rotation.
    pub rotation: UnitQuaternion<f32>,
}

impl Default for RenderError {
    fn default() -> Self {
        Self {
            position: Vector3::zeros(),
            rotation: UnitQuaternion::identity(),
        }
    }
}

/// The per-frame factor for an error of `distance` metres.
pub fn blend_factor(distance: f32) -> f32 {
    if distance <= SMALL_ERROR {
        SMALL_ERROR_FACTOR
    } else if distance >= LARGE_ERROR {
        LARGE_ERROR_FACTOR
    } else {
        let t = (distance - SMALL_ERROR) / (LARGE_ERROR - SMALL_ERROR);
        SMALL_ERROR_FACTOR + (LARGE_ERROR_FACTOR - SMALL_ERROR_FACTOR) * t
    }
}

impl RenderError {
    /// The error that keeps `shown` on screen after physics jumped to `corrected`.
    pub fn between(shown: &Isometry3<f32>, corrected: &Isometry3<f32>) -> Self {
        Self {
            position: shown.translation.vector - corrected.translation.vector,
            rotation: shown.rotation * corrected.rotation.inverse(),
        }
    }

    /// The pose to draw for an object whose physics pose is `physics`.
    pub fn apply(&self, physics: &Isometry3<f32>) -> Isometry3<f32> {
        Isometry3::from_parts(
            Translation3::from(physics.translation.vector + self.position),
            self.rotation * physics.rotation,
        )
    }

    /// Shrinks the error by one frame's factor, by at most [`MAX_BLEND_STEP`] in position; the rotation
    /// shrinks by the same share as the position (a large jump turns back no faster than it moves back, so the
    /// turning corners add little to the step on screen).
    pub fn decay(&mut self) {
        let distance = self.position.norm();
        let mut kept = blend_factor(distance);
        if distance > 0.0 {
            let shrunk = (distance * kept).max(distance - MAX_BLEND_STEP);
            kept = shrunk / distance;
            self.position *= kept;
        }
        if self.position.norm() < SNAP {
            self.position = Vector3::zeros();
        }
        self.rotation = UnitQuaternion::identity().slerp(&self.rotation, kept);
        if self.rotation.angle() < 1e-5 {
            self.rotation = UnitQuaternion::identity();
        }
    }

    /// Whether the shown position should wait for the physics pose this frame, and if so keeps it where it was
    /// (`shown_before`). It waits only while it is ahead of the physics position along the step physics just took
    /// (from `physics_before` to `physics`; a late authority's state put physics back along a path the object
    /// already travelled): on a frame whose blend would carry it back against that step, and, more than
    /// [`REWIND`] ahead, on any frame whose blend would let physics gain on it. The shown object stands still
    /// until the new timeline reaches it instead of turning back to meet it, or running on ahead of it into
    /// whatever it meets first; the caller bounds how long ([`MAX_WAIT_SECONDS`]).
    pub fn wait_for_physics(
        &mut self,
        shown_before: &Vector3<f32>,
        physics_before: &Vector3<f32>,
        physics: &Vector3<f32>,
    ) -> bool {
        let lead = shown_before - physics_before;
        let step = physics - physics_before;
        let length = step.norm();
        if lead == Vector3::zeros() || length < MIN_PACE_STEP {
            return false;
        }
        let along = step / length;
        let ahead = lead.dot(&along);
        let shown_along = (physics + self.position - shown_before).dot(&along);
        let wait = ahead > 0.0 && (shown_along < 0.0 || (ahead > REWIND && shown_along < length));
        if wait {
            self.position = shown_before - physics;
        }
        wait
    }

    /// Keeps the rendered position within `reach` (m) of where it was shown last frame (`shown_before`), on the
    /// line toward where this error puts it now beside the physics position `physics`: the solver may push a body
    /// several centimetres a step out of an overlap a received state put it in (the depenetration cap acts per
    /// contact, and the push is not in the body's velocity), and the screen would show that as a jump.
    pub fn follow_at_most(
        &mut self,
        shown_before: &Vector3<f32>,
        physics: &Vector3<f32>,
        reach: f32,
    ) {
        let step = physics + self.position - shown_before;
        let length = step.norm();
        if length > reach {
            self.position = shown_before + step * (reach / length) - physics;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_follows_the_sample_curve() {
        assert_eq!(blend_factor(0.1), 0.95);
        assert_eq!(blend_factor(0.25), 0.95);
        assert_eq!(blend_factor(2.0), 0.85);
        assert!((blend_factor(0.625) - 0.90).abs() < 1e-6);
    }

    #[test]
    fn the_shown_pose_does_not_jump_and_converges() {
        let before = Isometry3::new(Vector3::new(0.0, 1.0, 0.0), Vector3::new(0.0, 0.3, 0.0));
        let after = Isometry3::new(Vector3::new(0.4, 1.0, 0.0), Vector3::zeros());
        let mut e = RenderError::between(&before, &after);
        let shown = e.apply(&after);
        assert!((shown.translation.vector - before.translation.vector).norm() < 1e-6);
        assert!(shown.rotation.angle_to(&before.rotation) < 1e-5);
        e.decay();
        let expected = 0.4 * blend_factor(0.4);
        assert!((e.position.norm() - expected).abs() < 1e-5);
        // A large error closes by at most the blend step a frame.
        let mut far = RenderError::between(&Isometry3::translation(2.0, 0.0, 0.0), &after);
        let before = far.position.norm();
        far.decay();
        assert!((before - far.position.norm() - MAX_BLEND_STEP).abs() < 1e-5);
        for _ in 0..400 {
            e.decay();
        }
        assert_eq!(e, RenderError::default());
    }

    #[test]
    fn a_shown_pose_ahead_waits_and_one_behind_does_not() {
        let before = Vector3::new(0.0, 1.0, 0.0);
        let step = Vector3::new(0.0, -0.03, 0.0);
        // Shown 0.3 m further down a fall than physics: it stands still while physics comes down to it.
        let mut ahead = RenderError {
            position: Vector3::new(0.0, -0.3, 0.0),
            ..RenderError::default()
        };
        let shown = before + ahead.position;
        ahead.decay();
        assert!(ahead.wait_for_physics(&shown, &before, &(before + step)));
        assert_eq!(ahead.position, shown - (before + step));
        // Shown behind physics: the blend goes on as usual.
        let mut behind = RenderError {
            position: Vector3::new(0.0, 0.3, 0.0),
            ..RenderError::default()
        };
        let shown = before + behind.position;
        behind.decay();
        let blended = behind;
        assert!(!behind.wait_for_physics(&shown, &before, &(before + step)));
        assert_eq!(behind, blended);
        // A body that does not move gives nothing to wait along.
        assert!(!ahead.wait_for_physics(&shown, &before, &before));
    }
}
