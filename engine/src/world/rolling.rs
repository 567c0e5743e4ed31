//! Rolling resistance: what brings a rolling ball, cylinder, capsule or cone to a stop.
//!
//! rapier has no rolling resistance: a body rolling without slipping on a flat floor keeps its speed for ever.
//! Angular damping slows the spin, but only a small part of that reaches the linear velocity through the
//! contact's friction (2/7 for a solid ball), and under quantize-both-sides that part rounds away. Measured on
//! the playground scene: a ball of radius 0.25 m with angular damping 2/s, rolling at 0.17 m/s, loses about
//! 0.0016 m/s a step, less than half of a 1/256 m/s velocity step; the write-back before the next step restores
//! the same quantized velocities, frame after frame, and the ball rolls at exactly 0.1716 m/s for as long as
//! the session lasts. It turns as it rolls, so neither rest rule of [`super::at_rest`] can call it still, and it
//! keeps the authority of whoever threw it.
//!
//! Rolling resistance is a constant deceleration while the body touches something: each step its linear speed
//! loses `coefficient × g × dt` and its angular speed the same over its rolling radius (so a body rolling without
//! slipping slows on both at the same ratio and the contact does not fight it). Under quantize-both-sides each
//! loss is at least one quantization step, so rounding can never undo it: a slowly rolling body reaches zero
//! velocity in a bounded number of frames, on every peer alike, and then rests by the pose rule.

use nalgebra::Vector3;

/// Largest rolling-resistance coefficient a material may have (a deceleration of 1 g).
pub const MAX_ROLLING_RESISTANCE: f32 = 1.0;

/// What one step of rolling resistance takes off a body's speeds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RollingLoss {
    /// Linear speed lost this step (m/s).
    pub linear: f32,
    /// Angular speed lost this step (rad/s).
    pub angular: f32,
}

impl RollingLoss {
    /// The loss for a material's `coefficient` on a body of `rolling_radius` (m) under gravity `g` (m/s²) over a
    /// step of `dt` seconds; each at least its `floor` (one quantization step of linear and of angular
    /// velocity under quantize-both-sides, zero otherwise). A coefficient of zero loses nothing.
    pub fn new(coefficient: f32, rolling_radius: f32, g: f32, dt: f32, floor: [f32; 2]) -> Self {
        if coefficient <= 0.0 {
            return Self {
                linear: 0.0,
                angular: 0.0,
            };
        }
        let linear = coefficient * g * dt;
        Self {
            linear: linear.max(floor[0]),
            angular: (linear / rolling_radius.max(f32::EPSILON)).max(floor[1]),
        }
    }

    /// Takes this step's loss off `velocity`'s magnitude, stopping at zero.
    pub fn slow(linear: f32, velocity: Vector3<f32>) -> Vector3<f32> {
        let speed = velocity.norm();
        if speed <= linear {
            Vector3::zeros()
        } else {
            velocity * ((speed - linear) / speed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DT: f32 = 1.0 / 60.0;
    const G: f32 = 9.81;
    /// One step of the default quantization: 1/256 m/s and 1/128 rad/s.
    const FLOOR: [f32; 2] = [1.0 / 256.0, 1.0 / 128.0];

    #[test]
    fn no_coefficient_no_loss() {
        let loss = RollingLoss::new(0.0, 0.25, G, DT, FLOOR);
        assert_eq!(loss.linear, 0.0);
        assert_eq!(loss.angular, 0.0);
        let v = Vector3::new(0.17, 0.0, 0.0);
        assert_eq!(RollingLoss::slow(loss.linear, v), v);
    }

    #[test]
    fn a_loss_is_never_smaller_than_a_quantization_step() {
        let loss = RollingLoss::new(0.001, 0.25, G, DT, FLOOR);
        assert_eq!(loss.linear, FLOOR[0]);
        assert_eq!(loss.angular, FLOOR[1]);
        let unquantized = RollingLoss::new(0.001, 0.25, G, DT, [0.0; 2]);
        assert!((unquantized.linear - 0.001 * G * DT).abs() < 1e-7);
    }

    #[test]
    fn rolling_without_slipping_slows_both_speeds_at_the_same_ratio() {
        let (radius, speed) = (0.25, 2.0);
        let loss = RollingLoss::new(0.05, radius, G, DT, FLOOR);
        let v = RollingLoss::slow(loss.linear, Vector3::new(speed, 0.0, 0.0));
        let w = RollingLoss::slow(loss.angular, Vector3::new(0.0, 0.0, -speed / radius));
        assert!((v.x - w.z.abs() * radius).abs() < 1e-5, "{v} {w}");
        assert!(v.x < speed);
    }

    #[test]
    fn slowing_stops_at_zero_and_keeps_the_direction() {
        let v = RollingLoss::slow(0.01, Vector3::new(0.003, 0.0, -0.004));
        assert_eq!(v, Vector3::zeros());
        let v = RollingLoss::slow(0.1, Vector3::new(0.3, 0.0, -0.4));
        assert!((v.norm() - 0.4).abs() < 1e-6);
        assert!((v.x / v.z + 0.75).abs() < 1e-6);
    }
}
