//! Delta encoding of one entry against its object's baseline, cheapest path first.
//!
//! The paths, in order: unchanged (one bit); perfect prediction (the state's predictor run from the baseline lands
//! exactly on the state); prediction error (a residual against the prediction); delta (a residual against the
//! baseline); absolute. The encoder measures the residual paths and the absolute one with the measuring stream and
//! takes the smallest; the decoder reads which one was taken.
//!
//! Any state type joins by implementing [`DeltaState`]: rigid bodies and avatars here, shooter snapshots in the
//! engine. The generic code owns the choice of path and the tags; the state type owns its fields.

use std::borrow::Borrow;

use crate::arith::Priors;
use crate::bitpack::PackedBits;
use crate::error::CodecError;
use crate::quant::bits_for;
use crate::stream::{Ctx, MeasureStream, Stream};

/// The entry's tags, each under a context of the baseline's motion class (see [`DeltaState::motion_class`]) and of
/// whether the entry before it in the section changed (moving objects come in runs of neighbouring ids: a pile, a
/// ball gathered by a force).
const UNCHANGED: [[Ctx; MOTION_CLASSES]; 2] = [
    [
        Ctx::new(0, "unchanged flag"),
        Ctx::new(32, "unchanged flag, slow baseline"),
        Ctx::new(33, "unchanged flag, moving baseline"),
    ],
    [
        Ctx::new(159, "unchanged flag, after a change"),
        Ctx::new(160, "unchanged flag, slow baseline, after a change"),
        Ctx::new(161, "unchanged flag, moving baseline, after a change"),
    ],
];
/// The unchanged flag of an entry near a changed one coded before it (see [`Surroundings::near`]): a body next
/// to one that moved has often been pushed too. By nearness (near, close), then as [`UNCHANGED`].
const UNCHANGED_NEAR: [[[Ctx; MOTION_CLASSES]; 2]; NEAR_CLASSES - 1] = [
    [
        [
            Ctx::new(238, "unchanged flag, near a change"),
            Ctx::new(239, "unchanged flag, slow baseline, near a change"),
            Ctx::new(240, "unchanged flag, moving baseline, near a change"),
        ],
        [
            Ctx::new(241, "unchanged flag, after a change, near a change"),
            Ctx::new(
                242,
                "unchanged flag, slow baseline, after a change, near a change",
            ),
            Ctx::new(
                243,
                "unchanged flag, moving baseline, after a change, near a change",
            ),
        ],
    ],
    [
        [
            Ctx::new(244, "unchanged flag, close to a change"),
            Ctx::new(245, "unchanged flag, slow baseline, close to a change"),
            Ctx::new(246, "unchanged flag, moving baseline, close to a change"),
        ],
        [
            Ctx::new(247, "unchanged flag, after a change, close to a change"),
            Ctx::new(
                248,
                "unchanged flag, slow baseline, after a change, close to a change",
            ),
            Ctx::new(
                249,
                "unchanged flag, moving baseline, after a change, close to a change",
            ),
        ],
    ],
];
/// The perfect-prediction flag and the path tag, by the baseline's motion class and the class of the step the
/// prediction takes from the baseline (see [`DeltaState::prediction_class`]).
pub(crate) const PERFECT: [[Ctx; MOTION_CLASSES]; PREDICTION_CLASSES] = [
    [
        Ctx::new(1, "perfect prediction flag"),
        Ctx::new(34, "perfect prediction flag, slow baseline"),
        Ctx::new(35, "perfect prediction flag, moving baseline"),
    ],
    [
        Ctx::new(162, "perfect prediction flag, small step"),
        Ctx::new(163, "perfect prediction flag, slow baseline, small step"),
        Ctx::new(164, "perfect prediction flag, moving baseline, small step"),
    ],
    [
        Ctx::new(165, "perfect prediction flag, large step"),
        Ctx::new(166, "perfect prediction flag, slow baseline, large step"),
        Ctx::new(167, "perfect prediction flag, moving baseline, large step"),
    ],
];
pub(crate) const PATH: [[Ctx; MOTION_CLASSES]; PREDICTION_CLASSES] = [
    [
        Ctx::new(2, "encoding path"),
        Ctx::new(36, "encoding path, slow baseline"),
        Ctx::new(37, "encoding path, moving baseline"),
    ],
    [
        Ctx::new(177, "encoding path, small step"),
        Ctx::new(178, "encoding path, slow baseline, small step"),
        Ctx::new(179, "encoding path, moving baseline, small step"),
    ],
    [
        Ctx::new(180, "encoding path, large step"),
        Ctx::new(181, "encoding path, slow baseline, large step"),
        Ctx::new(182, "encoding path, moving baseline, large step"),
    ],
];

