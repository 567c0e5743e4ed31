//! A rigid body's residual on a stream that ignores contexts (bit-packing, measuring), written by hand: the same
//! bits as [`super::object_residual`] codes there, with each residual vector's bucket tag and components packed
//! into one field ([`Stream::packed`]) instead of four, and no context worked out. Every changed rigid body of a
//! bit-packed datagram goes through here, on both ends; the generic path cost about three times as much.
//!
//! The writer also takes a changed entry's tags (see [`write_changed`]): they and the residual's fields go in as few
//! 64-bit fields as the bits allow ([`Fields`]).
//!
//! Reading looks at a vector's tag and components at once ([`Stream::peek`]) and takes them when they are in
//! range; otherwise it takes the tag first (it says how wide the components are), then each component on its own,
//! so that a component out of its bucket's range is the same [`CodecError::Invalid`], naming the same field, as the
//! generic reader's. The sums are checked against the quantizer's bounds a vector at a time ([`Bounds`]).

use super::{
    ABS_ANGULAR, ABS_LARGEST, ABS_LINEAR, ABS_POSITION, ANGULAR, ANGULAR_BUCKETS, AT_REST, Buckets,
    LINEAR, LINEAR_BUCKETS, META_BITS, META_CHANGED, Motion, POSITION, POSITION_BUCKETS,
    POSITION_PLAIN_AFTER, ROTATION, ROTATION_AFTER, ROTATION_BUCKETS, ROTATION_PLAIN_AFTER,
    SAME_LARGEST, StateConfig, TURNED, body_fits, check_bounds, check_rotation_bounds, keep_meta,
    meta, meta_changed, rotation_as, turned_buckets, velocities_off,
};
use crate::bitpack::PackedBits;
use crate::delta::{DeltaPath, DeltaState, PATH, PERFECT, PackedPlan, choose_changed_path};
use crate::error::CodecError;
use crate::quant::{ScalarQuantizer, Vec3Quantizer, bits_for};
use crate::state::{BodyState, ObjectState};
use crate::stream::{Ctx, Stream};

/// `value`'s residual against `reference`, as [`super::object_residual`] codes it on a stream that ignores
/// contexts. With `baseline` given, `reference` is the prediction from it, and each position axis and rotation
/// component the prediction stepped back on (toward negative values) goes with its sign flipped, as there.
#[inline]
pub(super) fn object_residual<S: Stream>(
    s: &mut S,
    config: &StateConfig,
    value: &mut ObjectState,
    reference: &ObjectState,
    baseline: Option<&BodyState>,
) -> Result<(), CodecError> {
    debug_assert!(!S::CONTEXTS);
    if !S::READING {
        return write_residual(s, config, value, reference, baseline, Fields::default());
    }
    let quant = &config.quant;
    let (b, r) = (&mut value.body, &reference.body);
    let (position_back, rotation_back) = flips(r, baseline);
    // The names of the contexts a component out of range is reported under, worked out only then.
    let position_name = |i: usize, so_far: i64| match (i, class(so_far, [3, 15])) {
        (_, 0) => POSITION.axes[i].name,
        (1, c) => POSITION_PLAIN_AFTER[0][c - 1].name,
        (_, c) => POSITION_PLAIN_AFTER[1][c - 1].name,
    };
    let rotation_name = |i: usize, so_far: i64| {
        let c = class(
            so_far,
            [ROTATION_BUCKETS.0[0].into(), ROTATION_BUCKETS.0[1].into()],
        );
        match (c, baseline) {
            (0, _) if i == 0 => ROTATION.axes[0].name,
            (c, Some(base)) => ROTATION_AFTER[Motion::between(base, r).rotation[i]][c].name,
            (c, None) => ROTATION_PLAIN_AFTER[c].name,
        }
    };

    b.at_rest = flag(s, AT_REST)?;
    let position = Bounds {
        range: &quant.position,
        check: |v: &[i32; 3]| check_bounds(&quant.position, v, ABS_POSITION),
    };
    read_vector(
        s,
        POSITION.bucket,
        position_name,
        POSITION_BUCKETS,
        position_back,
        &mut b.position,
        &r.position,
        position,
    )?;
    let max = quant.rotation.max_component();
    let component = ScalarQuantizer {
        steps_per_unit: 1,
        min_index: -max,
        max_index: max,
    };
    let components = Vec3Quantizer {
        axes: [component; 3],
    };
    let rotation = Bounds {
        range: &components,
        check: |v: &[i32; 3]| check_rotation_bounds(quant, v),
    };
    if flag(s, SAME_LARGEST)? {
        b.rotation.largest = r.rotation.largest;
        read_vector(
            s,
            ROTATION.bucket,
            rotation_name,
            ROTATION_BUCKETS,
            rotation_back,
            &mut b.rotation.components,
            &r.rotation.components,
            rotation,
        )?;
    } else {
        let mut largest = 0;
        s.packed(ABS_LARGEST, &mut largest, 2)?;
        if largest == u64::from(r.rotation.largest) {
            return Err(CodecError::Invalid {
                field: SAME_LARGEST.name,
            });
        }
        b.rotation.largest = largest as u8;
        let turned = rotation_as(quant, &r.rotation, b.rotation.largest);
        read_vector(
            s,
            TURNED,
            |_, _| TURNED.name,
            turned_buckets(quant),
            [false; 3],
            &mut b.rotation.components,
            &turned,
            rotation,
        )?;
    }
    if config.pose_only {
        velocities_off::<S>(b)?;
    } else if b.at_rest {
        b.linear_velocity = [0; 3];
        b.angular_velocity = [0; 3];
    } else {
        let linear = Bounds {
            range: &quant.linear_velocity,
            check: |v: &[i32; 3]| check_bounds(&quant.linear_velocity, v, ABS_LINEAR),
        };
        read_vector(
            s,
            LINEAR.bucket,
            |i, _| LINEAR.axes[i].name,
            LINEAR_BUCKETS,
            [false; 3],
            &mut b.linear_velocity,
            &r.linear_velocity,
            linear,
        )?;
        let angular = Bounds {
            range: &quant.angular_velocity,
            check: |v: &[i32; 3]| check_bounds(&quant.angular_velocity, v, ABS_ANGULAR),
        };
        read_vector(
            s,
            ANGULAR.bucket,
            |i, _| ANGULAR.axes[i].name,
            ANGULAR_BUCKETS,
            [false; 3],
            &mut b.angular_velocity,
            &r.angular_velocity,
            angular,
        )?;
    }
    // What `meta_residual` reads, without first comparing the fields it overwrites: the changed flag, then the
    // fields or the reference's.
    if flag(s, META_CHANGED)? {
        meta(s, value)
    } else {
        keep_meta(value, reference);
        Ok(())
    }
}

