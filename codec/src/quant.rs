//! Quantizers: floats in, small integers out, and back.
//!
//! Quantize-both-sides depends on one property, tested below: `quantize(dequantize(q)) == q` for every `q` that
//! `quantize` can produce. The authority side writes its physics state back through these functions every step,
//! so the replica extrapolates from exactly the numbers the authority simulated.

/// Number of bits needed to send any value in `0..=span`.
#[inline]
pub fn bits_for(span: u32) -> u32 {
    32 - span.leading_zeros()
}

/// Maps a bounded scalar to an integer index with a fixed number of steps per unit. Values are zero-centred
/// (index 0 is the value 0.0), so integer arithmetic on indices (deltas, prediction) stays natural.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalarQuantizer {
    /// Steps per unit (per metre, per m/s, per rad/s).
    pub steps_per_unit: u32,
    /// Smallest index (inclusive).
    pub min_index: i32,
    /// Largest index (inclusive).
    pub max_index: i32,
}

impl ScalarQuantizer {
    /// A quantizer covering `[min, max]` at `steps_per_unit`; the bounds are rounded outward to whole steps.
    pub fn new(min: f32, max: f32, steps_per_unit: u32) -> Self {
        assert!(min < max, "quantizer bounds must satisfy min < max");
        assert!(
            steps_per_unit > 0,
            "quantizer needs at least one step per unit"
        );
        let spu = f64::from(steps_per_unit);
        Self {
            steps_per_unit,
            min_index: (f64::from(min) * spu).floor() as i32,
            max_index: (f64::from(max) * spu).ceil() as i32,
        }
    }

    /// A quantizer symmetric around zero: `[-max, max]`.
    pub fn symmetric(max: f32, steps_per_unit: u32) -> Self {
        Self::new(-max, max, steps_per_unit)
    }

    /// Bits needed to send one index as an offset from `min_index`.
    pub fn bits(&self) -> u32 {
        bits_for(self.span())
    }

    /// Number of indices above `min_index`.
    pub fn span(&self) -> u32 {
        (i64::from(self.max_index) - i64::from(self.min_index)) as u32
    }

    /// The nearest index to `value`, clamped to the bounds. NaN maps to index 0 clamped into range.
    pub fn quantize(&self, value: f32) -> i32 {
        let scaled = f64::from(value) * f64::from(self.steps_per_unit);
        let rounded = if scaled.is_nan() { 0.0 } else { scaled.round() };
        rounded.clamp(f64::from(self.min_index), f64::from(self.max_index)) as i32
    }

    /// The value an index stands for.
    pub fn dequantize(&self, index: i32) -> f32 {
        (f64::from(index) / f64::from(self.steps_per_unit)) as f32
    }

    /// Clamps an index into the bounds (for indices computed by prediction or read from the wire). Bounds out of
    /// order (the fields are public) give `max_index` rather than a panic.
    #[inline]
    pub fn clamp(&self, index: i32) -> i32 {
        // Not `Ord::clamp`, whose check of the bounds' order cost a comparison and a branch per index.
        index.max(self.min_index).min(self.max_index)
    }

    /// True when `index` lies inside the bounds.
    #[inline]
    pub fn contains(&self, index: i32) -> bool {
        (self.min_index..=self.max_index).contains(&index)
    }

    /// The largest error quantization introduces inside the bounds: half a step.
    pub fn max_error(&self) -> f32 {
        0.5 / self.steps_per_unit as f32
    }
}

/// Three scalar quantizers, one per axis: positions inside a world box, or velocities inside a ball of speeds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vec3Quantizer {
    /// The x, y and z quantizers.
    pub axes: [ScalarQuantizer; 3],
}

impl Vec3Quantizer {
    /// A box `[min, max]` per axis at `steps_per_unit`.
    pub fn bounded(min: [f32; 3], max: [f32; 3], steps_per_unit: u32) -> Self {
        Self {
            axes: [0, 1, 2].map(|i| ScalarQuantizer::new(min[i], max[i], steps_per_unit)),
        }
    }

    /// `[-max, max]` on every axis at `steps_per_unit`.
    pub fn symmetric(max: f32, steps_per_unit: u32) -> Self {
        Self {
            axes: [ScalarQuantizer::symmetric(max, steps_per_unit); 3],
        }
    }

    /// Quantizes each component.
    pub fn quantize(&self, v: [f32; 3]) -> [i32; 3] {
        [0, 1, 2].map(|i| self.axes[i].quantize(v[i]))
    }

    /// Dequantizes each component.
    pub fn dequantize(&self, q: [i32; 3]) -> [f32; 3] {
        [0, 1, 2].map(|i| self.axes[i].dequantize(q[i]))
    }

    /// Clamps each component into its bounds.
    // Always inlined, as `contains`: a call to either cost more than its three comparisons on the codec's hot
    // paths (every prediction, every residual sized, written or read), where the inliner left them out of line.
    #[inline(always)]
    pub fn clamp(&self, q: [i32; 3]) -> [i32; 3] {
        // Spelled out: `array::map` is not always inlined, and this runs for every predicted and decoded state.
        let [a, b, c] = &self.axes;
        [a.clamp(q[0]), b.clamp(q[1]), c.clamp(q[2])]
    }

