//! The ballistic predictor: where a body will be after some frames under gravity and damping.
//!
//! Both ends of a link run it from the same quantized baseline, so it must give bit-identical results everywhere.
//! Position and velocity are integer arithmetic: the constants are converted to 16.16 fixed point once, and the
//! integration order matches a semi-implicit Euler step (velocity first, then position), the scheme rapier uses.
//!
//! Orientation is predicted too: the smallest-three rotation is unpacked to a quaternion (the largest component
//! rebuilt with a square root), advanced by the angular velocity each frame with the first-order update
//! `q += ½·dt·ω⊗q`, and packed again. That update is linear in `q`, so normalizing once at the end gives the same
//! direction as normalizing every frame; an undamped spin repeats the same update, so its frames are taken as one
//! product whose norm is known from two scalars. The rotation is computed in `f64` with only the operations
//! IEEE 754 rounds exactly (add, subtract, multiply, divide, square root; no fused multiply-add, no library
//! functions), so every target whose `f64` is IEEE double precision gets the same bits. (32-bit x86 without SSE2,
//! whose x87 unit keeps extra precision, would not: it is not a target physync supports.) Floating point keeps the
//! chain from baseline to prediction short: no integer square roots and division corrected step by step.

use crate::quant::{QuantConfig, QuantizedRotation};
use crate::state::BodyState;

/// Fractional bits of the fixed-point arithmetic.
const FRAC: u32 = 16;
const ONE: i64 = 1 << FRAC;

/// The longest gap, in frames, the predictor will bridge; beyond it an entry is sent without prediction.
pub const MAX_PREDICT_FRAMES: u16 = 255;

/// The longest gap, in frames, over which the orientation is advanced; past it the rotation is predicted
/// unchanged (a first-order step over so long a gap predicts nothing useful).
const MAX_ROTATION_FRAMES: u16 = 64;