/// Number of classes [`DeltaState::prediction_class`] may return.
pub const PREDICTION_CLASSES: usize = 3;

/// Number of motion classes [`DeltaState::motion_class`] may return.
pub const MOTION_CLASSES: usize = 3;

/// Number of classes of [`Surroundings::near`].
pub const NEAR_CLASSES: usize = 3;

/// What both ends know of an entry's section before its unchanged flag: the tags' contexts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Surroundings {
    /// Whether the entry before this one in its section changed (was not [`DeltaPath::Unchanged`]).
    pub after_change: bool,
    /// How near the nearest changed entry coded before this one lies, in `0..NEAR_CLASSES` (0: none within reach,
    /// 1: near, 2: close); the packet layer finds it for history predictions, 0 elsewhere.
    pub near: usize,
}

/// A state that can be sent as a change against an earlier state of the same object.
pub trait DeltaState: Copy + PartialEq + Default {
    /// What both ends share to code this type: quantizers, predictor constants.
    type Config;

    /// The state `frames` frames after `baseline`, or `None` when this type has no predictor (or the gap is too
    /// long). Must be deterministic and identical on both ends.
    fn predict(config: &Self::Config, baseline: &Self, frames: u16) -> Option<Self>;

    /// Serializes `value` as a residual against `reference`. Writing fails with [`CodecError::Invalid`] when the
    /// difference is beyond what the residual can carry (the encoder then picks another path); reading checks
    /// every decoded field against its bounds.
    fn serialize_residual<S: Stream>(
        s: &mut S,
        config: &Self::Config,
        value: &mut Self,
        reference: &Self,
    ) -> Result<(), CodecError>;

    /// Serializes `value` as a residual against `prediction`, the prediction from `baseline`. The default codes it
    /// like any residual; a type whose residuals spread with the motion the prediction extrapolated (a fast body's
    /// wider than a creeping one's) overrides it to code under contexts of that motion, which both ends know.
    /// `neighbour` is the class of the miss a neighbour correction moved the prediction by (0 for none; see
    /// [`Prediction::Corrected`]), a context of its own: a body whose neighbour missed by much misses by much.
    #[inline]
    fn serialize_prediction_error<S: Stream>(
        s: &mut S,
        config: &Self::Config,
        value: &mut Self,
        prediction: &Self,
        _baseline: &Self,
        _neighbour: usize,
    ) -> Result<(), CodecError> {
        Self::serialize_residual(s, config, value, prediction)
    }

    /// Serializes the whole state, with no reference.
    fn serialize_absolute<S: Stream>(
        s: &mut S,
        config: &Self::Config,
        value: &mut Self,
    ) -> Result<(), CodecError>;

    /// Whether [`DeltaState::predict`] gives a prediction for `baseline` over `frames`, known without making it: a
    /// reader that ignores contexts (bit-packing) then predicts only for an entry coded against the prediction,
    /// not for one sent as a residual against its baseline. The default makes the prediction to find out; an
    /// override must agree with `predict` exactly (a reader that was told wrong fails with a typed error).
    #[inline]
    fn predicts(config: &Self::Config, baseline: &Self, frames: u16) -> bool {
        Self::predict(config, baseline, frames).is_some()
    }

    /// Which trained table the range coder's models start from in a section of this type (see [`Priors`]): both
    /// ends must agree, so it depends on the shared configuration only.
    #[inline]
    fn priors(_config: &Self::Config) -> Priors {
        Priors::Full
    }

    /// Whether entries of this type may name an older acked state of the object besides its baseline, to
    /// extrapolate from the two (see [`DeltaState::predict_from_history`]): for types whose states carry no
    /// velocity to predict with. Both ends must agree, so it depends on the shared configuration only.
    #[inline]
    fn uses_history(_config: &Self::Config) -> bool {
        false
    }

