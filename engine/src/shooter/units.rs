//! The integer units of the shooter's state. The server writes every player state back through these after each
//! tick and the client predicts through the same functions, so both sides continue from identical numbers and a
//! snapshot carries exactly the state the server simulates (quantize both sides).

use nalgebra::{Point3, Vector3};

/// Position steps per metre (the codec's default position resolution: about 2 mm).
pub const POSITION_STEPS_PER_METRE: f32 = 512.0;
/// Vertical-velocity steps per metre per second.
pub const VELOCITY_STEPS_PER_MPS: f32 = 256.0;
/// Yaw steps in a full turn (`u16` wraps exactly once around).
pub const YAW_STEPS_PER_TURN: f32 = 65_536.0;
/// Pitch steps per quarter turn; pitch is an `i16` in `[-PITCH_LIMIT, PITCH_LIMIT]`.
pub const PITCH_STEPS_PER_QUARTER_TURN: f32 = 16_384.0;
/// The steepest pitch a player may look, up or down (about 87.9 degrees).
pub const PITCH_LIMIT: i16 = 16_000;

/// The lowest corner of the box players live in, in position steps (−64 m across, −8 m down): what a snapshot
/// can carry. A player who leaves it (falls off the map) dies and is held at its edge until it respawns.
pub const POSITION_MIN: [i32; 3] = [-32_768, -4_096, -32_768];
/// The highest corner of that box (64 m across, 56 m up).
pub const POSITION_MAX: [i32; 3] = [32_767, 28_671, 32_767];

/// True when a position lies within [`POSITION_MIN`]..=[`POSITION_MAX`].
pub fn in_bounds(p: [i32; 3]) -> bool {
    (0..3).all(|i| (POSITION_MIN[i]..=POSITION_MAX[i]).contains(&p[i]))
}

/// The nearest position within the bounds.
pub fn clamp_to_bounds(p: [i32; 3]) -> [i32; 3] {
    [0, 1, 2].map(|i| p[i].clamp(POSITION_MIN[i], POSITION_MAX[i]))
}

/// A world position in metres to position steps.
pub fn quantize_position(p: &Point3<f32>) -> [i32; 3] {
    [p.x, p.y, p.z].map(|c| quantize(c, POSITION_STEPS_PER_METRE))
}

/// Position steps back to metres.
pub fn dequantize_position(q: [i32; 3]) -> Point3<f32> {
    Point3::new(
        q[0] as f32 / POSITION_STEPS_PER_METRE,
        q[1] as f32 / POSITION_STEPS_PER_METRE,
        q[2] as f32 / POSITION_STEPS_PER_METRE,
    )
}

/// A speed in m/s to velocity steps.
pub fn quantize_velocity(v: f32) -> i32 {
    quantize(v, VELOCITY_STEPS_PER_MPS)
}

/// Velocity steps back to m/s.
pub fn dequantize_velocity(q: i32) -> f32 {
    q as f32 / VELOCITY_STEPS_PER_MPS
}

/// Yaw steps to radians in `[0, 2π)`.
pub fn yaw_radians(yaw: u16) -> f32 {
    f32::from(yaw) * std::f32::consts::TAU / YAW_STEPS_PER_TURN
}

/// Radians (any value) to yaw steps, wrapping around the circle.
pub fn yaw_from_radians(radians: f32) -> u16 {
    let turns = radians / std::f32::consts::TAU;
    let steps = ((turns - turns.floor()) * YAW_STEPS_PER_TURN).round();
    if steps.is_nan() {
        0
    } else {
        (steps as u32 % 65_536) as u16
    }
}

/// Pitch steps to radians (positive looks up).
pub fn pitch_radians(pitch: i16) -> f32 {
    f32::from(pitch) * std::f32::consts::FRAC_PI_2 / PITCH_STEPS_PER_QUARTER_TURN
}

/// Radians to pitch steps, clamped to the pitch limit.
pub fn pitch_from_radians(radians: f32) -> i16 {
    let steps = (radians / std::f32::consts::FRAC_PI_2 * PITCH_STEPS_PER_QUARTER_TURN).round();
    let limit = f32::from(PITCH_LIMIT);
    if steps.is_nan() {
        0
    } else {
        steps.clamp(-limit, limit) as i16
    }
}

/// The unit view direction for a yaw and pitch: yaw 0 looks along +Z, yaw grows towards +X.
pub fn view_direction(yaw: u16, pitch: i16) -> Vector3<f32> {
    let (sy, cy) = yaw_radians(yaw).sin_cos();
    let (sp, cp) = pitch_radians(pitch).sin_cos();
    Vector3::new(sy * cp, sp, cy * cp)
}

/// The yaw and pitch steps that look from `from` towards `to` (what an aiming player or bot sends).
pub fn aim_at(from: &Point3<f32>, to: &Point3<f32>) -> (u16, i16) {
    let d = to - from;
    let horizontal = (d.x * d.x + d.z * d.z).sqrt();
    (
        yaw_from_radians(d.x.atan2(d.z)),
        pitch_from_radians(d.y.atan2(horizontal)),
    )
}

fn quantize(value: f32, steps: f32) -> i32 {
    let scaled = (value * steps).round();
    if scaled.is_nan() {
        0
    } else {
        scaled.clamp(i32::MIN as f32, i32::MAX as f32) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_round_trip_is_a_fixed_point() {
        let q = quantize_position(&Point3::new(1.2345, -0.5, 17.001));
        assert_eq!(quantize_position(&dequantize_position(q)), q);
    }

    #[test]
    fn aim_at_points_the_view_direction_at_the_target() {
        let from = Point3::new(1.0, 1.6, -2.0);
        let to = Point3::new(-4.0, 2.5, 7.0);
        let (yaw, pitch) = aim_at(&from, &to);
        let dir = view_direction(yaw, pitch);
        let expected = (to - from).normalize();
        assert!((dir - expected).norm() < 1e-3, "{dir:?} vs {expected:?}");
    }

    #[test]
    fn pitch_is_clamped_and_yaw_wraps() {
        assert_eq!(pitch_from_radians(3.0), PITCH_LIMIT);
        assert_eq!(pitch_from_radians(-3.0), -PITCH_LIMIT);
        assert_eq!(yaw_from_radians(std::f32::consts::TAU), 0);
        assert_eq!(yaw_from_radians(-std::f32::consts::FRAC_PI_2), 49_152);
    }
}
