//! The ballistic predictor: where a body will be after some frames under gravity and damping, in integers only.
//!
//! Both ends of a link run it from the same quantized baseline, so it must give bit-identical results everywhere:
//! the constants are converted to 16.16 fixed point once, and every step is integer arithmetic. The integration
//! order matches a semi-implicit Euler step (velocity first, then position), the scheme rapier uses.

use crate::quant::QuantConfig;
use crate::state::BodyState;

/// Fractional bits of the fixed-point arithmetic.
const FRAC: u32 = 16;
const ONE: i64 = 1 << FRAC;

/// The longest gap, in frames, the predictor will bridge; beyond it an entry is sent without prediction.
pub const MAX_PREDICT_FRAMES: u16 = 255;

/// The physics constants the predictor assumes, and their fixed-point form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Predictor {
    /// Gravity's change to the y velocity per frame, in velocity indices, 16.16.
    gravity_per_frame: i64,
    /// Linear velocity kept per frame (damping), 16.16.
    linear_keep: i64,
    /// Angular velocity kept per frame, 16.16.
    angular_keep: i64,
    /// Position indices moved per frame per velocity index, 16.16.
    position_per_velocity: i64,
}

impl Predictor {
    /// A predictor for a simulation at `hz` steps a second with gravity `gravity_y` (m/s², negative is down) and
    /// rapier-style damping coefficients (velocity multiplied by `1 / (1 + dt * damping)` each step).
    pub fn new(
        quant: &QuantConfig,
        hz: u32,
        gravity_y: f32,
        linear_damping: f32,
        angular_damping: f32,
    ) -> Self {
        let hz = f64::from(hz.max(1));
        let dt = 1.0 / hz;
        let vel_spu = f64::from(quant.linear_velocity.axes[1].steps_per_unit);
        let pos_spu = f64::from(quant.position.axes[1].steps_per_unit);
        let fixed = |x: f64| (x * ONE as f64).round() as i64;
        Self {
            gravity_per_frame: fixed(f64::from(gravity_y) * dt * vel_spu),
            linear_keep: fixed(1.0 / (1.0 + dt * f64::from(linear_damping))),
            angular_keep: fixed(1.0 / (1.0 + dt * f64::from(angular_damping))),
            position_per_velocity: fixed(pos_spu / (vel_spu * hz)),
        }
    }

    /// The state `frames` frames after `base`, clamped to the quantizer bounds. A body at rest stays put.
    #[inline]
    pub fn predict(&self, quant: &QuantConfig, base: &BodyState, frames: u16) -> BodyState {
        if base.at_rest || frames == 0 {
            return *base;
        }
        let mut p = base.position.map(|x| i64::from(x) << FRAC);
        let mut v = base.linear_velocity.map(|x| i64::from(x) << FRAC);
        let mut w = base.angular_velocity.map(|x| i64::from(x) << FRAC);
        let frames = frames.min(MAX_PREDICT_FRAMES);
        if self.linear_keep == ONE {
            // Undamped: x and z move by the same step every frame, so their loop collapses to one product with
            // exactly the same result; only y, under gravity, needs the frame-by-frame sum.
            for i in [0, 2] {
                p[i] += i64::from(frames) * ((v[i] * self.position_per_velocity) >> FRAC);
            }
            for _ in 0..frames {
                v[1] += self.gravity_per_frame;
                p[1] += (v[1] * self.position_per_velocity) >> FRAC;
            }
        } else {
            for _ in 0..frames {
                v[1] += self.gravity_per_frame;
                for i in 0..3 {
                    v[i] = (v[i] * self.linear_keep) >> FRAC;
                    p[i] += (v[i] * self.position_per_velocity) >> FRAC;
                }
            }
        }
        if self.angular_keep != ONE {
            for _ in 0..frames {
                for x in &mut w {
                    *x = (*x * self.angular_keep) >> FRAC;
                }
            }
        }
        let round = |x: i64| {
            ((x + (ONE >> 1)) >> FRAC).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
        };
        BodyState {
            position: quant.position.clamp(p.map(round)),
            rotation: base.rotation,
            linear_velocity: quant.linear_velocity.clamp(v.map(round)),
            angular_velocity: quant.angular_velocity.clamp(w.map(round)),
            at_rest: false,
        }
    }
}

