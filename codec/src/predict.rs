//! The ballistic predictor: where a body will be after some frames under gravity and damping, in integers only.
//!
//! Both ends of a link run it from the same quantized baseline, so it must give bit-identical results everywhere:
//! the constants are converted to 16.16 fixed point once, and every step is integer arithmetic. The integration
//! order matches a semi-implicit Euler step (velocity first, then position), the scheme rapier uses.
//!
//! Orientation is predicted too: the smallest-three rotation is unpacked to a 4.28 fixed-point quaternion (the
//! largest component rebuilt with an integer square root), advanced by the angular velocity each frame with the
//! first-order update `q += ½·dt·ω⊗q`, and packed again. That update is linear in `q`, so normalizing once at
//! the end gives the same direction as normalizing every frame; an undamped spin repeats the same update, so its
//! frames are taken as one product (`spin_undamped`).

use crate::quant::{QuantConfig, QuantizedRotation};
use crate::state::BodyState;

/// Fractional bits of the fixed-point arithmetic.
const FRAC: u32 = 16;
const ONE: i64 = 1 << FRAC;

/// The longest gap, in frames, the predictor will bridge; beyond it an entry is sent without prediction.
pub const MAX_PREDICT_FRAMES: u16 = 255;

/// Fractional bits of the fixed-point quaternion.
const QFRAC: u32 = 28;

/// The longest gap over which the orientation is advanced; past it the rotation is predicted unchanged (the
/// unnormalized quaternion would grow too large).
const MAX_ROTATION_FRAMES: u16 = 64;

/// The largest half-angle step per frame (4.28), which keeps the fixed-point products inside 64 bits.
const H_LIMIT: i64 = 1 << 26;