    /// True when every component is inside its bounds.
    #[inline(always)]
    pub fn contains(&self, q: [i32; 3]) -> bool {
        let [a, b, c] = &self.axes;
        a.contains(q[0]) && b.contains(q[1]) && c.contains(q[2])
    }

    /// Total bits to send one vector as offsets from each axis minimum.
    pub fn bits(&self) -> u32 {
        self.axes.iter().map(ScalarQuantizer::bits).sum()
    }
}

/// A rotation quantized with "smallest three": the index of the largest quaternion component, which is dropped
/// (its sign made positive) and rebuilt from the unit norm, and the other three components as signed integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QuantizedRotation {
    /// Which of x, y, z, w was largest in magnitude (0..=3).
    pub largest: u8,
    /// The remaining three components in x, y, z, w order, each in `[-max_component, max_component]`.
    pub components: [i32; 3],
}

/// Quantizes unit quaternions with smallest-three at a configurable number of bits per component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotationQuantizer {
    /// Bits per component, sign included (the published reference uses 9).
    pub bits_per_component: u32,
}

const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;

impl RotationQuantizer {
    /// A quantizer at `bits_per_component` bits a component (between 4 and 20).
    pub fn new(bits_per_component: u32) -> Self {
        assert!(
            (4..=20).contains(&bits_per_component),
            "rotation bits must be within 4..=20"
        );
        Self { bits_per_component }
    }

    /// The largest component index: components are `[-max, max]`, so `2 * max + 1 <= 2^bits`.
    #[inline]
    pub fn max_component(&self) -> i32 {
        (1 << (self.bits_per_component - 1)) - 1
    }

    /// Bits on the wire for one rotation: two for the largest index and three components.
    pub fn bits(&self) -> u32 {
        2 + 3 * self.bits_per_component
    }

    /// Quantizes a quaternion given as `[x, y, z, w]`; it need not be normalized. The result is a fixed point
    /// of dequantize-then-quantize, which quantize-both-sides relies on.
    pub fn quantize(&self, q: [f32; 4]) -> QuantizedRotation {
        let mut r = self.quantize_once(q.map(f64::from));
        // Near the boundary between two "largest" components, rounding can leave the rebuilt largest component
        // smaller than a sent one, and the dequantized rotation would then quantize with another index. Pull the
        // biggest sent component one step toward zero until the result is a fixed point.
        for _ in 0..8 {
            if self.quantize_once(self.dequantize_f64(r)) == r {
                break;
            }
            let k = (0..3).max_by_key(|&k| r.components[k].abs()).unwrap_or(0);
            r.components[k] -= r.components[k].signum();
        }
        r
    }

    /// The quaternion `[x, y, z, w]` a quantized rotation stands for, normalized.
    pub fn dequantize(&self, r: QuantizedRotation) -> [f32; 4] {
        self.dequantize_f64(r).map(|c| c as f32)
    }

    fn scale(&self) -> f64 {
        f64::from(self.max_component()) / FRAC_1_SQRT_2
    }

    fn quantize_once(&self, q: [f64; 4]) -> QuantizedRotation {
        let norm = q.iter().map(|c| c * c).sum::<f64>().sqrt();
        let q = if norm.is_finite() && norm > 1e-12 {
            q.map(|c| c / norm)
        } else {
            [0.0, 0.0, 0.0, 1.0]
        };
        let mut largest = 0;
        for i in 1..4 {
            if q[i].abs() > q[largest].abs() {
                largest = i;
            }
        }
        let sign = if q[largest] < 0.0 { -1.0 } else { 1.0 };
        let max = self.max_component();
        let scale = self.scale();
        let mut components = [0i32; 3];
        let mut k = 0;
        for (i, c) in q.iter().enumerate() {
            if i != largest {
                components[k] = ((c * sign * scale).round() as i32).clamp(-max, max);
                k += 1;
            }
        }
        QuantizedRotation {
            largest: largest as u8,
            components,
        }
    }

    fn dequantize_f64(&self, r: QuantizedRotation) -> [f64; 4] {
        let scale = self.scale();
        let small = r.components.map(|c| f64::from(c) / scale);
        let sum: f64 = small.iter().map(|c| c * c).sum();
        let largest_value = (1.0 - sum).max(0.0).sqrt();
        let mut q = [0.0; 4];
        let mut k = 0;
        for (i, slot) in q.iter_mut().enumerate() {
            if i == usize::from(r.largest & 3) {
                *slot = largest_value;
            } else {
                *slot = small[k];
                k += 1;
            }
        }
        let norm = q.iter().map(|c| c * c).sum::<f64>().sqrt();
        if norm > 1e-12 {
            q.map(|c| c / norm)
        } else {
            [0.0, 0.0, 0.0, 1.0]
        }
    }
}

