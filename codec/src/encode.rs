//! How rigid bodies and avatars go on the wire: their absolute forms and their residuals in buckets.
//!
//! A residual vector is coded as a bucket tag (zero, small, medium, large) and then each component within the
//! bucket's bound: bit-packing pays the bucket's fixed width, the entropy back end pays for what the values are.
//!
//! The building blocks ([`vec_residual`], [`vec_absolute`], [`pose_residual`], [`pose_absolute`]) are public so
//! that state types defined elsewhere (the shooter's player snapshots) implement [`DeltaState`] with the same
//! encodings, using contexts from [`Ctx::user`] for their own fields.

use crate::arith::Priors;
use crate::delta::DeltaState;
use crate::error::CodecError;
use crate::neighbour::NEIGHBOUR_CLASSES;
use crate::predict::Predictor;
use crate::quant::{QuantConfig, QuantizedRotation, Vec3Quantizer, bits_for};
use crate::state::{AvatarState, BodyState, HandState, HeldObject, ObjectState, QuantizedPose};
use crate::stream::{Ctx, Stream};

mod packed;

/// What both ends of a link share to code rigid bodies and avatars.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StateConfig {
    /// The quantizers the states were made with.
    pub quant: QuantConfig,
    /// The ballistic predictor's constants.
    pub predictor: Predictor,
    /// Bodies travel as pose and at-rest flag only, velocities off the wire: for a receiver that interpolates
    /// between snapshots and never extrapolates (the published snapshot-compression scene codes cubes this way).
    /// Entries then predict from two acked poses instead of the ballistic predictor, bending a flying body's line
    /// by the predictor's gravity (so `predictor` must still match the simulation's rate and gravity). Writing a state with a velocity fails, so the
    /// sender strips them first ([`BodyState::without_velocities`]); reading gives zero velocities.
    pub pose_only: bool,
}

/// The component bounds of the small, medium and large buckets of one kind of residual (increasing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets(pub [i32; 3]);

/// Position residuals, in position indices (1/512 m by default): 3 cm, 0.5 m, 16 m.
pub const POSITION_BUCKETS: Buckets = Buckets([15, 255, 8191]);
/// Smallest-three component residuals.
pub const ROTATION_BUCKETS: Buckets = Buckets([7, 63, 511]);
/// Linear velocity residuals, in velocity indices.
pub const LINEAR_BUCKETS: Buckets = Buckets([15, 255, 16383]);
/// Angular velocity residuals, in velocity indices.
pub const ANGULAR_BUCKETS: Buckets = Buckets([15, 255, 8191]);

/// Contexts of one residual vector: its bucket tag and its three components.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VecCtx {
    /// The bucket tag's context.
    pub bucket: Ctx,
    /// Each component's context.
    pub axes: [Ctx; 3],
}

const POSITION: VecCtx = VecCtx {
    bucket: Ctx::new(4, "position residual bucket"),
    axes: [
        Ctx::new(5, "position residual x"),
        Ctx::new(6, "position residual y"),
        Ctx::new(7, "position residual z"),
    ],
};
const ROTATION: VecCtx = VecCtx {
    bucket: Ctx::new(8, "rotation residual bucket"),
    axes: [Ctx::new(9, "rotation residual"); 3],
};
const LINEAR: VecCtx = VecCtx {
    bucket: Ctx::new(10, "linear velocity residual bucket"),
    axes: [
        Ctx::new(11, "linear velocity residual, no position residual"),
        Ctx::new(12, "linear velocity residual, small position residual"),
        Ctx::new(
            13,
            "linear velocity residual, small negative position residual",
        ),
    ],
};
const ANGULAR: VecCtx = VecCtx {
    bucket: Ctx::new(14, "angular velocity residual bucket"),
    axes: [Ctx::new(15, "angular velocity residual"); 3],
};
const AT_REST: Ctx = Ctx::new(16, "at rest");
const SAME_LARGEST: Ctx = Ctx::new(17, "same largest rotation component");
const META_CHANGED: Ctx = Ctx::new(18, "authority changed");
const AUTHORITY: Ctx = Ctx::new(19, "authority");
const AUTHORITY_SEQ: Ctx = Ctx::new(20, "authority sequence");
const OWNERSHIP_SEQ: Ctx = Ctx::new(21, "ownership sequence");
const ABS_POSITION: Ctx = Ctx::new(22, "position");
const ABS_LARGEST: Ctx = Ctx::new(23, "rotation largest component");
const ABS_ROTATION: Ctx = Ctx::new(24, "rotation component");
const ABS_LINEAR: Ctx = Ctx::new(25, "linear velocity");
const ABS_ANGULAR: Ctx = Ctx::new(26, "angular velocity");
const PLAYER: Ctx = Ctx::new(27, "player");
const HELD: Ctx = Ctx::new(28, "held flag");
const HELD_SAME: Ctx = Ctx::new(29, "held unchanged");
const HELD_OBJECT: Ctx = Ctx::new(30, "held object id");
const PLAYER_CHANGED: Ctx = Ctx::new(31, "player changed");

/// Serializes `value` as a residual against `reference`: a bucket tag, then each component within the bucket's
/// bound. Writing a residual beyond the largest bucket is [`CodecError::Invalid`] (pick another path); reading
/// saturates at the `i32` range, so callers check the result against their bounds.
#[inline]
pub fn vec_residual<S: Stream>(
    s: &mut S,
    ctx: &VecCtx,
    buckets: Buckets,
    value: &mut [i32; 3],
    reference: &[i32; 3],
) -> Result<(), CodecError> {
    vec_residual_chained(
        s,
        ctx.bucket,
        |i, _| ctx.axes[i],
        [0, 0],
        [false; 3],
        buckets,
        value,
        reference,
    )
}

/// [`vec_residual`] with component `i`'s context chosen by `axis(i, class)`, where `class` says how large the
/// largest component coded before it in the same vector was: 0 for none (or the first component), 1 up to
/// `classes[0]`, 2 up to `classes[1]`, 3 beyond. A body knocked off its prediction is off on every axis, and with
/// a bound of a class at the bucket's floor the last component's context also says whether it must reach it.
/// Component `i` goes with its sign flipped where `flip[i]`: a residual coded relative to the direction the
/// prediction stepped, so its sign model learns "overshot" against "fell short" rather than a direction.
#[inline]
#[allow(clippy::too_many_arguments)]
fn vec_residual_chained<S: Stream>(
    s: &mut S,
    bucket_ctx: Ctx,
    axis: impl Fn(usize, usize) -> Ctx,
    classes: [i64; 2],
    flip: [bool; 3],
    buckets: Buckets,
    value: &mut [i32; 3],
    reference: &[i32; 3],
) -> Result<(), CodecError> {
    let mut diff = [0i32; 3];
    let mut bucket = 0i32;
    if !S::READING {
        let mut largest = 0i64;
        for i in 0..3 {
            let d = i64::from(value[i]) - i64::from(reference[i]);
            largest = largest.max(d.abs());
            diff[i] = d.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
        }
        if largest > 0 {
            bucket = 1 + buckets
                .0
                .iter()
                .position(|&b| largest <= i64::from(b))
                .ok_or(CodecError::Invalid {
                    field: bucket_ctx.name,
                })? as i32;
        }
    }
    s.int(bucket_ctx, &mut bucket, 0, 3)?;
    if bucket > 0 {
        let bound = buckets.0[(bucket - 1) as usize];
        let mut so_far = 0i64;
        for (i, d) in diff.iter_mut().enumerate() {
            let class = match so_far {
                0 => 0,
                m if m <= classes[0] => 1,
                m if m <= classes[1] => 2,
                _ => 3,
            };
            let mut coded = if flip[i] { -*d } else { *d };
            s.int(axis(i, class), &mut coded, -bound, bound)?;
            *d = if flip[i] { -coded } else { coded };
            so_far = so_far.max(i64::from(*d).abs());
        }
    }
    if S::READING {
        for i in 0..3 {
            value[i] = reference[i].saturating_add(diff[i]);
        }
    }
    Ok(())
}

/// Serializes a vector of indices within the bounds of `q`.
#[inline]
pub fn vec_absolute<S: Stream>(
    s: &mut S,
    ctx: Ctx,
    q: &Vec3Quantizer,
    value: &mut [i32; 3],
) -> Result<(), CodecError> {
    for (axis, v) in q.axes.iter().zip(value.iter_mut()) {
        s.int(ctx, v, axis.min_index, axis.max_index)?;
    }
    Ok(())
}

/// Bits [`vec_residual`] writes for `value` against `reference` with the bit-packing back end, or `None` when the
/// difference is beyond the largest bucket: the arithmetic behind [`DeltaState::residual_bits`] overrides.
// Always inlined, with the buckets compared one by one: for the codec's constant buckets each size folds to a
// constant, and the encoder sizes four of these twice for every changed rigid body.
#[inline(always)]
pub fn vec_residual_bits(buckets: Buckets, value: &[i32; 3], reference: &[i32; 3]) -> Option<u64> {
    let d = |i: usize| (i64::from(value[i]) - i64::from(reference[i])).abs();
    let largest = d(0).max(d(1)).max(d(2));
    // The tag is an int in 0..=3: two bits; then three components of the bucket's width.
    let sized = |bound: i32| 2 + 3 * u64::from(bits_for((2 * i64::from(bound)) as u32));
    let [small, medium, large] = buckets.0;
    if largest == 0 {
        Some(2)
    } else if largest <= i64::from(small) {
        Some(sized(small))
    } else if largest <= i64::from(medium) {
        Some(sized(medium))
    } else if largest <= i64::from(large) {
        Some(sized(large))
    } else {
        None
    }
}

/// Bits [`vec_absolute`] writes for `value` with the bit-packing back end, or `None` when it is outside `q`.
#[inline]
pub fn vec_absolute_bits(q: &Vec3Quantizer, value: &[i32; 3]) -> Option<u64> {
    let mut bits = 0;
    for (axis, v) in q.axes.iter().zip(value) {
        if !(axis.min_index..=axis.max_index).contains(v) {
            return None;
        }
        bits += u64::from(axis.bits());
    }
    Some(bits)
}

#[inline]
fn check_bounds(q: &Vec3Quantizer, v: &[i32; 3], ctx: Ctx) -> Result<(), CodecError> {
    if q.contains(*v) {
        Ok(())
    } else {
        Err(CodecError::Invalid { field: ctx.name })
    }
}

/// Every smallest-three component within the quantizer's range: a residual can decode to one outside it.
// Always inlined, the components spelled out: every changed body written or read checks them.
#[inline(always)]
fn check_rotation_bounds(quant: &QuantConfig, components: &[i32; 3]) -> Result<(), CodecError> {
    let max = quant.rotation.max_component();
    let inside = |c: i32| (-max..=max).contains(&c);
    if !(inside(components[0]) && inside(components[1]) && inside(components[2])) {
        return Err(CodecError::Invalid {
            field: ABS_ROTATION.name,
        });
    }
    Ok(())
}

#[inline]
fn rotation_absolute<S: Stream>(
    s: &mut S,
    quant: &QuantConfig,
    r: &mut QuantizedRotation,
) -> Result<(), CodecError> {
    let mut largest = u32::from(r.largest);
    s.bits(ABS_LARGEST, &mut largest, 2)?;
    r.largest = largest as u8;
    let max = quant.rotation.max_component();
    for c in r.components.iter_mut() {
        s.int(ABS_ROTATION, c, -max, max)?;
    }
    Ok(())
}