/// Smallest-three scales (16.16) from which the last step of the rotation predictor needs 128-bit products: up to
/// 15 bits a component, `scale * 2^48` stays below 2^63.
const WIDE_COMPONENTS: i64 = 1 << 30;

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
    /// Largest smallest-three component index.
    rotation_max: i32,
    /// One smallest-three component step as a 4.28 quaternion component.
    component_to_q: i64,
    /// Smallest-three components per unit quaternion component, 16.16.
    q_to_component: i64,
    /// Half a frame's rotation angle per angular velocity index, per axis, 4.28.
    half_angle_per_index: [i64; 3],
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
        let rotation_max = quant.rotation.max_component();
        let scale = f64::from(rotation_max) * std::f64::consts::SQRT_2;
        let q_one = (1i64 << QFRAC) as f64;
        Self {
            gravity_per_frame: fixed(f64::from(gravity_y) * dt * vel_spu),
            linear_keep: fixed(1.0 / (1.0 + dt * f64::from(linear_damping))),
            angular_keep: fixed(1.0 / (1.0 + dt * f64::from(angular_damping))),
            position_per_velocity: fixed(pos_spu / (vel_spu * hz)),
            rotation_max,
            component_to_q: (q_one / scale).round() as i64,
            q_to_component: fixed(scale),
            half_angle_per_index: quant
                .angular_velocity
                .axes
                .map(|a| (q_one * 0.5 * dt / f64::from(a.steps_per_unit)).round() as i64),
        }
    }

    /// What gravity adds to a free body's y position index (rounded; negative is down) `frames` after a baseline,
    /// beyond the straight line through an older pose `span` frames before it: `g·frames·(frames + span)/2`. The
    /// line carries the mean velocity between the two poses, half a span's fall behind the baseline's.
    pub fn gravity_curve(&self, frames: u16, span: u16) -> i64 {
        let per_frame_sq = (self.gravity_per_frame * self.position_per_velocity) >> FRAC;
        let n = per_frame_sq * i64::from(frames) * (i64::from(frames) + i64::from(span));
        let d = 2 * ONE;
        (2 * n + n.signum() * d) / (2 * d)
    }

    /// Advances a rotation by angular velocity `w` (16.16 indices, damped each frame as the velocity is).
    #[inline]
    fn predict_rotation(
        &self,
        r: QuantizedRotation,
        mut w: [i64; 3],
        frames: u16,
    ) -> QuantizedRotation {
        // Compared field by field: an array comparison here compiles to a vector load that stalls on the
        // stores just made.
        if (w[0] | w[1] | w[2]) == 0 || frames > MAX_ROTATION_FRAMES {
            return r;
        }
        // Clamped with `max` and `min` rather than `clamp`, whose check that the bounds are in order (they are:
        // `max` is positive) cost a comparison and a branch each on this hot path.
        let max = self.rotation_max;
        let [a, b, c] = r
            .components
            .map(|c| i64::from(c.max(-max).min(max)) * self.component_to_q);
        let l = isqrt(((1i64 << (2 * QFRAC)) - (a * a + b * b + c * c)).max(0) as u64) as i64;
        let mut q = place_largest(r.largest & 3, l, [a, b, c]);
        let half_angle = |w: &[i64; 3]| {
            [0, 1, 2]
                .map(|i| ((w[i] * self.half_angle_per_index[i]) >> FRAC).clamp(-H_LIMIT, H_LIMIT))
        };
        // Each step multiplies |q| by sqrt(1 + |h|^2) (damping only shrinks h), so after n frames it is at most
        // 2^28 * e^(n |h|^2 / 2). With n |h|^2 <= 8, |q| < 2^34, the step products stay below 2^61 and the squares
        // of the norm below 2^62. Faster spins over longer gaps (beyond about 40 rad/s over a second) are
        // predicted unchanged rather than overflow.
        let h = half_angle(&w);
        let h_sq: i64 = h.iter().map(|x| x * x).sum();
        if i64::from(frames) * h_sq > 8 << (2 * QFRAC) {
            return r;
        }
        if self.angular_keep == ONE {
            q = spin_undamped(q, &h, h_sq >> QFRAC, frames);
        } else {
            for _ in 0..frames {
                w = w.map(|x| (x * self.angular_keep) >> FRAC);
                q = rotate_step(q, &half_angle(&w));
            }
        }
        // The norm at three fewer fractional bits, so the squares fit in 64 bits.
        let norm = (isqrt(q.iter().map(|c| ((c >> 3) * (c >> 3)) as u64).sum()) as i64) << 3;
        if norm == 0 {
            return r;
        }
        let (largest, sign, rest) = split_largest(q);
        // Component = q / norm * scale, rounded: one division for the factor (scale * 2^48 / norm), then products
        // below 2^57.
        let components = if self.q_to_component < WIDE_COMPONENTS {
            let factor = div_floor_positive(self.q_to_component << 32, norm);
            let component = |c: i64| {
                ((c * sign * factor + (1 << 47)) >> 48)
                    .max(i64::from(-max))
                    .min(i64::from(max)) as i32
            };
            [component(rest[0]), component(rest[1]), component(rest[2])]
        } else {
            // 16 bits a component and more: the factor and the products need 128 bits.
            let factor = (i128::from(self.q_to_component) << 32) / i128::from(norm);
            rest.map(|c| {
                ((i128::from(c * sign) * factor + (1 << 47)) >> 48)
                    .clamp(i128::from(-max), i128::from(max)) as i32
            })
        };
        QuantizedRotation {
            largest: largest as u8,
            components,
        }
    }

    /// The state `frames` frames after `base`, clamped to the quantizer bounds. A body at rest stays put.
    #[inline]
    pub fn predict(&self, quant: &QuantConfig, base: &BodyState, frames: u16) -> BodyState {
        if base.at_rest || frames == 0 {
            return *base;
        }
        let frames = frames.min(MAX_PREDICT_FRAMES);
        let w = base.angular_velocity.map(|x| i64::from(x) << FRAC);
        let rotation = self.predict_rotation(base.rotation, w, frames);
        let round = |x: i64| {
            ((x + (ONE >> 1)) >> FRAC).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
        };
        // Spelled out rather than `array::map`, which is not always inlined on this hot path.
        let round3 = |x: [i64; 3]| [round(x[0]), round(x[1]), round(x[2])];
        let (position, linear_velocity) = if self.linear_keep == ONE {
            // Undamped: x and z move by the same step every frame, so their loop collapses to one product with
            // exactly the same result, and their velocities stay; only y, under gravity, needs the frame-by-frame
            // sum. A whole index plus the steps rounds to the index plus the steps' sum rounded.
            let moved = |i: usize| {
                let step = ((i64::from(base.linear_velocity[i]) << FRAC)
                    * self.position_per_velocity)
                    >> FRAC;
                (i64::from(base.position[i]) + ((i64::from(frames) * step + (ONE >> 1)) >> FRAC))
                    .clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
            };
            let mut v = i64::from(base.linear_velocity[1]) << FRAC;
            let mut p = i64::from(base.position[1]) << FRAC;
            for _ in 0..frames {
                v += self.gravity_per_frame;
                p += (v * self.position_per_velocity) >> FRAC;
            }
            let [vx, _, vz] = base.linear_velocity;
            ([moved(0), round(p), moved(2)], [vx, round(v), vz])
        } else {
            let mut p = base.position.map(|x| i64::from(x) << FRAC);
            let mut v = base.linear_velocity.map(|x| i64::from(x) << FRAC);
            for _ in 0..frames {
                v[1] += self.gravity_per_frame;
                for i in 0..3 {
                    v[i] = (v[i] * self.linear_keep) >> FRAC;
                    p[i] += (v[i] * self.position_per_velocity) >> FRAC;
                }
            }
            (round3(p), round3(v))
        };
        // Undamped, the spin stays as it is.
        let angular_velocity = if self.angular_keep == ONE {
            base.angular_velocity
        } else {
            let mut w = w;
            for _ in 0..frames {
                for x in &mut w {
                    *x = (*x * self.angular_keep) >> FRAC;
                }
            }
            round3(w)
        };
        BodyState {
            position: quant.position.clamp(position),
            rotation,
            linear_velocity: quant.linear_velocity.clamp(linear_velocity),
            angular_velocity: quant.angular_velocity.clamp(angular_velocity),
            at_rest: false,
        }
    }
}