/// The physics constants the predictor assumes, and their fixed-point form.
#[derive(Debug, Clone, Copy, PartialEq)]
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
    /// A unit quaternion component per smallest-three step.
    unit_per_component: f64,
    /// Smallest-three steps per unit quaternion component.
    scale: f64,
    /// Half a frame's rotation angle per angular velocity index, per axis.
    half_angle_per_index: [f64; 3],
    /// Angular velocity kept per frame (damping), the floating-point rotation's copy of `angular_keep`.
    angular_keep_f64: f64,
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
        let angular_keep = 1.0 / (1.0 + dt * f64::from(angular_damping));
        Self {
            gravity_per_frame: fixed(f64::from(gravity_y) * dt * vel_spu),
            linear_keep: fixed(1.0 / (1.0 + dt * f64::from(linear_damping))),
            angular_keep: fixed(angular_keep),
            position_per_velocity: fixed(pos_spu / (vel_spu * hz)),
            rotation_max,
            unit_per_component: 1.0 / scale,
            scale,
            half_angle_per_index: quant
                .angular_velocity
                .axes
                .map(|a| 0.5 * dt / f64::from(a.steps_per_unit)),
            angular_keep_f64: angular_keep,
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

    /// Advances a rotation by the angular velocity indices `w` (damped each frame as the velocity is).
    #[inline]
    fn predict_rotation(
        &self,
        r: QuantizedRotation,
        w: [i32; 3],
        frames: u16,
    ) -> QuantizedRotation {
        if (w[0] | w[1] | w[2]) == 0 || frames > MAX_ROTATION_FRAMES {
            return r;
        }
        let max = self.rotation_max;
        let unit = |c: i32| f64::from(c.max(-max).min(max)) * self.unit_per_component;
        let [a, b, c] = r.components.map(unit);
        let small_sq = a * a + b * b + c * c;
        let q = place_largest(r.largest & 3, (1.0 - small_sq).max(0.0).sqrt(), [a, b, c]);
        // |q|² is 1 when the smallest three fit in a unit quaternion and their own sum when they do not (the
        // rebuilt component is then 0): known without waiting for the square root.
        let q_sq = small_sq.max(1.0);
        let half_angle = |w: [f64; 3]| {
            [
                w[0] * self.half_angle_per_index[0],
                w[1] * self.half_angle_per_index[1],
                w[2] * self.half_angle_per_index[2],
            ]
        };
        let mut w = w.map(f64::from);
        let h = half_angle(w);
        let h_sq = h[0] * h[0] + h[1] * h[1] + h[2] * h[2];
        // The first-order step drifts from the true rotation as frames·|h|² grows; past 8 (about 40 rad/s over a
        // second) the rotation is predicted unchanged.
        if f64::from(frames) * h_sq > 8.0 {
            return r;
        }
        let (q, norm_sq) = if self.angular_keep == ONE {
            // (1 + h)^n for a pure quaternion h (h² = -|h|²) is A + B·h, with (A + B·h)(1 + h) = (A - |h|²·B) +
            // (A + B)·h: a few scalar operations a frame, and |A + B·h|² = A² + B²·|h|² gives the norm without
            // waiting for the rotated quaternion.
            let (mut a, mut b) = (1.0, 0.0);
            for _ in 0..frames {
                (a, b) = (a - h_sq * b, a + b);
            }
            let t = turn(q, &h);
            (
                [
                    a * q[0] + b * t[0],
                    a * q[1] + b * t[1],
                    a * q[2] + b * t[2],
                    a * q[3] + b * t[3],
                ],
                (a * a + b * b * h_sq) * q_sq,
            )
        } else {
            let mut q = q;
            for _ in 0..frames {
                w = w.map(|x| x * self.angular_keep_f64);
                let t = turn(q, &half_angle(w));
                q = [q[0] + t[0], q[1] + t[1], q[2] + t[2], q[3] + t[3]];
            }
            (q, q.iter().map(|c| c * c).sum())
        };
        let (largest, sign, rest) = split_largest(q);
        let factor = sign * self.scale / norm_sq.sqrt();
        // Rounded half away from zero (the conversion truncates), then clamped.
        let component = |c: f64| {
            let x = c * factor;
            ((x + 0.5f64.copysign(x)) as i32).max(-max).min(max)
        };
        QuantizedRotation {
            largest: largest as u8,
            components: [component(rest[0]), component(rest[1]), component(rest[2])],
        }
    }

    /// The state `frames` frames after `base`, clamped to the quantizer bounds. A body at rest stays put.
    #[inline]
    pub fn predict(&self, quant: &QuantConfig, base: &BodyState, frames: u16) -> BodyState {
        if base.at_rest || frames == 0 {
            return *base;
        }
        let frames = frames.min(MAX_PREDICT_FRAMES);
        let rotation = self.predict_rotation(base.rotation, base.angular_velocity, frames);
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
            let mut w = base.angular_velocity.map(|x| i64::from(x) << FRAC);
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

/// `h⊗q` for the pure quaternion `h` (the half-angle step) and the quaternion `q`.
#[inline(always)]
fn turn(q: [f64; 4], h: &[f64; 3]) -> [f64; 4] {
    let [x, y, z, s] = q;
    [
        h[0] * s + h[1] * z - h[2] * y,
        h[1] * s + h[2] * x - h[0] * z,
        h[2] * s + h[0] * y - h[1] * x,
        -(h[0] * x + h[1] * y + h[2] * z),
    ]
}

/// The quaternion with the rebuilt largest component `l` at index `largest` (0..=3) and the smallest three in
/// order around it. Chosen without branches: the index is as random as the orientations, so a jump table on it
/// mispredicts about every other call.
#[inline(always)]
fn place_largest(largest: u8, l: f64, [a, b, c]: [f64; 3]) -> [f64; 4] {
    use std::hint::select_unpredictable as pick;
    [
        pick(largest == 0, l, a),
        pick(largest == 1, l, pick(largest == 0, a, b)),
        pick(largest == 2, l, pick(largest < 2, b, c)),
        pick(largest == 3, l, c),
    ]
}

/// The index of the first component of `q` with the largest magnitude, that component's sign (±1), and the
/// other three in order: smallest-three's split, without branches (see [`place_largest`]).
#[inline(always)]
fn split_largest(q: [f64; 4]) -> (usize, f64, [f64; 3]) {
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
    (largest, if value < 0.0 { -1.0 } else { 1.0 }, rest)
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
        let rotation = plain_rotation(pred, base.rotation, base.angular_velocity, frames);
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
        let mut rotations = RoundingApart::default();
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
                let got = p.predict(&quant, &base, frames);
                let want = plain_predict(p, &quant, &base, frames);
                rotations.compare(&quant, got.rotation, want.rotation);
                assert_eq!(
                    got,
                    BodyState {
                        rotation: got.rotation,
                        ..want
                    },
                    "{base:?} {frames}"
                );
            }
        }
        rotations.assert_rare();
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

    /// The rotation predictor written plainly: every frame stepped `q += h⊗q` with `h` recomputed from the
    /// (damped) spin, components placed and taken out by index, the norm taken from the rotated quaternion. The
    /// predictor takes an undamped spin's frames as one product and its norm from that product's scalars; the two
    /// differ only in rounding.
    fn plain_rotation(
        p: &Predictor,
        r: QuantizedRotation,
        w: [i32; 3],
        frames: u16,
    ) -> QuantizedRotation {
        if w == [0; 3] || frames > MAX_ROTATION_FRAMES {
            return r;
        }
        let max = p.rotation_max;
        let small = r
            .components
            .map(|c| f64::from(c.clamp(-max, max)) / p.scale);
        let l = (1.0 - small.iter().map(|c| c * c).sum::<f64>())
            .max(0.0)
            .sqrt();
        let mut q = [0.0; 4];
        let mut k = 0;
        for (i, slot) in q.iter_mut().enumerate() {
            *slot = if i == usize::from(r.largest & 3) {
                l
            } else {
                k += 1;
                small[k - 1]
            };
        }
        let mut w = w.map(f64::from);
        let half_angle = |w: [f64; 3]| [0, 1, 2].map(|i| w[i] * p.half_angle_per_index[i]);
        if f64::from(frames) * half_angle(w).iter().map(|x| x * x).sum::<f64>() > 8.0 {
            return r;
        }
        for _ in 0..frames {
            if p.angular_keep != ONE {
                w = w.map(|x| x * p.angular_keep_f64);
            }
            let h = half_angle(w);
            let [x, y, z, s] = q;
            q = [
                x + h[0] * s + h[1] * z - h[2] * y,
                y + h[1] * s + h[2] * x - h[0] * z,
                z + h[2] * s + h[0] * y - h[1] * x,
                s - h[0] * x - h[1] * y - h[2] * z,
            ];
        }
        let norm = q.iter().map(|c| c * c).sum::<f64>().sqrt();
        let mut largest = 0;
        for i in 1..4 {
            if q[i].abs() > q[largest].abs() {
                largest = i;
            }
        }
        let sign = q[largest].signum();
        let mut components = [0i32; 3];
        let mut k = 0;
        for (i, c) in q.iter().enumerate() {
            if i != largest {
                components[k] = ((c * sign / norm * p.scale).round() as i32).clamp(-max, max);
                k += 1;
            }
        }
        QuantizedRotation {
            largest: largest as u8,
            components,
        }
    }

    /// Counts predicted rotations that differ from the plain predictor's, each checked to be the same rotation to
    /// within a quantizer step (a rounding apart: the two round at different places).
    #[derive(Default)]
    struct RoundingApart {
        compared: u32,
        differ: u32,
    }

    impl RoundingApart {
        fn compare(
            &mut self,
            quant: &QuantConfig,
            got: QuantizedRotation,
            want: QuantizedRotation,
        ) {
            self.compared += 1;
            if got != want {
                self.differ += 1;
                let [a, b] = [got, want].map(|r| quant.rotation.dequantize(r));
                let dot: f32 = (0..4).map(|i| a[i] * b[i]).sum();
                assert!(dot.abs() > 0.9999, "{got:?} vs {want:?}");
            }
        }

        /// Rounding differences are rare: the two forms differ by parts in 2^50 (none in these tests' 600,000).
        fn assert_rare(&self) {
            assert!(
                self.differ * 10_000 <= self.compared,
                "{} of {} differ",
                self.differ,
                self.compared
            );
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
        let mut rotations = RoundingApart::default();
        for _ in 0..100_000 {
            // Anywhere in range, including smallest three too long for a unit quaternion (a hostile baseline).
            let r = QuantizedRotation {
                largest: rng.random_range(0..4),
                components: [0; 3].map(|_| rng.random_range(-max - 2..=max + 2)),
            };
            let scale = 1 << rng.random_range(0..14);
            let w = [0; 3].map(|_| rng.random_range(-scale..=scale));
            let frames = rng.random_range(0..=70);
            for p in &predictors {
                rotations.compare(
                    &quant,
                    p.predict_rotation(r, w, frames),
                    plain_rotation(p, r, w, frames),
                );
            }
        }
        rotations.assert_rare();
    }

    #[test]
    fn an_undamped_spin_in_one_product_is_the_frame_by_frame_spin_but_for_rounding() {
        let quant = QuantConfig::default();
        let p = Predictor::default();
        let mut rng = ChaCha8Rng::seed_from_u64(29);
        let max = quant.rotation.max_component();
        let mut rotations = RoundingApart::default();
        for _ in 0..100_000 {
            let v = [0; 4].map(|_| rng.random_range(-1.0f32..1.0));
            let n = v.iter().map(|c| c * c).sum::<f32>().sqrt().max(1e-3);
            let q = quant.rotation.quantize(v.map(|c| c / n));
            let scale = 1 << rng.random_range(0..13);
            let w = [0; 3].map(|_| rng.random_range(-scale..=scale));
            let frames = rng.random_range(1..=64);
            let got = p.predict_rotation(q, w, frames);
            assert!(got.components.iter().all(|c| c.abs() <= max), "{got:?}");
            rotations.compare(&quant, got, plain_rotation(&p, q, w, frames));
        }
        rotations.assert_rare();
    }

    #[test]
    fn wide_rotation_components_predict_without_overflow() {
        // The quantizer allows up to 20 bits a component (at 16 bits and more, the earlier fixed-point predictor's
        // products passed 2^63).
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
            let want = plain_rotation(&predictor, base.rotation, base.angular_velocity, 6);
            RoundingApart::default().compare(&quant, out.rotation, want);
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
        // 32 rad/s about every axis (the quantizer's limit) for 64 frames is far past what a first-order step
        // predicts; such a prediction keeps the rotation instead.
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