#[inline]
fn rotation_residual<S: Stream>(
    s: &mut S,
    quant: &QuantConfig,
    r: &mut QuantizedRotation,
    reference: &QuantizedRotation,
    ctx: &VecCtx,
    chained: Option<([usize; 3], [bool; 3])>,
) -> Result<(), CodecError> {
    let mut same = r.largest == reference.largest;
    // The margin class takes a square root: not worked out for a stream that ignores contexts.
    let same_ctx = match chained {
        Some(_) if S::CONTEXTS => SAME_LARGEST_BY_MARGIN[largest_margin_class(quant, reference)],
        _ => SAME_LARGEST,
    };
    s.bool(same_ctx, &mut same)?;
    if !same {
        // The largest component changed (a cube tumbling past 90°): the reference re-expressed with the new
        // largest component is still near, so a residual against it, not the whole rotation.
        let mut largest = u32::from(r.largest);
        s.bits(ABS_LARGEST, &mut largest, 2)?;
        if largest == u32::from(reference.largest) {
            return Err(CodecError::Invalid {
                field: SAME_LARGEST.name,
            });
        }
        r.largest = largest as u8;
        let turned = rotation_as(quant, reference, r.largest);
        vec_residual(
            s,
            &ROTATION_TURNED,
            turned_buckets(quant),
            &mut r.components,
            &turned,
        )?;
        return check_rotation_bounds(quant, &r.components);
    }
    r.largest = reference.largest;
    vec_residual_chained(
        s,
        ctx.bucket,
        |i, class| match (class, chained) {
            (0, _) if i == 0 => ctx.axes[0],
            (c, Some((steps, _))) => ROTATION_AFTER[steps[i]][c],
            (c, None) => ROTATION_PLAIN_AFTER[c],
        },
        [ROTATION_BUCKETS.0[0].into(), ROTATION_BUCKETS.0[1].into()],
        chained.map_or([false; 3], |(_, back)| back),
        ROTATION_BUCKETS,
        &mut r.components,
        &reference.components,
    )?;
    check_rotation_bounds(quant, &r.components)
}

#[inline]
fn body_residual<S: Stream>(
    s: &mut S,
    config: &StateConfig,
    b: &mut BodyState,
    r: &BodyState,
    motion: Option<&Motion>,
) -> Result<(), CodecError> {
    let quant = &config.quant;
    // Contexts are worked out only for a stream that codes under them: the maxima and array maps they take stay
    // out of line, so a bit-packing stream would pay for them too (about a tenth of a changed entry's cost).
    let motion_ctx = motion.filter(|_| S::CONTEXTS);
    let at_rest = motion_ctx.map_or(AT_REST, |m| {
        AT_REST_BY_STEP[m.position.iter().copied().max().unwrap_or(0)]
    });
    s.bool(at_rest, &mut b.at_rest)?;
    vec_residual_chained(
        s,
        motion_ctx.map_or(POSITION.bucket, |m| m.position_bucket_ctx(b.at_rest)),
        |i, class| match (motion_ctx, i, class) {
            (Some(m), _, _) => m.position_axis_ctx(i, class),
            (None, _, 0) => POSITION.axes[i],
            (None, 1, c) => POSITION_PLAIN_AFTER[0][c - 1],
            (None, _, c) => POSITION_PLAIN_AFTER[1][c - 1],
        },
        [3, POSITION_BUCKETS.0[0].into()],
        motion.map_or([false; 3], |m| m.position_back),
        POSITION_BUCKETS,
        &mut b.position,
        &r.position,
    )?;
    check_bounds(&quant.position, &b.position, ABS_POSITION)?;
    let rotation = motion_ctx.map_or(ROTATION, |m| {
        m.rotation_ctx(bucket_of(POSITION_BUCKETS, &b.position, &r.position))
    });
    rotation_residual(
        s,
        quant,
        &mut b.rotation,
        &r.rotation,
        &rotation,
        motion.map(|m| (m.rotation, m.rotation_back)),
    )?;
    if config.pose_only {
        velocities_off::<S>(b)?;
    } else if b.at_rest {
        b.linear_velocity = [0; 3];
        b.angular_velocity = [0; 3];
    } else {
        // A body pushed off its predicted path shows it in both its position and its velocity residual, with the
        // same sign: each velocity component is coded under a context of the position residual on its axis.
        let linear = if S::CONTEXTS {
            // Spelled out, as in `Motion::between`.
            let moved = |i: usize| i64::from(b.position[i]) - i64::from(r.position[i]);
            let (x, y, z) = (moved(0), moved(1), moved(2));
            VecCtx {
                bucket: LINEAR_BUCKET_BY_POSITION
                    [magnitude_class(x.abs().max(y.abs()).max(z.abs()))],
                axes: [
                    LINEAR_BY_POSITION[signed_class(x)],
                    LINEAR_BY_POSITION[signed_class(y)],
                    LINEAR_BY_POSITION[signed_class(z)],
                ],
            }
        } else {
            LINEAR
        };
        vec_residual(
            s,
            &linear,
            LINEAR_BUCKETS,
            &mut b.linear_velocity,
            &r.linear_velocity,
        )?;
        check_bounds(&quant.linear_velocity, &b.linear_velocity, ABS_LINEAR)?;
        let angular = if S::CONTEXTS {
            let pushed = (0..3)
                .map(|i| (i64::from(b.linear_velocity[i]) - i64::from(r.linear_velocity[i])).abs())
                .max()
                .unwrap_or(0);
            VecCtx {
                bucket: ANGULAR_BUCKET_BY_LINEAR[magnitude_class(pushed)],
                axes: ANGULAR.axes,
            }
        } else {
            ANGULAR
        };
        vec_residual(
            s,
            &angular,
            ANGULAR_BUCKETS,
            &mut b.angular_velocity,
            &r.angular_velocity,
        )?;
        check_bounds(&quant.angular_velocity, &b.angular_velocity, ABS_ANGULAR)?;
    }
    Ok(())
}

/// A pose-only body's velocities: none may be written (the receiver could not know them), and zero when read.
#[inline]
fn velocities_off<S: Stream>(b: &mut BodyState) -> Result<(), CodecError> {
    if !S::READING && !b.has_no_velocity() {
        return Err(CodecError::Invalid {
            field: "velocity of a pose-only body",
        });
    }
    b.linear_velocity = [0; 3];
    b.angular_velocity = [0; 3];
    Ok(())
}

/// The linear velocity residual's bucket tag, by the magnitude class of the position residual.
const LINEAR_BUCKET_BY_POSITION: [Ctx; 4] = [
    LINEAR.bucket,
    Ctx::new(
        38,
        "linear velocity residual bucket, small position residual",
    ),
    Ctx::new(
        39,
        "linear velocity residual bucket, medium position residual",
    ),
    Ctx::new(
        50,
        "linear velocity residual bucket, large position residual",
    ),
];
/// A linear velocity residual component, by the sign and magnitude class of the position residual on its axis.
const LINEAR_BY_POSITION: [Ctx; 7] = [
    LINEAR.axes[0],
    LINEAR.axes[1],
    LINEAR.axes[2],
    Ctx::new(51, "linear velocity residual, medium position residual"),
    Ctx::new(
        52,
        "linear velocity residual, medium negative position residual",
    ),
    Ctx::new(53, "linear velocity residual, large position residual"),
    Ctx::new(
        54,
        "linear velocity residual, large negative position residual",
    ),
];
/// The angular velocity residual's bucket tag, by the magnitude class of the linear velocity residual.
const ANGULAR_BUCKET_BY_LINEAR: [Ctx; 4] = [
    ANGULAR.bucket,
    Ctx::new(
        55,
        "angular velocity residual bucket, small linear residual",
    ),
    Ctx::new(
        56,
        "angular velocity residual bucket, medium linear residual",
    ),
    Ctx::new(
        57,
        "angular velocity residual bucket, large linear residual",
    ),
];

/// 0 for no change, then small (up to 7), medium (up to 63), large.
#[inline]
fn magnitude_class(m: i64) -> usize {
    match m {
        0 => 0,
        1..=7 => 1,
        8..=63 => 2,
        _ => 3,
    }
}

/// [`magnitude_class`] split by sign: 0, then small, medium and large each positive and negative (small ones share
/// two contexts by sign only).
#[inline]
fn signed_class(d: i64) -> usize {
    match magnitude_class(d.abs()) {
        0 => 0,
        1 => 1 + usize::from(d < 0),
        2 => 3 + usize::from(d < 0),
        _ => 5 + usize::from(d < 0),
    }
}

/// The same-largest flag of a prediction error, by how far the predicted rotation's largest component is ahead of
/// the next largest (see [`largest_margin_class`]): a rotation near the 45° line where two components swap changes
/// its largest component far more often.
const SAME_LARGEST_BY_MARGIN: [Ctx; 4] = [
    Ctx::new(168, "same largest rotation component, margin 0-4"),
    Ctx::new(169, "same largest rotation component, margin 5-16"),
    Ctx::new(170, "same largest rotation component, margin 17-64"),
    Ctx::new(171, "same largest rotation component, margin 65+"),
];

/// A prediction error's at-rest flag, by the largest class of the predicted position step: a body predicted to
/// move is seldom found at rest.
const AT_REST_BY_STEP: [Ctx; MOTION_STEPS] = [
    Ctx::new(172, "at rest, no step"),
    Ctx::new(173, "at rest, step 1-3"),
    Ctx::new(174, "at rest, step 4-15"),
    Ctx::new(175, "at rest, step 16-63"),
    Ctx::new(176, "at rest, step 64+"),
];

/// How far `r`'s largest component is ahead of its next largest, in quantizer steps, as a class: 0 up to 4, 1 up
/// to 16, 2 up to 64, 3 beyond.
#[inline]
fn largest_margin_class(quant: &QuantConfig, r: &QuantizedRotation) -> usize {
    // The components of `rotation_full` other than the largest are the three sent; spelled out rather than a
    // filtered iterator over the four, which stayed out of line (a call per changed body coded, priced or read).
    let [a, b, c] = r.components;
    let next = i64::from(a)
        .abs()
        .max(i64::from(b).abs())
        .max(i64::from(c).abs());
    match dropped_component(quant, r).abs() - next {
        ..=4 => 0,
        5..=16 => 1,
        17..=64 => 2,
        _ => 3,
    }
}

/// One context for the bucket and the components (they use separate models of it).
const TURNED: Ctx = Ctx::new(3, "rotation residual, largest component turned");
/// Contexts of a rotation residual against a reference re-expressed with another largest component.
const ROTATION_TURNED: VecCtx = VecCtx {
    bucket: TURNED,
    axes: [TURNED; 3],
};

/// The buckets of a residual after the largest component changed: the largest spans any difference of two
/// components.
#[inline]
fn turned_buckets(quant: &QuantConfig) -> Buckets {
    Buckets([
        ROTATION_BUCKETS.0[0],
        ROTATION_BUCKETS.0[1],
        (2 * quant.rotation.max_component()).max(ROTATION_BUCKETS.0[1]),
    ])
}

/// The smallest three components of `r` re-expressed with `largest` as its largest component, in integers: the
/// dropped component rebuilt as in [`rotation_full`] (a component of 1/√2 is `max`), the sign flipped so the new
/// largest is not negative, each clamped to the component range.
#[inline]
fn rotation_as(quant: &QuantConfig, r: &QuantizedRotation, largest: u8) -> [i32; 3] {
    let max = i64::from(quant.rotation.max_component());
    let q = rotation_full(quant, r);
    let new = usize::from(largest & 3);
    let sign = if q[new] < 0 { -1 } else { 1 };
    let mut out = [0i32; 3];
    let mut k = 0;
    for (i, &c) in q.iter().enumerate() {
        if i != new {
            out[k] = (c * sign).clamp(-max, max) as i32;
            k += 1;
        }
    }
    out
}

/// Bits [`rotation_absolute`] writes, or `None` when a field is out of range.
#[inline]
fn rotation_absolute_bits(quant: &QuantConfig, r: &QuantizedRotation) -> Option<u64> {
    let max = quant.rotation.max_component();
    if r.largest > 3 || r.components.iter().any(|c| !(-max..=max).contains(c)) {
        return None;
    }
    Some(2 + 3 * u64::from(bits_for((2 * max) as u32)))
}

/// Bits [`body_residual`] writes, or `None` when it fails: the same checks, in arithmetic.
#[inline]
fn body_residual_bits(config: &StateConfig, b: &BodyState, r: &BodyState) -> Option<u64> {
    body_fits(config, b)
        .then(|| body_residual_bits_fitting(config, b, r))
        .flatten()
}

/// Whether `b` is a body [`body_residual`] can write against any reference: its fields inside the quantizer's
/// bounds, and no velocities on a pose-only link. What [`body_residual_bits`] checks of the value alone, checked
/// once when the encoder sizes a body against both its prediction and its baseline.
#[inline]
fn body_fits(config: &StateConfig, b: &BodyState) -> bool {
    let quant = &config.quant;
    let max = quant.rotation.max_component();
    let [x, y, z] = b.rotation.components;
    let velocities_fit = if config.pose_only {
        b.has_no_velocity()
    } else {
        b.at_rest
            || (quant.linear_velocity.contains(b.linear_velocity)
                && quant.angular_velocity.contains(b.angular_velocity))
    };
    velocities_fit
        && quant.position.contains(b.position)
        && (-max..=max).contains(&x)
        && (-max..=max).contains(&y)
        && (-max..=max).contains(&z)
}