/// `h⊗q` for the pure quaternion `h` (4.28, the half-angle step) and the 4.28 quaternion `q`, at 4.28.
#[inline(always)]
fn turn(q: [i64; 4], h: &[i64; 3]) -> [i64; 4] {
    let [x, y, z, s] = q;
    [
        (h[0] * s + h[1] * z - h[2] * y) >> QFRAC,
        (h[1] * s + h[2] * x - h[0] * z) >> QFRAC,
        (h[2] * s + h[0] * y - h[1] * x) >> QFRAC,
        -((h[0] * x + h[1] * y + h[2] * z) >> QFRAC),
    ]
}

/// One first-order step `q += ½·dt·ω⊗q` of a 4.28 quaternion by the half-angle step `h` (4.28).
#[inline(always)]
fn rotate_step(q: [i64; 4], h: &[i64; 3]) -> [i64; 4] {
    let t = turn(q, h);
    [q[0] + t[0], q[1] + t[1], q[2] + t[2], q[3] + t[3]]
}

/// `frames` first-order steps by the same half-angle step `h` (4.28; `h_sq` its squared length, 4.28), as one
/// product: `(1 + h)^n` for a pure quaternion `h` (`h² = -|h|²`) is `A + B·h` with scalars following
/// `(A + B·h)(1 + h) = (A - |h|²·B) + (A + B)·h`, so `q` becomes `A·q + B·(h⊗q)`. A few scalar operations a frame
/// instead of a quaternion product; it differs from stepping frame by frame only in rounding (a part in 2^28 a
/// frame), and both ends of a link run this same code.
///
/// Bounds, for `frames·|h|² <= 8` (the caller's guard): `|A|`, `|B·h|` and the result stay within
/// `(1 + |h|²)^(n/2) <= e^4` of a unit quaternion, so every product is below 2^62.
#[inline(always)]
fn spin_undamped(q: [i64; 4], h: &[i64; 3], h_sq: i64, frames: u16) -> [i64; 4] {
    let (mut a, mut b) = (1i64 << QFRAC, 0i64);
    for _ in 0..frames {
        (a, b) = (a - ((h_sq * b) >> QFRAC), a + b);
    }
    let t = turn(q, h);
    // Spelled out rather than `array::map`, which is not always inlined here.
    [
        (a * q[0] + b * t[0]) >> QFRAC,
        (a * q[1] + b * t[1]) >> QFRAC,
        (a * q[2] + b * t[2]) >> QFRAC,
        (a * q[3] + b * t[3]) >> QFRAC,
    ]
}