    /// The state `frames` frames after `baseline`, extrapolated from how the object moved between `older` (an
    /// acked state `span` frames before the baseline) and the baseline; `None` when this type has no such
    /// predictor. Must be deterministic and identical on both ends (integer arithmetic only).
    #[inline]
    fn predict_from_history(
        _config: &Self::Config,
        _baseline: &Self,
        _frames: u16,
        _older: &Self,
        _span: u16,
    ) -> Option<Self> {
        None
    }

    /// How the baseline moves, in `0..MOTION_CLASSES` (0: still, 1: slowly, 2: moving): the entry's tags (unchanged,
    /// perfect prediction, path) are coded under a context of this class, so a resting object's "unchanged" costs
    /// a fraction of a bit while a moving one's does not skew it. Types without motion keep the default, 0.
    #[inline]
    fn motion_class(&self) -> usize {
        0
    }

    /// Where the state puts its body, in position steps, for the neighbour correction of history predictions
    /// (see [`crate::neighbour`]); types without a position keep the default, `None`, and are never corrected.
    #[inline]
    fn position(&self) -> Option<[i32; 3]> {
        None
    }

    /// This prediction with its position moved by `by` steps per axis, kept within the configuration's bounds: the
    /// neighbour correction. Types without a position keep the default, the prediction unchanged.
    #[inline]
    fn moved(&self, _config: &Self::Config, _by: [i32; 3]) -> Self {
        *self
    }

    /// How far `prediction` moved from `baseline`, in `0..PREDICTION_CLASSES` (0: not at all, 1: a little, 2: far):
    /// the perfect-prediction flag and the path tag are coded under a context of it (a prediction that stands
    /// still is often exact, one that moves far is seldom beaten by the baseline). Types without motion keep the
    /// default, 0.
    #[inline]
    fn prediction_class(_prediction: &Self, _baseline: &Self) -> usize {
        0
    }

    /// Bits [`DeltaState::serialize_residual`] writes with the bit-packing back end, or `None` when writing it
    /// fails. The encoder's choice of path asks this for every candidate of every entry, so a type on a hot path
    /// overrides it with arithmetic on bit lengths; the default runs the measuring stream. An override must give
    /// exactly what the measuring stream counts.
    #[inline]
    fn residual_bits(config: &Self::Config, value: &Self, reference: &Self) -> Option<u64> {
        let mut m = MeasureStream::new();
        let mut v = *value;
        Self::serialize_residual(&mut m, config, &mut v, reference).ok()?;
        Some(m.bits_counted())
    }

    /// [`DeltaState::residual_bits`] of `value` against `prediction` and against `baseline`: the two sizes the
    /// encoder's plan takes for every changed entry that has a prediction. A type may size both at once, checking
    /// what depends on `value` alone once; an override must give exactly the two sizes.
    #[inline]
    fn residual_bits_both(
        config: &Self::Config,
        value: &Self,
        prediction: &Self,
        baseline: &Self,
    ) -> (Option<u64>, Option<u64>) {
        (
            Self::residual_bits(config, value, prediction),
            Self::residual_bits(config, value, baseline),
        )
    }

    /// Writes what [`serialize_changed`] writes for a changed entry after its prediction is handed over: along
    /// `path` against `base` and `prediction` (made from it, if the entry has one), on a stream that ignores
    /// contexts (the bit-packing writer's changed entry). The default goes through [`serialize_changed`]; a type on
    /// a hot path overrides it to write its tags and state in one pass. An override must write exactly the same
    /// bits and fail with exactly the same errors.
    #[inline]
    fn write_changed<S: Stream>(
        s: &mut S,
        config: &Self::Config,
        value: &Self,
        path: DeltaPath,
        base: &Self,
        prediction: Option<&Self>,
    ) -> Result<(), CodecError> {
        write_changed_generic(s, config, value, path, base, prediction)
    }

    /// [`plan`] of a changed entry (one that is neither `baseline` nor `prediction`, the prediction from it) for the
    /// bit-packing writer, with the bits [`DeltaState::write_changed`] then writes for it on that stream when the
    /// plan is a residual, worked out in the same pass: a type on a hot path sizes and writes each residual from one
    /// working out of its fields. Also gives how far apart the two residuals' sizes lie, as [`plan`] finds them
    /// (for the range coder's pricing). `None` where the type has no such pass (the default) or it does not serve
    /// this entry: the general plan and writer take it. An override must give exactly the general plan, gap and
    /// bits. The bits go into `out`, empty when it is called (left as it may be when the plan has none).
    #[inline]
    fn plan_packed(
        _config: &Self::Config,
        _value: &Self,
        _baseline: &Self,
        _prediction: Option<&Self>,
        _out: &mut PackedBits,
    ) -> Option<PackedPlan> {
        None
    }