/// [`body_residual_bits`] of a body [`body_fits`]: the residual's tags and bucketed components against `r`, or
/// `None` when one lies beyond its largest bucket.
#[inline(always)]
fn body_residual_bits_fitting(config: &StateConfig, b: &BodyState, r: &BodyState) -> Option<u64> {
    let quant = &config.quant;
    let mut bits = 2 + vec_residual_bits(POSITION_BUCKETS, &b.position, &r.position)?;
    if b.rotation.largest == r.rotation.largest {
        bits += vec_residual_bits(
            ROTATION_BUCKETS,
            &b.rotation.components,
            &r.rotation.components,
        )?;
    } else {
        if b.rotation.largest > 3 {
            return None;
        }
        let turned = rotation_as(quant, &r.rotation, b.rotation.largest);
        bits += 2 + vec_residual_bits(turned_buckets(quant), &b.rotation.components, &turned)?;
    }
    if !b.at_rest && !config.pose_only {
        bits += vec_residual_bits(LINEAR_BUCKETS, &b.linear_velocity, &r.linear_velocity)?;
        bits += vec_residual_bits(ANGULAR_BUCKETS, &b.angular_velocity, &r.angular_velocity)?;
    }
    Some(bits)
}

/// The general form of [`body_residual_bits`], check by check in the order the writer meets them: what the tests
/// compare [`body_fits`] and [`body_residual_bits_fitting`] with.
#[cfg(test)]
fn body_residual_bits_in_order(config: &StateConfig, b: &BodyState, r: &BodyState) -> Option<u64> {
    let quant = &config.quant;
    if config.pose_only && !b.has_no_velocity() {
        return None;
    }
    let mut bits = 1 + vec_residual_bits(POSITION_BUCKETS, &b.position, &r.position)?;
    if !quant.position.contains(b.position) {
        return None;
    }
    bits += 1;
    if b.rotation.largest == r.rotation.largest {
        bits += vec_residual_bits(
            ROTATION_BUCKETS,
            &b.rotation.components,
            &r.rotation.components,
        )?;
        let max = quant.rotation.max_component();
        if b.rotation
            .components
            .iter()
            .any(|c| !(-max..=max).contains(c))
        {
            return None;
        }
    } else {
        let max = quant.rotation.max_component();
        if b.rotation.largest > 3
            || b.rotation
                .components
                .iter()
                .any(|c| !(-max..=max).contains(c))
        {
            return None;
        }
        let turned = rotation_as(quant, &r.rotation, b.rotation.largest);
        bits += 2 + vec_residual_bits(turned_buckets(quant), &b.rotation.components, &turned)?;
    }
    if !b.at_rest && !config.pose_only {
        bits += vec_residual_bits(LINEAR_BUCKETS, &b.linear_velocity, &r.linear_velocity)?;
        bits += vec_residual_bits(ANGULAR_BUCKETS, &b.angular_velocity, &r.angular_velocity)?;
        if !quant.linear_velocity.contains(b.linear_velocity)
            || !quant.angular_velocity.contains(b.angular_velocity)
        {
            return None;
        }
    }
    Some(bits)
}

/// Bits [`meta_residual`] writes: the changed flag, and the three fields when they changed.
#[inline(always)]
fn meta_residual_bits(value: &ObjectState, reference: &ObjectState) -> u64 {
    1 + if meta_changed(value, reference) {
        META_BITS
    } else {
        0
    }
}

/// Bits [`body_absolute`] writes, or `None` when it fails.
#[inline]
fn body_absolute_bits(config: &StateConfig, b: &BodyState) -> Option<u64> {
    let quant = &config.quant;
    if config.pose_only && !b.has_no_velocity() {
        return None;
    }
    let mut bits = 1
        + vec_absolute_bits(&quant.position, &b.position)?
        + rotation_absolute_bits(quant, &b.rotation)?;
    if !b.at_rest && !config.pose_only {
        bits += vec_absolute_bits(&quant.linear_velocity, &b.linear_velocity)?;
        bits += vec_absolute_bits(&quant.angular_velocity, &b.angular_velocity)?;
    }
    Some(bits)
}

/// Bits of the authority and the two sequences.
const META_BITS: u64 = 8 + 16 + 16;

#[inline]
fn body_absolute<S: Stream>(
    s: &mut S,
    config: &StateConfig,
    b: &mut BodyState,
) -> Result<(), CodecError> {
    let quant = &config.quant;
    s.bool(AT_REST, &mut b.at_rest)?;
    vec_absolute(s, ABS_POSITION, &quant.position, &mut b.position)?;
    rotation_absolute(s, quant, &mut b.rotation)?;
    if config.pose_only {
        velocities_off::<S>(b)?;
    } else if b.at_rest {
        b.linear_velocity = [0; 3];
        b.angular_velocity = [0; 3];
    } else {
        vec_absolute(
            s,
            ABS_LINEAR,
            &quant.linear_velocity,
            &mut b.linear_velocity,
        )?;
        vec_absolute(
            s,
            ABS_ANGULAR,
            &quant.angular_velocity,
            &mut b.angular_velocity,
        )?;
    }
    Ok(())
}

#[inline]
fn meta<S: Stream>(s: &mut S, o: &mut ObjectState) -> Result<(), CodecError> {
    s.u8(AUTHORITY, &mut o.authority)?;
    s.u16(AUTHORITY_SEQ, &mut o.authority_seq)?;
    s.u16(OWNERSHIP_SEQ, &mut o.ownership_seq)
}

/// `b + (b - o) * frames / span`, rounded to nearest (integer arithmetic, the same on every machine).
#[inline]
fn extrapolate(b: i32, o: i32, frames: u16, span: u16) -> i64 {
    let num = (i64::from(b) - i64::from(o)) * i64::from(frames);
    let span = i64::from(span.max(1));
    let step = (2 * num + num.signum() * span) / (2 * span);
    i64::from(b) + step
}

/// Position indices a body must have risen or fallen between the two acked poses for the pose-only predictor to
/// take it as flying and bend its line by gravity (2: 4 mm at the default 1/512 m; one step is contact noise, a
/// body sliding on a floor keeps its height). Measured on the ladder's pose-only rung with the priors retrained:
/// thresholds 2 and 3 are best (24.93 bits a changed cube), 1 and 5-8 cost 0.05-0.1 bits more.
const AIRBORNE_MIN_RISE: i64 = 2;

/// The pose `frames` after `base`, extrapolated linearly from `older` (`span` frames before it) through `base`,
/// each position index and, when both share their largest component, each smallest-three component; clamped to
/// the quantizers' bounds. A body that moved vertically between the two is taken to fly: its height follows the
/// predictor's gravity ([`crate::predict::Predictor::gravity_curve`]), not the straight line. The at-rest flag is
/// the baseline's, velocities are zero (a pose-only link's).
fn extrapolate_pose(
    config: &StateConfig,
    base: &BodyState,
    frames: u16,
    older: &BodyState,
    span: u16,
) -> BodyState {
    let quant = &config.quant;
    let airborne = !base.at_rest
        && (i64::from(base.position[1]) - i64::from(older.position[1])).abs() >= AIRBORNE_MIN_RISE;
    let mut out = *base;
    for (i, axis) in quant.position.axes.iter().enumerate() {
        let mut p = extrapolate(base.position[i], older.position[i], frames, span);
        if i == 1 && airborne {
            p += config.predictor.gravity_curve(frames, span);
        }
        out.position[i] = p.clamp(i64::from(axis.min_index), i64::from(axis.max_index)) as i32;
    }
    out.rotation = extrapolate_rotation(quant, &base.rotation, frames, &older.rotation, span);
    out
}

/// A smallest-three rotation as its four components in x, y, z, w order, in the quantizer's steps (a unit
/// quaternion has length `max·√2`): the dropped component rebuilt as `√(2·max² − Σc²)` rounded to the nearest
/// integer (the floor of the root left it half a step short on average, a bias the pose-only prediction carried
/// into every component: 0.09 bits a changed cube on the katamari ladder's pose-only rung).
#[inline]
fn rotation_full(quant: &QuantConfig, r: &QuantizedRotation) -> [i64; 4] {
    let dropped = dropped_component(quant, r);
    let mut q = [0i64; 4];
    let mut k = 0;
    for (i, slot) in q.iter_mut().enumerate() {
        if i == usize::from(r.largest & 3) {
            *slot = dropped;
        } else {
            *slot = i64::from(r.components.get(k).copied().unwrap_or(0));
            k += 1;
        }
    }
    q
}

/// The component a smallest-three rotation leaves out, rebuilt as [`rotation_full`] does: `√(2·max² − Σc²)`
/// rounded to the nearest integer.
#[inline]
fn dropped_component(quant: &QuantConfig, r: &QuantizedRotation) -> i64 {
    let max = i64::from(quant.rotation.max_component());
    let [a, b, c] = r.components;
    let (a, b, c) = (i64::from(a), i64::from(b), i64::from(c));
    let square = (2 * max * max - (a * a + b * b + c * c)).max(0);
    // Exact like the standard library's integer root, at a fraction of its cost.
    let mut dropped = crate::quant::isqrt(square as u64) as i64;
    if (dropped + 1) * (dropped + 1) - square < square - dropped * dropped {
        dropped += 1;
    }
    dropped
}

/// `n / d` rounded to nearest, halves away from zero (`d > 0`).
#[inline]
fn div_round(n: i128, d: i128) -> i128 {
    (2 * n + n.signum() * d) / (2 * d)
}

/// The rotation `frames` after `base`, continuing the turn from `older` (`span` frames before it) at the same rate,
/// in integers on the four components: `older` reflected through `base` on the unit sphere (`2(b·o)b − o`, where
/// the turn lands one span on, exactly), the step toward it scaled by `frames / span`, normalized back to unit
/// length, and written as smallest-three with whichever component is then largest. A cube tumbling past 90° is
/// predicted to, instead of going absolute. A component the turn from `older` to `base` left alone (same largest
/// component, same value) keeps its value: renormalizing the four components moves it a step now and then, a miss
/// the residual pays for (0.02 bits a changed cube on the katamari ladder's pose-only rung).
fn extrapolate_rotation(
    quant: &QuantConfig,
    base: &QuantizedRotation,
    frames: u16,
    older: &QuantizedRotation,
    span: u16,
) -> QuantizedRotation {
    let max = i128::from(quant.rotation.max_component());
    let unit = 2 * max * max;
    let b = rotation_full(quant, base).map(i128::from);
    let mut o = rotation_full(quant, older).map(i128::from);
    let mut dot: i128 = (0..4).map(|i| b[i] * o[i]).sum();
    if dot < 0 {
        o = o.map(|c| -c);
        dot = -dot;
    }
    let (frames, span) = (i128::from(frames), i128::from(span.max(1)));
    let p: [i128; 4] = [0, 1, 2, 3].map(|i| {
        let ahead = div_round(2 * dot * b[i], unit) - o[i];
        b[i] + div_round((ahead - b[i]) * frames, span)
    });
    let norm: i128 = p.iter().map(|c| c * c).sum();
    if norm == 0 {
        return *base;
    }
    let mut largest = 0;
    for i in 1..4 {
        if p[i].abs() > p[largest].abs() {
            largest = i;
        }
    }
    let sign = if p[largest] < 0 { -1 } else { 1 };
    // The scale back to unit length, in 2^-20 steps.
    let scale = ((unit << 40) / norm).isqrt();
    let mut out = QuantizedRotation {
        largest: largest as u8,
        components: [0; 3],
    };
    let kept = sign > 0 && out.largest == base.largest && base.largest == older.largest;
    let mut k = 0;
    for (i, &c) in p.iter().enumerate() {
        if i != largest {
            out.components[k] = if kept && base.components[k] == older.components[k] {
                base.components[k]
            } else {
                div_round(sign * c * scale, 1 << 20).clamp(-max, max) as i32
            };
            k += 1;
        }
    }
    out
}

/// Velocity indices (linear and angular, per component) under which a moving body counts as slow.
const SLOW_VELOCITY: i32 = 64;

/// An object's residual against `reference`: its body (under contexts of `motion` when given), then its
/// authority and sequences when they changed.
#[inline]
fn object_residual<S: Stream>(
    s: &mut S,
    config: &StateConfig,
    value: &mut ObjectState,
    reference: &ObjectState,
    motion: Option<&Motion>,
) -> Result<(), CodecError> {
    body_residual(s, config, &mut value.body, &reference.body, motion)?;
    meta_residual(s, value, reference)
}