/// What [`crate::delta::serialize_changed`] writes for a changed body along `path` against `base` and the
/// prediction made from it (if any) on a stream that ignores contexts, in one pass: the perfect-prediction flag and
/// the path tag go in one field with the residual's first (see [`DeltaState::write_changed`]). The same bits and
/// the same errors as there.
#[inline]
pub(super) fn write_changed<S: Stream>(
    s: &mut S,
    config: &StateConfig,
    value: &ObjectState,
    path: DeltaPath,
    base: &ObjectState,
    prediction: Option<&ObjectState>,
) -> Result<(), CodecError> {
    debug_assert!(!S::CONTEXTS && !S::READING);
    // With a prediction, the perfect-prediction flag (0 unless the entry is the prediction) and the path tag in two
    // bits (0: against the prediction, 1: against the baseline, 2: absolute); without one, the tag less one in one
    // bit.
    let (reference, baseline, tags) = match (path, prediction) {
        (DeltaPath::Predicted, Some(_)) => return s.packed(PERFECT[0][0], &mut 1, 1),
        (DeltaPath::PredictionError, Some(p)) => (p, Some(&base.body), Fields { code: 0, bits: 3 }),
        (DeltaPath::Delta, Some(_)) => (base, None, Fields { code: 1, bits: 3 }),
        (DeltaPath::Delta, None) => (base, None, Fields { code: 0, bits: 1 }),
        (DeltaPath::Absolute, _) => {
            let (mut code, bits) = if prediction.is_some() { (2, 3) } else { (1, 1) };
            s.packed(PATH[0][0], &mut code, bits)?;
            return ObjectState::serialize_absolute(s, config, &mut value.clone());
        }
        // Unchanged, or a path that needs a prediction the entry has none of: the path tag cannot say it.
        _ => {
            return Err(CodecError::Invalid {
                field: PATH[0][0].name,
            });
        }
    };
    write_residual(s, config, value, reference, baseline, tags)
}

/// [`DeltaState::plan_packed`] for a rigid body: the plan [`crate::delta::plan`] makes for a changed body and the
/// bits [`write_changed`] writes along it, in one pass. Each residual vector is bucketed once against each
/// reference for sizing, and only the chosen residual laid out, in the bucket found, as [`vector_code`] lays it
/// out. `None` (the general plan and writer take the entry) on a pose-only link, for a body out of its quantizers'
/// bounds, and for a plan that fails.
#[inline]
pub(super) fn plan_packed(
    config: &StateConfig,
    value: &ObjectState,
    base: &ObjectState,
    prediction: Option<&ObjectState>,
    out: &mut PackedBits,
) -> Option<PackedPlan> {
    if config.pose_only || !body_fits(config, &value.body) {
        return None;
    }
    let against_prediction = prediction.and_then(|p| BodyResidual::new(config, value, p));
    let against_baseline = BodyResidual::new(config, value, base);
    let (plan, gap) = choose_changed_path(
        config,
        value,
        prediction.is_some(),
        against_prediction.map(|r| r.bits),
        against_baseline.map(|r| r.bits),
    )?;
    if plan.path == DeltaPath::Absolute {
        return Some((plan, gap, false));
    }
    // The tags and the residual as `write_changed` writes them: the perfect-prediction flag (0) and the path tag in
    // three bits with a prediction, the path tag less one in one bit without.
    match (plan.path, prediction) {
        (DeltaPath::PredictionError, Some(p)) => {
            out.push_fitting(0, 3).ok()?;
            let flip = flips(&p.body, Some(&base.body));
            against_prediction?.write(out, config, value, p, flip)
        }
        (_, Some(_)) => {
            out.push_fitting(1, 3).ok()?;
            against_baseline?.write(out, config, value, base, ([false; 3], [false; 3]))
        }
        (_, None) => {
            out.push_fitting(0, 1).ok()?;
            against_baseline?.write(out, config, value, base, ([false; 3], [false; 3]))
        }
    }
    .ok()?;
    Some((plan, gap, true))
}

/// A body's residual against one reference as [`plan_packed`] sizes it: each vector's bucket, not its components
/// (worked out again for the one residual written, rather than kept for both).
#[derive(Clone, Copy)]
struct BodyResidual {
    position: Bucket,
    /// The rotation's, against the reference's rotation or, when its largest component differs, against it
    /// re-expressed with the body's (`turned`).
    rotation: Bucket,
    turned: bool,
    /// The velocities', for a body not at rest.
    linear: Bucket,
    angular: Bucket,
    /// Whether the authority fields changed.
    meta: bool,
    /// Its size, as [`super::body_residual_bits_fitting`] and [`super::meta_residual_bits`] count it.
    bits: u64,
}