/// The quaternion with the rebuilt largest component `l` at index `largest` (0..=3) and the smallest three in
/// order around it. Chosen without branches: the index is as random as the orientations, so a jump table on it
/// mispredicts about every other call.
#[inline(always)]
fn place_largest(largest: u8, l: i64, [a, b, c]: [i64; 3]) -> [i64; 4] {
    use std::hint::select_unpredictable as pick;
    [
        pick(largest == 0, l, a),
        pick(largest == 1, l, pick(largest == 0, a, b)),
        pick(largest == 2, l, pick(largest < 2, b, c)),
        pick(largest == 3, l, c),
    ]
}

/// The index of the first component of `q` with the largest magnitude, that component's sign, and the other
/// three in order: smallest-three's split, without branches (see [`place_largest`]).
#[inline(always)]
fn split_largest(q: [i64; 4]) -> (usize, i64, [i64; 3]) {
    use std::hint::select_unpredictable as pick;
    let (mut largest, mut value) = (0usize, q[0]);
    for (i, &c) in q.iter().enumerate().skip(1) {
        let larger = c.abs() > value.abs();
        largest = pick(larger, i, largest);
        value = pick(larger, c, value);
    }
    let [x, y, z, s] = q;
    let rest = [
        pick(largest == 0, y, x),
        pick(largest <= 1, z, y),
        pick(largest <= 2, s, z),
    ];
    (largest, if value < 0 { -1 } else { 1 }, rest)
}

/// `a / b` for `a >= 0` and `b > 0`, rounded down: exactly the integer quotient. A floating-point estimate (a
/// fraction of the latency of a 64-bit integer division) is corrected with integer arithmetic, so the result is
/// exact and identical everywhere.
#[inline]
fn div_floor_positive(a: i64, b: i64) -> i64 {
    debug_assert!(a >= 0 && b > 0);
    let mut q = (a as f64 / b as f64) as i64;
    // The estimate is within a few units of the quotient, so the remainder below cannot overflow.
    let mut r = a - q * b;
    while r < 0 {
        q -= 1;
        r += b;
    }
    while r >= b {
        q += 1;
        r -= b;
    }
    q
}