/// An object's authority and sequences against `reference`'s: a flag, then the three when they changed (a
/// reader takes `reference`'s otherwise). The tail of every residual, the hand-written one's too.
#[inline]
fn meta_residual<S: Stream>(
    s: &mut S,
    value: &mut ObjectState,
    reference: &ObjectState,
) -> Result<(), CodecError> {
    let mut changed = meta_changed(value, reference);
    s.bool(META_CHANGED, &mut changed)?;
    if changed {
        meta(s, value)
    } else {
        keep_meta(value, reference);
        Ok(())
    }
}

/// Whether `value`'s authority fields differ from `reference`'s: what the changed-authority flag of a residual says.
#[inline(always)]
fn meta_changed(value: &ObjectState, reference: &ObjectState) -> bool {
    value.authority != reference.authority
        || value.authority_seq != reference.authority_seq
        || value.ownership_seq != reference.ownership_seq
}

/// The authority fields of `reference` in `value`: what an unchanged-authority flag read against it means.
#[inline(always)]
fn keep_meta(value: &mut ObjectState, reference: &ObjectState) {
    value.authority = reference.authority;
    value.authority_seq = reference.authority_seq;
    value.ownership_seq = reference.ownership_seq;
}

/// Classes of how far a prediction moved from its baseline on one position axis or rotation component.
const MOTION_STEPS: usize = 5;

/// How far a prediction moved from its baseline, per position axis and smallest-three component, as classes of
/// [`step_class`]: a fast body's prediction misses by more than a creeping one's, so each residual component (and
/// each bucket tag, by the largest class of its vector) is coded under a context of its class. Both ends know the
/// baseline and the prediction, so the classes cost nothing.
#[derive(Debug, Clone, Copy)]
struct Motion {
    position: [usize; 3],
    rotation: [usize; 3],
    /// Per position axis and rotation component, whether the prediction stepped toward negative values: the
    /// residual is coded with its sign flipped there (see [`vec_residual_chained`]).
    position_back: [bool; 3],
    rotation_back: [bool; 3],
    /// The class of the miss a neighbour correction moved the prediction by, `0..NEIGHBOUR_CLASSES` (0: none): the
    /// position's bucket tag and first component are coded under it.
    neighbour: usize,
}

impl Motion {
    #[inline]
    fn between(baseline: &BodyState, prediction: &BodyState) -> Self {
        // The three-element arrays spelled out rather than built with `array::map`, which stayed out of line (a
        // call per array of every changed body, coded or read).
        let step = |a: i32, b: i32| step_class(i64::from(a) - i64::from(b));
        let (p, pb) = (&prediction.position, &baseline.position);
        let position = [step(p[0], pb[0]), step(p[1], pb[1]), step(p[2], pb[2])];
        let position_back = [p[0] < pb[0], p[1] < pb[1], p[2] < pb[2]];
        let same = prediction.rotation.largest == baseline.rotation.largest;
        let (r, rb) = (
            &prediction.rotation.components,
            &baseline.rotation.components,
        );
        let rotation = if same {
            [step(r[0], rb[0]), step(r[1], rb[1]), step(r[2], rb[2])]
        } else {
            [MOTION_STEPS - 1; 3]
        };
        let rotation_back = [
            same && r[0] < rb[0],
            same && r[1] < rb[1],
            same && r[2] < rb[2],
        ];
        Self {
            position,
            rotation,
            position_back,
            rotation_back,
            neighbour: 0,
        }
    }

    #[inline]
    fn position_bucket_ctx(&self, at_rest: bool) -> Ctx {
        let top = self.position.iter().copied().max().unwrap_or(0);
        match (at_rest, self.neighbour) {
            (true, _) => POSITION_BUCKET_AT_REST[top],
            (false, 0) => POSITION_BUCKET_BY_STEP[top],
            (false, n) => POSITION_BUCKET_BY_NEIGHBOUR[n - 1][top],
        }
    }

    /// Position axis `i`'s context: by the class of its predicted step and, after the first axis, by the
    /// magnitude class of the largest residual component before it.
    #[inline]
    fn position_axis_ctx(&self, i: usize, class: usize) -> Ctx {
        let step = self.position[i];
        match (i, class) {
            (0, _) if self.neighbour > 0 => POSITION_X_BY_NEIGHBOUR[self.neighbour - 1][step],
            (_, 0) => POSITION_BY_STEP[step][i],
            (1, c) => POSITION_AFTER[step][0][c - 1],
            (_, c) => POSITION_AFTER[step][1][c - 1],
        }
    }

    /// The rotation residual's contexts, its bucket tag also by the position residual's bucket (a cube knocked
    /// off its predicted path is mostly knocked off its turn too).
    #[inline]
    fn rotation_ctx(&self, position_bucket: usize) -> VecCtx {
        let top = self.rotation.iter().copied().max().unwrap_or(0);
        let bucket = match position_bucket {
            0 => ROTATION_BUCKET_BY_STEP[top],
            p => ROTATION_BUCKET_BY_STEP_AND_POSITION[top][(p - 1).min(2)],
        };
        let [a, b, c] = self.rotation;
        VecCtx {
            bucket,
            axes: [
                ROTATION_BY_STEP[a],
                ROTATION_BY_STEP[b],
                ROTATION_BY_STEP[c],
            ],
        }
    }
}

/// The bucket [`vec_residual`] codes `value` against `reference` in: 0 for none, then 1..=3 (3 beyond the last).
#[inline]
fn bucket_of(buckets: Buckets, value: &[i32; 3], reference: &[i32; 3]) -> usize {
    let largest = (0..3)
        .map(|i| (i64::from(value[i]) - i64::from(reference[i])).abs())
        .max()
        .unwrap_or(0);
    if largest == 0 {
        return 0;
    }
    1 + buckets
        .0
        .iter()
        .position(|&b| largest <= i64::from(b))
        .unwrap_or(2)
}

/// The rotation residual's bucket tag when the position residual was in the small, medium or large bucket, by the
/// largest class of the predicted step.
const ROTATION_BUCKET_BY_STEP_AND_POSITION: [[Ctx; 3]; MOTION_STEPS] = [
    [
        Ctx::new(
            94,
            "rotation residual bucket, no step, small translation miss",
        ),
        Ctx::new(
            95,
            "rotation residual bucket, no step, medium translation miss",
        ),
        Ctx::new(
            96,
            "rotation residual bucket, no step, large translation miss",
        ),
    ],
    [
        Ctx::new(
            97,
            "rotation residual bucket, step 1-3, small translation miss",
        ),
        Ctx::new(
            98,
            "rotation residual bucket, step 1-3, medium translation miss",
        ),
        Ctx::new(
            99,
            "rotation residual bucket, step 1-3, large translation miss",
        ),
    ],
    [
        Ctx::new(
            100,
            "rotation residual bucket, step 4-15, small translation miss",
        ),
        Ctx::new(
            101,
            "rotation residual bucket, step 4-15, medium translation miss",
        ),
        Ctx::new(
            102,
            "rotation residual bucket, step 4-15, large translation miss",
        ),
    ],
    [
        Ctx::new(
            103,
            "rotation residual bucket, step 16-63, small translation miss",
        ),
        Ctx::new(
            104,
            "rotation residual bucket, step 16-63, medium translation miss",
        ),
        Ctx::new(
            105,
            "rotation residual bucket, step 16-63, large translation miss",
        ),
    ],
    [
        Ctx::new(
            106,
            "rotation residual bucket, step 64+, small translation miss",
        ),
        Ctx::new(
            107,
            "rotation residual bucket, step 64+, medium translation miss",
        ),
        Ctx::new(
            108,
            "rotation residual bucket, step 64+, large translation miss",
        ),
    ],
];

/// 0 for no step, then 1..=3, 4..=15, 16..=63 and more (in quantizer steps).
#[inline]
fn step_class(d: i64) -> usize {
    match d.unsigned_abs() {
        0 => 0,
        1..=3 => 1,
        4..=15 => 2,
        16..=63 => 3,
        _ => 4,
    }
}

/// The position residual's bucket tag of a neighbour-corrected prediction, by the class of the neighbour's miss
/// (exact, 1-3, 4-15, 16+ steps) and the largest class of the predicted step.
const POSITION_BUCKET_BY_NEIGHBOUR: [[Ctx; MOTION_STEPS]; NEIGHBOUR_CLASSES - 1] = [
    [
        Ctx::new(198, "position residual bucket, neighbour exact, no step"),
        Ctx::new(199, "position residual bucket, neighbour exact, step 1-3"),
        Ctx::new(200, "position residual bucket, neighbour exact, step 4-15"),
        Ctx::new(201, "position residual bucket, neighbour exact, step 16-63"),
        Ctx::new(202, "position residual bucket, neighbour exact, step 64+"),
    ],
    [
        Ctx::new(
            203,
            "position residual bucket, neighbour missed 1-3, no step",
        ),
        Ctx::new(
            204,
            "position residual bucket, neighbour missed 1-3, step 1-3",
        ),
        Ctx::new(
            205,
            "position residual bucket, neighbour missed 1-3, step 4-15",
        ),
        Ctx::new(
            206,
            "position residual bucket, neighbour missed 1-3, step 16-63",
        ),
        Ctx::new(
            207,
            "position residual bucket, neighbour missed 1-3, step 64+",
        ),
    ],
    [
        Ctx::new(
            208,
            "position residual bucket, neighbour missed 4-15, no step",
        ),
        Ctx::new(
            209,
            "position residual bucket, neighbour missed 4-15, step 1-3",
        ),
        Ctx::new(
            210,
            "position residual bucket, neighbour missed 4-15, step 4-15",
        ),
        Ctx::new(
            211,
            "position residual bucket, neighbour missed 4-15, step 16-63",
        ),
        Ctx::new(
            212,
            "position residual bucket, neighbour missed 4-15, step 64+",
        ),
    ],
    [
        Ctx::new(
            213,
            "position residual bucket, neighbour missed 16+, no step",
        ),
        Ctx::new(
            214,
            "position residual bucket, neighbour missed 16+, step 1-3",
        ),
        Ctx::new(
            215,
            "position residual bucket, neighbour missed 16+, step 4-15",
        ),
        Ctx::new(
            216,
            "position residual bucket, neighbour missed 16+, step 16-63",
        ),
        Ctx::new(
            217,
            "position residual bucket, neighbour missed 16+, step 64+",
        ),
    ],
];
/// A neighbour-corrected prediction's first position component (x), by the class of the neighbour's miss and the
/// class of the predicted step on x.
const POSITION_X_BY_NEIGHBOUR: [[Ctx; MOTION_STEPS]; NEIGHBOUR_CLASSES - 1] = [
    [
        Ctx::new(218, "position residual x, neighbour exact, no step"),
        Ctx::new(219, "position residual x, neighbour exact, step 1-3"),
        Ctx::new(220, "position residual x, neighbour exact, step 4-15"),
        Ctx::new(221, "position residual x, neighbour exact, step 16-63"),
        Ctx::new(222, "position residual x, neighbour exact, step 64+"),
    ],
    [
        Ctx::new(223, "position residual x, neighbour missed 1-3, no step"),
        Ctx::new(224, "position residual x, neighbour missed 1-3, step 1-3"),
        Ctx::new(225, "position residual x, neighbour missed 1-3, step 4-15"),
        Ctx::new(226, "position residual x, neighbour missed 1-3, step 16-63"),
        Ctx::new(227, "position residual x, neighbour missed 1-3, step 64+"),
    ],
    [
        Ctx::new(228, "position residual x, neighbour missed 4-15, no step"),
        Ctx::new(229, "position residual x, neighbour missed 4-15, step 1-3"),
        Ctx::new(230, "position residual x, neighbour missed 4-15, step 4-15"),
        Ctx::new(
            231,
            "position residual x, neighbour missed 4-15, step 16-63",
        ),
        Ctx::new(232, "position residual x, neighbour missed 4-15, step 64+"),
    ],
    [
        Ctx::new(233, "position residual x, neighbour missed 16+, no step"),
        Ctx::new(234, "position residual x, neighbour missed 16+, step 1-3"),
        Ctx::new(235, "position residual x, neighbour missed 16+, step 4-15"),
        Ctx::new(236, "position residual x, neighbour missed 16+, step 16-63"),
        Ctx::new(237, "position residual x, neighbour missed 16+, step 64+"),
    ],
];