/// Every quantizer a rigid-body link needs, in one value both ends of the link share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantConfig {
    /// Positions, in a world box.
    pub position: Vec3Quantizer,
    /// Orientations.
    pub rotation: RotationQuantizer,
    /// Linear velocities, m/s.
    pub linear_velocity: Vec3Quantizer,
    /// Angular velocities, rad/s.
    pub angular_velocity: Vec3Quantizer,
}

impl Default for QuantConfig {
    /// A 128 m × 64 m × 128 m world at 512 values per metre, 9-bit smallest-three rotations (the published
    /// reference), linear velocity ±32 m/s at 1/256 m/s, angular velocity ±32 rad/s at 1/128 rad/s.
    fn default() -> Self {
        Self {
            position: Vec3Quantizer::bounded([-64.0, -8.0, -64.0], [64.0, 56.0, 64.0], 512),
            rotation: RotationQuantizer::new(9),
            linear_velocity: Vec3Quantizer::symmetric(32.0, 256),
            angular_velocity: Vec3Quantizer::symmetric(32.0, 128),
        }
    }
}

/// The integer square root (the floor of the exact root), for rebuilding a smallest-three rotation's dropped
/// component where both ends of a link must agree exactly. A floating-point estimate is corrected with integer
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unit_quaternion() -> impl Strategy<Value = [f32; 4]> {
        prop::array::uniform4(-1.0f32..1.0).prop_filter("non-degenerate", |q| {
            q.iter().map(|c| c * c).sum::<f32>() > 1e-3
        })
    }

    #[test]
    fn default_position_is_at_least_512_per_metre() {
        let config = QuantConfig::default();
        assert!(config.position.axes.iter().all(|a| a.steps_per_unit >= 512));
        assert_eq!(config.position.axes[0].bits(), 17);
    }

    #[test]
    fn scalar_clamps_and_handles_nan() {
        let q = ScalarQuantizer::new(-1.0, 1.0, 100);
        assert_eq!(q.quantize(5.0), 100);
        assert_eq!(q.quantize(-5.0), -100);
        assert_eq!(q.quantize(f32::NAN), 0);
        assert_eq!(q.quantize(0.004), 0);
        assert_eq!(q.quantize(0.006), 1);
    }

    #[test]
    fn rotation_identity_quaternion() {
        let r = RotationQuantizer::new(9);
        let q = r.quantize([0.0, 0.0, 0.0, 1.0]);
        assert_eq!(q.largest, 3);
        assert_eq!(q.components, [0, 0, 0]);
        assert_eq!(r.dequantize(q), [0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn rotation_sign_does_not_matter() {
        let r = RotationQuantizer::new(11);
        let q = [0.3, -0.5, 0.1, 0.8];
        assert_eq!(r.quantize(q), r.quantize(q.map(|c| -c)));
    }

    proptest! {
        #[test]
        fn scalar_requantize_is_identity(v in -300.0f32..300.0, spu in 1u32..2048) {
            let q = ScalarQuantizer::new(-256.0, 256.0, spu);
            let i = q.quantize(v);
            prop_assert_eq!(q.quantize(q.dequantize(i)), i);
            if (-256.0..=256.0).contains(&v) {
                // Half a step, plus the rounding of the f32 result itself.
                let tolerance = q.max_error() * 1.001 + v.abs() * f32::EPSILON * 2.0;
                prop_assert!((q.dequantize(i) - v).abs() <= tolerance);
            }
        }

        #[test]
        fn vec3_requantize_is_identity(v in prop::array::uniform3(-80.0f32..80.0)) {
            let config = QuantConfig::default();
            for quantizer in [config.position, config.linear_velocity, config.angular_velocity] {
                let q = quantizer.quantize(v);
                prop_assert_eq!(quantizer.quantize(quantizer.dequantize(q)), q);
                prop_assert!(quantizer.contains(q));
            }
        }

        #[test]
        fn rotation_requantize_is_identity(q in unit_quaternion(), bits in 6u32..=16) {
            let r = RotationQuantizer::new(bits);
            let first = r.quantize(q);
            prop_assert_eq!(r.quantize(r.dequantize(first)), first);
            let max = r.max_component();
            prop_assert!(first.components.iter().all(|c| (-max..=max).contains(c)));
        }

        #[test]
        fn rotation_error_is_small(q in unit_quaternion()) {
            let r = RotationQuantizer::new(9);
            let norm = q.iter().map(|c| c * c).sum::<f32>().sqrt();
            let q = q.map(|c| c / norm);
            let back = r.dequantize(r.quantize(q));
            let dot: f32 = q.iter().zip(back.iter()).map(|(a, b)| a * b).sum::<f32>().abs();
            // 9 bits: a step of about 0.0028 per component; the rotation error stays well under one degree.
            prop_assert!(dot > 0.9999, "dot {dot}");
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
    fn the_integer_square_root_from_a_floating_estimate_is_exact() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for _ in 0..200_000 {
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
}