impl BodyResidual {
    /// `value`'s residual against `reference`, or `None` where it cannot be written (a vector beyond its largest
    /// bucket, a largest rotation component out of range).
    #[inline(always)]
    fn new(config: &StateConfig, value: &ObjectState, reference: &ObjectState) -> Option<Self> {
        let (b, r) = (&value.body, &reference.body);
        let position = Bucket::of(POSITION_BUCKETS, &b.position, &r.position)?;
        let turned = b.rotation.largest != r.rotation.largest;
        let rotation = if turned {
            if b.rotation.largest > 3 {
                return None;
            }
            let quant = &config.quant;
            let reference = rotation_as(quant, &r.rotation, b.rotation.largest);
            Bucket::of(turned_buckets(quant), &b.rotation.components, &reference)?
        } else {
            Bucket::of(
                ROTATION_BUCKETS,
                &b.rotation.components,
                &r.rotation.components,
            )?
        };
        // The at-rest and same-largest flags, the new largest component of a turned rotation, the position and the
        // rotation.
        let mut bits = 2 + if turned { 2 } else { 0 } + position.bits() + rotation.bits();
        let (linear, angular) = if b.at_rest {
            (Bucket::NONE, Bucket::NONE)
        } else {
            let linear = Bucket::of(LINEAR_BUCKETS, &b.linear_velocity, &r.linear_velocity)?;
            let angular = Bucket::of(ANGULAR_BUCKETS, &b.angular_velocity, &r.angular_velocity)?;
            bits += linear.bits() + angular.bits();
            (linear, angular)
        };
        let meta = meta_changed(value, reference);
        bits += 1 + if meta { META_BITS } else { 0 };
        Some(Self {
            position,
            rotation,
            turned,
            linear,
            angular,
            meta,
            bits,
        })
    }

    /// Appends what [`write_residual`] writes for `value` against `reference`, this residual, with the position
    /// axes and rotation components `flip` names sign-flipped. Each field lies within its width by construction
    /// (a component within its bucket's bound, the codec's constant buckets under 64 bits a vector).
    #[inline(always)]
    fn write(
        &self,
        out: &mut PackedBits,
        config: &StateConfig,
        value: &ObjectState,
        reference: &ObjectState,
        (position_back, rotation_back): ([bool; 3], [bool; 3]),
    ) -> Result<(), CodecError> {
        let (b, r) = (&value.body, &reference.body);
        let (code, bits) = self.position.code(
            position_back,
            &b.position,
            &r.position,
            u64::from(b.at_rest),
            1,
        );
        out.push_fitting(code, bits)?;
        if self.turned {
            // The same-largest flag (0) and the new largest component, then each component on its own (with the
            // finest rotation quantizers the whole takes more than 64 bits), as `push_turned` writes them.
            let turned = rotation_as(&config.quant, &r.rotation, b.rotation.largest);
            let c = &b.rotation.components;
            let Bucket { tag, bound, width } = self.rotation;
            out.push_fitting(u64::from(b.rotation.largest) << 2 | tag, 5)?;
            if tag > 0 {
                for i in 0..3 {
                    let d = i64::from(c[i]) - i64::from(turned[i]);
                    out.push_fitting((d + bound) as u64, width)?;
                }
            }
        } else {
            let (code, bits) = self.rotation.code(
                rotation_back,
                &b.rotation.components,
                &r.rotation.components,
                1,
                1,
            );
            out.push_fitting(code, bits)?;
        }
        if !b.at_rest {
            let no_flip = [false; 3];
            let (code, bits) =
                self.linear
                    .code(no_flip, &b.linear_velocity, &r.linear_velocity, 0, 0);
            out.push_fitting(code, bits)?;
            let (code, bits) =
                self.angular
                    .code(no_flip, &b.angular_velocity, &r.angular_velocity, 0, 0);
            out.push_fitting(code, bits)?;
        }
        let (code, bits) = meta_code(value, self.meta);
        out.push_fitting(code, bits)
    }
}

/// The bucket of one residual vector: its tag (0 for none), bound, and the width of each component in it.
#[derive(Clone, Copy)]
struct Bucket {
    tag: u64,
    bound: i64,
    width: u32,
}

impl Bucket {
    /// The bucket of a vector not sent (the velocities of a body at rest).
    const NONE: Bucket = Bucket {
        tag: 0,
        bound: 0,
        width: 0,
    };

    /// The bucket of `value`'s residual against `reference` in `buckets`, or `None` beyond the largest.
    #[inline(always)]
    fn of(buckets: Buckets, value: &[i32; 3], reference: &[i32; 3]) -> Option<Self> {
        // Exact in 32 bits: `abs_diff` cannot overflow.
        let d = |i: usize| value[i].abs_diff(reference[i]);
        let largest = d(0).max(d(1)).max(d(2));
        let (tag, bound) = bucket_tag(POSITION.bucket, buckets, i64::from(largest)).ok()?;
        let width = if tag > 0 {
            bits_for((2 * bound) as u32)
        } else {
            0
        };
        Some(Self { tag, bound, width })
    }

    /// The size of a residual in it: the tag's two bits and the components'.
    #[inline(always)]
    fn bits(&self) -> u64 {
        2 + 3 * u64::from(self.width)
    }

    /// `prefix` (its low `prefix_bits` bits), then `value`'s residual against `reference` in this bucket, its
    /// sign flipped where `flip` says, as [`vector_code`] lays them out.
    #[inline(always)]
    fn code(
        &self,
        flip: [bool; 3],
        value: &[i32; 3],
        reference: &[i32; 3],
        prefix: u64,
        prefix_bits: u32,
    ) -> (u64, u32) {
        let code = prefix << 2 | self.tag;
        if self.tag == 0 {
            return (code, prefix_bits + 2);
        }
        let w = self.width;
        let offset = |i: usize| {
            let d = i64::from(value[i]) - i64::from(reference[i]);
            (if flip[i] { -d } else { d } + self.bound) as u64
        };
        (
            (((code << w | offset(0)) << w | offset(1)) << w) | offset(2),
            prefix_bits + 2 + 3 * w,
        )
    }
}