/// The position residual's bucket tag, by the largest class of the predicted step.
const POSITION_BUCKET_BY_STEP: [Ctx; MOTION_STEPS] = [
    Ctx::new(64, "position residual bucket, no step"),
    Ctx::new(65, "position residual bucket, step 1-3"),
    Ctx::new(66, "position residual bucket, step 4-15"),
    Ctx::new(67, "position residual bucket, step 16-63"),
    Ctx::new(68, "position residual bucket, step 64+"),
];
/// A position residual component, by the class of the predicted step on its axis, per axis.
const POSITION_BY_STEP: [[Ctx; 3]; MOTION_STEPS] = [
    [
        Ctx::new(69, "position residual x, no step"),
        Ctx::new(70, "position residual y, no step"),
        Ctx::new(71, "position residual z, no step"),
    ],
    [
        Ctx::new(72, "position residual x, step 1-3"),
        Ctx::new(73, "position residual y, step 1-3"),
        Ctx::new(74, "position residual z, step 1-3"),
    ],
    [
        Ctx::new(75, "position residual x, step 4-15"),
        Ctx::new(76, "position residual y, step 4-15"),
        Ctx::new(77, "position residual z, step 4-15"),
    ],
    [
        Ctx::new(78, "position residual x, step 16-63"),
        Ctx::new(79, "position residual y, step 16-63"),
        Ctx::new(80, "position residual z, step 16-63"),
    ],
    [
        Ctx::new(81, "position residual x, step 64+"),
        Ctx::new(82, "position residual y, step 64+"),
        Ctx::new(83, "position residual z, step 64+"),
    ],
];
/// Position axes y and z, by the class of the predicted step on the axis, the axis (y, z) and the magnitude class
/// (small, medium, large) of the largest residual component coded before it.
const POSITION_AFTER: [[[Ctx; 3]; 2]; MOTION_STEPS] = [
    [
        [
            Ctx::new(109, "position residual y, no step, after a 1-3 one"),
            Ctx::new(110, "position residual y, no step, after a 4-15 one"),
            Ctx::new(111, "position residual y, no step, after a 16+ one"),
        ],
        [
            Ctx::new(112, "position residual z, no step, after a 1-3 one"),
            Ctx::new(113, "position residual z, no step, after a 4-15 one"),
            Ctx::new(114, "position residual z, no step, after a 16+ one"),
        ],
    ],
    [
        [
            Ctx::new(115, "position residual y, step 1-3, after a 1-3 one"),
            Ctx::new(116, "position residual y, step 1-3, after a 4-15 one"),
            Ctx::new(117, "position residual y, step 1-3, after a 16+ one"),
        ],
        [
            Ctx::new(118, "position residual z, step 1-3, after a 1-3 one"),
            Ctx::new(119, "position residual z, step 1-3, after a 4-15 one"),
            Ctx::new(120, "position residual z, step 1-3, after a 16+ one"),
        ],
    ],
    [
        [
            Ctx::new(121, "position residual y, step 4-15, after a 1-3 one"),
            Ctx::new(122, "position residual y, step 4-15, after a 4-15 one"),
            Ctx::new(123, "position residual y, step 4-15, after a 16+ one"),
        ],
        [
            Ctx::new(124, "position residual z, step 4-15, after a 1-3 one"),
            Ctx::new(125, "position residual z, step 4-15, after a 4-15 one"),
            Ctx::new(126, "position residual z, step 4-15, after a 16+ one"),
        ],
    ],
    [
        [
            Ctx::new(127, "position residual y, step 16-63, after a 1-3 one"),
            Ctx::new(128, "position residual y, step 16-63, after a 4-15 one"),
            Ctx::new(129, "position residual y, step 16-63, after a 16+ one"),
        ],
        [
            Ctx::new(130, "position residual z, step 16-63, after a 1-3 one"),
            Ctx::new(131, "position residual z, step 16-63, after a 4-15 one"),
            Ctx::new(132, "position residual z, step 16-63, after a 16+ one"),
        ],
    ],
    [
        [
            Ctx::new(133, "position residual y, step 64+, after a 1-3 one"),
            Ctx::new(134, "position residual y, step 64+, after a 4-15 one"),
            Ctx::new(135, "position residual y, step 64+, after a 16+ one"),
        ],
        [
            Ctx::new(136, "position residual z, step 64+, after a 1-3 one"),
            Ctx::new(137, "position residual z, step 64+, after a 4-15 one"),
            Ctx::new(138, "position residual z, step 64+, after a 16+ one"),
        ],
    ],
];
/// Rotation components after the first, by the class of the component's predicted step and the magnitude class of
/// the largest residual component coded before it (none, small, medium, large).
const ROTATION_AFTER: [[Ctx; 4]; MOTION_STEPS] = [
    [
        Ctx::new(139, "rotation residual, no step, after none"),
        Ctx::new(140, "rotation residual, no step, after 1-7"),
        Ctx::new(141, "rotation residual, no step, after 8-63"),
        Ctx::new(142, "rotation residual, no step, after 64+"),
    ],
    [
        Ctx::new(143, "rotation residual, step 1-3, after none"),
        Ctx::new(144, "rotation residual, step 1-3, after 1-7"),
        Ctx::new(145, "rotation residual, step 1-3, after 8-63"),
        Ctx::new(146, "rotation residual, step 1-3, after 64+"),
    ],
    [
        Ctx::new(147, "rotation residual, step 4-15, after none"),
        Ctx::new(148, "rotation residual, step 4-15, after 1-7"),
        Ctx::new(149, "rotation residual, step 4-15, after 8-63"),
        Ctx::new(150, "rotation residual, step 4-15, after 64+"),
    ],
    [
        Ctx::new(151, "rotation residual, step 16-63, after none"),
        Ctx::new(152, "rotation residual, step 16-63, after 1-7"),
        Ctx::new(153, "rotation residual, step 16-63, after 8-63"),
        Ctx::new(154, "rotation residual, step 16-63, after 64+"),
    ],
    [
        Ctx::new(155, "rotation residual, step 64+, after none"),
        Ctx::new(156, "rotation residual, step 64+, after 1-7"),
        Ctx::new(157, "rotation residual, step 64+, after 8-63"),
        Ctx::new(158, "rotation residual, step 64+, after 64+"),
    ],
];
/// A residual against the baseline (no prediction): position axes y and z by the magnitude class (1-3, 4-15,
/// 16+) of the largest component before them, as [`POSITION_AFTER`] does for prediction errors.
const POSITION_PLAIN_AFTER: [[Ctx; 3]; 2] = [
    [
        Ctx::new(183, "position residual y, after a 1-3 one"),
        Ctx::new(184, "position residual y, after a 4-15 one"),
        Ctx::new(185, "position residual y, after a 16+ one"),
    ],
    [
        Ctx::new(186, "position residual z, after a 1-3 one"),
        Ctx::new(187, "position residual z, after a 4-15 one"),
        Ctx::new(188, "position residual z, after a 16+ one"),
    ],
];
/// A residual against the baseline: rotation components after the first, by the magnitude class of the largest
/// before them, as [`ROTATION_AFTER`] does for prediction errors.
const ROTATION_PLAIN_AFTER: [Ctx; 4] = [
    Ctx::new(189, "rotation residual, after none"),
    Ctx::new(190, "rotation residual, after 1-7"),
    Ctx::new(191, "rotation residual, after 8-63"),
    Ctx::new(192, "rotation residual, after 64+"),
];
/// The position residual's bucket tag of a body found at rest, by the largest class of the predicted step: a body
/// predicted to move that stopped missed by the whole step.
const POSITION_BUCKET_AT_REST: [Ctx; MOTION_STEPS] = [
    Ctx::new(193, "position residual bucket, at rest, no step"),
    Ctx::new(194, "position residual bucket, at rest, step 1-3"),
    Ctx::new(195, "position residual bucket, at rest, step 4-15"),
    Ctx::new(196, "position residual bucket, at rest, step 16-63"),
    Ctx::new(197, "position residual bucket, at rest, step 64+"),
];
/// The rotation residual's bucket tag, by the largest class of the predicted step.
const ROTATION_BUCKET_BY_STEP: [Ctx; MOTION_STEPS] = [
    Ctx::new(84, "rotation residual bucket, no step"),
    Ctx::new(85, "rotation residual bucket, step 1-3"),
    Ctx::new(86, "rotation residual bucket, step 4-15"),
    Ctx::new(87, "rotation residual bucket, step 16-63"),
    Ctx::new(88, "rotation residual bucket, step 64+"),
];
/// A rotation residual component, by the class of the predicted step of that component.
const ROTATION_BY_STEP: [Ctx; MOTION_STEPS] = [
    Ctx::new(89, "rotation residual, no step"),
    Ctx::new(90, "rotation residual, step 1-3"),
    Ctx::new(91, "rotation residual, step 4-15"),
    Ctx::new(92, "rotation residual, step 16-63"),
    Ctx::new(93, "rotation residual, step 64+"),
];

impl DeltaState for ObjectState {
    type Config = StateConfig;

    #[inline]
    fn motion_class(&self) -> usize {
        let b = &self.body;
        // Spelled out rather than a chained iterator, which stayed out of line (a call per entry coded or read
        // under contexts, unchanged ones included).
        let slow = |v: &[i32; 3]| {
            v[0].abs() < SLOW_VELOCITY && v[1].abs() < SLOW_VELOCITY && v[2].abs() < SLOW_VELOCITY
        };
        if b.at_rest {
            0
        } else if slow(&b.linear_velocity) && slow(&b.angular_velocity) {
            1
        } else {
            2
        }
    }

    #[inline]
    fn predict(config: &StateConfig, baseline: &Self, frames: u16) -> Option<Self> {
        if config.pose_only || frames == 0 || frames > crate::predict::MAX_PREDICT_FRAMES {
            return None;
        }
        Some(Self {
            body: config
                .predictor
                .predict(&config.quant, &baseline.body, frames),
            ..*baseline
        })
    }

    #[inline]
    fn predicts(config: &StateConfig, _baseline: &Self, frames: u16) -> bool {
        !config.pose_only && frames != 0 && frames <= crate::predict::MAX_PREDICT_FRAMES
    }

    #[inline]
    fn prediction_class(prediction: &Self, baseline: &Self) -> usize {
        let step = (0..3)
            .map(|i| {
                (i64::from(prediction.body.position[i]) - i64::from(baseline.body.position[i]))
                    .abs()
            })
            .max()
            .unwrap_or(0);
        match step {
            0 => 0,
            1..=15 => 1,
            _ => 2,
        }
    }

    #[inline]
    fn position(&self) -> Option<[i32; 3]> {
        Some(self.body.position)
    }

    #[inline]
    fn moved(&self, config: &StateConfig, by: [i32; 3]) -> Self {
        let p = &self.body.position;
        let moved = [0, 1, 2].map(|i| {
            (i64::from(p[i]) + i64::from(by[i])).clamp(i64::from(i32::MIN), i64::from(i32::MAX))
                as i32
        });
        let mut out = *self;
        out.body.position = config.quant.position.clamp(moved);
        out
    }

    /// A pose-only link's statistics are its own: no velocities, predictions from two acked poses.
    #[inline]
    fn priors(config: &StateConfig) -> Priors {
        if config.pose_only {
            Priors::PoseOnly
        } else {
            Priors::Full
        }
    }

    /// A pose-only link sends no velocities to predict with: it extrapolates from two acked poses instead.
    #[inline]
    fn uses_history(config: &StateConfig) -> bool {
        config.pose_only
    }

    #[inline]
    fn predict_from_history(
        config: &StateConfig,
        baseline: &Self,
        frames: u16,
        older: &Self,
        span: u16,
    ) -> Option<Self> {
        if !config.pose_only || span == 0 || frames > crate::predict::MAX_PREDICT_FRAMES {
            return None;
        }
        Some(Self {
            body: extrapolate_pose(config, &baseline.body, frames, &older.body, span),
            ..*baseline
        })
    }