    /// Reads what [`serialize_changed`] reads for a changed entry against `base` on a stream that ignores
    /// contexts, when the entry's prediction, if it has one, is [`DeltaState::predict`] from `base` over `frames`
    /// (made only if the entry needs it), and returns the path read: the bit-packing reader's changed entry, the
    /// read side of [`DeltaState::write_changed`]. The default goes through [`serialize_changed`]; a type on a hot
    /// path overrides it to read its tags and state in one pass. An override must accept exactly the same bits,
    /// decode the same state and fail with exactly the same errors.
    #[inline]
    fn read_changed<S: Stream>(
        s: &mut S,
        config: &Self::Config,
        value: &mut Self,
        base: &Self,
        frames: Option<u16>,
    ) -> Result<DeltaPath, CodecError> {
        read_changed_generic(s, config, value, base, frames)
    }

    /// Bits [`DeltaState::serialize_absolute`] writes with the bit-packing back end, or `None` when writing it
    /// fails; overriding it follows the rules of [`DeltaState::residual_bits`].
    #[inline]
    fn absolute_bits(config: &Self::Config, value: &Self) -> Option<u64> {
        let mut m = MeasureStream::new();
        let mut v = *value;
        Self::serialize_absolute(&mut m, config, &mut v).ok()?;
        Some(m.bits_counted())
    }

    /// A floor under [`DeltaState::absolute_bits`] for any value: [`plan`] does not size the absolute form of an
    /// entry whose residual is already no larger than this (the absolute form could not win). The default, 0,
    /// always sizes it; an override must never exceed what `absolute_bits` gives.
    #[inline]
    fn absolute_bits_floor(_config: &Self::Config) -> u64 {
        0
    }
}

/// Which path an entry was coded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaPath {
    /// Same as the baseline.
    Unchanged,
    /// Exactly the prediction from the baseline.
    Predicted,
    /// A residual against the prediction.
    PredictionError,
    /// A residual against the baseline.
    Delta,
    /// The whole state.
    Absolute,
}

impl DeltaPath {
    /// Every path, cheapest first.
    pub const ALL: [DeltaPath; 5] = [
        DeltaPath::Unchanged,
        DeltaPath::Predicted,
        DeltaPath::PredictionError,
        DeltaPath::Delta,
        DeltaPath::Absolute,
    ];
}

/// The encoder's decision for one entry: the path and its size in bit-packed bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaPlan {
    /// The chosen path.
    pub path: DeltaPath,
    /// Its size with the bit-packing back end (an estimate for the entropy back end).
    pub bits: u64,
}

/// Chooses the cheapest path for `value` given its baseline and the prediction from it (see
/// [`DeltaState::predict`]; pass the same prediction to [`serialize_entry`]). The sizes come from
/// [`DeltaState::residual_bits`] and [`DeltaState::absolute_bits`] plus the entry's tags, so nothing is
/// serialized; ties go to the earlier path of [`DeltaPath::ALL`].
#[inline]
pub fn plan<T: DeltaState>(
    config: &T::Config,
    value: &T,
    baseline: Option<&T>,
    prediction: Option<&T>,
) -> Result<DeltaPlan, CodecError> {
    plan_with_residual_gap(config, value, baseline, prediction).map(|(plan, _)| plan)
}

/// [`plan`], with how far apart the two residuals' bit-packed sizes lie (against the prediction and against the
/// baseline) when both were sized: the range-coded writer prices an entry's paths under its models only where
/// they lie close, and the plan has sized both already.
#[inline]
pub(crate) fn plan_with_residual_gap<T: DeltaState>(
    config: &T::Config,
    value: &T,
    baseline: Option<&T>,
    prediction: Option<&T>,
) -> Result<(DeltaPlan, Option<u64>), CodecError> {
    const NO_PATH: CodecError = CodecError::Invalid { field: "state" };
    let Some(base) = baseline else {
        let bits = T::absolute_bits(config, value).ok_or(NO_PATH)?;
        let path = DeltaPath::Absolute;
        return Ok((DeltaPlan { path, bits }, None));
    };
    if base == value {
        let path = DeltaPath::Unchanged;
        return Ok((DeltaPlan { path, bits: 1 }, None));
    }
    if prediction == Some(value) {
        let path = DeltaPath::Predicted;
        return Ok((DeltaPlan { path, bits: 2 }, None));
    }
    let (against_prediction, against_baseline) = match prediction {
        Some(p) => T::residual_bits_both(config, value, p, base),
        None => (None, T::residual_bits(config, value, base)),
    };
    choose_changed_path(
        config,
        value,
        prediction.is_some(),
        against_prediction,
        against_baseline,
    )
    .ok_or(NO_PATH)
}