/// The integer square root (the floor of the exact root). A floating-point estimate is corrected with integer
/// comparisons, so the result is exact and identical everywhere. Below 2^62 the estimate is off by at most one,
/// so a single comparison each way settles it; larger inputs take the general loops.
#[inline]
pub(crate) fn isqrt(x: u64) -> u64 {
    if x < 1 << 62 {
        // Signed conversions are single instructions; r <= 2^31, so neither square overflows.
        let mut r = ((x as i64) as f64).sqrt() as i64 as u64;
        if r * r > x {
            r -= 1;
        } else if (r + 1) * (r + 1) <= x {
            r += 1;
        }
        return r;
    }
    let mut r = (x as f64).sqrt() as u64;
    while r > 0 && r.checked_mul(r).is_none_or(|sq| sq > x) {
        r -= 1;
    }
    while (r + 1).checked_mul(r + 1).is_some_and(|sq| sq <= x) {
        r += 1;
    }
    r
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
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

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

    /// The whole prediction written plainly: every frame stepped, every value rounded from 16.16. The optimized
    /// one must give exactly the same state.
    fn plain_predict(
        pred: &Predictor,
        quant: &QuantConfig,
        base: &BodyState,
        frames: u16,
    ) -> BodyState {
        if base.at_rest || frames == 0 {
            return *base;
        }
        let frames = frames.min(MAX_PREDICT_FRAMES);
        let mut p = base.position.map(|x| i64::from(x) << FRAC);
        let mut v = base.linear_velocity.map(|x| i64::from(x) << FRAC);
        let mut w = base.angular_velocity.map(|x| i64::from(x) << FRAC);
        let rotation = plain_rotation(pred, base.rotation, w, frames);
        for _ in 0..frames {
            v[1] += pred.gravity_per_frame;
            for i in 0..3 {
                if pred.linear_keep != ONE {
                    v[i] = (v[i] * pred.linear_keep) >> FRAC;
                }
                p[i] += (v[i] * pred.position_per_velocity) >> FRAC;
            }
            if pred.angular_keep != ONE {
                w = w.map(|x| (x * pred.angular_keep) >> FRAC);
            }
        }
        let round = |x: [i64; 3]| {
            x.map(|x| {
                ((x + (ONE >> 1)) >> FRAC).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
            })
        };
        BodyState {
            position: quant.position.clamp(round(p)),
            rotation,
            linear_velocity: quant.linear_velocity.clamp(round(v)),
            angular_velocity: quant.angular_velocity.clamp(round(w)),
            at_rest: false,
        }
    }

    #[test]
    fn prediction_matches_the_plain_version() {
        let quant = QuantConfig::default();
        let predictors = [
            Predictor::default(),
            Predictor::new(&quant, 60, -9.81, 0.0, 0.5),
            Predictor::new(&quant, 30, -9.81, 0.1, 2.0),
            Predictor::new(&quant, 120, 3.0, 0.7, 0.0),
        ];
        let mut rng = ChaCha8Rng::seed_from_u64(23);
        let max = quant.rotation.max_component();
        for _ in 0..50_000 {
            // Mostly states the quantizers make, some anywhere in range (a hostile or foreign baseline).
            let wide = rng.random_range(0..4) == 0;
            let index = |rng: &mut ChaCha8Rng, limit: i32| {
                if wide {
                    rng.random_range(i32::MIN..=i32::MAX)
                } else {
                    rng.random_range(-limit..=limit)
                }
            };
            let base = BodyState {
                position: [0; 3].map(|_| index(&mut rng, 70_000)),
                rotation: QuantizedRotation {
                    largest: rng.random_range(0..4),
                    components: [0; 3].map(|_| rng.random_range(-max..=max)),
                },
                linear_velocity: [0; 3].map(|_| index(&mut rng, 9000)),
                angular_velocity: [0; 3].map(|_| rng.random_range(-4200..=4200)),
                at_rest: rng.random_range(0..10) == 0,
            };
            let frames = rng.random_range(0..=300);
            for p in &predictors {
                assert_eq!(
                    p.predict(&quant, &base, frames),
                    plain_predict(p, &quant, &base, frames),
                    "{base:?} {frames}"
                );
            }
        }
    }

    #[test]
    fn spin_is_predicted_to_within_a_step() {
        let quant = QuantConfig::default();
        let pred = Predictor::default();
        for (axis, rate) in [(2usize, 2.0f64), (0, -3.5), (1, 1.25)] {
            let start = [0.2f64, -0.3, 0.1, 0.93];
            let n = start.iter().map(|c| c * c).sum::<f64>().sqrt();
            let start = start.map(|c| c / n);
            let mut w = [0.0f32; 3];
            w[axis] = rate as f32;
            let base = BodyState::quantize(
                &quant,
                [0.0; 3],
                start.map(|c| c as f32),
                [0.0; 3],
                w,
                false,
            );
            for frames in [1u16, 6, 30] {
                // The exact rotation: angle rate * t about the axis, applied in the world frame.
                let half = rate * f64::from(frames) / 60.0 / 2.0;
                let mut d = [0.0; 4];
                d[axis] = half.sin();
                d[3] = half.cos();
                let [x, y, z, s] = start;
                let [dx, dy, dz, ds] = d;
                let exact = [
                    ds * x + dx * s + dy * z - dz * y,
                    ds * y + dy * s + dz * x - dx * z,
                    ds * z + dz * s + dx * y - dy * x,
                    ds * s - dx * x - dy * y - dz * z,
                ];
                let want = quant.rotation.quantize(exact.map(|c| c as f32));
                let got = pred.predict(&quant, &base, frames).rotation;
                assert_eq!(got.largest, want.largest);
                for k in 0..3 {
                    assert!(
                        (got.components[k] - want.components[k]).abs() <= 1,
                        "axis {axis}, {frames} frames: {got:?} vs {want:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn integer_square_root_is_exact() {
        for x in [
            0u64,
            1,
            2,
            3,
            4,
            15,
            16,
            17,
            u64::from(u32::MAX),
            (1 << 56) + 12345,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let r = isqrt(x);
            assert!(u128::from(r) * u128::from(r) <= u128::from(x));
            assert!(u128::from(r + 1) * u128::from(r + 1) > u128::from(x), "{x}");
        }
    }

    #[test]
    fn floating_estimates_give_exact_integer_results() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for _ in 0..200_000 {
            let a = rng.random_range(0..=i64::MAX >> 4);
            let shift = rng.random_range(0..40);
            let b = rng.random_range(1..=1i64 << shift);
            assert_eq!(div_floor_positive(a, b), a / b, "{a} / {b}");
            let r = rng.random_range(0..1u64 << 31);
            for x in [r * r, (r * r).saturating_sub(1), r * r + r, r * r + 2 * r] {
                assert_eq!(isqrt(x), x.isqrt(), "isqrt {x}");
            }
            let shift = rng.random_range(0..64);
            let x = rng.random::<u64>() >> shift;
            assert_eq!(isqrt(x), x.isqrt(), "isqrt {x}");
        }
        for x in [(1u64 << 62) - 1, 1 << 62, (1 << 62) + 1, u64::MAX] {
            assert_eq!(isqrt(x), x.isqrt());
        }
    }

    /// The rotation predictor written plainly: integer division and square root, a per-frame step recomputed
    /// every frame, components placed by index. The optimized one must give exactly the same result.
    fn plain_rotation(
        p: &Predictor,
        r: QuantizedRotation,
        w: [i64; 3],
        frames: u16,
    ) -> QuantizedRotation {
        plain_rotation_by(p, r, w, frames, false)
    }

    /// `frames` first-order steps `q += h⊗q`, `h` recomputed every frame from the damped spin.
    fn plain_steps(p: &Predictor, mut q: [i64; 4], mut w: [i64; 3], frames: u16) -> [i64; 4] {
        for _ in 0..frames {
            if p.angular_keep != ONE {
                w = w.map(|x| (x * p.angular_keep) >> FRAC);
            }
            let h = [0, 1, 2]
                .map(|i| ((w[i] * p.half_angle_per_index[i]) >> FRAC).clamp(-H_LIMIT, H_LIMIT));
            let [x, y, z, s] = q;
            q = [
                x + ((h[0] * s + h[1] * z - h[2] * y) >> QFRAC),
                y + ((h[1] * s + h[2] * x - h[0] * z) >> QFRAC),
                z + ((h[2] * s + h[0] * y - h[1] * x) >> QFRAC),
                s - ((h[0] * x + h[1] * y + h[2] * z) >> QFRAC),
            ];
        }
        q
    }

    /// `(1 + h)^frames ⊗ q` as `A·q + B·(h⊗q)`, the scalars stepped in 128 bits.
    fn plain_spin_undamped(q: [i64; 4], h: [i64; 3], frames: u16) -> [i64; 4] {
        let h = h.map(i128::from);
        let h_sq = (h[0] * h[0] + h[1] * h[1] + h[2] * h[2]) >> QFRAC;
        let (mut a, mut b) = (1i128 << QFRAC, 0i128);
        for _ in 0..frames {
            let next_a = a - ((h_sq * b) >> QFRAC);
            b += a;
            a = next_a;
        }
        let [x, y, z, s] = q.map(i128::from);
        let t = [
            (h[0] * s + h[1] * z - h[2] * y) >> QFRAC,
            (h[1] * s + h[2] * x - h[0] * z) >> QFRAC,
            (h[2] * s + h[0] * y - h[1] * x) >> QFRAC,
            -((h[0] * x + h[1] * y + h[2] * z) >> QFRAC),
        ];
        let q = [x, y, z, s];
        [0, 1, 2, 3].map(|i| ((a * q[i] + b * t[i]) >> QFRAC) as i64)
    }

    /// The plain rotation predictor, its undamped spin taken frame by frame if `stepped` (as it was before the
    /// one-product form) or as one product.
    fn plain_rotation_by(
        p: &Predictor,
        r: QuantizedRotation,
        w: [i64; 3],
        frames: u16,
        stepped: bool,
    ) -> QuantizedRotation {
        if w == [0; 3] || frames > MAX_ROTATION_FRAMES {
            return r;
        }
        let one = 1i64 << QFRAC;
        let max = p.rotation_max;
        let small = r
            .components
            .map(|c| i64::from(c.clamp(-max, max)) * p.component_to_q);
        let sum: i64 = small.iter().map(|c| c * c).sum();
        let l = ((one * one - sum).max(0) as u64).isqrt() as i64;
        let mut q = [0i64; 4];
        let mut k = 0;
        for (i, slot) in q.iter_mut().enumerate() {
            *slot = if i == usize::from(r.largest & 3) {
                l
            } else {
                k += 1;
                small[k - 1]
            };
        }
        let h: [i64; 3] = [0, 1, 2]
            .map(|i| ((w[i] * p.half_angle_per_index[i]) >> FRAC).clamp(-H_LIMIT, H_LIMIT));
        if i64::from(frames) * h.iter().map(|x| x * x).sum::<i64>() > 8 << (2 * QFRAC) {
            return r;
        }
        q = if p.angular_keep == ONE && !stepped {
            plain_spin_undamped(q, h, frames)
        } else {
            plain_steps(p, q, w, frames)
        };
        let sq: u64 = q.iter().map(|c| ((c >> 3) * (c >> 3)) as u64).sum();
        let norm = (sq.isqrt() as i64) << 3;
        if norm == 0 {
            return r;
        }
        let mut largest = 0;
        for i in 1..4 {
            if q[i].abs() > q[largest].abs() {
                largest = i;
            }
        }
        let sign = if q[largest] < 0 { -1 } else { 1 };
        let factor = (i128::from(p.q_to_component) << 32) / i128::from(norm);
        let mut components = [0i32; 3];
        let mut k = 0;
        for (i, c) in q.iter().enumerate() {
            if i != largest {
                let v = (i128::from(c * sign) * factor + (1 << 47)) >> 48;
                components[k] = v.clamp(i128::from(-max), i128::from(max)) as i32;
                k += 1;
            }
        }
        QuantizedRotation {
            largest: largest as u8,
            components,
        }
    }

    #[test]
    fn rotation_prediction_matches_the_plain_version() {
        let quant = QuantConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        let predictors = [
            Predictor::default(),
            Predictor::new(&quant, 60, -9.81, 0.0, 0.5),
            Predictor::new(&QuantConfig::default(), 30, -9.81, 0.1, 2.0),
        ];
        let max = quant.rotation.max_component();
        for _ in 0..100_000 {
            let r = QuantizedRotation {
                largest: rng.random_range(0..4),
                components: [0; 3].map(|_| rng.random_range(-max - 2..=max + 2)),
            };
            let scale = 1 << rng.random_range(0..14);
            let w = [0; 3].map(|_| i64::from(rng.random_range(-scale..=scale)) << FRAC);
            let frames = rng.random_range(0..=70);
            for p in &predictors {
                assert_eq!(
                    p.predict_rotation(r, w, frames),
                    plain_rotation(p, r, w, frames),
                    "{r:?} {w:?} {frames}"
                );
            }
        }
    }

    #[test]
    fn an_undamped_spin_in_one_product_is_the_frame_by_frame_spin_but_for_rounding() {
        let quant = QuantConfig::default();
        let p = Predictor::default();
        let mut rng = ChaCha8Rng::seed_from_u64(29);
        let max = quant.rotation.max_component();
        let (mut compared, mut differ) = (0, 0);
        for _ in 0..100_000 {
            let v = [0; 4].map(|_| rng.random_range(-1.0f32..1.0));
            let n = v.iter().map(|c| c * c).sum::<f32>().sqrt().max(1e-3);
            let q = quant.rotation.quantize(v.map(|c| c / n));
            let scale = 1 << rng.random_range(0..13);
            let w = [0; 3].map(|_| i64::from(rng.random_range(-scale..=scale)) << FRAC);
            let frames = rng.random_range(1..=64);
            let stepped = plain_rotation_by(&p, q, w, frames, true);
            let product = p.predict_rotation(q, w, frames);
            compared += 1;
            if stepped != product {
                differ += 1;
                // A rounding apart: the same rotation to within a quantizer step.
                let [a, b] = [stepped, product].map(|r| quant.rotation.dequantize(r));
                let dot: f32 = (0..4).map(|i| a[i] * b[i]).sum();
                assert!(
                    dot.abs() > 0.9999,
                    "{q:?} {w:?} {frames}: {stepped:?} vs {product:?}"
                );
            }
            assert!(product.components.iter().all(|c| c.abs() <= max));
        }
        // Rounding differences are rare (13 in 100,000 here): the two forms differ by parts in 2^28 a frame.
        assert!(differ * 1000 < compared, "{differ} of {compared} differ");
    }

    #[test]
    fn wide_rotation_components_predict_without_overflow() {
        // The quantizer allows up to 20 bits a component; from 16 bits on, the last step's products pass 2^63.
        for bits in [15u32, 16, 18, 20] {
            let quant = QuantConfig {
                rotation: crate::quant::RotationQuantizer::new(bits),
                ..QuantConfig::default()
            };
            let predictor = Predictor::new(&quant, 60, -9.81, 0.0, 0.0);
            let base = BodyState::quantize(
                &quant,
                [0.0; 3],
                [0.3, 0.1, -0.2, 0.9],
                [0.0; 3],
                [2.0, -1.0, 0.5],
                false,
            );
            let out = predictor.predict(&quant, &base, 6);
            assert_eq!(
                out.rotation,
                plain_rotation(
                    &predictor,
                    base.rotation,
                    base.angular_velocity.map(|w| i64::from(w) << FRAC),
                    6
                )
            );
            let expected = quant.rotation.dequantize(base.rotation);
            let got = quant.rotation.dequantize(out.rotation);
            // Six frames of about 2.3 rad/s: the rotation moved, by well under a radian.
            let dot: f32 = (0..4).map(|i| expected[i] * got[i]).sum();
            assert!(
                dot.abs() < 0.99999 && dot.abs() > 0.9,
                "{bits} bits: dot {dot}"
            );
        }
    }

    #[test]
    fn extreme_spin_over_a_long_gap_does_not_overflow() {
        // 32 rad/s about every axis (the quantizer's limit) for 64 frames would grow the unnormalized quaternion
        // past 64-bit products; such a prediction keeps the rotation instead.
        let quant = QuantConfig::default();
        let base = BodyState::quantize(
            &quant,
            [0.0; 3],
            [0.3, 0.1, -0.2, 0.9],
            [0.0; 3],
            [32.0, -32.0, 32.0],
            false,
        );
        for pred in [
            Predictor::default(),
            Predictor::new(&quant, 60, -9.81, 0.0, 0.1),
        ] {
            for frames in [1u16, 10, 30, 64] {
                let out = pred.predict(&quant, &base, frames);
                let max = quant.rotation.max_component();
                assert!(out.rotation.components.iter().all(|c| c.abs() <= max));
            }
            assert_eq!(pred.predict(&quant, &base, 64).rotation, base.rotation);
        }
    }

    #[test]
    fn no_spin_keeps_the_rotation() {
        let quant = QuantConfig::default();
        let base = BodyState::quantize(
            &quant,
            [0.0; 3],
            [0.3, 0.1, -0.2, 0.9],
            [1.0; 3],
            [0.0; 3],
            false,
        );
        assert_eq!(
            Predictor::default().predict(&quant, &base, 10).rotation,
            base.rotation
        );
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