impl Default for Predictor {
    /// 60 Hz, Earth gravity, no damping, for the default quantizers.
    fn default() -> Self {
        Self::new(&QuantConfig::default(), 60, -9.81, 0.0, 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_fall_matches_the_float_integration() {
        let quant = QuantConfig::default();
        let pred = Predictor::default();
        let base = BodyState::quantize(
            &quant,
            [0.0, 20.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [2.0, 5.0, 0.0],
            [0.0; 3],
            false,
        );
        let out = pred.predict(&quant, &base, 30);
        // Semi-implicit Euler over 30 steps of 1/60 s.
        let (mut y, mut vy, mut x) = (20.0f64, 5.0f64, 0.0f64);
        for _ in 0..30 {
            vy -= 9.81 / 60.0;
            y += vy / 60.0;
            x += 2.0 / 60.0;
        }
        let got = out.position_f32(&quant);
        assert!((f64::from(got[1]) - y).abs() < 0.01, "{} vs {y}", got[1]);
        assert!((f64::from(got[0]) - x).abs() < 0.01);
        assert!((f64::from(out.linear_velocity_f32(&quant)[1]) - vy).abs() < 0.01);
    }

    #[test]
    fn damping_slows_spin_and_rest_is_kept() {
        let quant = QuantConfig::default();
        let pred = Predictor::new(&quant, 60, 0.0, 0.0, 1.0);
        let base = BodyState::quantize(
            &quant,
            [0.0; 3],
            [0.0, 0.0, 0.0, 1.0],
            [0.0; 3],
            [4.0, 0.0, 0.0],
            false,
        );
        // Over 30 steps the spin keeps (60/61)^30, about 0.61 of itself.
        let out = pred.predict(&quant, &base, 30);
        let kept = f64::from(out.angular_velocity[0]) / f64::from(base.angular_velocity[0]);
        assert!(
            (kept - (60.0f64 / 61.0).powi(30)).abs() < 0.01,
            "kept {kept}"
        );
        let rest = BodyState {
            at_rest: true,
            ..base
        };
        assert_eq!(pred.predict(&quant, &rest, 60), rest);
    }

    #[test]
    fn undamped_shortcut_matches_the_step_loop() {
        let quant = QuantConfig::default();
        let fast = Predictor::default();
        // The undamped shortcut must give exactly what stepping frame by frame gives.
        let base = BodyState::quantize(
            &quant,
            [3.0, 9.0, -2.0],
            [0.0, 0.0, 0.0, 1.0],
            [1.7, 2.3, -0.9],
            [0.5; 3],
            false,
        );
        for frames in [1u16, 2, 7, 60] {
            let got = fast.predict(&quant, &base, frames);
            let mut p = base.position.map(|x| i64::from(x) << FRAC);
            let mut v = base.linear_velocity.map(|x| i64::from(x) << FRAC);
            for _ in 0..frames {
                v[1] += fast.gravity_per_frame;
                for i in 0..3 {
                    p[i] += (v[i] * fast.position_per_velocity) >> FRAC;
                }
            }
            let want = p.map(|x| ((x + (ONE >> 1)) >> FRAC) as i32);
            assert_eq!(got.position, want, "{frames} frames");
            assert_eq!(got.angular_velocity, base.angular_velocity);
        }
    }

    #[test]
    fn prediction_stays_in_bounds() {
        let quant = QuantConfig::default();
        let pred = Predictor::default();
        let base = BodyState::quantize(
            &quant,
            [0.0, -7.9, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [0.0, -30.0, 0.0],
            [0.0; 3],
            false,
        );
        let out = pred.predict(&quant, &base, 255);
        assert!(quant.position.contains(out.position));
        assert!(quant.linear_velocity.contains(out.linear_velocity));
    }
}