/// The path a changed entry takes, given the bit-packed sizes of its residuals against its prediction (if it has
/// one) and its baseline (`None` where one cannot be written), with how far apart the two lie when both were
/// sized: the smaller residual with its tags (the unchanged flag, the perfect-prediction flag when there is a
/// prediction, and the path tag: 0..=2, or 0..=1 without a prediction), ties to the prediction, and the absolute
/// form only if smaller still. The one rule [`plan`] and the one-pass [`DeltaState::plan_packed`] both follow.
#[inline(always)]
pub(crate) fn choose_changed_path<T: DeltaState>(
    config: &T::Config,
    value: &T,
    has_prediction: bool,
    against_prediction: Option<u64>,
    against_baseline: Option<u64>,
) -> Option<(DeltaPlan, Option<u64>)> {
    let tags = if has_prediction {
        1 + 1 + u64::from(bits_for(2))
    } else {
        1 + u64::from(bits_for(1))
    };
    let mut best: Option<DeltaPlan> = None;
    let consider = |best: &mut Option<DeltaPlan>, path: DeltaPath, bits: Option<u64>| {
        if let Some(bits) = bits
            && best.is_none_or(|b| bits + tags < b.bits)
        {
            *best = Some(DeltaPlan {
                path,
                bits: bits + tags,
            });
        }
    };
    consider(&mut best, DeltaPath::PredictionError, against_prediction);
    consider(&mut best, DeltaPath::Delta, against_baseline);
    let gap = against_prediction
        .zip(against_baseline)
        .map(|(a, b)| a.abs_diff(b));
    // Ties go to the earlier path, so the absolute form wins only if smaller than the best residual.
    if best.is_none_or(|b| T::absolute_bits_floor(config) + tags < b.bits) {
        consider(
            &mut best,
            DeltaPath::Absolute,
            T::absolute_bits(config, value),
        );
    }
    best.map(|plan| (plan, gap))
}

/// What [`DeltaState::plan_packed`] gives: the plan, how far apart the two residuals' bit-packed sizes lie (when
/// both were sized), and whether the bits the bit-packing writer writes for the entry after its unchanged flag
/// (when the plan is a residual) went into the caller's [`PackedBits`]. Written there in place, not returned: a
/// returned `PackedBits`, stored field by field and then copied out in wider loads, stalled the writer on each
/// changed entry.
pub type PackedPlan = (DeltaPlan, Option<u64>, bool);

/// [`plan_with_residual_gap`] of an entry that differs from `base` for the bit-packing writer: through
/// [`DeltaState::plan_packed`] where the type serves it, with the entry's bits worked out in the same pass.
#[inline]
pub(crate) fn plan_changed_for_packing<T: DeltaState>(
    config: &T::Config,
    value: &T,
    base: &T,
    prediction: Option<&T>,
    out: &mut PackedBits,
) -> Result<PackedPlan, CodecError> {
    if prediction != Some(value)
        && let Some(planned) = T::plan_packed(config, value, base, prediction, out)
    {
        return Ok(planned);
    }
    plan_with_residual_gap(config, value, Some(base), prediction)
        .map(|(plan, gap)| (plan, gap, false))
}

/// The prediction an entry is coded against, as the packet layer hands it to [`serialize_entry_lazy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prediction<P> {
    /// The entry has none (and no prediction paths).
    None,
    /// Made already, by value or by reference.
    Made(P),
    /// Made already and moved by the miss of a neighbour (see `neighbour.rs`), whose class (1 and up) the
    /// prediction error is coded under (see [`DeltaState::serialize_prediction_error`]).
    Corrected(P, usize),
    /// `T::predict` from the baseline over this many frames, which [`DeltaState::predicts`] said gives one: made
    /// only if the stream needs it, that is for a perfect prediction, a prediction error, or a stream that codes
    /// under contexts (which depend on it).
    FromBaseline(u16),
}