/// What [`crate::delta::serialize_changed`] reads for a changed body against `base` on a stream that ignores
/// contexts, when the entry's prediction, if it has one, is the prediction from `base` over `frames`, in one pass:
/// the perfect-prediction flag and the path tag, then the state along the path read, which is returned (see
/// [`DeltaState::read_changed`]). The prediction is made only for the paths that need it. The same bits, the same
/// state and the same errors as there.
#[inline(never)]
pub(super) fn read_changed<S: Stream>(
    s: &mut S,
    config: &StateConfig,
    value: &mut ObjectState,
    base: &ObjectState,
    frames: Option<u16>,
) -> Result<DeltaPath, CodecError> {
    debug_assert!(!S::CONTEXTS && S::READING);
    let predicted = |frames: u16| {
        ObjectState::predict(config, base, frames).ok_or(CodecError::Invalid {
            field: "prediction",
        })
    };
    // With a prediction, the perfect-prediction flag, then the path tag in two bits (0: against the prediction, 1:
    // against the baseline, 2: absolute); without one, the tag less one in one bit.
    let tag = match frames {
        Some(frames) => {
            if flag(s, PERFECT[0][0])? {
                *value = predicted(frames)?;
                return Ok(DeltaPath::Predicted);
            }
            let mut tag = 0;
            s.packed(PATH[0][0], &mut tag, 2)?;
            tag
        }
        None => {
            let mut coded = 0;
            s.packed(PATH[0][0], &mut coded, 1)?;
            coded + 1
        }
    };
    match (tag, frames) {
        (0, Some(frames)) => {
            let prediction = predicted(frames)?;
            object_residual(s, config, value, &prediction, Some(&base.body))?;
            Ok(DeltaPath::PredictionError)
        }
        (1, _) => {
            object_residual(s, config, value, base, None)?;
            Ok(DeltaPath::Delta)
        }
        (2, _) => {
            ObjectState::serialize_absolute(s, config, value)?;
            Ok(DeltaPath::Absolute)
        }
        _ => Err(CodecError::Invalid {
            field: PATH[0][0].name,
        }),
    }
}

/// Fields gathered into one [`Stream::packed`] call while they fit in its 64 bits, most significant first: the
/// writer's fields of one changed body in as few calls as their bits allow.
#[derive(Default)]
struct Fields {
    /// The gathered fields, the first in the highest bits; nothing above `bits`.
    code: u64,
    bits: u32,
}

impl Fields {
    /// Appends `code`'s low `bits` bits (`bits` at most 64, nothing above them), writing out what was gathered
    /// first if they do not fit beside it.
    #[inline(always)]
    fn push<S: Stream>(&mut self, s: &mut S, code: u64, bits: u32) -> Result<(), CodecError> {
        if self.bits + bits > 64 {
            self.flush(s)?;
        }
        // Now `self.bits + bits <= 64`: a shift by 64 finds nothing gathered (and wraps to a shift by 0 of 0).
        self.code = self.code.wrapping_shl(bits) | code;
        self.bits += bits;
        Ok(())
    }

    /// Writes out what was gathered.
    #[inline(always)]
    fn flush<S: Stream>(&mut self, s: &mut S) -> Result<(), CodecError> {
        if self.bits > 0 {
            s.packed(POSITION.bucket, &mut self.code, self.bits)?;
        }
        *self = Fields::default();
        Ok(())
    }
}

/// Which position axes and rotation components of the residual against `r` go with their signs flipped: those
/// the prediction from `baseline` (if `r` is one) stepped back on.
#[inline(always)]
fn flips(r: &BodyState, baseline: Option<&BodyState>) -> ([bool; 3], [bool; 3]) {
    // The three-element arrays here and in `vector_code` are spelled out: `array::map` went out of line, a call
    // per vector of every changed body on both ends.
    let position_back = baseline.map_or([false; 3], |base| {
        let back = |i: usize| r.position[i] < base.position[i];
        [back(0), back(1), back(2)]
    });
    let rotation_back = baseline.map_or([false; 3], |base| {
        let same = base.rotation.largest == r.rotation.largest;
        let back = |i: usize| same && r.rotation.components[i] < base.rotation.components[i];
        [back(0), back(1), back(2)]
    });
    (position_back, rotation_back)
}

/// The writing side of [`object_residual`], after the `fields` gathered before it (a changed entry's tags): the
/// same checks in the same order, each vector and the authority fields gathered into `fields`, written at the end.
#[inline(always)]
fn write_residual<S: Stream>(
    s: &mut S,
    config: &StateConfig,
    value: &ObjectState,
    reference: &ObjectState,
    baseline: Option<&BodyState>,
    mut fields: Fields,
) -> Result<(), CodecError> {
    let quant = &config.quant;
    let (b, r) = (&value.body, &reference.body);
    let (position_back, rotation_back) = flips(r, baseline);
    let (code, bits) = vector_code(
        POSITION.bucket,
        POSITION_BUCKETS,
        position_back,
        &b.position,
        &r.position,
        u64::from(b.at_rest),
        1,
    )?;
    fields.push(s, code, bits)?;
    check_bounds(&quant.position, &b.position, ABS_POSITION)?;
    if b.rotation.largest == r.rotation.largest {
        let (code, bits) = vector_code(
            ROTATION.bucket,
            ROTATION_BUCKETS,
            rotation_back,
            &b.rotation.components,
            &r.rotation.components,
            1,
            1,
        )?;
        fields.push(s, code, bits)?;
    } else {
        if b.rotation.largest > 3 {
            return Err(CodecError::Invalid {
                field: ABS_LARGEST.name,
            });
        }
        // The same-largest flag (0) and the new largest component, then the residual against the reference
        // re-expressed with it, which may not fit in one field.
        let turned = rotation_as(quant, &r.rotation, b.rotation.largest);
        push_turned(
            s,
            &mut fields,
            turned_buckets(quant),
            &b.rotation.components,
            &turned,
            u64::from(b.rotation.largest),
        )?;
    }
    check_rotation_bounds(quant, &b.rotation.components)?;
    if config.pose_only {
        velocities_off::<S>(&mut b.clone())?;
    } else if !b.at_rest {
        let (code, bits) = vector_code(
            LINEAR.bucket,
            LINEAR_BUCKETS,
            [false; 3],
            &b.linear_velocity,
            &r.linear_velocity,
            0,
            0,
        )?;
        fields.push(s, code, bits)?;
        check_bounds(&quant.linear_velocity, &b.linear_velocity, ABS_LINEAR)?;
        let (code, bits) = vector_code(
            ANGULAR.bucket,
            ANGULAR_BUCKETS,
            [false; 3],
            &b.angular_velocity,
            &r.angular_velocity,
            0,
            0,
        )?;
        fields.push(s, code, bits)?;
        check_bounds(&quant.angular_velocity, &b.angular_velocity, ABS_ANGULAR)?;
    }
    // The authority's changed flag, then (when they changed) the authority and the two sequences, as
    // `meta_residual` writes them.
    let (code, bits) = meta_code(value, meta_changed(value, reference));
    fields.push(s, code, bits)?;
    fields.flush(s)
}