    fn serialize_residual<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
        reference: &Self,
    ) -> Result<(), CodecError> {
        if !S::CONTEXTS {
            return packed::object_residual(s, config, value, reference, None);
        }
        object_residual(s, config, value, reference, None)
    }

    #[inline]
    fn serialize_prediction_error<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
        prediction: &Self,
        baseline: &Self,
        neighbour: usize,
    ) -> Result<(), CodecError> {
        if !S::CONTEXTS {
            return packed::object_residual(s, config, value, prediction, Some(&baseline.body));
        }
        let mut motion = Motion::between(&baseline.body, &prediction.body);
        motion.neighbour = neighbour.min(NEIGHBOUR_CLASSES - 1);
        object_residual(s, config, value, prediction, Some(&motion))
    }

    fn serialize_absolute<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
    ) -> Result<(), CodecError> {
        body_absolute(s, config, &mut value.body)?;
        meta(s, value)
    }

    #[inline]
    fn residual_bits(config: &StateConfig, value: &Self, reference: &Self) -> Option<u64> {
        Some(
            body_residual_bits(config, &value.body, &reference.body)?
                + meta_residual_bits(value, reference),
        )
    }

    /// The body's bounds checked once for both references (see [`body_fits`]).
    #[inline]
    fn residual_bits_both(
        config: &StateConfig,
        value: &Self,
        prediction: &Self,
        baseline: &Self,
    ) -> (Option<u64>, Option<u64>) {
        if !body_fits(config, &value.body) {
            return (None, None);
        }
        let against = |reference: &Self| {
            Some(
                body_residual_bits_fitting(config, &value.body, &reference.body)?
                    + meta_residual_bits(value, reference),
            )
        };
        (against(prediction), against(baseline))
    }

    /// The tags and the residual in one pass on a stream that ignores contexts (see [`packed::write_changed`]).
    #[inline]
    fn write_changed<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &Self,
        path: crate::delta::DeltaPath,
        base: &Self,
        prediction: Option<&Self>,
    ) -> Result<(), CodecError> {
        if S::CONTEXTS || S::READING {
            return crate::delta::write_changed_generic(s, config, value, path, base, prediction);
        }
        packed::write_changed(s, config, value, path, base, prediction)
    }

    /// Both residuals worked out once, for sizing and for writing (see [`packed::plan_packed`]).
    #[inline]
    fn plan_packed(
        config: &StateConfig,
        value: &Self,
        baseline: &Self,
        prediction: Option<&Self>,
        out: &mut crate::bitpack::PackedBits,
    ) -> Option<crate::delta::PackedPlan> {
        packed::plan_packed(config, value, baseline, prediction, out)
    }

    /// The tags and the residual in one pass on a stream that ignores contexts (see [`packed::read_changed`]).
    #[inline]
    fn read_changed<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
        base: &Self,
        frames: Option<u16>,
    ) -> Result<crate::delta::DeltaPath, CodecError> {
        if S::CONTEXTS || !S::READING {
            return crate::delta::read_changed_generic(s, config, value, base, frames);
        }
        packed::read_changed(s, config, value, base, frames)
    }

    #[inline]
    fn absolute_bits(config: &StateConfig, value: &Self) -> Option<u64> {
        Some(body_absolute_bits(config, &value.body)? + META_BITS)
    }

    /// A body at rest: its flag, position and rotation, and the authority fields.
    #[inline]
    fn absolute_bits_floor(config: &StateConfig) -> u64 {
        let quant = &config.quant;
        let position: u64 = quant
            .position
            .axes
            .iter()
            .map(|a| u64::from(a.bits()))
            .sum();
        let rotation = 2 + 3 * u64::from(bits_for((2 * quant.rotation.max_component()) as u32));
        1 + position + rotation + META_BITS
    }
}

/// Serializes a pose in full: position within the quantizer's bounds, then the smallest-three rotation.
pub fn pose_absolute<S: Stream>(
    s: &mut S,
    quant: &QuantConfig,
    p: &mut QuantizedPose,
) -> Result<(), CodecError> {
    vec_absolute(s, ABS_POSITION, &quant.position, &mut p.position)?;
    rotation_absolute(s, quant, &mut p.rotation)
}

/// Serializes a pose as a residual against `r` (the rotation in full when its largest component changed), checking
/// the result against the position bounds.
pub fn pose_residual<S: Stream>(
    s: &mut S,
    quant: &QuantConfig,
    p: &mut QuantizedPose,
    r: &QuantizedPose,
) -> Result<(), CodecError> {
    vec_residual(s, &POSITION, POSITION_BUCKETS, &mut p.position, &r.position)?;
    check_bounds(&quant.position, &p.position, ABS_POSITION)?;
    rotation_residual(s, quant, &mut p.rotation, &r.rotation, &ROTATION, None)
}

fn held_absolute<S: Stream>(
    s: &mut S,
    quant: &QuantConfig,
    h: &mut HeldObject,
) -> Result<(), CodecError> {
    s.u16(HELD_OBJECT, &mut h.object)?;
    pose_absolute(s, quant, &mut h.relative)?;
    s.u16(AUTHORITY_SEQ, &mut h.authority_seq)?;
    s.u16(OWNERSHIP_SEQ, &mut h.ownership_seq)
}

fn hand<S: Stream>(
    s: &mut S,
    quant: &QuantConfig,
    h: &mut HandState,
    reference: Option<&HandState>,
) -> Result<(), CodecError> {
    match reference {
        Some(r) => pose_residual(s, quant, &mut h.pose, &r.pose)?,
        None => pose_absolute(s, quant, &mut h.pose)?,
    }
    let mut holding = h.held.is_some();
    s.bool(HELD, &mut holding)?;
    if !holding {
        h.held = None;
        return Ok(());
    }
    if let Some(previous) = reference.and_then(|r| r.held) {
        let mut same = h.held == Some(previous);
        s.bool(HELD_SAME, &mut same)?;
        if same {
            h.held = Some(previous);
            return Ok(());
        }
    }
    let mut held = h.held.unwrap_or_default();
    held_absolute(s, quant, &mut held)?;
    h.held = Some(held);
    Ok(())
}

impl DeltaState for AvatarState {
    type Config = StateConfig;

    fn predict(_config: &StateConfig, _baseline: &Self, _frames: u16) -> Option<Self> {
        None
    }