impl<P> Prediction<P> {
    /// `prediction` after a neighbour correction of class `neighbour` (see `neighbour.rs`): class 0 moved
    /// nothing, so it is [`Prediction::Made`].
    pub fn corrected(prediction: P, neighbour: usize) -> Self {
        match neighbour {
            0 => Prediction::Made(prediction),
            n => Prediction::Corrected(prediction, n),
        }
    }
}

/// Serializes one entry along `path` (written when writing, filled in when reading). `baseline` is the state the
/// entry is coded against, if any, and `prediction` must be `T::predict` from it (the same on both ends).
#[inline]
pub fn serialize_entry<S: Stream, T: DeltaState>(
    s: &mut S,
    config: &T::Config,
    value: &mut T,
    path: &mut DeltaPath,
    baseline: Option<&T>,
    prediction: Option<&T>,
) -> Result<(), CodecError> {
    serialize_entry_lazy(
        s,
        config,
        value,
        path,
        baseline,
        Surroundings::default(),
        |_| Ok(prediction.map_or(Prediction::None, Prediction::Made)),
    )
}

/// [`serialize_entry`] with the prediction computed only when the entry needs it (not for an unchanged entry,
/// most of a packet): `prediction(s)` runs right after the unchanged flag and must return what `T::predict` from
/// the baseline does, or what `T::predict_from_history` does from the older state it serializes on `s` (the
/// packet layer names that state there, so an unchanged entry pays nothing for it). It may hand the prediction
/// back by value or, where the caller holds it already, by reference, or leave it to be made from the baseline
/// only if the entry needs it ([`Prediction::FromBaseline`]). `around` gives the tags' contexts.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn serialize_entry_lazy<S: Stream, T: DeltaState, P: Borrow<T>>(
    s: &mut S,
    config: &T::Config,
    value: &mut T,
    path: &mut DeltaPath,
    baseline: Option<&T>,
    around: Surroundings,
    prediction: impl FnOnce(&mut S) -> Result<Prediction<P>, CodecError>,
) -> Result<(), CodecError> {
    let Some(base) = baseline else {
        if !S::READING && *path != DeltaPath::Absolute {
            return Err(CodecError::Invalid {
                field: PATH[0][0].name,
            });
        }
        *path = DeltaPath::Absolute;
        return T::serialize_absolute(s, config, value);
    };
    if serialize_unchanged(s, path, base, around)? {
        *value = *base;
        return Ok(());
    }
    serialize_changed(s, config, value, path, base, prediction)
}

/// The tags' context class of `base`'s motion, worked out only for a stream that codes under contexts.
#[inline]
fn motion_class<S: Stream, T: DeltaState>(base: &T) -> usize {
    if S::CONTEXTS {
        base.motion_class().min(MOTION_CLASSES - 1)
    } else {
        0
    }
}

/// The context of the unchanged flag of an entry against `base` in `around`: shared by [`serialize_unchanged`]
/// and the range-coded section writer's run of plain unchanged entries, which codes their flags on its own.
#[inline]
pub(crate) fn unchanged_context<S: Stream, T: DeltaState>(base: &T, around: Surroundings) -> Ctx {
    let class = motion_class::<S, T>(base);
    let after = usize::from(around.after_change);
    match around.near.min(NEAR_CLASSES - 1) {
        0 => UNCHANGED[after][class],
        n => UNCHANGED_NEAR[n - 1][after][class],
    }
}

/// The first part of [`serialize_entry_lazy`] for an entry with a baseline: the unchanged flag. Returns whether
/// the entry is unchanged (setting `path` to [`DeltaPath::Unchanged`] when it is), in which case nothing follows
/// and the state is the baseline. Split out so that a writer sends an unchanged entry without copying its state.
#[inline]
pub(crate) fn serialize_unchanged<S: Stream, T: DeltaState>(
    s: &mut S,
    path: &mut DeltaPath,
    base: &T,
    around: Surroundings,
) -> Result<bool, CodecError> {
    let ctx = unchanged_context::<S, T>(base, around);
    let mut unchanged = *path == DeltaPath::Unchanged;
    s.bool(ctx, &mut unchanged)?;
    if unchanged {
        *path = DeltaPath::Unchanged;
    }
    Ok(unchanged)
}