/// The changed-authority flag and, when `changed`, the authority and the two sequences after it, as
/// `meta_residual` writes them: one field of 41 bits, or the flag alone.
#[inline(always)]
fn meta_code(value: &ObjectState, changed: bool) -> (u64, u32) {
    if changed {
        let meta = u64::from(value.authority) << 32
            | u64::from(value.authority_seq) << 16
            | u64::from(value.ownership_seq);
        (1 << 40 | meta, 41)
    } else {
        (0, 1)
    }
}

/// One flag, read.
#[inline(always)]
fn flag<S: Stream>(s: &mut S, ctx: Ctx) -> Result<bool, CodecError> {
    let mut v = 0;
    s.packed(ctx, &mut v, 1)?;
    Ok(v != 0)
}

/// The class [`super::vec_residual_chained`] gives the largest component before another: 0 for none, 1 up to
/// `classes[0]`, 2 up to `classes[1]`, 3 beyond.
#[inline]
fn class(so_far: i64, classes: [i64; 2]) -> usize {
    match so_far {
        0 => 0,
        m if m <= classes[0] => 1,
        m if m <= classes[1] => 2,
        _ => 3,
    }
}

/// The bucket tag (1 to 3, or 0 for none) and bound of a residual whose largest component magnitude is
/// `largest`; beyond the largest bucket is [`CodecError::Invalid`] naming `bucket`.
#[inline(always)]
fn bucket_tag(bucket: Ctx, buckets: Buckets, largest: i64) -> Result<(u64, i64), CodecError> {
    let [small, medium, large] = buckets.0;
    let [small, medium, large] = [i64::from(small), i64::from(medium), i64::from(large)];
    match largest {
        0 => Ok((0, 0)),
        m if m <= small => Ok((1, small)),
        m if m <= medium => Ok((2, medium)),
        m if m <= large => Ok((3, large)),
        _ => Err(CodecError::Invalid { field: bucket.name }),
    }
}

/// A turned rotation's residual as [`vector_code`] lays it out with its three-bit prefix (the same-largest flag,
/// 0, and `largest`), pushed onto `fields` a component at a time: with the finest rotation quantizers (19 and 20
/// bits a component) the whole takes more than the 64 bits of one field. A turn is rare, so this is not the hot
/// path.
fn push_turned<S: Stream>(
    s: &mut S,
    fields: &mut Fields,
    buckets: Buckets,
    value: &[i32; 3],
    reference: &[i32; 3],
    largest: u64,
) -> Result<(), CodecError> {
    let d = [0, 1, 2].map(|i| i64::from(value[i]) - i64::from(reference[i]));
    let magnitude = d.iter().map(|x| x.abs()).max().unwrap_or(0);
    let (tag, bound) = bucket_tag(TURNED, buckets, magnitude)?;
    fields.push(s, largest << 2 | tag, 5)?;
    if tag > 0 {
        // Each component as its offset from -bound, in the bucket's width (at most 22 bits): |d| <= bound.
        let width = bits_for((2 * bound) as u32);
        for x in d {
            fields.push(s, (x + bound) as u64, width)?;
        }
    }
    Ok(())
}

/// `prefix` (its low `prefix_bits` bits), then `value`'s residual against `reference` as
/// [`super::vec_residual_chained`] writes it: the bucket tag and each component within the bucket's bound, its
/// sign flipped where `flip` says, all as one field of the bits returned. A residual beyond the largest bucket, or
/// a field wider than 64 bits, is [`CodecError::Invalid`] naming `bucket`.
#[inline(always)]
fn vector_code(
    bucket: Ctx,
    buckets: Buckets,
    flip: [bool; 3],
    value: &[i32; 3],
    reference: &[i32; 3],
    prefix: u64,
    prefix_bits: u32,
) -> Result<(u64, u32), CodecError> {
    let residual = |i: usize| i64::from(value[i]) - i64::from(reference[i]);
    let d = [residual(0), residual(1), residual(2)];
    let largest = d[0].abs().max(d[1].abs()).max(d[2].abs());
    let (tag, bound) = bucket_tag(bucket, buckets, largest)?;
    let mut code = prefix << 2 | tag;
    let mut bits = prefix_bits + 2;
    if tag > 0 {
        // Each component as its offset from -bound, in the bucket's width; |d| <= bound, so none goes negative.
        let width = bits_for((2 * bound) as u32);
        let offset = |i: usize| (if flip[i] { -d[i] } else { d[i] } + bound) as u64;
        code = (((code << width | offset(0)) << width | offset(1)) << width) | offset(2);
        bits += 3 * width;
    }
    // What `Stream::packed` refuses; no caller's buckets come near it (a turned rotation, which can, goes through
    // `push_turned`).
    if bits > 64 || (bits < 64 && code >> bits != 0) {
        return Err(CodecError::Invalid { field: bucket.name });
    }
    Ok((code, bits))
}