    fn serialize_residual<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
        reference: &Self,
    ) -> Result<(), CodecError> {
        let mut player_changed = value.player != reference.player;
        s.bool(PLAYER_CHANGED, &mut player_changed)?;
        if player_changed {
            s.u8(PLAYER, &mut value.player)?;
        } else {
            value.player = reference.player;
        }
        pose_residual(s, &config.quant, &mut value.head, &reference.head)?;
        for (h, r) in value.hands.iter_mut().zip(reference.hands.iter()) {
            hand(s, &config.quant, h, Some(r))?;
        }
        Ok(())
    }

    fn serialize_absolute<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
    ) -> Result<(), CodecError> {
        s.u8(PLAYER, &mut value.player)?;
        pose_absolute(s, &config.quant, &mut value.head)?;
        for h in value.hands.iter_mut() {
            hand(s, &config.quant, h, None)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arith::{ArithReadStream, ArithWriteStream};
    use crate::bitpack::{BitReadStream, BitWriteStream};
    use crate::delta::{DeltaPath, plan, serialize_entry};
    use crate::stream::MeasureStream;
    use proptest::prelude::*;
    use std::fmt::Debug;

    /// Writes `value` along `path` with both back ends, reads it back and checks value and path. Returns false when
    /// the path cannot carry the value (a residual beyond its buckets).
    fn round_trip<T: DeltaState + Debug>(
        config: &T::Config,
        value: T,
        baseline: Option<&T>,
        path: DeltaPath,
    ) -> Result<bool, TestCaseError> {
        let prediction = baseline.and_then(|b| T::predict(config, b, 6));
        let prediction = prediction.as_ref();
        let mut m = MeasureStream::new();
        let (mut v, mut p) = (value, path);
        if serialize_entry(&mut m, config, &mut v, &mut p, baseline, prediction).is_err() {
            return Ok(false);
        }
        let mut w = BitWriteStream::new();
        let (mut v, mut p) = (value, path);
        serialize_entry(&mut w, config, &mut v, &mut p, baseline, prediction).unwrap();
        prop_assert_eq!(w.bits_written(), m.bits_counted());
        let bytes = w.finish();
        let (mut back, mut got) = (T::default(), DeltaPath::Unchanged);
        serialize_entry(
            &mut BitReadStream::new(&bytes),
            config,
            &mut back,
            &mut got,
            baseline,
            prediction,
        )
        .unwrap();
        prop_assert_eq!((back, got), (value, path));

        let mut w = ArithWriteStream::new();
        let (mut v, mut p) = (value, path);
        serialize_entry(&mut w, config, &mut v, &mut p, baseline, prediction).unwrap();
        let bytes = w.finish();
        let mut r = ArithReadStream::new(&bytes).unwrap();
        let (mut back, mut got) = (T::default(), DeltaPath::Unchanged);
        serialize_entry(&mut r, config, &mut back, &mut got, baseline, prediction).unwrap();
        prop_assert_eq!((back, got), (value, path));
        Ok(true)
    }

    /// The plan by brute force: every candidate path serialized through the measuring stream, the smallest taken
    /// (the earliest on ties). [`plan`] must agree with it exactly, bits included.
    fn measured_plan<T: DeltaState>(
        config: &T::Config,
        value: &T,
        baseline: Option<&T>,
        prediction: Option<&T>,
    ) -> Option<crate::delta::DeltaPlan> {
        let candidates: &[DeltaPath] = match baseline {
            None => &[DeltaPath::Absolute],
            Some(b) if b == value => &[DeltaPath::Unchanged],
            Some(_) if prediction == Some(value) => &[DeltaPath::Predicted],
            Some(_) => &[
                DeltaPath::PredictionError,
                DeltaPath::Delta,
                DeltaPath::Absolute,
            ],
        };
        candidates
            .iter()
            .filter(|&&p| p != DeltaPath::PredictionError || prediction.is_some())
            .filter_map(|&path| {
                let mut m = MeasureStream::new();
                let (mut v, mut p) = (*value, path);
                serialize_entry(&mut m, config, &mut v, &mut p, baseline, prediction).ok()?;
                Some(crate::delta::DeltaPlan {
                    path,
                    bits: m.bits_counted(),
                })
            })
            .min_by_key(|p| p.bits)
    }

    /// Checks the arithmetic sizes against the measuring stream for one value and reference.
    fn sizes_agree<T: DeltaState + Debug>(
        config: &T::Config,
        value: &T,
        reference: &T,
    ) -> Result<(), TestCaseError> {
        let measure_residual = {
            let mut m = MeasureStream::new();
            let mut v = *value;
            T::serialize_residual(&mut m, config, &mut v, reference)
                .ok()
                .map(|_| m.bits_counted())
        };
        prop_assert_eq!(T::residual_bits(config, value, reference), measure_residual);
        let measure_absolute = {
            let mut m = MeasureStream::new();
            let mut v = *value;
            T::serialize_absolute(&mut m, config, &mut v)
                .ok()
                .map(|_| m.bits_counted())
        };
        prop_assert_eq!(T::absolute_bits(config, value), measure_absolute);
        prop_assert!(measure_absolute.is_none_or(|bits| bits >= T::absolute_bits_floor(config)));
        Ok(())
    }

    fn rotation() -> impl Strategy<Value = QuantizedRotation> {
        prop::array::uniform4(-1.0f32..1.0)
            .prop_filter("non-degenerate", |q| {
                q.iter().map(|c| c * c).sum::<f32>() > 1e-3
            })
            .prop_map(|q| QuantConfig::default().rotation.quantize(q))
    }

    fn body() -> impl Strategy<Value = BodyState> {
        let q = QuantConfig::default();
        let pos = q.position.axes.map(|a| a.min_index..=a.max_index);
        (
            pos,
            rotation(),
            prop::array::uniform3(-8192..=8192),
            prop::array::uniform3(-4096..=4096),
            any::<bool>(),
        )
            .prop_map(|(position, rotation, lin, ang, at_rest)| BodyState {
                position,
                rotation,
                linear_velocity: if at_rest { [0; 3] } else { lin },
                angular_velocity: if at_rest { [0; 3] } else { ang },
                at_rest,
            })
    }

    fn object() -> impl Strategy<Value = ObjectState> {
        (body(), any::<u8>(), any::<u16>(), any::<u16>()).prop_map(|(body, authority, a, o)| {
            ObjectState {
                body,
                authority,
                authority_seq: a,
                ownership_seq: o,
            }
        })
    }

    /// A state near `base`: within `spread` indices on every field, clamped into bounds.
    fn nudge(base: &ObjectState, noise: [i32; 9], spread: i32, flip_meta: bool) -> ObjectState {
        let q = QuantConfig::default();
        let mut s = *base;
        let n = noise.map(|x| x % (spread + 1));
        s.body.position = q
            .position
            .clamp([0, 1, 2].map(|i| s.body.position[i] + n[i]));
        let max = q.rotation.max_component();
        s.body.rotation.components =
            [0, 1, 2].map(|i| (s.body.rotation.components[i] + n[3 + i] / 8).clamp(-max, max));
        if !s.body.at_rest {
            s.body.linear_velocity = q
                .linear_velocity
                .clamp([0, 1, 2].map(|i| s.body.linear_velocity[i] + n[6 + i]));
            s.body.angular_velocity = q
                .angular_velocity
                .clamp([0, 1, 2].map(|i| s.body.angular_velocity[i] - n[i]));
        }
        if flip_meta {
            s.authority_seq = s.authority_seq.wrapping_add(1);
        }
        s
    }

    fn pose() -> impl Strategy<Value = QuantizedPose> {
        let q = QuantConfig::default();
        (
            q.position.axes.map(|a| a.min_index..=a.max_index),
            rotation(),
        )
            .prop_map(|(position, rotation)| QuantizedPose { position, rotation })
    }

    fn hand_state() -> impl Strategy<Value = HandState> {
        (
            pose(),
            prop::option::of((any::<u16>(), pose(), any::<u16>(), any::<u16>())),
        )
            .prop_map(|(pose, held)| HandState {
                pose,
                held: held.map(
                    |(object, relative, authority_seq, ownership_seq)| HeldObject {
                        object,
                        relative,
                        authority_seq,
                        ownership_seq,
                    },
                ),
            })
    }

    fn avatar() -> impl Strategy<Value = AvatarState> {
        (any::<u8>(), pose(), hand_state(), hand_state()).prop_map(|(player, head, l, r)| {
            AvatarState {
                player,
                head,
                hands: [l, r],
            }
        })
    }

    #[test]
    fn a_turned_rotation_is_a_residual_not_a_whole_rotation() {
        // A cube tumbling past 45° between baseline and now: its largest component goes from w to x.
        let quant = QuantConfig::default();
        let before = quant.rotation.quantize([0.69, 0.10, 0.05, 0.71]);
        let after = quant.rotation.quantize([0.71, 0.10, 0.05, 0.69]);
        assert_eq!((before.largest, after.largest), (3, 0));
        let turned = rotation_as(&quant, &before, 0);
        for (t, a) in turned.iter().zip(after.components) {
            assert!(
                (t - a).abs() <= 12,
                "{turned:?} against {:?}",
                after.components
            );
        }
        // Re-expressed with its own largest component, a rotation is itself (up to the rebuilt component's
        // rounding).
        assert_eq!(rotation_as(&quant, &after, after.largest), after.components);
        let config = StateConfig {
            pose_only: true,
            ..StateConfig::default()
        };
        let object = |rotation| ObjectState {
            body: BodyState {
                rotation,
                ..BodyState::default()
            },
            ..ObjectState::default()
        };
        let residual = plan(&config, &object(after), Some(&object(before)), None).unwrap();
        assert_eq!(residual.path, DeltaPath::Delta);
        // Unchanged, path, at rest, position bucket, same-largest flags and the meta flag, then the largest
        // component (2 bits) and a medium residual: well under the 29 bits of a whole rotation.
        assert!(residual.bits < 29, "{residual:?}");
    }

    /// A unit quaternion `[x, y, z, w]` turned by `angle` about the unit axis `axis`, applied after `start`.
    fn turned(start: [f64; 4], axis: [f64; 3], angle: f64) -> [f32; 4] {
        let (s, c) = (angle / 2.0).sin_cos();
        let d = [axis[0] * s, axis[1] * s, axis[2] * s, c];
        let q = start;
        [
            d[3] * q[0] + d[0] * q[3] + d[1] * q[2] - d[2] * q[1],
            d[3] * q[1] - d[0] * q[2] + d[1] * q[3] + d[2] * q[0],
            d[3] * q[2] + d[0] * q[1] - d[1] * q[0] + d[2] * q[3],
            d[3] * q[3] - d[0] * q[0] - d[1] * q[1] - d[2] * q[2],
        ]
        .map(|c| c as f32)
    }

    #[test]
    fn a_steady_turn_is_extrapolated_past_the_largest_component_change() {
        // A cube spinning at 6 rad/s about a tilted axis, seen 6 frames apart: over a whole turn its largest
        // component changes many times, and the prediction must follow it (the residual costs a few bits, not a
        // turned rotation's).
        let quant = QuantConfig::default();
        let axis = {
            let a = [0.3f64, 0.8, -0.5];
            let n = (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
            a.map(|c| c / n)
        };
        let start = [0.1, 0.2, 0.3, 0.927_361_849_549_570_4];
        let step = 6.0 * 6.0 / 60.0;
        let (mut crossings, mut worst) = (0, 0);
        for i in 0..40 {
            let at = |k: f64| {
                quant
                    .rotation
                    .quantize(turned(start, axis, (f64::from(i) * 0.17 + k) * step))
            };
            let (older, base, now) = (at(0.0), at(1.0), at(2.0));
            let p = extrapolate_rotation(&quant, &base, 6, &older, 6);
            // The largest component is predicted, except at a tie: two components within a step of each other,
            // where either names the rotation as well (the prediction is compared re-expressed as `now` is).
            let q = rotation_full(&quant, &now);
            let mut sorted = q.map(i64::abs);
            sorted.sort_unstable();
            assert!(
                p.largest == now.largest || sorted[3] - sorted[2] <= 1,
                "turn {i}: {p:?} against {now:?}"
            );
            crossings += usize::from(base.largest != now.largest);
            let predicted = if p.largest == now.largest {
                p.components
            } else {
                rotation_as(&quant, &p, now.largest)
            };
            for (a, b) in predicted.iter().zip(now.components) {
                worst = worst.max((a - b).abs());
            }
        }
        assert!(crossings >= 3, "{crossings} largest-component changes");
        // Reflection through the baseline is exact for a steady turn: what is left is the three states'
        // quantization.
        assert!(worst <= 3, "worst component error {worst} steps");
    }

    proptest! {
        #[test]
        fn rotation_extrapolation_stays_in_range(
            a in (0u8..4, prop::array::uniform3(-255i32..=255)),
            b in (0u8..4, prop::array::uniform3(-255i32..=255)),
            frames in 0u16..=crate::predict::MAX_PREDICT_FRAMES,
            span in 0u16..=64,
        ) {
            // Any two rotations a receiver may hold (decoded ones are in range, not necessarily unit length).
            let quant = QuantConfig::default();
            let older = QuantizedRotation { largest: a.0, components: a.1 };
            let base = QuantizedRotation { largest: b.0, components: b.1 };
            let p = extrapolate_rotation(&quant, &base, frames, &older, span);
            prop_assert!(p.largest < 4);
            prop_assert!(p.components.iter().all(|c| c.abs() <= 255));
        }

        #[test]
        fn rotation_extrapolation_keeps_what_did_not_turn(
            q in prop::array::uniform4(-1.0f32..1.0),
            turn in prop::array::uniform3(-8i32..=8),
            still in prop::array::uniform3(any::<bool>()),
            frames in 1u16..=12,
            span in 1u16..=12,
        ) {
            // A quantized rotation turned by a few steps on some components and not at all on the others, as a
            // receiver holds it: where the prediction keeps the largest component, the unturned ones stay put.
            let quant = QuantConfig::default();
            prop_assume!(q.iter().map(|c| c * c).sum::<f32>() > 0.01);
            let base = quant.rotation.quantize(q);
            let mut older = base;
            for k in 0..3 {
                if !still[k] {
                    older.components[k] = (base.components[k] + turn[k]).clamp(-255, 255);
                }
            }
            let p = extrapolate_rotation(&quant, &base, frames, &older, span);
            if p.largest == base.largest {
                for k in 0..3 {
                    if older.components[k] == base.components[k] {
                        prop_assert_eq!(p.components[k], base.components[k]);
                    }
                }
            }
        }
    }

    #[test]
    fn the_largest_margin_is_taken_from_the_whole_rotation() {
        // The margin class from the three components sent and the rebuilt one, against the class worked out from
        // the whole rotation (`rotation_full`, the largest against the next largest of the other three), over a
        // sweep of component triples and every slot of the largest.
        let quant = QuantConfig::default();
        let mut classes = [0usize; 4];
        for largest in 0..4u8 {
            for a in (-255..=255).step_by(7) {
                for b in (-255..=255).step_by(11) {
                    for c in (-255..=255).step_by(13) {
                        let r = QuantizedRotation {
                            largest,
                            components: [a, b, c],
                        };
                        let q = rotation_full(&quant, &r);
                        let top = usize::from(largest);
                        let next = (0..4)
                            .filter(|&i| i != top)
                            .map(|i| q[i].abs())
                            .max()
                            .unwrap_or(0);
                        let expected = match q[top].abs() - next {
                            ..=4 => 0,
                            5..=16 => 1,
                            17..=64 => 2,
                            _ => 3,
                        };
                        let class = largest_margin_class(&quant, &r);
                        assert_eq!(class, expected, "{r:?}");
                        classes[class] += 1;
                    }
                }
            }
        }
        assert!(classes.iter().all(|&n| n > 100), "{classes:?}");
    }

    #[test]
    fn the_dropped_component_is_the_nearest_root() {
        // Over a sweep of component triples a receiver may hold (the largest rebuilt from the other three), the
        // rebuilt component is within half a step of the exact root, and rounds up where the floor would not.
        let quant = QuantConfig::default();
        let max = i64::from(quant.rotation.max_component());
        let mut rounded_up = 0;
        for a in (-255..=255).step_by(7) {
            for b in (-255..=255).step_by(11) {
                for c in (-255..=255).step_by(13) {
                    let r = QuantizedRotation {
                        largest: 2,
                        components: [a, b, c],
                    };
                    let left = (2 * max * max - i64::from(a * a + b * b + c * c)).max(0);
                    let got = rotation_full(&quant, &r)[2];
                    let exact = (left as f64).sqrt();
                    assert!(
                        (got as f64 - exact).abs() <= 0.5,
                        "{a} {b} {c}: {got} for {exact}"
                    );
                    rounded_up += usize::from(got > (left as u64).isqrt() as i64);
                }
            }
        }
        assert!(rounded_up > 1000, "{rounded_up} rounded up");
    }

    proptest! {
        #[test]
        fn predicts_agrees_with_predict(
            at_rest: bool,
            pose_only: bool,
            frames in 0u16..=300,
            velocity in prop::array::uniform3(-2000i32..=2000),
        ) {
            // A bit-packed reader trusts `predicts` to know whether an entry has prediction paths without making
            // the prediction: the two must never disagree.
            let config = StateConfig { pose_only, ..StateConfig::default() };
            let base = ObjectState {
                body: BodyState {
                    position: [100, 300, -40],
                    linear_velocity: if at_rest { [0; 3] } else { velocity },
                    at_rest,
                    ..BodyState::default()
                },
                ..ObjectState::default()
            };
            prop_assert_eq!(
                ObjectState::predicts(&config, &base, frames),
                ObjectState::predict(&config, &base, frames).is_some()
            );
        }
    }

    #[test]
    fn pose_only_prediction_of_a_flying_body_follows_gravity() {
        // A body thrown up at 3 m/s, free-falling under the default 60 Hz Earth gravity, acked 6 frames apart and
        // predicted 6 frames on: a straight line through the two poses lands 50 indices (10 cm) high.
        let config = StateConfig {
            pose_only: true,
            ..StateConfig::default()
        };
        let height = |frame: f64| {
            let t = frame / 60.0;
            (512.0 * (1.0 + 3.0 * t - 0.5 * 9.81 * t * t)).round() as i32
        };
        let at = |frame: f64| ObjectState {
            body: BodyState {
                position: [100, height(frame), -40],
                ..BodyState::default()
            },
            ..ObjectState::default()
        };
        for start in [0.0, 10.0, 30.0] {
            let (older, base, value) = (at(start), at(start + 6.0), at(start + 12.0));
            let p = ObjectState::predict_from_history(&config, &base, 6, &older, 6).unwrap();
            let miss = (p.body.position[1] - value.body.position[1]).abs();
            assert!(miss <= 1, "from frame {start}: {miss} indices off");
        }
    }

    #[test]
    fn pose_only_extrapolates_from_an_older_acked_pose() {
        // A body sliding on a floor and turning steadily, seen 6 frames apart, as a pose-only link sends it.
        let config = StateConfig {
            pose_only: true,
            ..StateConfig::default()
        };
        let at = |t: i32| ObjectState {
            body: BodyState {
                position: [1000 + 40 * t, 700, -500 + 17 * t],
                rotation: QuantizedRotation {
                    largest: 3,
                    components: [10 + 2 * t, -30 + t, 5],
                },
                ..BodyState::default()
            },
            ..ObjectState::default()
        };
        let (older, base, value) = (at(0), at(6), at(12));
        let p = ObjectState::predict_from_history(&config, &base, 6, &older, 6).unwrap();
        assert_eq!(p, value);
        // Rounding to nearest, both signs alike: a third of a step each frame.
        assert_eq!(extrapolate(10, 0, 1, 3), 13);
        assert_eq!(extrapolate(-10, 0, 1, 3), -13);
        assert_eq!(extrapolate(0, 1, 1, 2), -1);
        // The full-state link keeps its ballistic predictor.
        assert!(
            ObjectState::predict_from_history(&StateConfig::default(), &base, 6, &older, 6)
                .is_none()
        );
        // A perfect prediction's two tag bits against a delta's residual.
        let predicted = plan(&config, &value, Some(&base), Some(&p)).unwrap();
        let delta = plan(&config, &value, Some(&base), None).unwrap();
        assert_eq!((predicted.path, predicted.bits), (DeltaPath::Predicted, 2));
        assert!(delta.bits > 30, "{delta:?}");
    }

    #[test]
    fn ballistic_object_is_perfectly_predicted() {
        let config = StateConfig::default();
        let base = ObjectState {
            body: BodyState::quantize(
                &config.quant,
                [1.0, 5.0, 2.0],
                [0.1, 0.2, 0.3, 0.9],
                [3.0, 4.0, 0.0],
                [1.0, 0.0, 0.0],
                false,
            ),
            ..ObjectState::default()
        };
        let later = ObjectState::predict(&config, &base, 6).unwrap();
        let p = plan(&config, &later, Some(&base), Some(&later)).unwrap();
        assert_eq!(
            p,
            crate::delta::DeltaPlan {
                path: DeltaPath::Predicted,
                bits: 2
            }
        );
        let same = plan(&config, &base, Some(&base), Some(&later)).unwrap();
        assert_eq!(same.bits, 1);
        let fresh = plan(&config, &base, None, None).unwrap();
        assert_eq!(fresh.path, DeltaPath::Absolute);
        // A small error against the prediction is far cheaper than the absolute state.
        let mut off = later;
        off.body.position[1] += 3;
        let p = plan(&config, &off, Some(&base), Some(&later)).unwrap();
        assert_eq!(p.path, DeltaPath::PredictionError);
        assert!(p.bits * 3 < fresh.bits, "{} vs {}", p.bits, fresh.bits);
    }

    proptest! {
        #[test]
        fn a_prediction_made_on_demand_reads_as_one_made_first(
            base in object(),
            noise in prop::array::uniform9(0i32..20000),
            spread in prop::sample::select(vec![0, 15, 255, 8191]),
            flip in any::<bool>(),
            path in prop::sample::select(vec![
                DeltaPath::Unchanged,
                DeltaPath::Predicted,
                DeltaPath::PredictionError,
                DeltaPath::Delta,
                DeltaPath::Absolute,
            ]),
        ) {
            // The bit-packed packet reader leaves the prediction to be made only if the entry needs it
            // (Prediction::FromBaseline); the general reading hands it over made. Both must read the same state and
            // path from the same bits and stop at the same place.
            use crate::delta::{Prediction, Surroundings, serialize_entry_lazy};
            let config = StateConfig::default();
            let frames = 6;
            let prediction = ObjectState::predict(&config, &base, frames).unwrap();
            let mut value = match path {
                DeltaPath::Unchanged => base,
                DeltaPath::Predicted => prediction,
                _ => nudge(&base, noise, spread, flip),
            };
            let mut w = BitWriteStream::new();
            let mut written = path;
            if serialize_entry(&mut w, &config, &mut value, &mut written, Some(&base), Some(&prediction))
                .is_err()
            {
                return Ok(());
            }
            let bits = w.bits_written();
            let bytes = w.finish();
            let read = |deferred: bool| {
                let mut r = BitReadStream::new(&bytes);
                let (mut v, mut p) = (ObjectState::default(), DeltaPath::Absolute);
                serialize_entry_lazy(&mut r, &config, &mut v, &mut p, Some(&base), Surroundings::default(), |_| {
                    Ok(if deferred {
                        Prediction::FromBaseline(frames)
                    } else {
                        Prediction::Made(prediction)
                    })
                })
                .map(|()| (v, p, r.bits_left()))
            };
            let (eager, lazy) = (read(false), read(true));
            prop_assert_eq!(&eager, &lazy);
            let (v, p, left) = eager.unwrap();
            prop_assert_eq!((v, p), (value, written));
            prop_assert_eq!(bytes.len() as u64 * 8 - left, bits);
        }
    }

    proptest! {
        #[test]
        fn objects_round_trip_through_every_path(
            base in object(),
            noise in prop::array::uniform9(0i32..20000),
            spread in prop::sample::select(vec![0, 15, 255, 8191, 20000]),
            flip in any::<bool>(),
        ) {
            let config = StateConfig::default();
            let value = nudge(&base, noise, spread, flip);
            let prediction = ObjectState::predict(&config, &base, 6).unwrap();
            prop_assert!(round_trip(&config, base, Some(&base), DeltaPath::Unchanged)?);
            prop_assert!(round_trip(&config, prediction, Some(&base), DeltaPath::Predicted)?);
            prop_assert!(round_trip(&config, value, None, DeltaPath::Absolute)?);
            prop_assert!(round_trip(&config, value, Some(&base), DeltaPath::Absolute)?);
            let fits = round_trip(&config, value, Some(&base), DeltaPath::Delta)?;
            prop_assert!(fits || spread > 8191);
            round_trip(&config, value, Some(&base), DeltaPath::PredictionError)?;
            let chosen = plan(&config, &value, Some(&base), Some(&prediction)).unwrap();
            prop_assert!(round_trip(&config, value, Some(&base), chosen.path)?);
            for (v, b, p) in [
                (value, Some(&base), Some(&prediction)),
                (value, Some(&base), None),
                (value, None, None),
                (prediction, Some(&base), Some(&prediction)),
                (base, Some(&base), Some(&prediction)),
            ] {
                prop_assert_eq!(plan(&config, &v, b, p).ok(), measured_plan(&config, &v, b, p));
            }
            sizes_agree(&config, &value, &base)?;
            sizes_agree(&config, &value, &prediction)?;
        }

        #[test]
        fn pose_only_objects_round_trip_without_velocities(
            base in object(),
            noise in prop::array::uniform9(0i32..20000),
            spread in prop::sample::select(vec![0, 15, 255, 8191]),
            flip in any::<bool>(),
        ) {
            let config = StateConfig { pose_only: true, ..StateConfig::default() };
            let strip = |mut s: ObjectState| {
                s.body = s.body.without_velocities();
                s
            };
            let base = strip(base);
            let value = strip(nudge(&base, noise, spread, flip));
            prop_assert_eq!(ObjectState::predict(&config, &base, 6), None);
            prop_assert!(round_trip(&config, base, Some(&base), DeltaPath::Unchanged)?);
            prop_assert!(round_trip(&config, value, None, DeltaPath::Absolute)?);
            prop_assert!(round_trip(&config, value, Some(&base), DeltaPath::Absolute)?);
            prop_assert!(round_trip(&config, value, Some(&base), DeltaPath::Delta)?);
            for (v, b) in [(value, Some(&base)), (value, None), (base, Some(&base))] {
                prop_assert_eq!(plan(&config, &v, b, None).ok(), measured_plan(&config, &v, b, None));
            }
            sizes_agree(&config, &value, &base)?;
            // The pose costs what it costs on a full-state link, minus the velocities.
            let full = StateConfig::default();
            let pose_bits = ObjectState::absolute_bits(&config, &value).unwrap();
            prop_assert!(pose_bits <= ObjectState::absolute_bits(&full, &value).unwrap());
        }

        #[test]
        fn pose_only_refuses_to_write_a_velocity(base in object(), lin in prop::array::uniform3(1i32..100)) {
            // A velocity the receiver would never see would leave the two ends with different baselines.
            let config = StateConfig { pose_only: true, ..StateConfig::default() };
            let mut moving = base;
            moving.body.at_rest = false;
            moving.body.linear_velocity = lin;
            let still = ObjectState { body: base.body.without_velocities(), ..base };
            prop_assert!(plan(&config, &moving, Some(&still), None).is_err());
            prop_assert!(plan(&config, &moving, None, None).is_err());
            let mut w = BitWriteStream::new();
            let (mut v, mut p) = (moving, DeltaPath::Absolute);
            prop_assert!(serialize_entry(&mut w, &config, &mut v, &mut p, None, None).is_err());
        }

        #[test]
        fn object_sizes_agree_out_of_range(
            base in object(),
            value in object(),
            wild in prop::array::uniform3(-40000i32..40000),
            largest in 0u8..6,
        ) {
            // States no quantizer makes: fields past their bounds must fail in both the arithmetic and the
            // measured sizes.
            let config = StateConfig::default();
            let mut odd = value;
            odd.body.position[0] = wild[0];
            odd.body.rotation.components[1] = wild[1] / 64;
            odd.body.rotation.largest = largest;
            odd.body.angular_velocity[2] = wild[2];
            sizes_agree(&config, &odd, &base)?;
            sizes_agree(&config, &value, &base)?;
        }

        #[test]
        fn bodies_sized_against_both_references_at_once_size_as_one_by_one(
            base in object(),
            value in object(),
            noise in prop::array::uniform9(-300i32..300),
            spread in 0i32..300,
            wild in prop::array::uniform3(-40000i32..40000),
            largest in 0u8..6,
            odd_field in 0usize..6,
            pose_only in any::<bool>(),
        ) {
            // Near and far references (a nudged copy, another body), states no quantizer makes (one field past its
            // bounds, or the largest component out of range), full-state and pose-only links: the body's checks
            // split out (body_fits) and its residual sized after them give what the checks in the writer's order
            // give, and both references sized at once give the two sizes one by one.
            let config = StateConfig { pose_only, ..StateConfig::default() };
            let near = nudge(&value, noise, spread, false);
            let mut odd = value;
            match odd_field {
                0 => odd.body.position[0] = wild[0],
                1 => odd.body.rotation.components[1] = wild[1] / 64,
                2 => odd.body.rotation.largest = largest,
                3 => odd.body.linear_velocity[2] = wild[2],
                4 => odd.body.angular_velocity[0] = wild[0],
                _ => {}
            }
            for v in [&value, &odd, &near] {
                for (p, b) in [(&near, &base), (&base, &near), (&odd, &value), (&value, &base)] {
                    prop_assert_eq!(
                        body_residual_bits(&config, &v.body, &p.body),
                        body_residual_bits_in_order(&config, &v.body, &p.body)
                    );
                    prop_assert_eq!(
                        ObjectState::residual_bits_both(&config, v, p, b),
                        (
                            ObjectState::residual_bits(&config, v, p),
                            ObjectState::residual_bits(&config, v, b)
                        )
                    );
                }
            }
        }

        #[test]
        fn avatars_round_trip_through_every_path(base in avatar(), other in avatar(), keep_held in any::<bool>()) {
            let config = StateConfig::default();
            let mut value = other;
            if keep_held {
                value.hands[0].held = base.hands[0].held;
            }
            prop_assert!(round_trip(&config, base, Some(&base), DeltaPath::Unchanged)?);
            prop_assert!(round_trip(&config, value, None, DeltaPath::Absolute)?);
            prop_assert!(round_trip(&config, value, Some(&base), DeltaPath::Absolute)?);
            round_trip(&config, value, Some(&base), DeltaPath::Delta)?;
            let chosen = plan(&config, &value, Some(&base), None).unwrap();
            prop_assert_eq!(Some(chosen), measured_plan(&config, &value, Some(&base), None));
            prop_assert!(chosen.path != DeltaPath::PredictionError && chosen.path != DeltaPath::Predicted);
            prop_assert!(round_trip(&config, value, Some(&base), chosen.path)?);
        }
    }
}