/// [`DeltaState::write_changed`] through [`serialize_changed`]: the default, and what an override falls back to on a
/// stream its one pass does not serve.
#[inline]
pub(crate) fn write_changed_generic<S: Stream, T: DeltaState>(
    s: &mut S,
    config: &T::Config,
    value: &T,
    path: DeltaPath,
    base: &T,
    prediction: Option<&T>,
) -> Result<(), CodecError> {
    let (mut value, mut path) = (*value, path);
    serialize_changed(s, config, &mut value, &mut path, base, |_| {
        Ok(prediction.map_or(Prediction::None, Prediction::Made))
    })
}

/// [`DeltaState::read_changed`] through [`serialize_changed`]: the default, and what an override falls back to on a
/// stream its one pass does not serve.
#[inline]
pub(crate) fn read_changed_generic<S: Stream, T: DeltaState>(
    s: &mut S,
    config: &T::Config,
    value: &mut T,
    base: &T,
    frames: Option<u16>,
) -> Result<DeltaPath, CodecError> {
    let mut path = DeltaPath::Absolute;
    serialize_changed(s, config, value, &mut path, base, |_| {
        Ok(frames.map_or(Prediction::<&T>::None, Prediction::FromBaseline))
    })?;
    Ok(path)
}

/// The rest of [`serialize_entry_lazy`] after an unchanged flag that said the entry changed: the prediction, the
/// perfect-prediction flag, the path tag and the state along its path.
#[inline]
pub(crate) fn serialize_changed<S: Stream, T: DeltaState, P: Borrow<T>>(
    s: &mut S,
    config: &T::Config,
    value: &mut T,
    path: &mut DeltaPath,
    base: &T,
    prediction: impl FnOnce(&mut S) -> Result<Prediction<P>, CodecError>,
) -> Result<(), CodecError> {
    let class = motion_class::<S, T>(base);
    let (made, mut later, neighbour) = match prediction(s)? {
        Prediction::None => (None, None, 0),
        Prediction::Made(p) => (Some(p), None, 0),
        Prediction::Corrected(p, class) => (Some(p), None, class),
        Prediction::FromBaseline(frames) => (None, Some(frames), 0),
    };
    let exists = made.is_some() || later.is_some();
    // The deferred prediction, once made.
    let mut owned: Option<T> = None;
    let make = |later: &mut Option<u16>, owned: &mut Option<T>| -> Result<(), CodecError> {
        if let Some(frames) = later.take() {
            *owned = Some(T::predict(config, base, frames).ok_or(CodecError::Invalid {
                field: "prediction",
            })?);
        }
        Ok(())
    };
    if S::CONTEXTS {
        make(&mut later, &mut owned)?;
    }
    // A context only: not worked out for a stream that ignores contexts.
    let step = match made.as_ref().map(Borrow::borrow).or(owned.as_ref()) {
        Some(p) if S::CONTEXTS => T::prediction_class(p, base).min(PREDICTION_CLASSES - 1),
        _ => 0,
    };
    if exists {
        let mut perfect = *path == DeltaPath::Predicted;
        s.bool(PERFECT[step][class], &mut perfect)?;
        if perfect {
            make(&mut later, &mut owned)?;
            if let Some(p) = made.as_ref().map(Borrow::borrow).or(owned.as_ref()) {
                *path = DeltaPath::Predicted;
                *value = *p;
                return Ok(());
            }
        }
    }
    let first = i32::from(!exists);
    let mut tag = match *path {
        DeltaPath::PredictionError => 0,
        DeltaPath::Delta => 1,
        DeltaPath::Absolute => 2,
        DeltaPath::Unchanged | DeltaPath::Predicted => -1,
    };
    if !S::READING && tag < first {
        return Err(CodecError::Invalid {
            field: PATH[step][class].name,
        });
    }
    let mut coded = tag - first;
    s.int(PATH[step][class], &mut coded, 0, 2 - first)?;
    tag = coded + first;
    if tag == 0 {
        make(&mut later, &mut owned)?;
    }
    match (tag, made.as_ref().map(Borrow::borrow).or(owned.as_ref())) {
        (0, Some(p)) => {
            *path = DeltaPath::PredictionError;
            T::serialize_prediction_error(s, config, value, p, base, neighbour)
        }
        (1, _) => {
            *path = DeltaPath::Delta;
            T::serialize_residual(s, config, value, base)
        }
        _ => {
            *path = DeltaPath::Absolute;
            T::serialize_absolute(s, config, value)
        }
    }
}