/// Reads what [`vector_code`] wrote (without its prefix) into `value`, against `reference`, and checks it against
/// `bounds`: the tag, then each component. A component beyond its bucket's bound is [`CodecError::Invalid`] naming
/// `axis(i, largest)`, where `largest` is the largest magnitude of the components before it (as the generic reader
/// names its contexts); a value outside `bounds` is the error its check gives.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn read_vector<S: Stream>(
    s: &mut S,
    bucket: Ctx,
    axis: impl Fn(usize, i64) -> &'static str,
    buckets: Buckets,
    flip: [bool; 3],
    value: &mut [i32; 3],
    reference: &[i32; 3],
    bounds: Bounds<'_, impl FnOnce(&[i32; 3]) -> Result<(), CodecError>>,
) -> Result<(), CodecError> {
    if let Some(d) = look_ahead_vector(s, buckets) {
        return bounds.add(value, reference, d, flip);
    }
    let mut tag = 0;
    s.packed(bucket, &mut tag, 2)?;
    let mut d = [0i64; 3];
    if tag > 0 {
        let bound = i64::from(buckets.0[(tag as usize - 1).min(2)]);
        let width = bits_for((2 * bound) as u32);
        // The three components in one read when they fit in 32 bits and the stream holds them all. A bit-packing
        // read that fails takes nothing, so without them the components are read one by one, each checked before
        // the next is read: where the stream ends after a component out of range, that component is the error.
        let mut all = 0;
        let together = 3 * width <= 32 && s.packed(bucket, &mut all, 3 * width).is_ok();
        let mask = (1u64 << width) - 1;
        for i in 0..3 {
            let raw = if together {
                all >> (width * (2 - i as u32)) & mask
            } else {
                let mut raw = 0;
                s.packed(bucket, &mut raw, width)?;
                raw
            };
            let v = raw as i64 - bound;
            if v > bound {
                let so_far = d[..i].iter().map(|x| x.abs()).max().unwrap_or(0);
                return Err(CodecError::Invalid {
                    field: axis(i, so_far),
                });
            }
            d[i] = v;
        }
    }
    bounds.add(value, reference, d, flip)
}

/// [`read_vector`]'s tag and components (not yet flipped) in one look at the stream ([`Stream::peek`]) as wide as
/// the medium bucket's layout, read only when the tag names no bucket or one of the two narrower ones and every
/// component lies within its bucket's bound. Otherwise (a component out of range, the largest bucket, the stream
/// ending within the look, a stream that cannot look ahead, buckets too wide for one look) nothing is read, and the
/// general path reads the same bits and reports the same error.
#[inline(always)]
fn look_ahead_vector<S: Stream>(s: &mut S, buckets: Buckets) -> Option<[i64; 3]> {
    // A bucket's components are offsets from -bound, each in the width of 2 * bound.
    let width = |bound: i32| bits_for((2 * i64::from(bound)) as u32);
    let widths = [width(buckets.0[0]), width(buckets.0[1])];
    let look = 2 + 3 * widths[0].max(widths[1]);
    if look > 56 {
        return None;
    }
    let ahead = s.peek(look)?;
    let tag = (ahead >> (look - 2)) as usize;
    if tag == 0 {
        s.skip(2);
        return Some([0; 3]);
    }
    let (&bound, &width) = (buckets.0.get(tag - 1)?, widths.get(tag - 1)?);
    let bound = i64::from(bound);
    let mask = (1u64 << width) - 1;
    // The components follow the tag, the first highest; `look - 2 >= 3 * width`.
    let all = ahead >> (look - 2 - 3 * width);
    let component = |i: u32| (all >> (width * (2 - i)) & mask) as i64 - bound;
    let d = [component(0), component(1), component(2)];
    if d[0] > bound || d[1] > bound || d[2] > bound {
        return None;
    }
    s.skip(2 + 3 * width);
    Some(d)
}

/// The range a decoded vector must lie in, per component (a quantizer's bounds, or the rotation's as one), and
/// the check that reports a vector outside it ([`check_bounds`], [`check_rotation_bounds`]).
struct Bounds<'a, F> {
    range: &'a Vec3Quantizer,
    /// Passes exactly the vectors within `range`, and names the error otherwise.
    check: F,
}

impl<F: FnOnce(&[i32; 3]) -> Result<(), CodecError>> Bounds<'_, F> {
    /// `value` set to `reference` plus the residual `d` read, each component's sign flipped where `flip` says and
    /// added with saturation at the ends of `i32`, then checked. The sums are taken in `i64` and checked against
    /// the bounds at once: within them (inside `i32`) a saturating add gives the same sum and the check passes;
    /// only outside them does the general path run, saturating each component and checking as before.
    #[inline(always)]
    fn add(
        self,
        value: &mut [i32; 3],
        reference: &[i32; 3],
        d: [i64; 3],
        flip: [bool; 3],
    ) -> Result<(), CodecError> {
        // |d| <= the bucket's bound, far inside i32.
        let flipped = |i: usize| if flip[i] { -d[i] } else { d[i] };
        let sum = |i: usize| i64::from(reference[i]) + flipped(i);
        let inside = |i: usize, sum: i64| {
            let axis = &self.range.axes[i];
            i64::from(axis.min_index) <= sum && sum <= i64::from(axis.max_index)
        };
        let (x, y, z) = (sum(0), sum(1), sum(2));
        if inside(0, x) & inside(1, y) & inside(2, z) {
            *value = [x as i32, y as i32, z as i32];
            return Ok(());
        }
        for i in 0..3 {
            value[i] = reference[i].saturating_add(flipped(i) as i32);
        }
        (self.check)(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitpack::{BitReadStream, BitWriteStream};
    use crate::delta::{plan_with_residual_gap, read_changed_generic, write_changed_generic};
    use crate::quant::{QuantizedRotation, RotationQuantizer};
    use crate::stream::MeasureStream;
    use proptest::prelude::*;

    fn state() -> impl Strategy<Value = ObjectState> {
        (
            prop::array::uniform3(-33_000i32..33_000),
            0u8..5,
            prop::array::uniform3(-260i32..260),
            prop::array::uniform3(-9000i32..9000),
            prop::array::uniform3(-4200i32..4200),
            any::<bool>(),
            0u8..3,
        )
            .prop_map(|(position, largest, components, lin, ang, at_rest, meta)| {
                ObjectState {
                    body: BodyState {
                        position,
                        rotation: QuantizedRotation {
                            largest,
                            components,
                        },
                        linear_velocity: lin,
                        angular_velocity: ang,
                        at_rest,
                    },
                    authority: meta,
                    authority_seq: u16::from(meta) * 7,
                    ownership_seq: 3,
                }
            })
    }

    /// `base` moved by `noise` scaled to `spread`: residuals in every bucket, and beyond.
    fn nudged(base: &ObjectState, noise: [i32; 12], spread: i32, turn: bool) -> ObjectState {
        let mut s = *base;
        let b = &mut s.body;
        for i in 0..3 {
            b.position[i] = b.position[i].saturating_add(noise[i] % (spread + 1));
            b.rotation.components[i] += noise[3 + i] % (spread.min(300) + 1);
            b.linear_velocity[i] += noise[6 + i] % (spread + 1);
            b.angular_velocity[i] += noise[9 + i] % (spread + 1);
        }
        if turn {
            b.rotation.largest = (b.rotation.largest + 1) % 4;
        }
        s
    }

    /// The default config, pose-only, and the finest rotation quantizer (20 bits a component), whose turned
    /// rotations' residuals take more than 64 bits.
    fn configs() -> [StateConfig; 3] {
        let mut fine = StateConfig::default();
        fine.quant.rotation = RotationQuantizer::new(20);
        [
            StateConfig::default(),
            StateConfig {
                pose_only: true,
                ..StateConfig::default()
            },
            fine,
        ]
    }

    /// A reader and its generic oracle run on the same bytes from the same starting state agree: the same result
    /// and, where they read, the same state and the same bits left.
    fn same_reads<R: PartialEq + std::fmt::Debug>(
        bytes: &[u8],
        start: ObjectState,
        fast: impl FnOnce(&mut BitReadStream<'_>, &mut ObjectState) -> Result<R, CodecError>,
        slow: impl FnOnce(&mut BitReadStream<'_>, &mut ObjectState) -> Result<R, CodecError>,
    ) -> Result<(), TestCaseError> {
        let (mut a, mut b) = (start, start);
        let (mut ra, mut rb) = (BitReadStream::new(bytes), BitReadStream::new(bytes));
        let (fast, slow) = (fast(&mut ra, &mut a), slow(&mut rb, &mut b));
        prop_assert_eq!(&fast, &slow);
        if slow.is_ok() {
            prop_assert_eq!(a, b);
            prop_assert_eq!(ra.bits_left(), rb.bits_left());
        }
        Ok(())
    }

    /// The generic residual on `s`, as it codes without contexts.
    fn generic<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut ObjectState,
        reference: &ObjectState,
        baseline: Option<&BodyState>,
    ) -> Result<(), CodecError> {
        let motion = baseline.map(|b| Motion::between(b, &reference.body));
        super::super::object_residual(s, config, value, reference, motion.as_ref())
    }

    proptest! {
        #[test]
        fn writes_the_bits_the_generic_residual_writes(
            reference in state(),
            baseline in state(),
            noise in prop::array::uniform12(-20_000i32..20_000),
            spread in prop::sample::select(vec![0, 3, 15, 40, 300, 9000, 20_000]),
            turn in any::<bool>(),
            predicted in any::<bool>(),
        ) {
            let value = nudged(&reference, noise, spread, turn);
            let baseline = predicted.then_some(&baseline.body);
            for config in configs() {
                let (mut a, mut b) = (BitWriteStream::new(), BitWriteStream::new());
                let (mut va, mut vb) = (value, value);
                let fast = object_residual(&mut a, &config, &mut va, &reference, baseline);
                let slow = generic(&mut b, &config, &mut vb, &reference, baseline);
                prop_assert_eq!(&fast, &slow);
                let mut m = MeasureStream::new();
                let measured = object_residual(&mut m, &config, &mut value.clone(), &reference, baseline);
                prop_assert_eq!(&measured, &slow);
                if slow.is_ok() {
                    prop_assert_eq!(a.bits_written(), b.bits_written());
                    prop_assert_eq!(m.bits_counted(), b.bits_written());
                    let bytes = a.finish();
                    prop_assert_eq!(&bytes, &b.finish());
                    let mut back = ObjectState::default();
                    object_residual(&mut BitReadStream::new(&bytes), &config, &mut back, &reference, baseline)
                        .unwrap();
                    let mut expected = value;
                    if config.pose_only || expected.body.at_rest {
                        expected.body.linear_velocity = [0; 3];
                        expected.body.angular_velocity = [0; 3];
                    }
                    prop_assert_eq!(back, expected);
                }
            }
        }

        #[test]
        fn a_changed_entry_writes_what_serialize_changed_writes(
            base in state(),
            predicted in state(),
            noise in prop::array::uniform12(-20_000i32..20_000),
            spread in prop::sample::select(vec![0, 3, 15, 40, 300, 9000, 20_000]),
            turn in any::<bool>(),
            near_prediction in any::<bool>(),
            with_prediction in any::<bool>(),
            path in prop::sample::select(DeltaPath::ALL.to_vec()),
        ) {
            let value = nudged(if near_prediction { &predicted } else { &base }, noise, spread, turn);
            let prediction = with_prediction.then_some(&predicted);
            for config in configs() {
                let (mut a, mut b) = (BitWriteStream::new(), BitWriteStream::new());
                let fast = write_changed(&mut a, &config, &value, path, &base, prediction);
                let slow = write_changed_generic(&mut b, &config, &value, path, &base, prediction);
                prop_assert_eq!(&fast, &slow);
                if slow.is_ok() {
                    prop_assert_eq!(a.bits_written(), b.bits_written());
                    prop_assert_eq!(a.finish(), b.finish());
                }
            }
        }

        #[test]
        fn a_plan_packed_in_one_pass_is_the_general_plan_and_writes_its_bits(
            base in state(),
            predicted in state(),
            noise in prop::array::uniform12(-20_000i32..20_000),
            spread in prop::sample::select(vec![0, 3, 15, 40, 300, 9000, 20_000]),
            turn in any::<bool>(),
            near_prediction in any::<bool>(),
            with_prediction in any::<bool>(),
            same_largest in any::<bool>(),
        ) {
            let mut value = nudged(if near_prediction { &predicted } else { &base }, noise, spread, turn);
            let mut predicted = predicted;
            if same_largest {
                // The common case this pass serves: one largest rotation component throughout.
                predicted.body.rotation.largest = base.body.rotation.largest;
                value.body.rotation.largest = base.body.rotation.largest;
            }
            let prediction = with_prediction.then_some(&predicted);
            prop_assume!(value != base && prediction != Some(&value));
            for config in configs() {
                let general = plan_with_residual_gap(&config, &value, Some(&base), prediction);
                let mut bits = PackedBits::default();
                let Some((plan, gap, written_bits)) =
                    plan_packed(&config, &value, &base, prediction, &mut bits)
                else {
                    continue;
                };
                prop_assert_eq!(Ok((plan, gap)), general);
                let mut written = BitWriteStream::new();
                write_changed_generic(&mut written, &config, &value, plan.path, &base, prediction).unwrap();
                if written_bits {
                    let mut replayed = BitWriteStream::new();
                    replayed.put_packed(&bits).unwrap();
                    prop_assert_eq!(replayed.bits_written(), written.bits_written());
                    prop_assert_eq!(replayed.finish(), written.finish());
                } else {
                    prop_assert_eq!(plan.path, DeltaPath::Absolute);
                }
            }
        }

        #[test]
        fn reads_a_changed_entry_as_serialize_changed_reads_it(
            base in state(),
            written in state(),
            noise in prop::array::uniform12(-20_000i32..20_000),
            spread in prop::sample::select(vec![0, 3, 15, 40, 300, 9000, 20_000]),
            turn in any::<bool>(),
            path in prop::sample::select(DeltaPath::ALL.to_vec()),
            frames in prop::option::of(0u16..12),
            garbage in prop::collection::vec(any::<u8>(), 0..40),
            cut in 0usize..40,
        ) {
            for config in configs() {
                // Bytes a writer wrote (any path, cut anywhere), and bytes no writer wrote.
                let value = nudged(&written, noise, spread, turn);
                let prediction = frames.and_then(|f| ObjectState::predict(&config, &base, f));
                let mut w = BitWriteStream::new();
                let mut bytes = match write_changed(&mut w, &config, &value, path, &base, prediction.as_ref()) {
                    Ok(()) => w.finish(),
                    Err(_) => garbage.clone(),
                };
                for bytes in [bytes.clone(), { bytes.truncate(cut); bytes }, garbage.clone()] {
                    same_reads(
                        &bytes,
                        written,
                        |r, v| read_changed(r, &config, v, &base, frames),
                        |r, v| read_changed_generic(r, &config, v, &base, frames),
                    )?;
                }
            }
        }

        #[test]
        fn reads_any_bytes_as_the_generic_residual_reads_them(
            reference in state(),
            baseline in state(),
            bytes in prop::collection::vec(any::<u8>(), 0..24),
            predicted in any::<bool>(),
        ) {
            let baseline = predicted.then_some(&baseline.body);
            for config in configs() {
                same_reads(
                    &bytes,
                    ObjectState::default(),
                    |r, v| object_residual(r, &config, v, &reference, baseline),
                    |r, v| generic(r, &config, v, &reference, baseline),
                )?;
            }
        }

        /// With quantizer bounds at the ends of `i32` (the fields are public) and references next to them, a
        /// residual's sum saturates there, and is inside or outside the bounds, exactly as the generic reader has
        /// it: the sums checked at once in `i64` must not change a decoded value or an error.
        #[test]
        fn reads_at_the_ends_of_i32_as_the_generic_residual_reads_them(
            near in prop::array::uniform12(0i32..20_000),
            ends in prop::array::uniform12(any::<bool>()),
            wide in prop::array::uniform3(any::<bool>()),
            bytes in prop::collection::vec(any::<u8>(), 0..24),
            at_rest in any::<bool>(),
        ) {
            let end = |i: usize| if ends[i] { i32::MAX - near[i] } else { i32::MIN + near[i] };
            let mut config = StateConfig::default();
            // Each vector's bounds at the ends of i32, or just inside them, where a saturated sum lies outside.
            let bound = |wide: bool, q: &mut Vec3Quantizer| {
                for axis in &mut q.axes {
                    (axis.min_index, axis.max_index) =
                        if wide { (i32::MIN, i32::MAX) } else { (i32::MIN + 5, i32::MAX - 5) };
                }
            };
            bound(wide[0], &mut config.quant.position);
            bound(wide[1], &mut config.quant.linear_velocity);
            bound(wide[2], &mut config.quant.angular_velocity);
            let mut reference = ObjectState::default();
            let r = &mut reference.body;
            r.at_rest = at_rest;
            for i in 0..3 {
                r.position[i] = end(i);
                r.linear_velocity[i] = end(6 + i);
                r.angular_velocity[i] = end(9 + i);
            }
            for written in [true, false] {
                let bytes = if written {
                    // Residuals that step past the ends, in every bucket.
                    let mut value = reference;
                    let v = &mut value.body;
                    for i in 0..3 {
                        let step = |x: i32, k: usize| x.saturating_add(if ends[k] { near[k] % 300 } else { -(near[k] % 9000) });
                        v.position[i] = step(v.position[i], i);
                        v.linear_velocity[i] = step(v.linear_velocity[i], 6 + i);
                        v.angular_velocity[i] = step(v.angular_velocity[i], 9 + i);
                    }
                    let mut w = BitWriteStream::new();
                    match generic(&mut w, &config, &mut value, &reference, None) {
                        Ok(()) => w.finish(),
                        Err(_) => bytes.clone(),
                    }
                } else {
                    bytes.clone()
                };
                same_reads(
                    &bytes,
                    ObjectState::default(),
                    |r, v| object_residual(r, &config, v, &reference, None),
                    |r, v| generic(r, &config, v, &reference, None),
                )?;
            }
        }
    }
}
