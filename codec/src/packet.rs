//! Whole datagrams: a header, then sections of delta-coded entries, filled in priority order to a byte budget.
//!
//! A section holds entries of one state type: the sender's frame number and the entry count, then per entry, in
//! ascending id order, the id as the gap from the previous one, whether it has a baseline and which one (as an offset
//! back from the packet's own sequence, so that the receiver finds it in its history), and the entry along its delta
//! path. The writer chooses entries in priority order while the budget lasts and writes them sorted, so ids cost
//! their gaps and no id appears twice. The header's `ack` field acknowledges the other direction's packets, so
//! baselines are named relative to this packet's `sequence`. Nothing may follow the last section.

use crate::arith::{ArithPricing, ArithReadStream, ArithWriteStream, FieldCosts};
use crate::baseline::{
    AckTracker, Baseline, HISTORY_BLOCK, MAX_BASELINE_OFFSET, MAX_OLDER_GAP, ReceiveHistory,
};
use crate::bitpack::{BitReadStream, BitWriteStream, PackedBits};
use crate::delta::{
    DeltaPath, DeltaState, Prediction, Surroundings, plan_changed_for_packing,
    plan_with_residual_gap, serialize_changed, serialize_entry_lazy, serialize_unchanged,
    unchanged_context,
};
use crate::error::CodecError;
use crate::header::{Backend, HEADER_BYTES, PacketHeader, serialize_header};
use crate::neighbour::Neighbours;
use crate::quant::bits_for;
use crate::stream::{Ctx, Stream};

/// The default datagram budget: no IP fragmentation anywhere.
pub const DEFAULT_BUDGET_BYTES: usize = 1200;

/// Consecutive entries that may fail to fit before the writer stops trying smaller ones further down the order.
const MAX_MISSES: usize = 8;

/// Encodes a range-coded section may take to settle how many entries fit: each after the first re-codes the
/// section with a corrected estimate of what an entry costs.
const MAX_ARITH_PASSES: usize = 5;

const FRAME: Ctx = Ctx::new(40, "frame");
const ENTRY_COUNT: Ctx = Ctx::new(41, "entry count");
/// The next-id flag and the bit length of an id gap, under a context chosen by the bit length of the gap before it
/// (0, 1, 2, more).
const ID_GAP: [Ctx; 4] = [
    Ctx::new(42, "object id gap"),
    Ctx::new(46, "object id gap after a run"),
    Ctx::new(47, "object id gap after a short gap"),
    Ctx::new(48, "object id gap after a long gap"),
];
const ID_GAP_LOW: Ctx = Ctx::new(49, "object id gap low bits");
const HAS_BASELINE: Ctx = Ctx::new(43, "has baseline");
const SAME_OFFSET: Ctx = Ctx::new(44, "same baseline offset");
const OFFSET: Ctx = Ctx::new(45, "baseline offset");
const HAS_OLDER: Ctx = Ctx::new(58, "has older baseline");
/// The range coder's plain-entry flag: the entry is the next id, against a baseline at the offset named last (the
/// commonest entry: one decision instead of the next-id, has-baseline and same-offset flags). Under a context of
/// the bit length of the gap before it (0, 1, 2, more), as the id gap.
const PLAIN: [Ctx; 4] = [
    Ctx::new(250, "object id, plain entry"),
    Ctx::new(251, "object id, plain entry after a run"),
    Ctx::new(252, "object id, plain entry after a short gap"),
    Ctx::new(253, "object id, plain entry after a long gap"),
];
const OLDER_GAP: Ctx = Ctx::new(59, "older baseline gap");

/// What both ends of a link agree on besides the state types' own configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkConfig {
    /// Identifies the game and protocol; packets with another id are rejected.
    pub protocol_id: u16,
    /// How this end codes payloads (the reader takes the back end from each header).
    pub backend: Backend,
    /// The largest datagram in bytes, header included.
    pub budget_bytes: usize,
    /// Object ids are `0..max_objects`.
    pub max_objects: u16,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            protocol_id: 0x5053,
            backend: Backend::default(),
            budget_bytes: DEFAULT_BUDGET_BYTES,
            max_objects: 1024,
        }
    }
}

impl LinkConfig {
    #[inline]
    fn max_id(&self) -> i32 {
        i32::from(self.max_objects.max(1)) - 1
    }

    /// The largest bit length an id gap can have.
    #[inline]
    fn max_gap_length(&self) -> i32 {
        bits_for(self.max_id() as u32) as i32
    }

    /// Bits of an id gap's length field, which [`serialize_id`] codes in `1..=max_gap_length` (a link of one
    /// object has no gaps, and its empty range takes the 32 bits `Stream::int` gives it).
    #[inline]
    fn gap_length_bits(&self) -> u32 {
        bits_for((self.max_gap_length() - 1) as u32)
    }
}

enum Sink {
    Bit(BitWriteStream),
    Arith {
        header: Vec<u8>,
        stream: Box<ArithWriteStream>,
    },
}

impl Sink {
    /// Bytes the datagram would have if finished now.
    fn len(&self) -> usize {
        match self {
            Sink::Bit(s) => s.bits_written().div_ceil(8) as usize,
            Sink::Arith { header, stream } => header.len() + stream.finished_len(),
        }
    }
}

/// Writes one datagram: the header at creation, then any number of sections, then [`PacketWriter::finish`].
pub struct PacketWriter {
    link: LinkConfig,
    header: PacketHeader,
    sink: Sink,
}

/// One entry ready to write: everything [`serialize_entry_body`] needs. The baseline is borrowed from the ack
/// tracker; the state, and the prediction from the baseline (made only for an object that changed), are kept
/// aside in the section's values and named by index, so that choosing and sorting a datagram's entries moves a
/// few words per entry, not whole states (moving them dominated the encoder's time per unchanged entry). An
/// unchanged entry's state is its baseline's ([`SAME_AS_BASELINE`]): it is not copied at all.
#[derive(Clone, Copy)]
struct Entry<'b, T> {
    id: u16,
    offset: Option<u16>,
    /// Packets from the baseline back to the older state the prediction extrapolates from, if any.
    older: Option<u16>,
    path: DeltaPath,
    /// The planned path is the smaller of the two residuals by more than [`PRICED_MARGIN_BITS`] in bit-packed
    /// size (see [`decided`]): against its own prediction, the range coder keeps it without pricing the others.
    decided: bool,
    /// The state to send: an index into the section's values, or [`SAME_AS_BASELINE`].
    state: u32,
    /// The prediction from the baseline, if any: an index into the section's values.
    prediction: Option<u32>,
    baseline: Option<&'b Baseline<T>>,
    /// Entries after this one that continue its run as the bit-packing writer's selection took them (see
    /// [`Selection::extend_run`]): the next `run` ids, each unchanged since its baseline, at this entry's offset.
    run: u16,
    /// The bits the bit-packing writer writes for the changed entry after its unchanged flag, worked out with its
    /// plan (see [`DeltaState::plan_packed`]): an index into the section's packed bits, or [`NOT_PACKED`].
    packed: u32,
}

/// [`Entry::state`] of an entry whose state is its baseline's (an unchanged one).
const SAME_AS_BASELINE: u32 = u32::MAX;

/// [`Entry::packed`] of an entry whose bits were not worked out with its plan: its writer works them out.
const NOT_PACKED: u32 = u32::MAX;

impl<'b, T> Entry<'b, T> {
    /// The entry of object `id`, unchanged since `baseline`, in packet `sequence`.
    #[inline(always)]
    fn unchanged(id: u16, sequence: u16, baseline: &'b Baseline<T>) -> Self {
        Entry {
            id,
            offset: Some(sequence.wrapping_sub(baseline.sequence)),
            older: None,
            path: DeltaPath::Unchanged,
            decided: false,
            state: SAME_AS_BASELINE,
            prediction: None,
            baseline: Some(baseline),
            run: 0,
            packed: NOT_PACKED,
        }
    }

    /// The state to send, from the section's `values` or the baseline.
    #[inline]
    fn state<'v>(&self, values: &'v [T]) -> &'v T
    where
        'b: 'v,
    {
        match self.baseline {
            Some(b) if self.state == SAME_AS_BASELINE => &b.state,
            _ => &values[self.state as usize],
        }
    }

    /// The prediction from the baseline, if any, from the section's `values`.
    #[inline]
    fn prediction<'v>(&self, values: &'v [T]) -> Option<&'v T> {
        self.prediction.and_then(|i| values.get(i as usize))
    }
}

/// Serializes which older acked state (packets before the baseline) an entry's prediction extrapolates from, for
/// state types that predict from history ([`DeltaState::uses_history`]).
fn serialize_older<S: Stream>(s: &mut S, older: &mut Option<u16>) -> Result<(), CodecError> {
    let mut has = older.is_some();
    s.bool(HAS_OLDER, &mut has)?;
    *older = if has {
        let mut gap = i32::from(older.unwrap_or(1));
        s.int(OLDER_GAP, &mut gap, 1, i32::from(MAX_OLDER_GAP))?;
        Some(gap as u16)
    } else {
        None
    };
    Ok(())
}

/// Bit-packed size of [`serialize_older`].
fn older_bits(older: Option<u16>) -> u64 {
    1 + older.map_or(0, |_| u64::from(bits_for(u32::from(MAX_OLDER_GAP) - 1)))
}

/// The context of the next id gap: the bit length of the gap before it, capped.
#[inline]
fn gap_context(previous_gap_length: i32) -> Ctx {
    gap_context_of(&ID_GAP, previous_gap_length)
}

/// The context among `contexts` for the bit length of the gap before, capped.
#[inline]
fn gap_context_of(contexts: &[Ctx; 4], previous_gap_length: i32) -> Ctx {
    contexts[previous_gap_length.clamp(0, 3) as usize]
}

/// The id a plain entry (see [`PLAIN`]) would have, if the section codes the plain flag here: a stream that codes
/// under contexts (the range coder), after an entry that named a baseline (`previous_offset`, at least 1), short of
/// the link's last id.
#[inline]
fn plain_next(
    contexts: bool,
    link: &LinkConfig,
    previous: Option<u16>,
    previous_offset: u16,
) -> Option<u16> {
    let next = previous.map(|p| i32::from(p) + 1)?;
    (contexts && previous_offset != 0 && next <= link.max_id()).then_some(next as u16)
}

/// Serializes an id as the gap from the id before it (`previous`, ids strictly ascending within a section): whether
/// it is the next id (a flag, under a context of the previous gap's bit length), and if not the gap's bit length
/// under the same context, then the bits below the leading one. A run of consecutive ids costs one skewed decision
/// each with the range coder (a whole section of them a few bits); a lone id far away its gap's few bits.
#[inline]
fn serialize_id<S: Stream>(
    s: &mut S,
    link: &LinkConfig,
    id: &mut u16,
    previous: Option<u16>,
    previous_gap_length: &mut i32,
) -> Result<(), CodecError> {
    let first = previous.map_or(0, |p| i32::from(p) + 1);
    let mut gap = i32::from(*id) - first;
    if !S::READING && gap < 0 {
        return Err(CodecError::Invalid {
            field: "object id order",
        });
    }
    let context = gap_context(*previous_gap_length);
    let mut next = gap == 0;
    s.bool(context, &mut next)?;
    let mut length = 0;
    if !next {
        length = 32 - (gap.max(1) as u32).leading_zeros() as i32;
        s.int(context, &mut length, 1, link.max_gap_length())?;
    }
    if length >= 2 {
        let top = 1i32 << (length - 1);
        let mut low = gap - top;
        s.int(ID_GAP_LOW, &mut low, 0, top - 1)?;
        gap = top + low;
    } else {
        gap = length;
    }
    *previous_gap_length = length;
    let value = first + gap;
    if value > link.max_id() {
        return Err(CodecError::Invalid {
            field: ID_GAP[0].name,
        });
    }
    *id = value as u16;
    Ok(())
}

/// Bit-packed size of an id gap of `gap`: the next-id flag, and for a longer gap its bit length field and the bits
/// below the leading one.
#[inline]
fn id_bits(link: &LinkConfig, gap: i32) -> u64 {
    let length = 32 - (gap.max(0) as u32).leading_zeros();
    if length == 0 {
        return 1;
    }
    1 + u64::from(bits_for(link.max_gap_length() as u32 - 1)) + u64::from(length - 1)
}

/// Bit-packed size of the baseline fields of an entry written after an entry that named `previous_offset`.
#[inline]
fn offset_bits(offset: Option<u16>, previous_offset: u16) -> u64 {
    match offset {
        None => 1,
        Some(o) if o == previous_offset => 2,
        Some(_) => 2 + u64::from(bits_for(u32::from(MAX_BASELINE_OFFSET) - 1)),
    }
}

/// Serializes an entry's baseline fields (unless the entry is `plain`, see [`PLAIN`]) and its state along `path`
/// (its planned path, or one the range coder priced cheaper) against `prediction` (the entry's, or its neighbour
/// correction); the id comes before, from [`serialize_id`] or the plain flag. `values` holds the states the
/// entries' indices name.
#[inline]
#[allow(clippy::too_many_arguments)]
fn serialize_entry_body<S: Stream, T: DeltaState>(
    s: &mut S,
    config: &T::Config,
    values: &[T],
    e: &Entry<'_, T>,
    against: &Against<T>,
    path: DeltaPath,
    previous_offset: u16,
    around: Surroundings,
    plain: bool,
) -> Result<(), CodecError> {
    if !plain {
        let mut has = e.offset.is_some();
        s.bool(HAS_BASELINE, &mut has)?;
        if let Some(offset) = e.offset {
            let mut same = offset == previous_offset;
            s.bool(SAME_OFFSET, &mut same)?;
            if !same {
                let mut o = i32::from(offset);
                s.int(OFFSET, &mut o, 1, i32::from(MAX_BASELINE_OFFSET))?;
            }
        }
    }
    let (mut path, mut older) = (path, e.older);
    let Some(base) = e.baseline else {
        let mut state = *e.state(values);
        return serialize_entry_lazy(s, config, &mut state, &mut path, None, around, |_| {
            Ok(Prediction::<&T>::None)
        });
    };
    // An unchanged entry is its flag alone: its state is not even read.
    if serialize_unchanged(s, &mut path, &base.state, around)? {
        return Ok(());
    }
    let mut state = *e.state(values);
    let history = T::uses_history(config);
    serialize_changed(s, config, &mut state, &mut path, &base.state, |s| {
        if history {
            serialize_older(s, &mut older)?;
        }
        Ok(against.handed())
    })
}

/// The prediction an entry is coded against on the wire: its own, or moved by a neighbour's miss (see
/// [`Neighbours::corrected`]), with the class of that miss (0 for none).
#[derive(Debug, Clone, Copy)]
struct Against<T> {
    prediction: Option<T>,
    neighbour: usize,
    /// Whether `prediction` went through [`Neighbours::corrected`] (and may differ from the entry's own).
    corrected: bool,
}

impl<T> Against<T> {
    /// The prediction as [`serialize_changed`] takes it.
    fn handed(&self) -> Prediction<&T> {
        self.prediction.as_ref().map_or(Prediction::None, |p| {
            Prediction::corrected(p, self.neighbour)
        })
    }
}

/// A writing stream an entry's path is chosen for: by default the path planned from bit-packed sizes is kept; a
/// stream whose costs adapt to what it coded (the range coder) prices each path under its current models.
trait EntrySink: Stream {
    /// A stream pricing values as this one would code them now, if its costs differ from bit-packed sizes.
    fn pricing(&self) -> Option<ArithPricing<'_>> {
        None
    }

    /// Codes the flags of the plain unchanged entries at the start of `entries` that continue a run after entry
    /// `last` (see [`continues_run`]), each as [`write_entries`] codes one after another (the plain flag under
    /// the context after a run, the unchanged flag after an unchanged entry, `near` its nearness class), and
    /// returns how many it took. By default none: [`write_entries`] codes each one.
    fn unchanged_run<T: DeltaState>(
        &mut self,
        _link: &LinkConfig,
        _entries: &[Entry<'_, T>],
        _last: u16,
        _offset: u16,
        _near: impl Fn(&T) -> usize,
    ) -> usize {
        0
    }
}

impl EntrySink for BitWriteStream {}

impl EntrySink for ArithWriteStream {
    fn pricing(&self) -> Option<ArithPricing<'_>> {
        Some(ArithWriteStream::pricing(self))
    }

    /// Both flags of each entry coded on the coder's registers in locals ([`ArithWriteStream::flag_run`]); none
    /// taken (each coded by [`write_entries`]) for a stream tallying costs.
    #[inline(always)]
    fn unchanged_run<T: DeltaState>(
        &mut self,
        link: &LinkConfig,
        entries: &[Entry<'_, T>],
        last: u16,
        offset: u16,
        near: impl Fn(&T) -> usize,
    ) -> usize {
        self.flag_run(|run| {
            let mut id = last;
            let mut taken = 0;
            for e in entries {
                let Some(b) = continues_run(link, e, id, offset) else {
                    break;
                };
                run.flag(PLAIN[0], true);
                let around = Surroundings {
                    after_change: false,
                    near: near(&b.state),
                };
                run.flag(unchanged_context::<Self, T>(&b.state, around), true);
                id = e.id;
                taken += 1;
            }
            taken
        })
        .unwrap_or(0)
    }
}

/// The baseline of `e` if it is a plain unchanged entry after entry `last`, whose baseline was at `offset`: the
/// next id (short of the link's last), against a baseline at the same offset, unchanged.
#[inline(always)]
fn continues_run<'b, T>(
    link: &LinkConfig,
    e: &Entry<'b, T>,
    last: u16,
    offset: u16,
) -> Option<&'b Baseline<T>> {
    let next = i32::from(last) + 1;
    if i32::from(e.id) != next
        || next > link.max_id()
        || e.offset != Some(offset)
        || e.path != DeltaPath::Unchanged
    {
        return None;
    }
    e.baseline
}

/// Bit-packed sizes of an entry's two residuals further apart than this leave the planned path alone: on the
/// katamari ladder a margin of 16 bits kept all but 0.01 kbps of what pricing every entry saves, at a third of the
/// encode instructions pricing every entry adds (8 bits kept under half of the saving).
const PRICED_MARGIN_BITS: u64 = 16;

/// [`Entry::decided`] for an entry planned along `path` whose two residuals' bit-packed sizes lie `gap` apart
/// (see [`plan_with_residual_gap`]).
#[inline]
fn decided(path: DeltaPath, gap: Option<u64>) -> bool {
    matches!(path, DeltaPath::PredictionError | DeltaPath::Delta)
        && gap.is_some_and(|g| g > PRICED_MARGIN_BITS)
}

/// The path `e` costs least along under `pricing` against `against` (tags and state; the baseline fields cost the
/// same on every path); `e.path` for an unchanged entry, one without a baseline, or when no path can be written.
fn cheapest_path<T: DeltaState>(
    pricing: ArithPricing<'_>,
    config: &T::Config,
    values: &[T],
    e: &Entry<'_, T>,
    against: &Against<T>,
    around: Surroundings,
) -> DeltaPath {
    let Some(base) = e.baseline else {
        return e.path;
    };
    if e.path == DeltaPath::Unchanged {
        return e.path;
    }
    // Two residuals far apart in bit-packed size are far apart under the models too: only close calls are priced.
    // The plan sized both against the entry's own prediction; against one a neighbour correction moved, they are
    // sized again (and the planned path may no longer be the smaller).
    if !against.corrected {
        if e.decided {
            return e.path;
        }
    } else if let Some(p) = against.prediction.as_ref()
        && let state = e.state(values)
        && p != state
        && matches!(e.path, DeltaPath::PredictionError | DeltaPath::Delta)
        && let (Some(a), Some(b)) = (
            T::residual_bits(config, state, p),
            T::residual_bits(config, state, &base.state),
        )
        && a.abs_diff(b) > PRICED_MARGIN_BITS
    {
        return if a <= b {
            DeltaPath::PredictionError
        } else {
            DeltaPath::Delta
        };
    }
    let state = *e.state(values);
    let prediction = against.prediction;
    // The cheapest path so far and its price: each later path is priced only until its price reaches that one (see
    // `ArithPricing::stopping_at`), since from there on it cannot undercut it (a tie keeps the earlier path).
    let mut best: Option<(u32, DeltaPath)> = None;
    for path in [
        DeltaPath::Predicted,
        DeltaPath::PredictionError,
        DeltaPath::Delta,
        DeltaPath::Absolute,
    ] {
        let possible = match path {
            DeltaPath::Predicted => prediction == Some(state),
            DeltaPath::PredictionError => prediction.is_some(),
            // Priced only where bit-packing chose it or nothing else can be written: on the katamari ladder the
            // range coder never preferred it over a residual, and pricing it took a fifth of the encode time.
            DeltaPath::Absolute => e.path == DeltaPath::Absolute || best.is_none(),
            _ => true,
        };
        if !possible {
            continue;
        }
        let mut p = pricing.stopping_at(best.map_or(u32::MAX, |(b, _)| b));
        let (mut state, mut taken) = (state, path);
        let priced = serialize_entry_lazy(
            &mut p,
            config,
            &mut state,
            &mut taken,
            Some(&base.state),
            around,
            |_| Ok(against.handed()),
        );
        if priced.is_ok() && best.is_none_or(|(b, _)| p.price() < b) {
            best = Some((p.price(), path));
        }
    }
    best.map_or(e.path, |(_, path)| path)
}

/// Whether `e` can be written along `path` against `prediction`: a planned or earlier-priced path may not be once
/// a neighbour correction moved the prediction (no longer exact, or its residual beyond the largest bucket).
fn possible<T: DeltaState>(
    config: &T::Config,
    values: &[T],
    e: &Entry<'_, T>,
    prediction: Option<&T>,
    path: DeltaPath,
) -> bool {
    let state = e.state(values);
    match path {
        DeltaPath::Predicted => prediction == Some(state),
        DeltaPath::PredictionError => {
            prediction.is_some_and(|p| T::residual_bits(config, state, p).is_some())
        }
        DeltaPath::Delta => e
            .baseline
            .is_some_and(|b| T::residual_bits(config, state, &b.state).is_some()),
        DeltaPath::Unchanged | DeltaPath::Absolute => true,
    }
}

/// Writes a section's entries, ids ascending: the count, then per entry its id gap, baseline and state, each
/// along the path the stream codes cheapest (see [`EntrySink`]).
fn write_entries<'e, 'b: 'e, S: EntrySink, T: DeltaState + 'b>(
    s: &mut S,
    link: &LinkConfig,
    config: &T::Config,
    values: &[T],
    entries: &'e [Entry<'b, T>],
    mut priced: Option<&mut [Option<DeltaPath>]>,
) -> Result<(), CodecError> {
    let mut count = entries.len() as u32;
    s.count(ENTRY_COUNT, &mut count, u32::from(link.max_objects))?;
    let mut previous = None;
    let mut previous_gap_length = 0;
    let mut previous_offset = 0u16;
    let mut around = Surroundings::default();
    // History predictions are corrected by their neighbours' misses where the stream codes under contexts.
    let correct = S::CONTEXTS && T::uses_history(config);
    let mut neighbours = Neighbours::new();
    let mut at = 0;
    while let Some(e) = entries.get(at) {
        at += 1;
        let plain = match plain_next(S::CONTEXTS, link, previous, previous_offset) {
            Some(next) => {
                let mut plain = e.id == next && e.offset == Some(previous_offset);
                s.bool(gap_context_of(&PLAIN, previous_gap_length), &mut plain)?;
                plain
            }
            None => false,
        };
        around.near = match e.baseline {
            Some(b) if correct => neighbours.nearness(&b.state),
            _ => 0,
        };
        if plain {
            previous_gap_length = 0;
            // A plain unchanged entry (most of a section) is its unchanged flag alone: no prediction to correct,
            // no path to price, no baseline fields.
            if e.path == DeltaPath::Unchanged
                && let Some(b) = e.baseline
            {
                serialize_unchanged(s, &mut DeltaPath::Unchanged, &b.state, around)?;
                around.after_change = false;
                // The plain unchanged entries that continue this one, coded at once where the stream can.
                let rest = entries.get(at..).unwrap_or_default();
                let run = if correct {
                    s.unchanged_run(link, rest, e.id, previous_offset, |b| {
                        neighbours.nearness(b)
                    })
                } else {
                    s.unchanged_run(link, rest, e.id, previous_offset, |_| 0)
                };
                at += run;
                previous = Some(entries.get(at - 1).map_or(e.id, |l| l.id));
                continue;
            }
        } else {
            let mut id = e.id;
            serialize_id(s, link, &mut id, previous, &mut previous_gap_length)?;
        }
        // Only a prediction from history is corrected (the reader makes any other from the baseline alone).
        let raw = e.prediction(values).filter(|_| e.older.is_some());
        let against = match (raw, e.baseline) {
            (Some(p), Some(b)) if correct => {
                let (p, neighbour) = neighbours.corrected(config, &b.state, p);
                Against {
                    prediction: Some(p),
                    neighbour,
                    corrected: true,
                }
            }
            _ => Against {
                prediction: e.prediction(values).copied(),
                neighbour: 0,
                corrected: false,
            },
        };
        let prediction = against.prediction.as_ref();
        let mut path = e.path;
        // An unchanged entry is its flag alone on every pass: nothing to price.
        if path != DeltaPath::Unchanged
            && let Some(paths) = priced.as_deref_mut()
            && let Some(pricing) = s.pricing()
            && let Some(slot) = paths.get_mut(usize::from(e.id))
        {
            // A path priced on an earlier pass, against another neighbour correction, may no longer be possible.
            path = match *slot {
                Some(p) if possible(config, values, e, prediction, p) => p,
                _ => *slot.insert(cheapest_path(pricing, config, values, e, &against, around)),
            };
        } else if against.neighbour != 0 && !possible(config, values, e, prediction, path) {
            // The planned path fits the uncorrected prediction: only a correction can rule it out.
            path = [DeltaPath::PredictionError, DeltaPath::Delta]
                .into_iter()
                .find(|&p| possible(config, values, e, prediction, p))
                .unwrap_or(DeltaPath::Absolute);
        }
        serialize_entry_body(
            s,
            config,
            values,
            e,
            &against,
            path,
            previous_offset,
            around,
            plain,
        )?;
        if correct
            && path != DeltaPath::Unchanged
            && let (Some(p), Some(b)) = (raw, e.baseline)
        {
            neighbours.record(&b.state, p, e.state(values));
        }
        around.after_change = path != DeltaPath::Unchanged;
        previous = Some(e.id);
        if let Some(o) = e.offset {
            previous_offset = o;
        }
    }
    Ok(())
}

/// [`write_entries`] for the bit-packing writer, in one pass: no contexts, so no pricing and no neighbour
/// corrections, and each entry's id gap, baseline fields and unchanged flag go as one field (an unchanged entry,
/// most of a datagram, is that field alone); a changed entry's state follows along its planned path, against its
/// prediction by reference. The same bits as [`write_entries`] writes there.
fn write_entries_packed<'e, 'b: 'e, T: DeltaState + 'b>(
    s: &mut BitWriteStream,
    link: &LinkConfig,
    config: &T::Config,
    values: &[T],
    packed: &[PackedBits],
    count: usize,
    entries: impl Iterator<Item = &'e Entry<'b, T>>,
) -> Result<(), CodecError> {
    let mut count = count as u32;
    s.count(ENTRY_COUNT, &mut count, u32::from(link.max_objects))?;
    let mut at = PackedPlace {
        first: 0,
        previous_offset: 0,
        length_bits: link.gap_length_bits(),
        history: T::uses_history(config),
    };
    // Unchanged entries not yet written that continue a run (each the next id, against the baseline offset named
    // last): four one bits each (the next-id flag, the same-offset field, the unchanged flag), written together.
    let mut run = 0u32;
    for e in entries {
        if e.path == DeltaPath::Unchanged
            && i32::from(e.id) == at.first
            && at.first <= link.max_id()
            && e.offset == Some(at.previous_offset)
            && e.baseline.is_some()
            && i32::from(e.id) + i32::from(e.run) <= link.max_id()
        {
            // It and its run.
            at.first += 1 + i32::from(e.run);
            run += 1 + u32::from(e.run);
            flush_full_runs(s, &mut run)?;
            continue;
        }
        put_run(s, &mut run)?;
        write_packed_entry(s, link, config, values, packed, e, &mut at)?;
        // The entries that continue its run, as the branch above takes each of them: the next ids, unchanged,
        // against the offset this one left named (the selection takes them only after an entry that names one).
        if e.run > 0 {
            if e.offset.is_none() || i32::from(e.id) + i32::from(e.run) > link.max_id() {
                return Err(CodecError::Invalid {
                    field: ID_GAP[0].name,
                });
            }
            at.first += i32::from(e.run);
            run = u32::from(e.run);
            flush_full_runs(s, &mut run)?;
        }
    }
    put_run(s, &mut run)
}

/// Where [`write_entries_packed`] is in a section, and what it keeps for every entry.
struct PackedPlace {
    /// The smallest id the next entry may have.
    first: i32,
    /// The baseline offset named last.
    previous_offset: u16,
    /// Bits of an id gap's length field.
    length_bits: u32,
    /// Whether entries name an older acked state.
    history: bool,
}

/// Writes entry `e` of [`write_entries_packed`] outside a run: its id gap from `at.first` (which then moves past
/// it), its baseline offset (named when it differs from `at.previous_offset`, which then becomes it), its state.
#[inline(always)]
fn write_packed_entry<T: DeltaState>(
    s: &mut BitWriteStream,
    link: &LinkConfig,
    config: &T::Config,
    values: &[T],
    packed: &[PackedBits],
    e: &Entry<'_, T>,
    at: &mut PackedPlace,
) -> Result<(), CodecError> {
    if i32::from(e.id) > link.max_id() {
        return Err(CodecError::Invalid {
            field: ID_GAP[0].name,
        });
    }
    let (mut code, mut bits) = id_code(at.length_bits, i32::from(e.id) - at.first)?;
    at.first = i32::from(e.id) + 1;
    let mut push = |value: u64, width: u32| {
        code = code << width | value;
        bits += width;
    };
    match e.offset {
        None => push(0, 1),
        Some(o) if o == at.previous_offset => push(0b11, 2),
        Some(o) => {
            if !(1..=MAX_BASELINE_OFFSET).contains(&o) {
                return Err(CodecError::Invalid { field: OFFSET.name });
            }
            push(0b10, 2);
            push(
                u64::from(o - 1),
                bits_for(u32::from(MAX_BASELINE_OFFSET) - 1),
            );
            at.previous_offset = o;
        }
    }
    let mut path = e.path;
    let Some(base) = e.baseline else {
        s.packed(HAS_BASELINE, &mut code, bits)?;
        let mut state = *e.state(values);
        serialize_entry_lazy(
            s,
            config,
            &mut state,
            &mut path,
            None,
            Surroundings::default(),
            |_| Ok(Prediction::<&T>::None),
        )?;
        return Ok(());
    };
    let unchanged = path == DeltaPath::Unchanged;
    push(u64::from(unchanged), 1);
    s.packed(HAS_BASELINE, &mut code, bits)?;
    if unchanged {
        return Ok(());
    }
    if at.history {
        serialize_older(s, &mut e.older.clone())?;
    }
    if let Some(bits) = packed.get(e.packed as usize) {
        return s.put_packed(bits);
    }
    T::write_changed(
        s,
        config,
        e.state(values),
        path,
        &base.state,
        e.prediction(values),
    )
}

/// Entries of a run [`write_entries_packed`] writes at once: 64 bits.
const RUN_FLUSH: u32 = 16;

/// Writes [`RUN_FLUSH`] entries of `run` at a time while it has that many (see [`put_run`]).
#[inline(always)]
fn flush_full_runs(s: &mut BitWriteStream, run: &mut u32) -> Result<(), CodecError> {
    while *run >= RUN_FLUSH {
        let mut full = RUN_FLUSH;
        put_run(s, &mut full)?;
        *run -= RUN_FLUSH;
    }
    Ok(())
}

/// Writes the four one bits of each of `run` unchanged entries that continue a run (`run <= RUN_FLUSH`), and
/// empties it.
#[inline(always)]
fn put_run(s: &mut BitWriteStream, run: &mut u32) -> Result<(), CodecError> {
    if *run == 0 {
        return Ok(());
    }
    let bits = 4 * *run;
    // 4 <= bits <= 64: the shift is below 64.
    let mut ones = u64::MAX >> (64 - bits);
    *run = 0;
    s.packed(HAS_BASELINE, &mut ones, bits)
}

/// What [`serialize_id`] writes for an id `gap` past the smallest it could be (the id within the link's range), as
/// one field and its width: the next-id flag, and for a longer gap its bit length less one (`length_bits` wide)
/// and the bits below its leading one.
#[inline(always)]
fn id_code(length_bits: u32, gap: i32) -> Result<(u64, u32), CodecError> {
    if gap < 0 {
        return Err(CodecError::Invalid {
            field: "object id order",
        });
    }
    if gap == 0 {
        return Ok((1, 1));
    }
    // The caller checked the id, so the length is within the link's largest.
    let length = 32 - (gap as u32).leading_zeros();
    // The flag (0), the length less one, and the gap less its leading one in the bits below it.
    let low = (gap as u32 - (1 << (length - 1))) as u64;
    Ok((
        (u64::from(length - 1) << (length - 1)) | low,
        1 + length_bits + (length - 1),
    ))
}

impl PacketWriter {
    /// Starts a datagram with `header` (its `packet_type` must be at most 127).
    pub fn new(link: &LinkConfig, mut header: PacketHeader) -> Result<Self, CodecError> {
        if header.packet_type > crate::header::MAX_PACKET_TYPE {
            return Err(CodecError::Invalid {
                field: "packet type",
            });
        }
        let mut bits = BitWriteStream::with_capacity(link.budget_bytes);
        let mut backend = link.backend;
        serialize_header(&mut bits, link.protocol_id, &mut header, &mut backend)?;
        let sink = match link.backend {
            Backend::Bitpack => Sink::Bit(bits),
            Backend::Arith => Sink::Arith {
                header: bits.finish(),
                stream: Box::new(ArithWriteStream::new()),
            },
        };
        Ok(Self {
            link: *link,
            header,
            sink,
        })
    }

    /// Bytes the datagram would take if finished now.
    pub fn len(&self) -> usize {
        self.sink.len()
    }

    /// True when nothing but the header has been written.
    pub fn is_empty(&self) -> bool {
        self.len() <= HEADER_BYTES
    }

    /// Starts tallying what each field costs with the range coder (see [`FieldCosts`]); a no-op with
    /// bit-packing. For benchmarks: it slows the coder.
    pub fn track_costs(&mut self) {
        if let Sink::Arith { stream, .. } = &mut self.sink {
            stream.track_costs();
        }
    }

    /// The range coder's tally since [`PacketWriter::track_costs`].
    pub fn costs(&self) -> Option<&FieldCosts> {
        match &self.sink {
            Sink::Arith { stream, .. } => stream.costs(),
            Sink::Bit(_) => None,
        }
    }

    /// Writes a section of entries of type `T`: objects are taken from `order` (the priority accumulator's order;
    /// an id named twice is taken once) while the budget lasts; `state_of(id)` gives each object's current state
    /// (`None` skips it); each is coded against its acked baseline in `tracker`. The entries go on the wire in
    /// ascending id order, so that ids cost their gaps. The states sent are recorded in `tracker` under this
    /// packet's sequence, and the ids sent are returned, ascending.
    pub fn write_section<T: DeltaState>(
        &mut self,
        config: &T::Config,
        tracker: &mut AckTracker<T>,
        frame: u16,
        order: &[u16],
        state_of: impl FnMut(u16) -> Option<T>,
    ) -> Result<Vec<u16>, CodecError> {
        self.write_section_with(config, tracker, frame, order, state_of, Untracked)
    }

    /// [`PacketWriter::write_section`] for a sender that tracks which of its objects changed: `revision_of(id)`
    /// gives the revision of the state `state_of(id)` would give, a number that changes whenever that state does
    /// (the frame of its last change, for a world that notes it once per step for all its links), and `None` for
    /// an object it does not track or that `state_of` skips. Each state sent is recorded with its revision, and an
    /// object whose revision is its baseline's (see [`AckTracker::baseline_revision`]) is known unchanged: it is
    /// taken as such without asking `state_of` for a copy of its state or comparing it with the baseline, most of
    /// a datagram's entries. Any other object is compared as [`PacketWriter::write_section`] does, so the bytes
    /// are the same: an object that changed and changed back is still found unchanged.
    pub fn write_section_revised<T: DeltaState>(
        &mut self,
        config: &T::Config,
        tracker: &mut AckTracker<T>,
        frame: u16,
        order: &[u16],
        state_of: impl FnMut(u16) -> Option<T>,
        revision_of: impl FnMut(u16) -> Option<u64>,
    ) -> Result<Vec<u16>, CodecError> {
        self.write_section_with(
            config,
            tracker,
            frame,
            order,
            state_of,
            Tracked(revision_of),
        )
    }

    /// Both [`PacketWriter::write_section`] and [`PacketWriter::write_section_revised`], as `revisions` says.
    fn write_section_with<T: DeltaState, V: Revisions>(
        &mut self,
        config: &T::Config,
        tracker: &mut AckTracker<T>,
        frame: u16,
        order: &[u16],
        mut state_of: impl FnMut(u16) -> Option<T>,
        revisions: V,
    ) -> Result<Vec<u16>, CodecError> {
        let link = self.link;
        let sequence = self.header.sequence;
        // The frame number and the count must fit, with room for the entropy coder's terminator.
        let reserve_bytes = 4;
        if self.len() + reserve_bytes > link.budget_bytes {
            return Err(CodecError::Overflow);
        }
        let mut f = u32::from(frame);
        match &mut self.sink {
            Sink::Bit(s) => s.bits(FRAME, &mut f, 16)?,
            Sink::Arith { stream, .. } => {
                stream.use_priors(T::priors(config));
                stream.bits(FRAME, &mut f, 16)?
            }
        }
        let budget_bits = (link.budget_bytes as u64) * 8;
        let used_bits = match &self.sink {
            Sink::Bit(s) => s.bits_written(),
            Sink::Arith { header, stream } => ((header.len() + stream.finished_len()) * 8) as u64,
        };
        let room_bits = budget_bits.saturating_sub(used_bits);
        let mut tables = std::mem::take(&mut tracker.tables);
        let mut taken = std::mem::take(&mut tables.taken);
        let mut packed = std::mem::take(&mut tables.packed);
        packed.clear();
        taken.clear();
        taken.resize(usize::from(link.max_objects).div_ceil(64), 0);
        // Candidates in priority order, each with its bit-packed size. The prediction is computed only for an
        // object that changed since its baseline.
        let mut candidates = Candidates {
            link: &link,
            config,
            baselines: &*tracker,
            sequence,
            frame,
            order,
            next: 0,
            taken,
            state_of: &mut state_of,
            revisions,
            packing: matches!(self.sink, Sink::Bit(_)),
            packed,
        };
        // The candidates' states and predictions, which entries name by index.
        let mut values = std::mem::take(&mut tables.values);
        values.clear();
        values.reserve(order.len().min(usize::from(link.max_objects)));
        // Entries chosen so far, and the section's bit-packed size.
        let mut chosen: Selection<T> = Selection::new(&link, order.len(), &mut tables);
        // The ids sent, ascending, and the ids, states and revisions (if tracked) sent in any order (acks update each
        // object on its own). A revision is asked again rather than kept from each draw: a lookup per entry sent,
        // not a store per candidate.
        let (ids, sent_ids, sent, sent_revisions) = match &mut self.sink {
            Sink::Bit(s) => {
                // Exact sizes: take entries in priority order while the section's exact size fits.
                let mut misses = 0;
                let mut last: Option<Last> = None;
                while misses < MAX_MISSES {
                    let Some((entry, own)) = candidates.next(&mut values)? else {
                        break;
                    };
                    let next_to_last =
                        last.and_then(|l| chosen.marginal_bits_after(&link, &l, &entry, own));
                    let grown = chosen.total
                        + next_to_last.unwrap_or_else(|| chosen.marginal_bits(&link, &entry, own));
                    if grown <= room_bits {
                        let (id, offset) = (entry.id, entry.offset);
                        chosen.insert(entry, own, grown);
                        let after = match (next_to_last, last) {
                            (Some(_), Some(l)) => l.after,
                            _ => chosen.after(id),
                        };
                        let mut l = Last { id, offset, after };
                        misses = 0;
                        // The entries known unchanged that continue this one, as the loop above would take them: each
                        // one more id in this entry's run, not an entry of its own.
                        if candidates.extend_run(&mut chosen, &mut l, room_bits) {
                            misses += 1;
                        }
                        last = Some(l);
                    } else {
                        misses += 1;
                    }
                }
                let before = s.bits_written();
                // The ids ascending, gathered as they are written rather than by a second walk of the bitmap; an
                // entry's run follows it.
                let mut ids = Vec::with_capacity(chosen.len());
                write_entries_packed(
                    s,
                    &link,
                    config,
                    &values,
                    &candidates.packed,
                    chosen.len(),
                    chosen.sorted().inspect(|e| {
                        ids.push(e.id);
                        if e.run > 0 {
                            ids.extend((1..=e.run).map(|k| e.id.wrapping_add(k)));
                        }
                    }),
                )?;
                debug_assert_eq!(
                    s.bits_written() - before,
                    chosen.total,
                    "section size estimate"
                );
                // In the order chosen: a walk over the selection's slice, cheaper than its bitmap walk. Then the
                // ids of the entries' runs, each state its baseline's (an ack updates each object on its own, so
                // the order is free): collected so, a section without runs records its states as fast as before. Each
                // made with room for the runs' too, so that none grows by a copy of what it holds.
                let mut sent_ids: Vec<u16> = Vec::with_capacity(chosen.len());
                sent_ids.extend(chosen.in_priority_order().map(|e| e.id));
                let mut sent: Vec<T> = Vec::with_capacity(chosen.len());
                sent.extend(chosen.in_priority_order().map(|e| *e.state(&values)));
                let mut sent_revisions =
                    revisions_of(&mut candidates.revisions, &sent_ids, chosen.len());
                if chosen.len() > sent_ids.len() {
                    // A run's revisions are its baselines' (so it was taken): copied from the tracker.
                    let mut runs_revisions = V::TRACKED.then_some(&mut sent_revisions);
                    for e in chosen.in_priority_order().filter(|e| e.run > 0) {
                        candidates.baselines.extend_with_baselines(
                            e.id.saturating_add(1),
                            e.run,
                            sequence,
                            &mut sent_ids,
                            &mut sent,
                            runs_revisions.as_deref_mut(),
                        );
                    }
                }
                (ids, sent_ids, sent, sent_revisions)
            }
            Sink::Arith { header, stream } => {
                let limit = link.budget_bytes;
                let base_len = stream.finished_len();
                let mut start = stream.checkpoint();
                // Coded bits per bit-packed bit: guessed at first, measured on each pass.
                let mut ratio = 0.5f64;
                // Entries drawn but not chosen (the one that would have overshot the target, those a trim
                // dropped), the next in priority order last: drawn again before the candidates after them.
                let mut pending: Vec<(Entry<T>, u64)> = Vec::new();
                let mut exhausted = false;
                let mut fails_at: Option<usize> = None;
                // The entries of the last pass, ascending by id, and of the last pass that fitted.
                let mut written: Vec<Entry<T>> = Vec::with_capacity(order.len());
                let mut fitted: Vec<Entry<T>> = Vec::new();
                let mut written_is_fitted;
                let mut passes = 0;
                // Passes in a row that overran the budget.
                let mut overruns = 0u32;
                // Each entry's path, priced under the models the first time a pass writes it and kept after.
                let mut priced = std::mem::take(&mut tables.priced);
                priced.clear();
                priced.resize(usize::from(link.max_objects), None);
                // The entry inserted last, while nothing else changed the selection since: an entry continuing its
                // run (most of a datagram's unchanged entries) is sized without a walk of the bitmap.
                let mut last: Option<Last> = None;
                loop {
                    passes += 1;
                    // Grow in priority order toward the budget at the current ratio, short of a size that failed.
                    let target = room_bits as f64 / ratio * 0.98;
                    while passes <= MAX_ARITH_PASSES
                        && !exhausted
                        && fails_at.is_none_or(|f| chosen.len() + 1 < f)
                    {
                        // Most passes draw nothing pending: the candidate is matched where it is drawn, not first
                        // moved into a common option.
                        let (entry, own) = match pending.pop() {
                            Some(e) => e,
                            None => match candidates.next(&mut values)? {
                                Some(e) => e,
                                None => {
                                    exhausted = true;
                                    break;
                                }
                            },
                        };
                        let next_to_last =
                            last.and_then(|l| chosen.marginal_bits_after(&link, &l, &entry, own));
                        let grown = chosen.total
                            + next_to_last
                                .unwrap_or_else(|| chosen.marginal_bits(&link, &entry, own));
                        if grown as f64 > target && !chosen.is_empty() {
                            pending.push((entry, own));
                            break;
                        }
                        let (id, offset) = (entry.id, entry.offset);
                        chosen.insert(entry, own, grown);
                        let after = match (next_to_last, last) {
                            (Some(_), Some(l)) => l.after,
                            _ => chosen.after(id),
                        };
                        let mut l = Last { id, offset, after };
                        // The entries known unchanged that continue this one, as this loop would take them: none
                        // is pending (those are drawn first), and each is checked against the pass's bounds.
                        let mut overshot = false;
                        while pending.is_empty()
                            && fails_at.is_none_or(|f| chosen.len() + 1 < f)
                            && let Some(entry) = candidates.next_in_run(&l)
                        {
                            let grown = chosen.total + chosen.run_bits_after(&link, &l);
                            if grown as f64 > target {
                                pending.push((entry, 1));
                                overshot = true;
                                break;
                            }
                            l.id = entry.id;
                            chosen.insert(entry, 1, grown);
                        }
                        last = Some(l);
                        if overshot {
                            break;
                        }
                    }
                    debug_assert_eq!(
                        chosen.total,
                        chosen.recounted_total(&link),
                        "section size estimate"
                    );
                    stream.rollback(start);
                    start = stream.checkpoint();
                    written.clear();
                    written.extend(chosen.sorted().copied());
                    write_entries(
                        stream.as_mut(),
                        &link,
                        config,
                        &values,
                        &written,
                        Some(&mut priced),
                    )?;
                    let coded_bits = ((stream.finished_len() - base_len) * 8).max(8) as f64;
                    ratio = (coded_bits / chosen.total.max(1) as f64).clamp(0.02, 16.0);
                    let bytes = header.len() + stream.finished_len();
                    if bytes <= limit {
                        overruns = 0;
                        let n = written.len();
                        std::mem::swap(&mut fitted, &mut written);
                        written_is_fitted = true;
                        let per_entry = coded_bits / n.max(1) as f64;
                        if passes >= MAX_ARITH_PASSES
                            || exhausted
                            || fails_at.is_some_and(|f| n + 1 >= f)
                            || (((limit - bytes) * 8) as f64) < 2.0 * per_entry
                        {
                            break;
                        }
                    } else {
                        written_is_fitted = false;
                        fails_at = Some(chosen.len());
                        // Past the pass limit, a section that fitted on an earlier pass is written as it was.
                        if chosen.is_empty() || (passes >= MAX_ARITH_PASSES && !fitted.is_empty()) {
                            break;
                        }
                        // Drop the lowest-priority entries whose estimated coded size covers the overshoot, twice
                        // as much on each overrun in a row: the lowest-priority entries are often unchanged ones
                        // that cost a fraction of a bit and whose gaps cost the entries around them, so the
                        // estimate can free nothing pass after pass. Past the pass limit (no pass fitted yet), at
                        // least half of the entries go, which bounds the passes.
                        overruns += 1;
                        let over = ((bytes - limit) * 8) as f64 * 1.05 + 8.0;
                        let at_least = if passes >= MAX_ARITH_PASSES {
                            chosen.len().div_ceil(2)
                        } else {
                            1
                        };
                        chosen.drop_lowest_priority(
                            &mut pending,
                            &link,
                            over / ratio * f64::from(1u32 << overruns.min(20)) / 2.0,
                            at_least,
                        );
                        last = None;
                        exhausted = false;
                    }
                }
                // Past the limit only while no pass fitted, each pass dropping at least half of the entries.
                debug_assert!(
                    passes <= MAX_ARITH_PASSES + 1 + bits_for(u32::from(link.max_objects)) as usize,
                    "{passes} passes"
                );
                #[cfg(test)]
                tests::ARITH_PASSES.with(|p| p.set(passes));
                if !written_is_fitted {
                    stream.rollback(start);
                    write_entries(
                        stream.as_mut(),
                        &link,
                        config,
                        &values,
                        &fitted,
                        Some(&mut priced),
                    )?;
                } else {
                    stream.commit();
                }
                let ids: Vec<u16> = fitted.iter().map(|e| e.id).collect();
                let sent = fitted.iter().map(|e| *e.state(&values)).collect();
                tables.priced = priced;
                let sent_revisions = revisions_of(&mut candidates.revisions, &ids, ids.len());
                (ids.clone(), ids, sent, sent_revisions)
            }
        };
        chosen.put_back(&mut tables);
        tables.taken = candidates.taken;
        tables.packed = candidates.packed;
        tables.values = values;
        tracker.tables = tables;
        tracker.record_sent_split(sequence, frame, sent_ids, sent, sent_revisions);
        Ok(ids)
    }

    /// Finishes the datagram.
    pub fn finish(self) -> Vec<u8> {
        match self.sink {
            Sink::Bit(s) => s.finish(),
            Sink::Arith { mut header, stream } => {
                header.extend_from_slice(&stream.finish());
                header
            }
        }
    }
}

/// Where a section writer learns its objects' revisions (see [`PacketWriter::write_section_revised`]): a sender
/// that tracks none writes through [`Untracked`], whose draws compile without a revision's test.
trait Revisions {
    /// Whether any object may have a revision.
    const TRACKED: bool;

    /// Object `id`'s revision now, if the sender tracks it.
    fn of(&mut self, id: u16) -> Option<u64>;
}

/// The revisions of objects `ids` now, in order, with room for `capacity` in all; none without revisions (see
/// [`AckTracker::record_sent_split`]).
fn revisions_of<V: Revisions>(revisions: &mut V, ids: &[u16], capacity: usize) -> Vec<Option<u64>> {
    if V::TRACKED {
        let mut named = Vec::with_capacity(capacity.max(ids.len()));
        named.extend(ids.iter().map(|&id| revisions.of(id)));
        named
    } else {
        Vec::new()
    }
}

/// No revisions: [`PacketWriter::write_section`].
struct Untracked;

impl Revisions for Untracked {
    const TRACKED: bool = false;

    #[inline(always)]
    fn of(&mut self, _id: u16) -> Option<u64> {
        None
    }
}

/// The revisions `revision_of` gives: [`PacketWriter::write_section_revised`].
struct Tracked<R>(R);

impl<R: FnMut(u16) -> Option<u64>> Revisions for Tracked<R> {
    const TRACKED: bool = true;

    #[inline(always)]
    fn of(&mut self, id: u16) -> Option<u64> {
        (self.0)(id)
    }
}

/// A section's candidates in priority order, each planned against its baseline with its bit-packed size: what
/// both back ends' selection loops draw from, one at a time.
struct Candidates<'a, 'b, T: DeltaState, F, V> {
    link: &'a LinkConfig,
    config: &'a T::Config,
    baselines: &'b AckTracker<T>,
    sequence: u16,
    frame: u16,
    order: &'a [u16],
    /// The next position in `order`.
    next: usize,
    /// The ids already drawn, as a bitmap.
    taken: Vec<u64>,
    state_of: &'a mut F,
    /// The sender's revisions (see [`PacketWriter::write_section_revised`]), if it tracks them.
    revisions: V,
    /// Whether the section is bit-packed: each changed entry's bits are then worked out with its plan, onto
    /// `packed` (see [`Entry::packed`]).
    packing: bool,
    packed: Vec<PackedBits>,
}

impl<'b, T: DeltaState, F: FnMut(u16) -> Option<T>, V: Revisions> Candidates<'_, 'b, T, F, V> {
    /// The next candidate if it continues a run after `last` known unchanged (see
    /// [`PacketWriter::write_section_revised`]): the next id, its revision its baseline's, naming the same baseline
    /// offset. Drawn so (most of a datagram's entries where the sender tracks revisions), an entry is taken and
    /// sized in a short inner loop of the selection rather than through [`Candidates::next`] and the general one.
    /// `None`, with nothing drawn, for any other candidate (or without revisions): [`Candidates::next`] takes it.
    #[inline(always)]
    fn next_in_run(&mut self, last: &Last) -> Option<Entry<'b, T>> {
        if !V::TRACKED {
            return None;
        }
        let &id = self.order.get(self.next)?;
        let i = usize::from(id);
        if u32::from(id) != u32::from(last.id) + 1 || i >= usize::from(self.link.max_objects) {
            return None;
        }
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.taken[word] & bit != 0 {
            return None;
        }
        let revision = self.revisions.of(id);
        if revision.is_none() || revision != self.baselines.baseline_revision(id) {
            return None;
        }
        let b = self.baselines.baseline(id, self.sequence)?;
        let entry = Entry::unchanged(id, self.sequence, b);
        if entry.offset != last.offset {
            return None;
        }
        self.next += 1;
        self.taken[word] |= bit;
        Some(entry)
    }

    /// The candidates that continue the run after `last` (the entry `chosen` inserted last), taken while each fits
    /// the section's `room_bits`, as [`Candidates::next_in_run`] would draw them one by one, each sized by
    /// [`Selection::run_bits_after`]: `last` moves to the last one taken. Found by one walk of the order, the
    /// baselines and their revisions as slices, sized at once (see [`Selection::run_bits`]) and added to `chosen`
    /// at once (see [`Selection::extend_run`]), an object of a run (most of a bit-packed datagram's) costs a few
    /// loads and compares, not a draw, a sizing and an insertion of its own. Returns whether the room stopped the
    /// run: the candidate that did not fit is drawn all the same, as `next_in_run` draws it before it is sized,
    /// and not chosen.
    #[inline(always)]
    fn extend_run(
        &mut self,
        chosen: &mut Selection<'b, T>,
        last: &mut Last,
        room_bits: u64,
    ) -> bool {
        let Some(offset) = last.offset.filter(|_| V::TRACKED) else {
            return false;
        };
        let first = usize::from(last.id) + 1;
        // Most entries that are no run's head (changed ones, drawn first) are followed by another id.
        if self
            .order
            .get(self.next)
            .is_none_or(|&id| usize::from(id) != first)
        {
            return false;
        }
        let (baselines, revisions) = self.baselines.slots_from(first);
        let order = self.order.get(self.next..).unwrap_or_default();
        let sequence = self.sequence;
        // The candidates in a row from here that are the next ids within the link's range, known unchanged (their
        // revisions their baselines'), against a baseline at `offset`, up to the first one drawn already. No more
        // are looked at than can fit and one: each costs at least three bits (four, less one where the gap of the
        // entry after the run loses a bit of length) but the one next to that entry, so that of `fit` of them not
        // all fit, and the first that does not is among them.
        let in_range = usize::from(self.link.max_objects).saturating_sub(first);
        let fit = (room_bits.saturating_sub(chosen.total) / 3) as usize + 2;
        let mut count = 0;
        for ((&id, baseline), &named) in order
            .iter()
            .zip(baselines)
            .zip(revisions)
            .take(in_range.min(fit))
        {
            if usize::from(id) != first + count {
                break;
            }
            let revision = self.revisions.of(id);
            if revision.is_none()
                || revision != named
                || baseline
                    .as_ref()
                    .is_none_or(|b| sequence.wrapping_sub(b.sequence) != offset)
            {
                break;
            }
            count += 1;
        }
        count = clear_bits_from(&self.taken, first, first + count);
        let mut total = chosen.total + chosen.run_bits(self.link, last, count);
        let mut missed = false;
        if total > room_bits {
            // The room ends within the run: sized one by one up to the first that does not fit, which is drawn.
            let (found, mut at) = (count, *last);
            total = chosen.total;
            count = 0;
            while count < found {
                let grown = total + chosen.run_bits_after(self.link, &at);
                if grown > room_bits {
                    let i = first + count;
                    self.taken[i / 64] |= 1 << (i % 64);
                    self.next += 1;
                    missed = true;
                    break;
                }
                total = grown;
                at.id += 1;
                count += 1;
            }
        }
        self.next += count;
        set_bit_range(&mut self.taken, first, count);
        chosen.extend_run(first, count, offset, total);
        last.id += count as u16;
        missed
    }

    /// The next candidate and its own bit-packed size, its state and prediction (if it needs them) pushed onto
    /// `values`; `None` when `order` is exhausted. An unchanged object (most of a datagram) takes the short way:
    /// no prediction, no plan, and no copy of its state. Inlined into each selection loop, so that the entry comes
    /// back in registers rather than through memory.
    #[inline(always)]
    fn next(&mut self, values: &mut Vec<T>) -> Result<Option<(Entry<'b, T>, u64)>, CodecError> {
        let (config, sequence, frame) = (self.config, self.sequence, self.frame);
        while let Some(&id) = self.order.get(self.next) {
            self.next += 1;
            let i = usize::from(id);
            if i >= usize::from(self.link.max_objects) {
                continue;
            }
            let (word, bit) = (i / 64, 1u64 << (i % 64));
            if self.taken[word] & bit != 0 {
                continue;
            }
            // An object the sender knows unchanged since its baseline's state (the same revision) is that state:
            // neither copied out nor compared.
            if V::TRACKED {
                let revision = self.revisions.of(id);
                if revision.is_some()
                    && revision == self.baselines.baseline_revision(id)
                    && let Some(b) = self.baselines.baseline(id, sequence)
                {
                    self.taken[word] |= bit;
                    return Ok(Some((Entry::unchanged(id, sequence, b), 1)));
                }
            }
            // Borrowed where it was drawn, not moved out of its option: the move copied the state's bytes after the
            // option's niche in overlapping pieces, and reading them back stalled on store forwarding.
            let drawn = (self.state_of)(id);
            let Some(state) = drawn.as_ref() else {
                continue;
            };
            self.taken[word] |= bit;
            let base = self.baselines.baseline(id, sequence);
            if let Some(b) = base
                && b.state == *state
            {
                return Ok(Some((Entry::unchanged(id, sequence, b), 1)));
            }
            let history = T::uses_history(config);
            let mut older = None;
            let prediction = base.and_then(|b| {
                let frames = frame.wrapping_sub(b.frame);
                let from_history = if history {
                    self.baselines
                        .older_baseline(id, b, sequence, frame)
                        .and_then(|o| {
                            let span = b.frame.wrapping_sub(o.frame);
                            let p =
                                T::predict_from_history(config, &b.state, frames, &o.state, span)?;
                            older = Some(b.sequence.wrapping_sub(o.sequence));
                            Some(p)
                        })
                } else {
                    None
                };
                from_history.or_else(|| T::predict(config, &b.state, frames))
            });
            // The bits a bit-packed entry's plan worked out are kept for the writer, and its prediction is not; the
            // range coder's plan has no bits to carry (kept apart, its plan moves no more than the plan itself).
            let (decision, gap, packed) = match base {
                Some(b) if self.packing => {
                    // Worked out in their slot, which goes again when the plan has none.
                    let at = self.packed.len();
                    self.packed.push(PackedBits::default());
                    let (decision, gap, written) = plan_changed_for_packing(
                        config,
                        state,
                        &b.state,
                        prediction.as_ref(),
                        &mut self.packed[at],
                    )?;
                    let packed = if written {
                        at as u32
                    } else {
                        self.packed.truncate(at);
                        NOT_PACKED
                    };
                    (decision, gap, packed)
                }
                _ => {
                    let (decision, gap) = plan_with_residual_gap(
                        config,
                        state,
                        base.map(|b| &b.state),
                        prediction.as_ref(),
                    )?;
                    (decision, gap, NOT_PACKED)
                }
            };
            let index = match prediction {
                Some(p) if packed == NOT_PACKED => {
                    values.push(p);
                    Some(values.len() as u32 - 1)
                }
                _ => None,
            };
            let history_bits = if history && base.is_some() && decision.path != DeltaPath::Unchanged
            {
                older_bits(older)
            } else {
                0
            };
            let entry = Entry {
                id,
                offset: base.map(|b| sequence.wrapping_sub(b.sequence)),
                older,
                path: decision.path,
                decided: decided(decision.path, gap),
                state: values.len() as u32,
                prediction: index,
                baseline: base,
                run: 0,
                packed,
            };
            values.push(*state);
            return Ok(Some((entry, decision.bits + history_bits)));
        }
        Ok(None)
    }
}

/// A section writer's working tables, kept by the link's [`AckTracker`] from one datagram to the next so that
/// writing a section allocates none of them (the issue's "tables reused, not reallocated per datagram"). Each is
/// cleared, or written before it is read, by the section that takes it. A section that fails leaves them empty, and
/// the next one allocates them again.
pub(crate) struct SectionTables<T> {
    /// [`Candidates::taken`].
    taken: Vec<u64>,
    /// The section's states and predictions, which entries name by index.
    values: Vec<T>,
    /// [`Selection::entries`], emptied: an entry borrows its baseline from the tracker, so between sections the
    /// allocation is kept under a type without that borrow (see [`recycled`]).
    entries: Vec<(Entry<'static, ()>, u64)>,
    /// [`Selection::index_of`].
    index_of: Vec<u32>,
    /// [`Selection::ids`].
    ids: Vec<u64>,
    /// [`Selection::offsets`].
    offsets: Vec<u16>,
    /// The range-coded writer's priced path per id.
    priced: Vec<Option<DeltaPath>>,
    /// [`Candidates::packed`].
    packed: Vec<PackedBits>,
}

impl<T> Default for SectionTables<T> {
    fn default() -> Self {
        Self {
            taken: Vec::new(),
            values: Vec::new(),
            entries: Vec::new(),
            index_of: Vec::new(),
            ids: Vec::new(),
            offsets: Vec::new(),
            priced: Vec::new(),
            packed: Vec::new(),
        }
    }
}

// A tracker's copy starts its own tables.
impl<T> Clone for SectionTables<T> {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl<T> std::fmt::Debug for SectionTables<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SectionTables")
            .field("entries_capacity", &self.entries.capacity())
            .finish_non_exhaustive()
    }
}

/// `v` emptied, as a vector of another element type in the same allocation: the standard library collects a
/// vector's own iterator in place when the two element types have one size and alignment, as an entry and its
/// stored form have (they differ only in the lifetime and pointee of the baseline reference). The tables' test
/// counts allocations, so a toolchain that stopped doing so would be caught.
fn recycled<A, B>(mut v: Vec<A>) -> Vec<B> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// Sets bits `first..first + count` of `bitmap` (bit `i` of word `i / 64`), a word at a time.
#[inline(always)]
fn set_bit_range(bitmap: &mut [u64], first: usize, count: usize) {
    let (mut at, end) = (first, first + count);
    while at < end {
        let (word, shift) = (at / 64, at % 64);
        let bits = (end - at).min(64 - shift);
        bitmap[word] |= (u64::MAX >> (64 - bits)) << shift;
        at += bits;
    }
}

/// How many bits of `bitmap` from bit `first` on are clear, up to bit `end` (bit `i` of word `i / 64`).
#[inline(always)]
fn clear_bits_from(bitmap: &[u64], first: usize, end: usize) -> usize {
    let mut at = first;
    while at < end {
        let Some(&word) = bitmap.get(at / 64) else {
            break;
        };
        let set = word >> (at % 64);
        if set != 0 {
            at += set.trailing_zeros() as usize;
            break;
        }
        at += 64 - at % 64;
    }
    at.min(end).saturating_sub(first)
}

/// The entry a writer's selection inserted last (see [`Selection::marginal_bits_after`]).
#[derive(Clone, Copy)]
struct Last {
    id: u16,
    offset: Option<u16>,
    /// The smallest chosen id after `id`.
    after: Option<u16>,
}

/// The entries chosen for a section so far, in priority order, with the set of their ids as a bitmap so that an
/// id's neighbours in ascending order (which its gap and baseline fields depend on) are found in a few word scans.
struct Selection<'b, T> {
    entries: Vec<(Entry<'b, T>, u64)>,
    index_of: Vec<u32>,
    ids: Vec<u64>,
    /// Per chosen id, the baseline offset it names, 0 for none (offsets are at least 1).
    offsets: Vec<u16>,
    /// Bit-packed size of the section as [`write_entries`] writes the chosen entries.
    total: u64,
    /// Entries chosen, those in runs included (see [`Selection::extend_run`]).
    count: usize,
}

impl<'b, T: Copy> Selection<'b, T> {
    /// An empty selection for a section of at most `candidates` entries, in the tables of `tables` (taken out of it
    /// until [`Selection::put_back`]). Only the id bitmap is cleared: `index_of` and `offsets` are read only at
    /// chosen ids, each written when its entry is inserted.
    fn new(link: &LinkConfig, candidates: usize, tables: &mut SectionTables<T>) -> Self {
        let n = usize::from(link.max_objects);
        let mut entries = recycled(std::mem::take(&mut tables.entries));
        entries.reserve(candidates.min(n));
        let mut ids = std::mem::take(&mut tables.ids);
        ids.clear();
        ids.resize(n.div_ceil(64), 0);
        let mut index_of = std::mem::take(&mut tables.index_of);
        index_of.resize(n, 0);
        let mut offsets = std::mem::take(&mut tables.offsets);
        offsets.resize(n, 0);
        Self {
            entries,
            index_of,
            ids,
            offsets,
            total: u64::from(bits_for(u32::from(link.max_objects))),
            count: 0,
        }
    }

    /// Returns the selection's tables to `tables`, for the next section.
    fn put_back(self, tables: &mut SectionTables<T>) {
        tables.entries = recycled(self.entries);
        tables.index_of = self.index_of;
        tables.ids = self.ids;
        tables.offsets = self.offsets;
    }

    fn len(&self) -> usize {
        self.count
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The largest chosen id below `id`.
    #[inline]
    fn before(&self, id: u16) -> Option<u16> {
        let id = usize::from(id);
        let mut word = id / 64;
        let mut bits = self.ids[word] & ((1u64 << (id % 64)) - 1);
        loop {
            if bits != 0 {
                return Some((word * 64 + 63 - bits.leading_zeros() as usize) as u16);
            }
            word = word.checked_sub(1)?;
            bits = self.ids[word];
        }
    }

    /// The smallest chosen id above `id`.
    #[inline]
    fn after(&self, id: u16) -> Option<u16> {
        let id = usize::from(id) + 1;
        let mut word = id / 64;
        let mut bits = *self.ids.get(word)? & !((1u64 << (id % 64)) - 1);
        loop {
            if bits != 0 {
                return Some((word * 64 + bits.trailing_zeros() as usize) as u16);
            }
            word += 1;
            bits = *self.ids.get(word)?;
        }
    }

    /// The baseline offset named last up to chosen id `id` in ascending order (0 when none).
    fn offset_up_to(&self, id: u16) -> u16 {
        let mut at = Some(id);
        while let Some(b) = at {
            let o = self.offsets[usize::from(b)];
            if o != 0 {
                return o;
            }
            at = self.before(b);
        }
        0
    }

    /// The baseline offset of the first entry from chosen id `id` on, in ascending order, that names one.
    fn offset_from(&self, id: u16) -> Option<u16> {
        let mut at = Some(id);
        while let Some(a) = at {
            let o = self.offsets[usize::from(a)];
            if o != 0 {
                return Some(o);
            }
            at = self.after(a);
        }
        None
    }

    /// Bits the section grows by with `entry` (of `own` bits) in it: its own size, its id gap and baseline fields,
    /// and the change to the id gap of the entry after it and to the baseline fields of the first entry after it
    /// that names a baseline (the entries between name none, which costs the same whatever came before).
    // Always inlined into the selection loops, as `insert`: called for every candidate, where a call's overhead
    // was about half its cost.
    #[inline(always)]
    fn marginal_bits(&self, link: &LinkConfig, entry: &Entry<'b, T>, own: u64) -> u64 {
        let before = self.before(entry.id);
        let first = before.map_or(0, |b| i32::from(b) + 1);
        let previous_offset = before.map_or(0, |b| self.offset_up_to(b));
        let mut bits = own
            + id_bits(link, i32::from(entry.id) - first)
            + offset_bits(entry.offset, previous_offset);
        if let Some(a) = self.after(entry.id) {
            let mut old = id_bits(link, i32::from(a) - first);
            let mut new = id_bits(link, i32::from(a) - i32::from(entry.id) - 1);
            let new_previous = entry.offset.unwrap_or(previous_offset);
            if new_previous != previous_offset
                && let Some(o) = self.offset_from(a)
            {
                old += offset_bits(Some(o), previous_offset);
                new += offset_bits(Some(o), new_previous);
            }
            bits = (bits + new).saturating_sub(old);
        }
        bits
    }

    /// [`Selection::marginal_bits`] of an entry that continues a run after `last`, the entry inserted last: the
    /// next id, naming the same baseline offset. Its own bits, a one-bit id gap, the two-bit same-offset field, and
    /// the gap of the entry after it one shorter, with no walk of the bitmap: most of a datagram's unchanged
    /// entries come so. `None` for any other entry.
    #[inline(always)]
    fn marginal_bits_after(
        &self,
        link: &LinkConfig,
        last: &Last,
        entry: &Entry<'b, T>,
        own: u64,
    ) -> Option<u64> {
        let offset = entry.offset?;
        if last.offset != Some(offset) || u32::from(entry.id) != u32::from(last.id) + 1 {
            return None;
        }
        // The id gap (none) and the same-offset field, as `marginal_bits` sizes them after `last`.
        let mut bits = own + id_bits(link, 0) + offset_bits(Some(offset), offset);
        if let Some(a) = last.after {
            // `a` is the first chosen id after `last`, so after `entry` too (which is not chosen): `a > entry.id`.
            let gap = i32::from(a) - i32::from(entry.id);
            bits = (bits + id_bits(link, gap - 1)).saturating_sub(id_bits(link, gap));
        }
        Some(bits)
    }

    /// [`Selection::marginal_bits_after`] of an unchanged entry (one bit of its own) known to continue the run
    /// after `last`.
    #[inline(always)]
    fn run_bits_after(&self, link: &LinkConfig, last: &Last) -> u64 {
        let mut bits = 1 + id_bits(link, 0) + offset_bits(last.offset, last.offset.unwrap_or(0));
        if let Some(a) = last.after {
            let gap = i32::from(a) - i32::from(last.id) - 1;
            bits = (bits + id_bits(link, gap - 1)).saturating_sub(id_bits(link, gap));
        }
        bits
    }

    /// Bits the section grows by with the `count` entries that continue the run after `last`, the entry inserted
    /// last: the sum of their [`Selection::run_bits_after`], each one id on. Each one's own bit, gap and
    /// same-offset field, with the gap of the entry after the run shorter by `count` (none may saturate: the
    /// gap's length field is at most four bits wide, so shortening a gap saves at most four bits).
    #[inline(always)]
    fn run_bits(&self, link: &LinkConfig, last: &Last, count: usize) -> u64 {
        let each = 1 + id_bits(link, 0) + offset_bits(last.offset, last.offset.unwrap_or(0));
        let mut bits = each * count as u64;
        if let Some(a) = last.after {
            let gap = i32::from(a) - i32::from(last.id) - 1;
            bits = (bits + id_bits(link, gap - count as i32)).saturating_sub(id_bits(link, gap));
        }
        bits
    }

    /// Adds `entry`, whose marginal size is `grown - total`.
    #[inline(always)]
    fn insert(&mut self, entry: Entry<'b, T>, own: u64, grown: u64) {
        let id = usize::from(entry.id);
        self.ids[id / 64] |= 1 << (id % 64);
        self.index_of[id] = self.entries.len() as u32;
        self.offsets[id] = entry.offset.unwrap_or(0);
        self.entries.push((entry, own));
        self.count += 1;
        self.total = grown;
    }

    /// Adds the `count` entries of ids `first..`, which continue the run after the entry inserted last (see
    /// [`Candidates::extend_run`]), each naming baseline `offset`, as more ids of that entry's run rather than
    /// entries of their own: no entry to store, sort and write for most of a datagram's unchanged entries. The
    /// section's size is `total` with them.
    #[inline(always)]
    fn extend_run(&mut self, first: usize, count: usize, offset: u16, total: u64) {
        if count == 0 {
            return;
        }
        set_bit_range(&mut self.ids, first, count);
        self.offsets[first..first + count].fill(offset);
        if let Some((head, _)) = self.entries.last_mut() {
            debug_assert_eq!(usize::from(head.id) + usize::from(head.run) + 1, first);
            head.run += count as u16;
        }
        self.count += count;
        self.total = total;
    }

    /// The chosen entries and their bit-packed sizes, ascending by id.
    fn sorted_with_bits(&self) -> impl Iterator<Item = &(Entry<'b, T>, u64)> + '_ {
        let mut word = 0;
        let mut bits = self.ids.first().copied().unwrap_or(0);
        std::iter::from_fn(move || {
            while bits == 0 {
                word += 1;
                bits = *self.ids.get(word)?;
            }
            let id = word * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let entry = self.entries.get(self.index_of[id] as usize)?;
            // The ids of its run are no entries of their own: the walk goes on after them.
            if entry.0.run > 0 {
                let next = id + usize::from(entry.0.run) + 1;
                word = next / 64;
                bits = self
                    .ids
                    .get(word)
                    .map_or(0, |w| w & !((1u64 << (next % 64)) - 1));
            }
            Some(entry)
        })
    }

    /// The chosen entries in the order they were chosen.
    fn in_priority_order(&self) -> impl Iterator<Item = &Entry<'b, T>> + '_ {
        self.entries.iter().map(|(e, _)| e)
    }

    /// The chosen entries, ascending by id.
    fn sorted(&self) -> impl Iterator<Item = &Entry<'b, T>> + '_ {
        self.sorted_with_bits().map(|(e, _)| e)
    }

    /// Drops the last-chosen (lowest-priority) entries until their bit-packed sizes add up to `bits` and at least
    /// `at_least` went (at least one), onto `dropped`: the first one dropped in priority order goes last (the
    /// next to try again).
    fn drop_lowest_priority(
        &mut self,
        dropped: &mut Vec<(Entry<'b, T>, u64)>,
        link: &LinkConfig,
        bits: f64,
        at_least: usize,
    ) {
        let mut freed = 0.0;
        let keep = self.entries.len().saturating_sub(at_least.max(1));
        while freed < bits || self.entries.len() > keep {
            let Some((e, own)) = self.entries.pop() else {
                break;
            };
            for id in usize::from(e.id)..=usize::from(e.id) + usize::from(e.run) {
                self.ids[id / 64] &= !(1 << (id % 64));
                self.offsets[id] = 0;
            }
            self.count -= 1 + usize::from(e.run);
            // An entry's own bits, plus a few for its id and baseline fields.
            freed += (own + 4) as f64;
            dropped.push((e, own));
        }
        self.total = self.recounted_total(link);
    }

    /// Bit-packed size of the section as [`write_entries`] writes the chosen entries, counted from scratch.
    fn recounted_total(&self, link: &LinkConfig) -> u64 {
        let mut total = u64::from(bits_for(u32::from(link.max_objects)));
        let mut previous: Option<u16> = None;
        let mut previous_offset = 0u16;
        for (e, own) in self.sorted_with_bits() {
            let first = previous.map_or(0, |p| i32::from(p) + 1);
            total += id_bits(link, i32::from(e.id) - first)
                + offset_bits(e.offset, previous_offset)
                + own;
            previous = Some(e.id + e.run);
            if let Some(o) = e.offset {
                previous_offset = o;
            }
            // Its run: the next ids, each with a one-bit gap, the same offset and its unchanged flag.
            total +=
                u64::from(e.run) * (id_bits(link, 0) + offset_bits(e.offset, previous_offset) + 1);
        }
        total
    }
}
/// The baseline packet `named` holds for `id` (its frame and state), or [`CodecError::MissingBaseline`]. Asks
/// `history` to load the next block after `id`'s ahead of use (see [`ReceiveHistory::prefetch_block_after`]),
/// once per block: `ahead` is the block of ids it was last asked for.
#[inline(always)]
fn named_baseline<'h, T: Copy>(
    history: &'h ReceiveHistory<T>,
    ahead: &mut usize,
    id: u16,
    named: u16,
    sequence: u16,
) -> Result<(u16, &'h T), CodecError> {
    let block = usize::from(id) / HISTORY_BLOCK;
    if block != *ahead {
        *ahead = block;
        history.prefetch_block_after(id, named, sequence);
    }
    history
        .get_ref(id, named)
        .ok_or(CodecError::MissingBaseline {
            object: id,
            sequence: named,
        })
}

/// A reading stream a section's entries are read from: a stream that codes under contexts (the range coder) may
/// read a run of plain unchanged entries at once.
trait EntrySource: Stream {
    /// Reads the plain unchanged entries that continue a run after entry `last` (at most `left`), each as
    /// [`read_section_entries`] reads one after another (the plain flag under the context after a run, the
    /// unchanged flag after an unchanged entry, `near` its nearness class), their baselines at `offset` back from
    /// `sequence` pushed to `out`, and returns how many it read. It stops before the first entry that is not one,
    /// leaving it unread. By default none: [`read_section_entries`] reads each one.
    #[allow(clippy::too_many_arguments)]
    fn unchanged_run<T: DeltaState>(
        &mut self,
        _link: &LinkConfig,
        _history: &ReceiveHistory<T>,
        _ahead: &mut usize,
        _sequence: u16,
        _offset: u16,
        _last: u16,
        _left: u32,
        _near: impl Fn(&T) -> usize,
        _out: &mut Vec<(u16, T)>,
    ) -> u32 {
        0
    }
}

impl EntrySource for BitReadStream<'_> {}

impl EntrySource for ArithReadStream<'_> {
    /// Both flags of each entry read on a copy of the decoder in locals ([`ArithReadStream::flag_run`]); none
    /// read (each read by [`read_section_entries`]) by a stream tallying costs.
    #[inline(always)]
    fn unchanged_run<T: DeltaState>(
        &mut self,
        link: &LinkConfig,
        history: &ReceiveHistory<T>,
        ahead: &mut usize,
        sequence: u16,
        offset: u16,
        last: u16,
        left: u32,
        near: impl Fn(&T) -> usize,
        out: &mut Vec<(u16, T)>,
    ) -> u32 {
        let named = sequence.wrapping_sub(offset);
        self.flag_run(|run| {
            let mut id = last;
            let mut taken = 0;
            while taken < left && i32::from(id) < link.max_id() {
                if run.flag(PLAIN[0]) != Some(true) {
                    break;
                }
                let next = id + 1;
                let Ok((_, b)) = named_baseline(history, ahead, next, named, sequence) else {
                    break;
                };
                let around = Surroundings {
                    after_change: false,
                    near: near(b),
                };
                if run.flag(unchanged_context::<Self, T>(b, around)) != Some(true) {
                    break;
                }
                run.keep();
                id = next;
                taken += 1;
                // Pushed as a default and copied in place, as any unchanged entry.
                let at = out.len();
                out.push((id, T::default()));
                if let Some(slot) = out.get_mut(at) {
                    slot.1 = *b;
                }
            }
            taken
        })
        .unwrap_or(0)
    }
}

enum Source<'a> {
    Bit(BitReadStream<'a>),
    Arith(Box<ArithReadStream<'a>>),
}

/// Reads one datagram: the header at creation, then the sections in the order they were written, then
/// [`PacketReader::finish`] to check that nothing follows.
pub struct PacketReader<'a> {
    link: LinkConfig,
    header: PacketHeader,
    backend: Backend,
    source: Source<'a>,
}

fn read_section_entries<S: EntrySource, T: DeltaState>(
    s: &mut S,
    link: &LinkConfig,
    config: &T::Config,
    sequence: u16,
    history: &ReceiveHistory<T>,
) -> Result<(u16, Vec<(u16, T)>), CodecError> {
    let mut f = 0u32;
    s.bits(FRAME, &mut f, 16)?;
    let frame = f as u16;
    let mut count = 0u32;
    s.count(ENTRY_COUNT, &mut count, u32::from(link.max_objects))?;
    // `count` is at most the link's `max_objects`; the capacity is capped lower still, so that a hostile count
    // reserves little.
    let mut out = Vec::with_capacity((count as usize).min(1024));
    let mut previous = None;
    let mut previous_gap_length = 0;
    let mut previous_offset = 0u16;
    let mut around = Surroundings::default();
    // As the writer: history predictions are corrected where the stream codes under contexts.
    let correct = S::CONTEXTS && T::uses_history(config);
    let mut neighbours = Neighbours::new();
    // The block of ids whose successor the history was last asked to load ahead.
    let mut ahead = usize::MAX;
    let mut left = count;
    while left > 0 {
        left -= 1;
        // The commonest entry of a bit-packed section, four one bits: the next id, a baseline at the offset named
        // last, unchanged. Read at once, it is its baseline; so is each entry after it that is four one bits too,
        // read in this inner loop (a run of them is most of a section).
        let next = previous.map_or(0, |p| i32::from(p) + 1);
        // The next four flags, looked at once for both of the commonest entries (this one and the changed one below)
        // where either may come; `None` on a stream that cannot look ahead, which reads every entry flag by flag.
        let flags = if !S::CONTEXTS && previous_offset != 0 && next <= link.max_id() {
            s.peek(4)
        } else {
            None
        };
        if flags == Some(0b1111) {
            s.skip(4);
            let named = sequence.wrapping_sub(previous_offset);
            // The entries after it that continue the run, up to the link's last id and within the count: their
            // flags are taken at once, then their baselines a block of the history at a time.
            let more = s.take_ones_repeated(4, left.min((link.max_id() - next) as u32));
            left -= more;
            let last = next as u16 + more as u16;
            let mut id = next as u16;
            loop {
                let end = last.min(id | (HISTORY_BLOCK - 1) as u16);
                let block = usize::from(id) / HISTORY_BLOCK;
                if block != ahead {
                    ahead = block;
                    history.prefetch_block_after(id, named, sequence);
                }
                history
                    .extend_with_run(id, end, named, &mut out)
                    .map_err(|object| CodecError::MissingBaseline {
                        object,
                        sequence: named,
                    })?;
                if end == last {
                    break;
                }
                id = end + 1;
            }
            previous = Some(last);
            previous_gap_length = 0;
            around.after_change = false;
            continue;
        }
        // The commonest changed entry of a bit-packed section, its flags 1110: the next id, a baseline at the offset
        // named last, changed. Its flags read at once, it is read as any changed entry below.
        if !T::uses_history(config) && flags == Some(0b1110) {
            s.skip(4);
            let id = next as u16;
            previous = Some(id);
            previous_gap_length = 0;
            let named = sequence.wrapping_sub(previous_offset);
            let (b_frame, b) = named_baseline(history, &mut ahead, id, named, sequence)?;
            let at = out.len();
            out.push((id, T::default()));
            let frames = frame.wrapping_sub(b_frame);
            let predicts = T::predicts(config, b, frames).then_some(frames);
            T::read_changed(s, config, &mut out[at].1, b, predicts)?;
            around.after_change = true;
            continue;
        }
        let mut plain = false;
        if let Some(next) = plain_next(S::CONTEXTS, link, previous, previous_offset) {
            s.bool(gap_context_of(&PLAIN, previous_gap_length), &mut plain)?;
            if plain {
                previous_gap_length = 0;
                previous = Some(next);
            }
        }
        let mut has = plain;
        if !plain {
            let mut id = 0u16;
            serialize_id(s, link, &mut id, previous, &mut previous_gap_length)?;
            previous = Some(id);
            s.bool(HAS_BASELINE, &mut has)?;
        }
        // Set on either branch above.
        let id = previous.unwrap_or(0);
        let mut baseline = None;
        if has {
            // A plain entry's baseline is at the offset named last.
            let mut same = plain;
            if !plain {
                s.bool(SAME_OFFSET, &mut same)?;
            }
            if !same {
                let mut o = 0i32;
                s.int(OFFSET, &mut o, 1, i32::from(MAX_BASELINE_OFFSET))?;
                previous_offset = o as u16;
            } else if previous_offset == 0 {
                return Err(CodecError::Invalid {
                    field: SAME_OFFSET.name,
                });
            }
            let named = sequence.wrapping_sub(previous_offset);
            let (b_frame, b) = named_baseline(history, &mut ahead, id, named, sequence)?;
            baseline = Some((b, b_frame, named));
        }
        let mut path = DeltaPath::Absolute;
        around.near = match baseline {
            Some((b, _, _)) if correct => neighbours.nearness(b),
            _ => 0,
        };
        // An unchanged entry (most of a section) is its baseline: pushed as a default and copied in place, as
        // above.
        if let Some((b, _, _)) = baseline
            && serialize_unchanged(s, &mut path, b, around)?
        {
            let at = out.len();
            out.push((id, T::default()));
            out[at].1 = *b;
            around.after_change = false;
            // The plain unchanged entries that continue a plain one, read at once where the stream can.
            if plain {
                let run = if correct {
                    s.unchanged_run(
                        link,
                        history,
                        &mut ahead,
                        sequence,
                        previous_offset,
                        id,
                        left,
                        |b| neighbours.nearness(b),
                        &mut out,
                    )
                } else {
                    s.unchanged_run(
                        link,
                        history,
                        &mut ahead,
                        sequence,
                        previous_offset,
                        id,
                        left,
                        |_| 0,
                        &mut out,
                    )
                };
                left -= run;
                previous = Some(id + run as u16);
            }
            continue;
        }
        // Decoded in place in the output, so that the state is copied once.
        let at = out.len();
        out.push((id, T::default()));
        let state = &mut out[at].1;
        // A changed entry of a stream that ignores contexts, against its baseline and the prediction from it alone:
        // its tags and state in one pass.
        if !S::CONTEXTS
            && !T::uses_history(config)
            && let Some((b, b_frame, _)) = baseline
        {
            let frames = frame.wrapping_sub(b_frame);
            T::read_changed(
                s,
                config,
                state,
                b,
                T::predicts(config, b, frames).then_some(frames),
            )?;
            around.after_change = true;
            continue;
        }
        // The uncorrected prediction from history, recorded for the entries after this one.
        let mut raw: Option<T> = None;
        let predict = |s: &mut S| {
            let Some((b, b_frame, named)) = baseline else {
                return Ok(Prediction::None);
            };
            let frames = frame.wrapping_sub(b_frame);
            if T::uses_history(config) {
                let mut older = None;
                serialize_older(s, &mut older)?;
                if let Some(gap) = older {
                    let sequence = named.wrapping_sub(gap);
                    let o = history
                        .get(id, sequence)
                        .ok_or(CodecError::MissingBaseline {
                            object: id,
                            sequence,
                        })?;
                    let span = b_frame.wrapping_sub(o.frame);
                    raw = T::predict_from_history(config, b, frames, &o.state, span);
                    return Ok(match &raw {
                        Some(p) if correct => {
                            let (p, neighbour) = neighbours.corrected(config, b, p);
                            Prediction::corrected(p, neighbour)
                        }
                        Some(p) => Prediction::Made(*p),
                        None => Prediction::None,
                    });
                }
            }
            // Made only if the entry needs it: a residual against the baseline does not.
            Ok(if T::predicts(config, b, frames) {
                Prediction::FromBaseline(frames)
            } else {
                Prediction::None
            })
        };
        match baseline {
            // Its unchanged flag, read above, said it changed.
            Some((b, _, _)) => serialize_changed(s, config, state, &mut path, b, predict)?,
            None => serialize_entry_lazy(s, config, state, &mut path, None, around, predict)?,
        }
        if correct
            && path != DeltaPath::Unchanged
            && let (Some(p), Some((b, _, _))) = (&raw, baseline)
        {
            neighbours.record(b, p, state);
        }
        around.after_change = path != DeltaPath::Unchanged;
    }
    Ok((frame, out))
}

impl<'a> PacketReader<'a> {
    /// Reads and checks the header of `bytes`.
    pub fn new(link: &LinkConfig, bytes: &'a [u8]) -> Result<Self, CodecError> {
        if bytes.len() > link.budget_bytes.max(DEFAULT_BUDGET_BYTES) {
            return Err(CodecError::TooLarge {
                field: "datagram",
                value: bytes.len() as u64,
                limit: link.budget_bytes.max(DEFAULT_BUDGET_BYTES) as u64,
            });
        }
        let head = bytes.get(..HEADER_BYTES).ok_or(CodecError::Truncated)?;
        let mut header = PacketHeader::default();
        let mut backend = Backend::Bitpack;
        serialize_header(
            &mut BitReadStream::new(head),
            link.protocol_id,
            &mut header,
            &mut backend,
        )?;
        let payload = &bytes[HEADER_BYTES..];
        let source = match backend {
            Backend::Bitpack => Source::Bit(BitReadStream::new(payload)),
            Backend::Arith => Source::Arith(Box::new(ArithReadStream::new(payload)?)),
        };
        Ok(Self {
            link: *link,
            header,
            backend,
            source,
        })
    }

    /// The packet's header.
    pub fn header(&self) -> &PacketHeader {
        &self.header
    }

    /// The back end the sender used.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Starts tallying what each field cost with the range coder (see [`FieldCosts`]); a no-op for bit-packed
    /// datagrams. For benchmarks: it slows the decoder.
    pub fn track_costs(&mut self) {
        if let Source::Arith(s) = &mut self.source {
            s.track_costs();
        }
    }

    /// The range coder's tally since [`PacketReader::track_costs`].
    pub fn costs(&self) -> Option<&FieldCosts> {
        match &self.source {
            Source::Arith(s) => s.costs(),
            Source::Bit(_) => None,
        }
    }

    /// Reads the next section as entries of type `T`, decoding each against the baseline named in `history`. On
    /// success the decoded states are stored in `history` under this packet's sequence and returned with the
    /// sender's frame; on error nothing is stored.
    pub fn read_section<T: DeltaState>(
        &mut self,
        config: &T::Config,
        history: &mut ReceiveHistory<T>,
    ) -> Result<(u16, Vec<(u16, T)>), CodecError> {
        let (frame, entries) = self.read_section_unstored(config, history)?;
        history.insert_packet(self.header.sequence, frame, &entries);
        Ok((frame, entries))
    }

    /// [`PacketReader::read_section`] without storing the states: for a datagram of several sections that is
    /// accepted only whole, whose reader stores each section's states
    /// ([`ReceiveHistory::insert_packet`] under the header's sequence) once every section and
    /// [`PacketReader::finish`] have passed, so that a datagram rejected part way stores nothing.
    pub fn read_section_unstored<T: DeltaState>(
        &mut self,
        config: &T::Config,
        history: &ReceiveHistory<T>,
    ) -> Result<(u16, Vec<(u16, T)>), CodecError> {
        let sequence = self.header.sequence;
        match &mut self.source {
            Source::Bit(s) => read_section_entries(s, &self.link, config, sequence, history),
            Source::Arith(s) => {
                s.use_priors(T::priors(config));
                read_section_entries(s.as_mut(), &self.link, config, sequence, history)
            }
        }
    }

    /// Checks that the datagram ends where its last section did: anything after it (beyond the bit-packed
    /// stream's zero padding) is [`CodecError::Invalid`], since a sender never writes it.
    pub fn finish(self) -> Result<(), CodecError> {
        match self.source {
            Source::Bit(s) => s.finish(),
            Source::Arith(s) => s.finish(),
        }
    }
}

/// A datagram and the objects it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPacket {
    /// The bytes to send.
    pub bytes: Vec<u8>,
    /// The ids included, ascending (the order written): pass them to the priority accumulator's `mark_sent`.
    pub included: Vec<u16>,
}

/// Encodes a datagram of one section: `header`, then objects from `order` while `link.budget_bytes` lasts, each
/// against its acked baseline in `tracker` (which records what was sent).
pub fn encode_packet<T: DeltaState>(
    link: &LinkConfig,
    config: &T::Config,
    header: PacketHeader,
    frame: u16,
    order: &[u16],
    state_of: impl FnMut(u16) -> Option<T>,
    tracker: &mut AckTracker<T>,
) -> Result<EncodedPacket, CodecError> {
    let mut w = PacketWriter::new(link, header)?;
    let included = w.write_section(config, tracker, frame, order, state_of)?;
    Ok(EncodedPacket {
        bytes: w.finish(),
        included,
    })
}

/// A decoded datagram of one section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedPacket<T> {
    /// Its header.
    pub header: PacketHeader,
    /// The sender's frame when it wrote the section.
    pub frame: u16,
    /// The objects and their states.
    pub entries: Vec<(u16, T)>,
}

/// Decodes a datagram written by [`encode_packet`], storing the states in `history`.
pub fn decode_packet<T: DeltaState>(
    link: &LinkConfig,
    config: &T::Config,
    bytes: &[u8],
    history: &mut ReceiveHistory<T>,
) -> Result<DecodedPacket<T>, CodecError> {
    let mut r = PacketReader::new(link, bytes)?;
    let (frame, entries) = r.read_section(config, history)?;
    let header = *r.header();
    r.finish()?;
    Ok(DecodedPacket {
        header,
        frame,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::plan;
    use crate::encode::StateConfig;
    use crate::header::ReceivedPackets;
    use crate::priority::PriorityAccumulator;
    use crate::quant::QuantizedRotation;
    use crate::state::{AvatarState, BodyState, ObjectState};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::cell::Cell;

    thread_local! {
        /// The passes the last range-coded section written on this thread took.
        pub(super) static ARITH_PASSES: Cell<usize> = const { Cell::new(0) };
    }

    /// Objects under integer ballistic motion with random kicks and floor bounces; a quarter of them rest.
    struct World {
        rng: ChaCha8Rng,
        states: Vec<ObjectState>,
        config: StateConfig,
    }

    impl World {
        fn new(seed: u64, n: usize) -> Self {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let config = StateConfig::default();
            let states = (0..n)
                .map(|i| {
                    let at_rest = i % 4 == 0;
                    let p = [
                        rng.random_range(-20.0..20.0),
                        rng.random_range(0.5..10.0),
                        rng.random_range(-20.0..20.0),
                    ];
                    let v = [
                        rng.random_range(-3.0..3.0),
                        rng.random_range(-3.0..3.0),
                        rng.random_range(-3.0..3.0),
                    ];
                    let q = [
                        rng.random_range(-1.0..1.0),
                        0.3,
                        rng.random_range(-1.0..1.0),
                        0.8,
                    ];
                    ObjectState {
                        body: BodyState::quantize(&config.quant, p, q, v, [1.0, 0.5, 0.0], at_rest),
                        ..ObjectState::default()
                    }
                })
                .collect();
            Self {
                rng,
                states,
                config,
            }
        }

        fn step(&mut self) {
            for s in &mut self.states {
                if s.body.at_rest {
                    continue;
                }
                s.body = self
                    .config
                    .predictor
                    .predict(&self.config.quant, &s.body, 1);
                if s.body.position[1] < 0 && s.body.linear_velocity[1] < 0 {
                    s.body.linear_velocity[1] = -s.body.linear_velocity[1] * 3 / 4;
                }
                if self.rng.random_bool(0.05) {
                    s.body.linear_velocity[0] += self.rng.random_range(-40..40);
                    s.body.rotation.components[0] = (s.body.rotation.components[0] + 1).min(200);
                }
            }
        }
    }

    /// Runs a lossy session of 240 frames whose acks arrive `ack_delay` frames late, and returns the number of
    /// object states delivered (every one checked against the sender's state).
    /// A lossy session of 240 frames; returns the entries delivered. `pose_only` runs it as a pose-only link
    /// (velocities stripped before sending; the receiver must decode exactly what was sent).
    fn session(backend: Backend, seed: u64, ack_delay: usize, pose_only: bool) -> usize {
        let link = LinkConfig {
            backend,
            ..LinkConfig::default()
        };
        let mut world = World::new(seed, 400);
        let config = StateConfig {
            pose_only,
            ..world.config
        };
        let sent = |s: ObjectState| {
            if pose_only {
                ObjectState {
                    body: s.body.without_velocities(),
                    ..s
                }
            } else {
                s
            }
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xFF);
        let mut tracker = AckTracker::new(link.max_objects);
        let mut history = ReceiveHistory::new(link.max_objects);
        let mut received = ReceivedPackets::new();
        let mut priorities = PriorityAccumulator::new(400);
        let mut delivered = 0;
        let mut late_packets = 0;
        let mut acks_in_flight = std::collections::VecDeque::new();
        for frame in 0..240u16 {
            world.step();
            let mut p = vec![1.0; 400];
            p[0] = -1.0;
            priorities.add_all(&p);
            let order = priorities.order();
            let header = PacketHeader {
                packet_type: 3,
                sequence: frame.wrapping_add(65500),
                ..PacketHeader::default()
            };
            let packet = encode_packet(
                &link,
                &config,
                header,
                frame,
                &order,
                |id| world.states.get(usize::from(id)).copied().map(sent),
                &mut tracker,
            )
            .unwrap();
            assert!(packet.bytes.len() <= link.budget_bytes);
            assert!(!packet.included.contains(&0));
            priorities.mark_sent(&packet.included);
            if rng.random_bool(0.25) {
                continue;
            }
            let decoded =
                decode_packet::<ObjectState>(&link, &config, &packet.bytes, &mut history).unwrap();
            assert_eq!(decoded.header, header);
            assert_eq!(decoded.frame, frame);
            let ids: Vec<u16> = decoded.entries.iter().map(|e| e.0).collect();
            assert_eq!(ids, packet.included);
            for (id, state) in &decoded.entries {
                assert_eq!(
                    *state,
                    sent(world.states[usize::from(*id)]),
                    "object {id} at frame {frame}"
                );
            }
            delivered += decoded.entries.len();
            if frame >= 120 {
                late_packets += 1;
            }
            received.record(header.sequence);
            if rng.random_bool(0.75) {
                acks_in_flight.push_back((frame, received.ack().unwrap()));
            }
            while acks_in_flight
                .front()
                .is_some_and(|(sent, _)| usize::from(frame - sent) >= ack_delay)
            {
                if let Some((_, (ack, bits))) = acks_in_flight.pop_front() {
                    tracker.process_acks(ack, bits);
                }
            }
        }
        assert!(late_packets > 60);
        delivered
    }

    /// Writes a lossy seeded session twice, once through [`PacketWriter::write_section`] and once through
    /// [`PacketWriter::write_section_revised`] with each object's revision the frame of its last change (as a world
    /// notes it once per step), acking both trackers alike, and checks that every datagram is the same bytes.
    /// Some resting objects flip a field back and forth (a state that changed and changed back: a new revision,
    /// the baseline's state), and some are skipped now and then. Returns the `state_of` calls of each writer.
    fn revised_session(backend: Backend, budget_bytes: usize, seed: u64) -> (usize, usize) {
        let link = LinkConfig {
            backend,
            budget_bytes,
            ..LinkConfig::default()
        };
        let n = 300;
        let mut world = World::new(seed, n);
        let config = world.config;
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5EED);
        let (mut plain, mut revised) = (
            AckTracker::new(link.max_objects),
            AckTracker::new(link.max_objects),
        );
        let mut history = ReceiveHistory::new(link.max_objects);
        let mut received = ReceivedPackets::new();
        let mut priorities = PriorityAccumulator::new(n);
        let mut last_change = vec![0u64; n];
        let mut previous = world.states.clone();
        let (mut plain_calls, mut revised_calls) = (0, 0);
        // Blocks of ten neighbours that never move: runs of known unchanged entries.
        let still = world.states.clone();
        for frame in 0..200u16 {
            world.step();
            for (i, s) in world.states.iter_mut().enumerate() {
                if i % 30 < 10 {
                    *s = still[i];
                }
                if i % 8 == 4 {
                    s.authority = u8::from(frame / 3 % 2 == 0);
                }
            }
            for (i, (now, before)) in world.states.iter().zip(&previous).enumerate() {
                if now != before {
                    last_change[i] = u64::from(frame);
                }
            }
            previous.clone_from(&world.states);
            let skipped = |id: u16| id % 50 == 7 && frame % 2 == 1;
            priorities.add_all(&vec![1.0; n]);
            // Every other frame, the objects that moved first and then the others ascending, as a datagram filled
            // with what changed orders them: runs of known unchanged entries up to the budget's edge. Every sixth,
            // blocks of ten ids from the last block down: runs that end where the next block's entry begins, so
            // that the entry that heads a run continues the run before it on the wire.
            let order = if frame % 6 == 3 {
                (0..n as u16)
                    .rev()
                    .collect::<Vec<_>>()
                    .chunks(10)
                    .flat_map(|c| c.iter().rev().copied())
                    .collect()
            } else if frame % 2 == 0 {
                priorities.order()
            } else {
                let (mut moved, rest): (Vec<u16>, Vec<u16>) =
                    (0..n as u16).partition(|&id| last_change[usize::from(id)] == u64::from(frame));
                moved.extend(rest);
                moved
            };
            let header = PacketHeader {
                packet_type: 3,
                sequence: frame.wrapping_add(65400),
                ..PacketHeader::default()
            };
            let write = |tracker: &mut AckTracker<ObjectState>,
                         revisions: bool,
                         calls: &mut usize| {
                let mut w = PacketWriter::new(&link, header).unwrap();
                let state_of = |id: u16| {
                    *calls += 1;
                    (!skipped(id)).then(|| world.states[usize::from(id)])
                };
                let ids = if revisions {
                    let revision_of =
                        |id: u16| (!skipped(id)).then(|| last_change[usize::from(id)]);
                    w.write_section_revised(&config, tracker, frame, &order, state_of, revision_of)
                } else {
                    w.write_section(&config, tracker, frame, &order, state_of)
                }
                .unwrap();
                (w.finish(), ids)
            };
            let (bytes, ids) = write(&mut plain, false, &mut plain_calls);
            assert!(
                write(&mut revised, true, &mut revised_calls) == (bytes.clone(), ids.clone()),
                "{backend:?} {budget_bytes} bytes, seed {seed}, frame {frame}"
            );
            priorities.mark_sent(&ids);
            if rng.random_bool(0.2) {
                continue;
            }
            let decoded =
                decode_packet::<ObjectState>(&link, &config, &bytes, &mut history).unwrap();
            for (id, state) in &decoded.entries {
                assert_eq!(*state, world.states[usize::from(*id)]);
            }
            received.record(header.sequence);
            if rng.random_bool(0.7) {
                let (ack, bits) = received.ack().unwrap();
                plain.process_acks(ack, bits);
                revised.process_acks(ack, bits);
            }
        }
        (plain_calls, revised_calls)
    }

    #[test]
    fn revised_sections_are_the_bytes_of_compared_ones() {
        // The whole budget, and one that cuts the range-coded sections short too.
        for (backend, budget) in [
            (Backend::Bitpack, DEFAULT_BUDGET_BYTES),
            (Backend::Arith, DEFAULT_BUDGET_BYTES),
            (Backend::Bitpack, 300),
            (Backend::Arith, 300),
        ] {
            for seed in 1..=3 {
                let (plain, revised) = revised_session(backend, budget, seed);
                // Resting objects (a quarter, some flipping a field) are drawn known unchanged, without their
                // states: most of them under the whole budget.
                let share = if budget == DEFAULT_BUDGET_BYTES {
                    9
                } else {
                    10
                };
                assert!(
                    revised * 10 < plain * share,
                    "{backend:?} {budget} bytes, seed {seed}: {revised} of {plain}"
                );
            }
        }
    }

    #[test]
    fn a_run_of_resting_entries_costs_a_few_bits() {
        // A section naming every object again, none changed since its baseline (a resting scene, as a pose-only
        // link sends it): each entry after the first is one plain-entry decision and its unchanged flag. Then the
        // same objects with every third id left out: the gaps go through the id code, the rest stay plain.
        let link = LinkConfig {
            backend: Backend::Arith,
            ..LinkConfig::default()
        };
        let world = World::new(3, 901);
        let mut tracker = AckTracker::new(link.max_objects);
        let mut history = ReceiveHistory::new(link.max_objects);
        let every: Vec<u16> = (0..901).collect();
        let gapped: Vec<u16> = (0..901).filter(|id| id % 3 != 1).collect();
        let mut sizes = Vec::new();
        // First every object's absolute state, a packet's worth at a time, then every object against a baseline
        // (at several offsets), then the two measured sections.
        let mut unsent = every.clone();
        let mut sequence = 0u16;
        while !unsent.is_empty() {
            let p = encode_packet(
                &link,
                &world.config,
                PacketHeader {
                    sequence,
                    ..PacketHeader::default()
                },
                sequence,
                &unsent,
                |id| world.states.get(usize::from(id)).copied(),
                &mut tracker,
            )
            .unwrap();
            decode_packet::<ObjectState>(&link, &world.config, &p.bytes, &mut history).unwrap();
            tracker.process_acks(sequence, 0);
            unsent.retain(|id| !p.included.contains(id));
            sequence += 1;
        }
        for order in [&every, &every, &gapped] {
            let p = encode_packet(
                &link,
                &world.config,
                PacketHeader {
                    sequence,
                    ..PacketHeader::default()
                },
                sequence,
                order,
                |id| world.states.get(usize::from(id)).copied(),
                &mut tracker,
            )
            .unwrap();
            assert_eq!(p.included, *order);
            let d =
                decode_packet::<ObjectState>(&link, &world.config, &p.bytes, &mut history).unwrap();
            for (id, state) in &d.entries {
                assert_eq!(*state, world.states[usize::from(*id)]);
            }
            tracker.process_acks(sequence, 0);
            sizes.push(p.bytes.len() - HEADER_BYTES);
            sequence += 1;
        }
        // Measured: 5 bytes for the 901 resting entries (0.04 bits each, the section's frame and count included;
        // 6 before the plain flag), 158 for the 601 with a gap after every other entry (153 before).
        assert!(sizes[1] <= 6, "{sizes:?}");
        assert!(sizes[2] <= 165, "{sizes:?}");
    }

    /// Sessions of objects that mostly hold still (a full-state link, and a pose-only one, whose runs take the
    /// nearness of changed neighbours), each datagram written and read twice: by a writer and a reader that take
    /// runs of plain unchanged entries at once, and by ones tallying costs, which take each entry's flags one by
    /// one. Both write the same bytes and read the states sent.
    #[test]
    fn runs_of_plain_unchanged_entries_code_as_entry_by_entry() {
        let link = LinkConfig {
            backend: Backend::Arith,
            ..LinkConfig::default()
        };
        for (pose_only, seed) in [(false, 3), (false, 8), (true, 5), (true, 12)] {
            let mut world = World::new(seed, 700);
            let config = StateConfig {
                pose_only,
                ..world.config
            };
            let sent = |s: ObjectState| {
                if pose_only {
                    ObjectState {
                        body: s.body.without_velocities(),
                        ..s
                    }
                } else {
                    s
                }
            };
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let order: Vec<u16> = (0..700).collect();
            let mut trackers = [
                AckTracker::new(link.max_objects),
                AckTracker::new(link.max_objects),
            ];
            let mut histories = [
                ReceiveHistory::new(link.max_objects),
                ReceiveHistory::new(link.max_objects),
            ];
            for frame in 0..40u16 {
                // About one object in twelve moves a little (the moving ones in a block of ids more often, so
                // that changed entries come near each other); the rest hold still, at rest or not.
                for (i, s) in world.states.iter_mut().enumerate() {
                    let odds = if (200..260).contains(&i) { 0.5 } else { 0.06 };
                    if rng.random_bool(odds) {
                        s.body.position[0] += rng.random_range(1..40);
                        s.body.position[2] -= rng.random_range(0..3);
                    }
                }
                let header = PacketHeader {
                    packet_type: 3,
                    sequence: frame,
                    ..PacketHeader::default()
                };
                let mut datagrams = Vec::new();
                for (tally, tracker) in [false, true].into_iter().zip(&mut trackers) {
                    let mut w = PacketWriter::new(&link, header).unwrap();
                    if tally {
                        w.track_costs();
                    }
                    w.write_section(&config, tracker, frame, &order, |id| {
                        Some(sent(world.states[usize::from(id)]))
                    })
                    .unwrap();
                    datagrams.push(w.finish());
                }
                assert_eq!(
                    datagrams[0], datagrams[1],
                    "{pose_only} {seed}, frame {frame}"
                );
                for (tally, history) in [false, true].into_iter().zip(&mut histories) {
                    let mut r = PacketReader::new(&link, &datagrams[0]).unwrap();
                    if tally {
                        r.track_costs();
                    }
                    let (_, entries) = r.read_section::<ObjectState>(&config, history).unwrap();
                    r.finish().unwrap();
                    // Once every object has a baseline (the first datagrams carry states in full), most fit.
                    assert!(
                        frame < 20 || entries.len() > 300,
                        "{pose_only} {seed} {frame}: {}",
                        entries.len()
                    );
                    for (id, state) in entries {
                        assert_eq!(state, sent(world.states[usize::from(id)]), "frame {frame}");
                    }
                }
                // Acks lost now and then, the same for both senders.
                if rng.random_bool(0.7) {
                    for t in &mut trackers {
                        t.process_acks(frame, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn range_coded_entries_take_the_path_the_range_coder_prices_cheapest() {
        // Moving bodies 6 frames past their baselines, each pushed off its predicted course: the bit-packed plan
        // and the range coder's models disagree on some of them (on the katamari ladder about one changed entry
        // in nine).
        let link = LinkConfig {
            backend: Backend::Arith,
            ..LinkConfig::default()
        };
        let config = StateConfig::default();
        let mut world = World::new(3, 120);
        let baselines: Vec<Baseline<ObjectState>> = world
            .states
            .iter()
            .map(|&state| Baseline {
                sequence: 1,
                frame: 0,
                state,
            })
            .collect();
        for _ in 0..6 {
            world.step();
        }
        // Half the moving bodies stopped part of the way between their baselines and their predictions (a
        // contact), at fractions from none to all of it: around half way the residual against the baseline and
        // the one against the prediction cost about the same, and the models decide.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for (i, (s, b)) in world.states.iter_mut().zip(&baselines).enumerate() {
            let Some(p) = ObjectState::predict(&config, &b.state, 6) else {
                continue;
            };
            if s.body.at_rest || i % 2 == 0 {
                continue;
            }
            let part = (i / 2 % 16) as i32;
            s.body = b.state.body;
            for k in 0..3 {
                let moved = p.body.position[k] - b.state.body.position[k];
                s.body.position[k] += moved * part / 16 + rng.random_range(-2..=2);
                let slowed = p.body.linear_velocity[k] - b.state.body.linear_velocity[k];
                s.body.linear_velocity[k] += slowed * part / 16 + rng.random_range(-2..=2);
            }
        }
        let mut values = Vec::new();
        let planned: Vec<Entry<ObjectState>> = baselines
            .iter()
            .zip(&world.states)
            .enumerate()
            .map(|(id, (b, &state))| {
                let prediction = ObjectState::predict(&config, &b.state, 6);
                let index = prediction.map(|p| {
                    values.push(p);
                    values.len() as u32 - 1
                });
                let (planned, gap) =
                    plan_with_residual_gap(&config, &state, Some(&b.state), prediction.as_ref())
                        .unwrap();
                Entry {
                    id: id as u16,
                    offset: Some(1),
                    older: None,
                    path: planned.path,
                    decided: decided(planned.path, gap),
                    state: {
                        values.push(state);
                        values.len() as u32 - 1
                    },
                    prediction: index,
                    baseline: Some(b),
                    run: 0,
                    packed: NOT_PACKED,
                }
            })
            .collect();
        let write = |priced: bool| {
            let mut s = ArithWriteStream::new();
            let mut paths = vec![None; usize::from(link.max_objects)];
            write_entries(
                &mut s,
                &link,
                &config,
                &values,
                &planned,
                priced.then_some(&mut paths[..]),
            )
            .unwrap();
            (s.finish(), paths)
        };
        let (by_plan, _) = write(false);
        let (by_price, paths) = write(true);
        let differ = planned
            .iter()
            .filter(|e| paths[usize::from(e.id)].is_some_and(|p| p != e.path))
            .count();
        assert!(
            differ > 0,
            "no entry where the two back ends' choices differ"
        );
        assert!(
            by_price.len() < by_plan.len(),
            "priced {} bytes, planned {} bytes",
            by_price.len(),
            by_plan.len()
        );
        // That the decoder follows the paths taken is what the range-coded sessions below check.
    }

    /// [`cheapest_path`] as it was before a path's pricing stopped at the price of a cheaper one: every possible
    /// path priced to its end.
    fn cheapest_path_priced_in_full<T: DeltaState>(
        pricing: ArithPricing<'_>,
        config: &T::Config,
        values: &[T],
        e: &Entry<'_, T>,
        against: &Against<T>,
        around: Surroundings,
    ) -> DeltaPath {
        let Some(base) = e.baseline else {
            return e.path;
        };
        if e.path == DeltaPath::Unchanged || (!against.corrected && e.decided) {
            return e.path;
        }
        let state = *e.state(values);
        let prediction = against.prediction;
        let mut best: Option<(f64, DeltaPath)> = None;
        for path in [
            DeltaPath::Predicted,
            DeltaPath::PredictionError,
            DeltaPath::Delta,
            DeltaPath::Absolute,
        ] {
            let possible = match path {
                DeltaPath::Predicted => prediction == Some(state),
                DeltaPath::PredictionError => prediction.is_some(),
                DeltaPath::Absolute => e.path == DeltaPath::Absolute || best.is_none(),
                _ => true,
            };
            if !possible {
                continue;
            }
            let mut p = pricing;
            let (mut state, mut taken) = (state, path);
            let priced = serialize_entry_lazy(
                &mut p,
                config,
                &mut state,
                &mut taken,
                Some(&base.state),
                around,
                |_| Ok(against.handed()),
            );
            if priced.is_ok() && best.is_none_or(|(b, _)| p.priced_bits() < b) {
                best = Some((p.priced_bits(), path));
            }
        }
        best.map_or(e.path, |(_, path)| path)
    }

    #[test]
    fn a_path_priced_until_it_cannot_win_is_the_path_priced_in_full() {
        // Seeded bodies 1 to 8 frames past their baselines, some stopped part of the way to their predictions (the
        // close calls the range coder prices), written one after another so that the models learn: before each
        // changed entry, the path chosen with each path priced only until it reaches the cheapest so far is the
        // path chosen with every path priced in full.
        let config = StateConfig::default();
        let (mut priced, mut switched) = (0, 0);
        for seed in 0..6 {
            let mut world = World::new(seed, 200);
            let baselines: Vec<Baseline<ObjectState>> = world
                .states
                .iter()
                .map(|&state| Baseline {
                    sequence: 1,
                    frame: 0,
                    state,
                })
                .collect();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            for frames in 1..=8u16 {
                world.step();
                let mut values = Vec::new();
                let mut entries = Vec::new();
                for (id, (b, &now)) in baselines.iter().zip(&world.states).enumerate() {
                    let prediction = ObjectState::predict(&config, &b.state, frames);
                    let mut state = now;
                    if let Some(p) = prediction
                        && !state.body.at_rest
                        && id % 2 == 1
                    {
                        let part = rng.random_range(0..=16);
                        state.body = b.state.body;
                        for k in 0..3 {
                            let moved = p.body.position[k] - b.state.body.position[k];
                            state.body.position[k] += moved * part / 16 + rng.random_range(-2..=2);
                            let slowed =
                                p.body.linear_velocity[k] - b.state.body.linear_velocity[k];
                            state.body.linear_velocity[k] +=
                                slowed * part / 16 + rng.random_range(-2..=2);
                        }
                        let quant = &config.quant;
                        state.body.position = quant.position.clamp(state.body.position);
                        state.body.linear_velocity =
                            quant.linear_velocity.clamp(state.body.linear_velocity);
                    }
                    let index = prediction.map(|p| {
                        values.push(p);
                        values.len() as u32 - 1
                    });
                    let (planned, gap) = plan_with_residual_gap(
                        &config,
                        &state,
                        Some(&b.state),
                        prediction.as_ref(),
                    )
                    .unwrap();
                    values.push(state);
                    entries.push(Entry {
                        id: id as u16,
                        offset: Some(1),
                        older: None,
                        path: planned.path,
                        decided: decided(planned.path, gap),
                        state: values.len() as u32 - 1,
                        prediction: index,
                        baseline: Some(b),
                        run: 0,
                        packed: NOT_PACKED,
                    });
                }
                let mut s = ArithWriteStream::new();
                let mut around = Surroundings::default();
                for e in &entries {
                    let against = Against {
                        prediction: e.prediction(&values).copied(),
                        neighbour: 0,
                        corrected: false,
                    };
                    let full = cheapest_path_priced_in_full(
                        s.pricing(),
                        &config,
                        &values,
                        e,
                        &against,
                        around,
                    );
                    let path = cheapest_path(s.pricing(), &config, &values, e, &against, around);
                    assert_eq!(
                        path, full,
                        "entry {} at {frames} frames (seed {seed})",
                        e.id
                    );
                    let contested = e.path != DeltaPath::Unchanged && !e.decided;
                    priced += usize::from(contested);
                    switched += usize::from(contested && path != e.path);
                    serialize_entry_body(
                        &mut s, &config, &values, e, &against, path, 1, around, false,
                    )
                    .unwrap();
                    around.after_change = path != DeltaPath::Unchanged;
                }
            }
        }
        assert!(
            priced >= 300 && switched >= 15,
            "{priced} entries priced, {switched} off their planned path"
        );
    }

    #[test]
    fn a_decided_plan_is_the_path_the_residual_sizes_decide() {
        // Bodies under random kicks 1 to 8 frames past their baselines: wherever the plan marks an entry decided,
        // sizing the two residuals again (what the range-coded writer did for every changed entry) returns the
        // planned path without pricing, and wherever it does not, they lie close or one is missing.
        let config = StateConfig::default();
        let (mut decided_entries, mut close) = (0, 0);
        for seed in 0..4 {
            let mut world = World::new(seed, 200);
            let baselines = world.states.clone();
            for frames in 1..=8u16 {
                world.step();
                for (now, base) in world.states.iter().zip(&baselines) {
                    let prediction = ObjectState::predict(&config, base, frames);
                    let (planned, gap) =
                        plan_with_residual_gap(&config, now, Some(base), prediction.as_ref())
                            .unwrap();
                    let sized = prediction.filter(|p| p != now).and_then(|p| {
                        Some((
                            ObjectState::residual_bits(&config, now, &p)?,
                            ObjectState::residual_bits(&config, now, base)?,
                        ))
                    });
                    let by_sizes = match sized {
                        Some((a, b))
                            if matches!(
                                planned.path,
                                DeltaPath::PredictionError | DeltaPath::Delta
                            ) && a.abs_diff(b) > PRICED_MARGIN_BITS =>
                        {
                            Some(if a <= b {
                                DeltaPath::PredictionError
                            } else {
                                DeltaPath::Delta
                            })
                        }
                        _ => None,
                    };
                    let marked = decided(planned.path, gap);
                    assert_eq!(
                        marked.then_some(planned.path),
                        by_sizes,
                        "{now:?} against {base:?}"
                    );
                    decided_entries += usize::from(marked);
                    close += usize::from(!marked && sized.is_some());
                }
            }
        }
        assert!(
            decided_entries >= 1000 && close >= 50,
            "{decided_entries} decided, {close} close"
        );
    }

    #[test]
    fn lossy_session_delivers_exact_states() {
        let bitpack = session(Backend::Bitpack, 7, 0, false);
        let arith = session(Backend::Arith, 7, 0, false);
        // Absolute states alone fit about 45 to a packet; delta coding must do far better once acks flow (about
        // 180 packets arrive).
        assert!(bitpack > 180 * 150, "bitpack delivered {bitpack}");
        assert!(
            arith > bitpack * 6 / 5,
            "arith {arith} vs bitpack {bitpack}"
        );
    }

    #[test]
    fn pose_only_session_delivers_exact_poses() {
        // Velocities off the wire: both back ends deliver exactly the stripped states, delta coded once acks
        // flow. (This world moves ballistically, so the full-state link, which predicts it, is not the yardstick.)
        let bitpack = session(Backend::Bitpack, 7, 0, true);
        let arith = session(Backend::Arith, 7, 0, true);
        assert!(bitpack > 180 * 150, "bitpack delivered {bitpack}");
        assert!(arith > bitpack, "arith {arith} vs bitpack {bitpack}");
    }

    /// A range-coded link carrying poses only: the pose-only tests' settings.
    fn pose_only_arith() -> (LinkConfig, StateConfig) {
        let link = LinkConfig {
            backend: Backend::Arith,
            ..LinkConfig::default()
        };
        let config = StateConfig {
            pose_only: true,
            ..StateConfig::default()
        };
        (link, config)
    }

    /// Sends `at(id, frame)` for every id of `order` over a pose-only range-coded link, frames 0 to `last`, each
    /// acked `ack_delay` frames later; every datagram must decode to exactly what was sent. Returns the bytes of
    /// the datagrams from frame `counted_from` on.
    fn pose_only_round_trip(
        order: &[u16],
        last: u16,
        ack_delay: u16,
        counted_from: u16,
        at: impl Fn(u16, u16) -> ObjectState,
    ) -> usize {
        let (link, config) = pose_only_arith();
        let mut tracker = AckTracker::new(link.max_objects);
        let mut history = ReceiveHistory::new(link.max_objects);
        let mut bytes = 0;
        for frame in 0..=last {
            let header = PacketHeader {
                packet_type: 3,
                sequence: frame,
                ..PacketHeader::default()
            };
            let packet = encode_packet(
                &link,
                &config,
                header,
                frame,
                order,
                |id| Some(at(id, frame)),
                &mut tracker,
            )
            .unwrap();
            if frame >= ack_delay {
                tracker.process_acks(frame - ack_delay, 0);
            }
            let decoded =
                decode_packet::<ObjectState>(&link, &config, &packet.bytes, &mut history).unwrap();
            assert_eq!(decoded.entries.len(), order.len(), "frame {frame}");
            assert!(
                decoded.entries.iter().all(|&(id, s)| s == at(id, frame)),
                "frame {frame}"
            );
            if frame >= counted_from {
                bytes += packet.bytes.len();
            }
        }
        bytes
    }

    #[test]
    fn pose_only_entries_extrapolate_from_an_older_acked_state() {
        // 200 objects sliding at steady, different speeds; a pose-only link sends them every frame. One sender has
        // frames 0 to 6 acked, the other only frame 6: coding frame 12, the first extrapolates from frames 0 and
        // 6, the second can only send deltas from frame 6. The receiver holds every frame.
        let (link, config) = pose_only_arith();
        let at = |id: u16, frame: u16| {
            let (i, t) = (i32::from(id), i32::from(frame));
            ObjectState {
                body: BodyState {
                    position: [
                        i * 150 + t * (i % 50),
                        500 + t * (i % 7),
                        -i * 100 - t * (i % 30),
                    ],
                    rotation: QuantizedRotation {
                        largest: 3,
                        components: [t * (i % 5), -t * (i % 3), 100],
                    },
                    ..BodyState::default()
                },
                ..ObjectState::default()
            }
        };
        let order: Vec<u16> = (0..200).collect();
        let mut with_older = AckTracker::new(link.max_objects);
        let mut without = AckTracker::new(link.max_objects);
        let mut history = ReceiveHistory::new(link.max_objects);
        let header = |sequence: u16| PacketHeader {
            packet_type: 3,
            sequence,
            ..PacketHeader::default()
        };
        let mut sizes = [0usize; 2];
        for frame in 0..=12u16 {
            for (k, tracker) in [&mut with_older, &mut without].into_iter().enumerate() {
                let packet = encode_packet(
                    &link,
                    &config,
                    header(frame),
                    frame,
                    &order,
                    |id| Some(at(id, frame)),
                    tracker,
                )
                .unwrap();
                if k == 0 || frame == 6 {
                    tracker.process_acks(frame, 0);
                }
                let mut h = history.clone();
                let decoded =
                    decode_packet::<ObjectState>(&link, &config, &packet.bytes, &mut h).unwrap();
                assert!(decoded.entries.iter().all(|&(id, s)| s == at(id, frame)));
                if k == 0 {
                    history = h;
                }
                sizes[k] = packet.bytes.len();
            }
        }
        assert!(
            sizes[0] * 3 < sizes[1],
            "bytes with an older state {}, without {}",
            sizes[0],
            sizes[1]
        );
    }

    #[test]
    fn pose_only_rotations_that_keep_components_round_trip() {
        // Cubes turning on some smallest-three components and holding others, at the components' extremes too
        // (±255, where a quaternion component is 1/√2): both ends predict a held component unchanged from the two
        // acked states, so every entry decodes to exactly what was sent, along prediction errors and perfect
        // predictions alike.
        let held = [0, 255, -255, 181, -1];
        let at = |id: u16, frame: u16| {
            let (i, t) = (i32::from(id), i32::from(frame));
            let c = |k: i32| {
                if (i >> k) & 1 == 0 {
                    held[((i + k) % 5) as usize]
                } else {
                    (t * (i % 4 + 1) - 120 + k * 40).clamp(-180, 180)
                }
            };
            ObjectState {
                body: BodyState {
                    position: [i * 150 + t * (i % 9), 500, -i * 100],
                    rotation: QuantizedRotation {
                        largest: (i % 4) as u8,
                        components: [c(0), c(1), c(2)],
                    },
                    ..BodyState::default()
                },
                ..ObjectState::default()
            }
        };
        let order: Vec<u16> = (0..64).collect();
        pose_only_round_trip(&order, 24, 0, 0, at);
    }

    #[test]
    fn a_pile_shoved_together_round_trips_with_neighbour_corrections() {
        // A 10 x 10 pile of cubes 200 steps apart, shoved as one (the shove changes every few frames, so the
        // extrapolation misses every cube by about the same amount: the neighbour correction's case), each with a
        // jitter of its own; a row rests against the quantizer's upper bound and one at its lower bound (the
        // corrected prediction is clamped there), and a few are pinned in place. Every entry must decode to exactly
        // what was sent, and the corrections must pay: the pile costs less than the same cubes shoved apart.
        let (_, config) = pose_only_arith();
        let max = config.quant.position.axes.map(|a| a.max_index);
        let min = config.quant.position.axes.map(|a| a.min_index);
        let shove = |t: i32| {
            [
                (t / 3 % 4) * 9 - 12,
                (t / 5 % 3) * 4 - 4,
                7 - (t / 4 % 5) * 3,
            ]
        };
        let at = |id: u16, frame: u16, apart: bool| {
            let (i, t) = (i32::from(id), i32::from(frame));
            let push = if apart { shove(t + i * 7) } else { shove(t) };
            let jitter = [
                (i * 7 + t) % 3 - 1,
                (i * 5 + t * 3) % 3 - 1,
                (i + t * 2) % 3 - 1,
            ];
            let mut position =
                [0usize, 1, 2].map(|k| (i % 10 + 10 * k as i32) * 200 + push[k] * t + jitter[k]);
            match i {
                0..=9 => position[0] = max[0],
                10..=19 => position[2] = min[2],
                20..=22 => position = [i * 200, 500, -4000],
                _ => {}
            }
            ObjectState {
                body: BodyState {
                    position: config.quant.position.clamp(position),
                    rotation: QuantizedRotation {
                        largest: 3,
                        components: [0, (i % 3) * 10, 0],
                    },
                    ..BodyState::default()
                },
                ..ObjectState::default()
            }
        };
        let order: Vec<u16> = (0..100).collect();
        let run =
            |apart: bool| pose_only_round_trip(&order, 40, 3, 20, |id, frame| at(id, frame, apart));
        let (together, apart) = (run(false), run(true));
        assert!(together < apart, "{together} bytes together, {apart} apart");
    }

    #[test]
    fn slow_acks_fall_back_to_absolute_without_errors() {
        // Acks 20 frames late still allow deltas; 80 frames late is past the baseline window, so every entry goes
        // absolute (about 45 to a packet) and nothing names a baseline the receiver dropped.
        let slow = session(Backend::Bitpack, 9, 20, false);
        let stalled = session(Backend::Bitpack, 9, 80, false);
        assert!(slow > 180 * 100, "slow {slow}");
        assert!(stalled < 180 * 55, "stalled {stalled}");
        assert!(slow > 2 * stalled);
    }

    /// A test world of `count` objects stepped once, and its states before the step as baselines.
    fn stepped_world_and_its_baselines(
        seed: u64,
        count: usize,
    ) -> (World, Vec<Baseline<ObjectState>>) {
        let mut world = World::new(seed, count);
        let before = world.states.clone();
        world.step();
        let baselines = before
            .iter()
            .map(|&state| Baseline {
                sequence: 0,
                frame: 10,
                state,
            })
            .collect();
        (world, baselines)
    }

    /// Writes `entries` with the generic writer and the one-pass bit-packed one and asserts the same bits.
    fn assert_packed_entries_are_the_generic_ones(
        link: &LinkConfig,
        config: &StateConfig,
        values: &[ObjectState],
        packed_bits: &[PackedBits],
        entries: &[Entry<'_, ObjectState>],
    ) {
        let mut generic = BitWriteStream::new();
        write_entries(&mut generic, link, config, values, entries, None).unwrap();
        let mut packed = BitWriteStream::new();
        write_entries_packed(
            &mut packed,
            link,
            config,
            values,
            packed_bits,
            entries.len(),
            entries.iter(),
        )
        .unwrap();
        assert_eq!(packed.bits_written(), generic.bits_written());
        assert_eq!(
            packed.finish(),
            generic.finish(),
            "{} objects",
            link.max_objects
        );
    }

    #[test]
    fn the_one_pass_bit_packed_entries_are_the_generic_ones() {
        // Entries of every kind, gap and baseline field, written by the generic writer and the one-pass one; about
        // half of the changed ones with their bits worked out with their plans.
        let config = StateConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for max_objects in [2u16, 901, 1024, 65535] {
            let link = LinkConfig {
                max_objects,
                ..LinkConfig::default()
            };
            let (world, baselines) = stepped_world_and_its_baselines(3, 64);
            let mut values = Vec::new();
            let mut packed_bits = Vec::new();
            let mut entries = Vec::new();
            let mut id = 0u32;
            for (k, now) in world.states.iter().enumerate() {
                id += [0, 0, 1, 2, 5, 40, 700][rng.random_range(0..7)];
                if id >= u32::from(max_objects) {
                    break;
                }
                let base = &baselines[k];
                let with_base = rng.random_range(0..8) != 0;
                let prediction = ObjectState::predict(&config, &base.state, 6);
                let decision = if with_base {
                    plan(&config, now, Some(&base.state), prediction.as_ref()).unwrap()
                } else {
                    plan(&config, now, None, None).unwrap()
                };
                let index = prediction.filter(|_| with_base).map(|p| {
                    values.push(p);
                    values.len() as u32 - 1
                });
                values.push(*now);
                let mut packed = NOT_PACKED;
                let mut bits = PackedBits::default();
                if with_base
                    && *now != base.state
                    && rng.random_bool(0.5)
                    && let (planned, _, true) = plan_changed_for_packing(
                        &config,
                        now,
                        &base.state,
                        prediction.as_ref(),
                        &mut bits,
                    )
                    .unwrap()
                {
                    assert_eq!(planned, decision);
                    packed_bits.push(bits);
                    packed = packed_bits.len() as u32 - 1;
                }
                entries.push(Entry {
                    id: id as u16,
                    offset: with_base.then(|| [6, 6, 6, 9, 64][rng.random_range(0..5)]),
                    older: None,
                    path: decision.path,
                    decided: false,
                    state: values.len() as u32 - 1,
                    prediction: index,
                    baseline: with_base.then_some(base),
                    run: 0,
                    packed,
                });
                id += 1;
            }
            assert!(max_objects < 64 || !packed_bits.is_empty());
            assert_packed_entries_are_the_generic_ones(
                &link,
                &config,
                &values,
                &packed_bits,
                &entries,
            );
        }
    }

    #[test]
    fn a_run_after_the_last_entry_grows_the_section_as_any_entry_does() {
        // Entries in a shuffled order with runs of next ids, offsets that repeat or change, and entries without a
        // baseline: wherever the shortcut sizes an entry, it gives what the general sizing gives.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for max_objects in [2u16, 70, 901, 65535] {
            let link = LinkConfig {
                max_objects,
                ..LinkConfig::default()
            };
            let mut tables = SectionTables::<ObjectState>::default();
            let mut chosen = Selection::new(&link, usize::from(max_objects), &mut tables);
            let mut taken = std::collections::HashSet::new();
            let mut last: Option<Last> = None;
            let mut shortcuts = 0;
            for _ in 0..400 {
                let id = match last {
                    Some(l) if rng.random_range(0..4) != 0 => l.id.wrapping_add(1),
                    _ => rng.random_range(0..max_objects),
                };
                if id >= max_objects || !taken.insert(id) {
                    continue;
                }
                let offset = match (last, rng.random_range(0..6)) {
                    (_, 0) => None,
                    (Some(l), 1..=3) => l.offset.or(Some(6)),
                    (_, k) => Some(k as u16 * 3),
                };
                let entry = Entry {
                    id,
                    offset,
                    older: None,
                    path: DeltaPath::Unchanged,
                    decided: false,
                    state: SAME_AS_BASELINE,
                    prediction: None,
                    baseline: None,
                    run: 0,
                    packed: NOT_PACKED,
                };
                let own = rng.random_range(1..90);
                let general = chosen.marginal_bits(&link, &entry, own);
                let shortcut =
                    last.and_then(|l| chosen.marginal_bits_after(&link, &l, &entry, own));
                if let Some(bits) = shortcut {
                    assert_eq!(bits, general, "entry {id} after {:?}", last.map(|l| l.id));
                    shortcuts += 1;
                }
                chosen.insert(entry, own, chosen.total + general);
                last = Some(Last {
                    id,
                    offset,
                    after: chosen.after(id),
                });
            }
            if max_objects > 2 {
                assert!(shortcuts >= 10, "{shortcuts} runs sized by the shortcut");
            }
        }
    }

    #[test]
    fn runs_of_unchanged_entries_are_the_bits_the_generic_writer_writes() {
        // Long runs of unchanged next ids against the same offset (past the 16 written at once), broken by gaps,
        // new offsets, changed entries and entries without a baseline, up to the link's last id.
        let config = StateConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(23);
        for max_objects in [1u16, 2, 40, 901] {
            let link = LinkConfig {
                max_objects,
                ..LinkConfig::default()
            };
            let (world, baselines) =
                stepped_world_and_its_baselines(1, i32::from(max_objects).min(200) as usize);
            let mut values = Vec::new();
            let mut entries = Vec::new();
            let mut offset = 6;
            let mut id = 0u16;
            for (k, base) in baselines.iter().enumerate() {
                if id >= max_objects {
                    break;
                }
                let kind = rng.random_range(0..40);
                if kind == 0 {
                    offset = rng.random_range(1..=MAX_BASELINE_OFFSET);
                }
                let with_base = kind != 1;
                let changed = kind == 2;
                let now = if changed { world.states[k] } else { base.state };
                let decision = if with_base {
                    plan(&config, &now, Some(&base.state), None).unwrap()
                } else {
                    plan(&config, &now, None, None).unwrap()
                };
                values.push(now);
                entries.push(Entry {
                    id,
                    offset: with_base.then_some(offset),
                    older: None,
                    path: decision.path,
                    decided: false,
                    state: values.len() as u32 - 1,
                    prediction: None,
                    baseline: with_base.then_some(base),
                    run: 0,
                    packed: NOT_PACKED,
                });
                id = id.saturating_add(if kind == 3 { 3 } else { 1 });
            }
            let runs = entries
                .windows(2)
                .filter(|w| w[1].id == w[0].id + 1 && w[1].path == DeltaPath::Unchanged)
                .count();
            assert!(
                runs + 1 >= entries.len() / 2,
                "{runs} run entries of {}",
                entries.len()
            );
            assert_packed_entries_are_the_generic_ones(&link, &config, &values, &[], &entries);
        }
    }

    #[test]
    fn runs_taken_at_once_are_the_entries_drawn_one_by_one() {
        // Objects known unchanged in runs of every length, broken by changed ones and by ids the order names out of
        // turn or twice, up to the link's last id (120 objects) or short of it (901), at every budget from a few
        // entries to most of them: the room ends within runs at each of their ids. Written with revisions (runs
        // taken at once) and without (each object drawn, compared and sized on its own), twice, the second
        // datagram against the states the first recorded as sent.
        let config = StateConfig::default();
        for (seed, max_objects) in [(5u64, 120u16), (6, 901)] {
            let n = 120;
            let (world, baselines) = stepped_world_and_its_baselines(seed, n);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let changed: Vec<bool> = (0..n).map(|_| rng.random_range(0..8) == 0).collect();
            let now: Vec<ObjectState> = (0..n)
                .map(|i| {
                    if changed[i] {
                        world.states[i]
                    } else {
                        baselines[i].state
                    }
                })
                .collect();
            let mut order: Vec<u16> = (0..n as u16).collect();
            for _ in 0..n / 10 {
                order.swap(rng.random_range(0..n), rng.random_range(0..n));
            }
            for _ in 0..n / 20 {
                let again = order[rng.random_range(0..n)];
                order.insert(rng.random_range(0..order.len()), again);
            }
            let state_of = |id: u16| now.get(usize::from(id)).copied();
            let revision_of = |id: u16| changed.get(usize::from(id)).map(|&c| 1 + u64::from(c));
            for budget_bytes in HEADER_BYTES + 5..=HEADER_BYTES + 120 {
                let link = LinkConfig {
                    backend: Backend::Bitpack,
                    budget_bytes,
                    max_objects,
                    ..LinkConfig::default()
                };
                let mut trackers = [(); 2].map(|_| {
                    let mut t = AckTracker::new(max_objects);
                    t.record_sent_revised(
                        0,
                        10,
                        baselines
                            .iter()
                            .enumerate()
                            .map(|(i, b)| (i as u16, b.state, 1)),
                    );
                    t.process_acks(0, 0);
                    t
                });
                for sequence in [3u16, 4] {
                    let header = PacketHeader {
                        sequence,
                        ..PacketHeader::default()
                    };
                    let [revised, plain] = &mut trackers;
                    let mut w = PacketWriter::new(&link, header).unwrap();
                    let taken = w
                        .write_section_revised(&config, revised, 12, &order, state_of, revision_of)
                        .unwrap();
                    let revised_bytes = w.finish();
                    let mut w = PacketWriter::new(&link, header).unwrap();
                    let drawn = w
                        .write_section(&config, plain, 12, &order, state_of)
                        .unwrap();
                    assert_eq!(taken, drawn, "{budget_bytes} bytes, packet {sequence}");
                    assert_eq!(
                        revised_bytes,
                        w.finish(),
                        "{budget_bytes} bytes, packet {sequence}"
                    );
                    for t in &mut trackers {
                        t.process_acks(sequence, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn id_gaps_as_one_field_are_the_gaps_serialize_id_writes() {
        for max_objects in [1u16, 2, 3, 901, 1024, 65535] {
            let link = LinkConfig {
                max_objects,
                ..LinkConfig::default()
            };
            let length_bits = link.gap_length_bits();
            for id in (0..=link.max_id()).step_by(usize::from(max_objects / 500).max(1)) {
                for previous in [
                    None,
                    Some(0u16),
                    Some((id / 2) as u16),
                    Some((id - 1).max(0) as u16),
                ] {
                    let first = previous.map_or(0, |p| i32::from(p) + 1);
                    if id < first {
                        continue;
                    }
                    let mut generic = BitWriteStream::new();
                    let mut wanted = id as u16;
                    serialize_id(&mut generic, &link, &mut wanted, previous, &mut 0).unwrap();
                    let mut packed = BitWriteStream::new();
                    let (mut code, bits) = id_code(length_bits, id - first).unwrap();
                    packed.packed(ID_GAP_LOW, &mut code, bits).unwrap();
                    assert_eq!(packed.bits_written(), generic.bits_written());
                    assert_eq!(
                        packed.finish(),
                        generic.finish(),
                        "id {id} after {previous:?}"
                    );
                }
            }
            assert!(id_code(length_bits, -1).is_err());
        }
    }

    /// What reading one section gives: its frame and entries.
    type SectionRead = Result<(u16, Vec<(u16, ObjectState)>), CodecError>;

    /// One section read twice: by the bit-packing reader (runs of unchanged entries, and the flags of a changed
    /// entry, at once) and by [`Flagwise`].
    fn read_with_runs_and_flagwise(
        bytes: &[u8],
        link: &LinkConfig,
        config: &StateConfig,
        sequence: u16,
        history: &ReceiveHistory<ObjectState>,
    ) -> (SectionRead, SectionRead) {
        let at_once = read_section_entries::<_, ObjectState>(
            &mut BitReadStream::new(bytes),
            link,
            config,
            sequence,
            history,
        );
        let flagwise = read_section_entries::<_, ObjectState>(
            &mut Flagwise(BitReadStream::new(bytes)),
            link,
            config,
            sequence,
            history,
        );
        (at_once, flagwise)
    }

    /// A bit-packing reader that reads every flag on its own: it keeps the defaults of [`Stream::peek`] (which
    /// shows nothing) and [`Stream::take_ones_repeated`].
    struct Flagwise<'a>(BitReadStream<'a>);

    impl EntrySource for Flagwise<'_> {}

    impl Stream for Flagwise<'_> {
        const READING: bool = true;
        const CONTEXTS: bool = false;

        fn bool(&mut self, ctx: Ctx, value: &mut bool) -> Result<(), CodecError> {
            self.0.bool(ctx, value)
        }

        fn int(&mut self, ctx: Ctx, value: &mut i32, min: i32, max: i32) -> Result<(), CodecError> {
            self.0.int(ctx, value, min, max)
        }

        fn bits(&mut self, ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError> {
            self.0.bits(ctx, value, bits)
        }

        fn packed(&mut self, ctx: Ctx, value: &mut u64, bits: u32) -> Result<(), CodecError> {
            self.0.packed(ctx, value, bits)
        }
    }

    #[test]
    fn unchanged_runs_read_at_once_read_as_flag_by_flag() {
        // Sections of many unchanged neighbours and changed ones, as written and then with bits flipped and cut: the
        // reader that takes four flags at once (one bits, or a changed entry's 1110) must give exactly what the one
        // reading each flag gives, errors included.
        let config = StateConfig::default();
        let link = LinkConfig {
            backend: Backend::Bitpack,
            max_objects: 200,
            ..LinkConfig::default()
        };
        let mut world = World::new(21, 200);
        let mut tracker = AckTracker::new(link.max_objects);
        let mut history = ReceiveHistory::new(link.max_objects);
        let order: Vec<u16> = (0..200).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for sequence in 1..6u16 {
            world.step();
            let header = PacketHeader {
                sequence,
                ack: sequence - 1,
                ack_bits: u32::MAX,
                ..PacketHeader::default()
            };
            tracker.process_acks(header.ack, header.ack_bits);
            let states = world.states.clone();
            let packet = encode_packet(
                &link,
                &config,
                header,
                sequence,
                &order,
                |id| states.get(usize::from(id)).copied(),
                &mut tracker,
            )
            .unwrap();
            let payload = &packet.bytes[HEADER_BYTES..];
            for trial in 0..60 {
                let mut bytes = payload.to_vec();
                if trial > 0 {
                    let at = rng.random_range(0..bytes.len());
                    bytes[at] ^= 1 << rng.random_range(0..8);
                    bytes.truncate(rng.random_range(bytes.len() / 2..=bytes.len()));
                }
                let (at_once, flagwise) =
                    read_with_runs_and_flagwise(&bytes, &link, &config, sequence, &history);
                assert_eq!(at_once, flagwise, "sequence {sequence}, trial {trial}");
            }
            let (frame, entries) = read_section_entries(
                &mut BitReadStream::new(payload),
                &link,
                &config,
                sequence,
                &history,
            )
            .unwrap();
            for (id, state) in entries {
                assert_eq!(state, states[usize::from(id)]);
                history.insert(id, sequence, frame, state);
            }
        }
    }

    #[test]
    fn runs_reaching_the_last_id_or_the_count_read_as_flag_by_flag() {
        // Sections that are one entry naming its baseline offset and then nearly all one bits: runs of unchanged
        // entries that reach the link's last id, or the entry count, mid-run, with a few flipped bits among them.
        // The reader that takes the ones a run at a time must give what the one reading each flag gives.
        let config = StateConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let sequence = 100u16;
        for max_objects in [1u16, 2, 17, 40] {
            let link = LinkConfig {
                backend: Backend::Bitpack,
                max_objects,
                ..LinkConfig::default()
            };
            let mut history = ReceiveHistory::new(max_objects);
            for id in 0..max_objects {
                for back in 1..=MAX_BASELINE_OFFSET {
                    let mut state = ObjectState::default();
                    state.body.position[0] = i32::from(id) * 100 + i32::from(back);
                    history.insert(id, sequence - back, 0, state);
                }
            }
            for trial in 0..400 {
                let mut s = BitWriteStream::new();
                let mut frame = rng.random_range(0..=u32::from(u16::MAX));
                s.bits(FRAME, &mut frame, 16).unwrap();
                let mut count = rng.random_range(0..=u32::from(max_objects));
                s.count(ENTRY_COUNT, &mut count, u32::from(max_objects))
                    .unwrap();
                // The first id, a baseline at a named offset, unchanged.
                // The id gap, the baseline flag, the same-offset flag (0), the offset less one, unchanged.
                let gap = rng.random_range(0..i32::from(max_objects));
                let (id, id_bits) = id_code(link.gap_length_bits(), gap).unwrap();
                let offset = u64::from(rng.random_range(0..MAX_BASELINE_OFFSET));
                s.packed(
                    HAS_BASELINE,
                    &mut (id << 9 | 0b10 << 7 | offset << 1 | 1),
                    id_bits + 9,
                )
                .unwrap();
                let mut ones = u64::MAX;
                for _ in 0..rng.random_range(0..4) {
                    s.packed(HAS_BASELINE, &mut ones, 64).unwrap();
                }
                let tail = rng.random_range(1..64);
                s.packed(HAS_BASELINE, &mut (ones >> (64 - tail)), tail)
                    .unwrap();
                let mut bytes = s.finish();
                for _ in 0..rng.random_range(0..3) {
                    let at = rng.random_range(0..bytes.len());
                    bytes[at] ^= 1 << rng.random_range(0..8);
                }
                let (at_once, flagwise) =
                    read_with_runs_and_flagwise(&bytes, &link, &config, sequence, &history);
                assert_eq!(at_once, flagwise, "{max_objects} objects, trial {trial}");
            }
        }
    }

    #[test]
    fn an_id_named_twice_is_sent_once() {
        // The priority order names object 3 twice: the section must carry it once, or the two ends would record
        // different baselines for it.
        for backend in [Backend::Bitpack, Backend::Arith] {
            let link = LinkConfig {
                backend,
                ..LinkConfig::default()
            };
            let world = World::new(5, 8);
            let mut tracker = AckTracker::new(link.max_objects);
            let p = encode_packet(
                &link,
                &world.config,
                PacketHeader::default(),
                0,
                &[3, 5, 3, 1],
                |id| world.states.get(usize::from(id)).copied(),
                &mut tracker,
            )
            .unwrap();
            assert_eq!(p.included, vec![1, 3, 5], "{backend:?}");
            let mut history = ReceiveHistory::new(link.max_objects);
            let d =
                decode_packet::<ObjectState>(&link, &world.config, &p.bytes, &mut history).unwrap();
            let ids: Vec<u16> = d.entries.iter().map(|e| e.0).collect();
            assert_eq!(ids, p.included);
        }
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        for backend in [Backend::Bitpack, Backend::Arith] {
            let link = LinkConfig {
                backend,
                ..LinkConfig::default()
            };
            let world = World::new(5, 8);
            let mut tracker = AckTracker::new(link.max_objects);
            let p = encode_packet(
                &link,
                &world.config,
                PacketHeader::default(),
                0,
                &[0, 1, 2],
                |id| world.states.get(usize::from(id)).copied(),
                &mut tracker,
            )
            .unwrap();
            let mut history = ReceiveHistory::new(link.max_objects);
            decode_packet::<ObjectState>(&link, &world.config, &p.bytes, &mut history).unwrap();
            let mut longer = p.bytes.clone();
            longer.push(0);
            assert_eq!(
                decode_packet::<ObjectState>(&link, &world.config, &longer, &mut history),
                Err(CodecError::Invalid {
                    field: "trailing bytes"
                }),
                "{backend:?}"
            );
        }
    }

    #[test]
    fn range_coded_sections_fill_the_budget() {
        // More objects than fit: the writer must end close to the budget, never over it.
        let link = LinkConfig {
            backend: Backend::Arith,
            ..LinkConfig::default()
        };
        let mut world = World::new(12, 1000);
        let order: Vec<u16> = (0..1000).rev().collect();
        let mut tracker = AckTracker::new(link.max_objects);
        let mut history = ReceiveHistory::new(link.max_objects);
        for sequence in 0..6u16 {
            world.step();
            let p = encode_packet(
                &link,
                &world.config,
                PacketHeader {
                    sequence,
                    ..PacketHeader::default()
                },
                sequence,
                &order,
                |id| world.states.get(usize::from(id)).copied(),
                &mut tracker,
            )
            .unwrap();
            assert!(p.bytes.len() <= link.budget_bytes);
            assert!(
                p.bytes.len() * 100 >= link.budget_bytes * 93,
                "packet {sequence}: {} bytes",
                p.bytes.len()
            );
            let d =
                decode_packet::<ObjectState>(&link, &world.config, &p.bytes, &mut history).unwrap();
            assert_eq!(d.entries.len(), p.included.len());
            tracker.process_acks(sequence, 0);
        }
    }

    #[test]
    fn sections_mixing_entries_with_and_without_baselines_fit_their_budget() {
        // Every third packet goes unacked, so objects sent only in it have no baseline while their neighbours in
        // id order have one. An entry chosen between them changes the baseline fields of the next entry that
        // names a baseline, not only of the entry right after it; a size that missed this overshot the budget
        // (a 1201-byte datagram on a 1200-byte link).
        for backend in [Backend::Bitpack, Backend::Arith] {
            for pose_only in [false, true] {
                let link = LinkConfig {
                    backend,
                    max_objects: 700,
                    ..LinkConfig::default()
                };
                let config = StateConfig {
                    pose_only,
                    ..StateConfig::default()
                };
                let mut rng = ChaCha8Rng::seed_from_u64(7);
                let mut states: Vec<ObjectState> = (0..600)
                    .map(|i| {
                        let mut s = ObjectState::default();
                        s.body.position = [(i % 30) * 300 - 4000, 200, (i / 30) * 300 - 4000];
                        s.body.rotation.largest = 3;
                        s.body.at_rest = i % 3 == 0;
                        s
                    })
                    .collect();
                let mut tracker = AckTracker::new(link.max_objects);
                let mut history = ReceiveHistory::new(link.max_objects);
                for frame in 0..40u16 {
                    for s in states.iter_mut() {
                        if !rng.random_bool(0.2) {
                            continue;
                        }
                        let amp = [2, 20, 300, 9000][rng.random_range(0..4)];
                        for a in 0..3 {
                            s.body.position[a] = (s.body.position[a]
                                + rng.random_range(-amp..=amp))
                            .clamp(-4000, 8000);
                        }
                        s.body.rotation.components[0] = (s.body.rotation.components[0]
                            + rng.random_range(-amp..=amp) / 8)
                            .clamp(-200, 200);
                        if !pose_only && !s.body.at_rest {
                            s.body.linear_velocity[0] = (s.body.linear_velocity[0]
                                + rng.random_range(-amp..=amp))
                            .clamp(-4000, 4000);
                        }
                    }
                    let order: Vec<u16> = (0..650u16).map(|i| (i * 7 + frame * 13) % 650).collect();
                    let header = PacketHeader {
                        packet_type: 2,
                        sequence: frame.wrapping_add(65500),
                        ..PacketHeader::default()
                    };
                    let p = encode_packet(
                        &link,
                        &config,
                        header,
                        frame,
                        &order,
                        |id| states.get(usize::from(id)).copied(),
                        &mut tracker,
                    )
                    .unwrap();
                    assert!(
                        p.bytes.len() <= link.budget_bytes,
                        "{backend:?}, pose only {pose_only}, frame {frame}: {} bytes",
                        p.bytes.len()
                    );
                    let d = decode_packet::<ObjectState>(&link, &config, &p.bytes, &mut history)
                        .unwrap();
                    for (id, state) in &d.entries {
                        assert_eq!(*state, states[usize::from(*id)]);
                    }
                    if frame % 3 != 1 {
                        tracker.process_acks(header.sequence, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn a_section_a_few_bytes_over_keeps_most_of_its_entries() {
        // Changed objects first, then a long tail of unchanged ones, each a fraction of a bit under the range
        // coder, with a budget a few bytes short of the whole section. Dropping the tail's lowest-priority entries
        // frees little, and their gaps cost the entries around them: a trim that dropped only what the overshoot
        // seemed to need overran pass after pass (up to 32 passes on the ladder's links), past the pass limit.
        // The writer must stay within its passes (a debug assertion counts them) and keep about as many entries
        // as the longest run of the priority order that fits.
        let config = StateConfig::default();
        let n = 950u16;
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let base: Vec<ObjectState> = (0..n)
            .map(|i| {
                let mut s = ObjectState::default();
                s.body.position = [
                    i32::from(i % 30) * 300 - 4000,
                    200,
                    i32::from(i / 30) * 300 - 4000,
                ];
                s.body.rotation.largest = 3;
                s.body.at_rest = true;
                s
            })
            .collect();
        let mut now = base.clone();
        for s in now.iter_mut().step_by(7) {
            s.body.at_rest = false;
            for a in 0..3 {
                s.body.position[a] += rng.random_range(-200..=200);
                s.body.linear_velocity[a] = rng.random_range(-300..=300);
            }
            s.body.rotation.components[0] = rng.random_range(-150..=150);
        }
        let encode = |budget_bytes: usize, order: &[u16]| {
            let link = LinkConfig {
                backend: Backend::Arith,
                budget_bytes,
                ..LinkConfig::default()
            };
            let mut tracker = AckTracker::new(link.max_objects);
            tracker.record_sent(10, 10, base.iter().enumerate().map(|(i, s)| (i as u16, *s)));
            tracker.process_acks(10, 0);
            let header = PacketHeader {
                sequence: 16,
                ..PacketHeader::default()
            };
            let state_of = |id: u16| now.get(usize::from(id)).copied();
            let p =
                encode_packet(&link, &config, header, 16, order, state_of, &mut tracker).unwrap();
            assert!(p.bytes.len() <= budget_bytes);
            let mut history = ReceiveHistory::new(link.max_objects);
            for (i, s) in base.iter().enumerate() {
                history.insert(i as u16, 10, 10, *s);
            }
            let d = decode_packet::<ObjectState>(&link, &config, &p.bytes, &mut history).unwrap();
            assert_eq!(d.entries.len(), p.included.len());
            p
        };
        let (changed, mut unchanged): (Vec<u16>, Vec<u16>) =
            (0..n).partition(|&id| now[usize::from(id)] != base[usize::from(id)]);
        // The unchanged tail in id order (its lowest-priority entries a run at the end), then shuffled (each
        // dropped entry a hole among kept ones, which may cost more than it frees).
        for shuffled in [false, true] {
            if shuffled {
                for i in (1..unchanged.len()).rev() {
                    unchanged.swap(i, rng.random_range(0..=i));
                }
            }
            let order: Vec<u16> = changed.iter().chain(&unchanged).copied().collect();
            let whole = encode(64 * usize::from(n), &order).bytes.len();
            // The size of every eighth run of the order from its start (not monotone: holes cost).
            let runs: Vec<(usize, usize)> = (1..=order.len() / 8)
                .map(|k| {
                    (
                        8 * k,
                        encode(64 * usize::from(n), &order[..8 * k]).bytes.len(),
                    )
                })
                .collect();
            for short in [1, 3, 10, 20] {
                let budget = whole - short;
                let fits = runs
                    .iter()
                    .filter(|&&(_, bytes)| bytes <= budget)
                    .map(|&(k, _)| k)
                    .max()
                    .unwrap_or(0);
                let kept = encode(budget, &order).included.len();
                let passes = ARITH_PASSES.with(Cell::get);
                assert!(
                    kept * 10 >= fits * 8 && passes <= MAX_ARITH_PASSES,
                    "shuffled {shuffled}, {short} bytes short: {kept} entries kept, {fits} fit, {passes} passes"
                );
            }
        }
    }

    /// The finest rotation quantizer (20 bits a component): a body whose largest component changed is coded
    /// against its baseline with a residual wider than one 64-bit field on the bit-packing back end; both back
    /// ends must send it and read it back.
    #[test]
    fn a_turned_rotation_of_the_finest_quantizer_travels_as_a_delta() {
        let mut config = StateConfig::default();
        config.quant.rotation = crate::quant::RotationQuantizer::new(20);
        let at = |q: [f32; 4]| ObjectState {
            body: BodyState::quantize(&config.quant, [1.0, 2.0, 3.0], q, [0.0; 3], [0.0; 3], false),
            ..ObjectState::default()
        };
        // 46 degrees about y, then 44: the largest component turns from y to w.
        let (s, c) = (23f32.to_radians().sin(), 23f32.to_radians().cos());
        let (t, d) = (22f32.to_radians().sin(), 22f32.to_radians().cos());
        let states = [at([0.0, c.max(s), 0.0, s.min(c)]), at([0.0, t, 0.0, d])];
        assert_ne!(
            states[0].body.rotation.largest,
            states[1].body.rotation.largest
        );
        for backend in [Backend::Bitpack, Backend::Arith] {
            let link = LinkConfig {
                backend,
                ..LinkConfig::default()
            };
            let mut tracker = AckTracker::new(link.max_objects);
            let mut history = ReceiveHistory::new(link.max_objects);
            for (sequence, state) in (1u16..).zip(states) {
                let header = PacketHeader {
                    sequence,
                    ack: sequence.wrapping_sub(1),
                    ack_bits: 0,
                    ..PacketHeader::default()
                };
                let p = encode_packet(
                    &link,
                    &config,
                    header,
                    sequence,
                    &[0],
                    |_| Some(state),
                    &mut tracker,
                )
                .unwrap_or_else(|e| panic!("{backend:?}, packet {sequence}: {e:?}"));
                let d =
                    decode_packet::<ObjectState>(&link, &config, &p.bytes, &mut history).unwrap();
                assert_eq!(d.entries, vec![(0, state)], "{backend:?}");
                tracker.process_acks(sequence, 0);
            }
            assert!(
                tracker.baseline(0, 3).is_some(),
                "{backend:?}: the second state was not sent against the first"
            );
        }
    }

    #[test]
    fn small_budget_is_respected() {
        let link = LinkConfig {
            budget_bytes: 64,
            ..LinkConfig::default()
        };
        let world = World::new(1, 50);
        let order: Vec<u16> = (0..50).collect();
        for backend in [Backend::Bitpack, Backend::Arith] {
            let link = LinkConfig { backend, ..link };
            let mut tracker = AckTracker::new(link.max_objects);
            let p = encode_packet(
                &link,
                &world.config,
                PacketHeader::default(),
                0,
                &order,
                |id| world.states.get(usize::from(id)).copied(),
                &mut tracker,
            )
            .unwrap();
            assert!(p.bytes.len() <= 64);
            assert!(
                !p.included.is_empty() && p.included.len() < 5,
                "{:?}",
                p.included
            );
            let mut history = ReceiveHistory::new(link.max_objects);
            let d =
                decode_packet::<ObjectState>(&link, &world.config, &p.bytes, &mut history).unwrap();
            assert_eq!(d.entries.len(), p.included.len());
        }
    }

    #[test]
    fn missing_baseline_and_bad_headers_are_typed_errors() {
        for backend in [Backend::Bitpack, Backend::Arith] {
            let link = LinkConfig {
                backend,
                ..LinkConfig::default()
            };
            let world = World::new(2, 10);
            let order: Vec<u16> = (0..10).collect();
            let mut tracker = AckTracker::new(link.max_objects);
            let state_of = |id: u16| world.states.get(usize::from(id)).copied();
            let first = encode_packet(
                &link,
                &world.config,
                PacketHeader {
                    sequence: 1,
                    ..PacketHeader::default()
                },
                0,
                &order,
                state_of,
                &mut tracker,
            )
            .unwrap();
            tracker.process_acks(1, 0);
            let second = encode_packet(
                &link,
                &world.config,
                PacketHeader {
                    sequence: 2,
                    ..PacketHeader::default()
                },
                1,
                &order,
                state_of,
                &mut tracker,
            )
            .unwrap();
            assert!(second.bytes.len() < first.bytes.len() / 4);
            let mut fresh = ReceiveHistory::new(link.max_objects);
            assert!(matches!(
                decode_packet::<ObjectState>(&link, &world.config, &second.bytes, &mut fresh),
                Err(CodecError::MissingBaseline { sequence: 1, .. })
            ));
            assert_eq!(
                decode_packet::<ObjectState>(&link, &world.config, &first.bytes[..5], &mut fresh),
                Err(CodecError::Truncated)
            );
            let other = LinkConfig {
                protocol_id: 1,
                ..link
            };
            assert_eq!(
                decode_packet::<ObjectState>(&other, &world.config, &first.bytes, &mut fresh),
                Err(CodecError::Invalid {
                    field: "protocol id"
                })
            );
            let cut = &first.bytes[..first.bytes.len() - 3];
            assert_eq!(
                decode_packet::<ObjectState>(&link, &world.config, cut, &mut fresh),
                Err(CodecError::Truncated)
            );
        }
    }

    #[test]
    fn late_and_duplicated_packets_find_baselines_at_the_full_offset() {
        // Two packets name the same baseline, one at the full offset; they arrive newest first and then again, as
        // UDP may deliver them. Storing a newer packet's states must not evict the baseline the others still name.
        for backend in [Backend::Bitpack, Backend::Arith] {
            let link = LinkConfig {
                backend,
                ..LinkConfig::default()
            };
            let mut world = World::new(6, 8);
            let order: Vec<u16> = (0..8).collect();
            let mut tracker = AckTracker::new(link.max_objects);
            let mut history = ReceiveHistory::new(link.max_objects);
            // Close to the wrap, so the packets' sequences straddle it.
            let base = 65500u16;
            let mut packets = Vec::new();
            let mut frame = 0;
            for offset in [0, MAX_BASELINE_OFFSET - 1, MAX_BASELINE_OFFSET] {
                while frame < offset {
                    world.step();
                    frame += 1;
                }
                let header = PacketHeader {
                    sequence: base.wrapping_add(offset),
                    ..PacketHeader::default()
                };
                let state_of = |id: u16| world.states.get(usize::from(id)).copied();
                let packet = encode_packet(
                    &link,
                    &world.config,
                    header,
                    offset,
                    &order,
                    state_of,
                    &mut tracker,
                )
                .unwrap();
                assert_eq!(packet.included, order);
                packets.push((packet.bytes, world.states.clone()));
                if offset == 0 {
                    decode_packet::<ObjectState>(&link, &world.config, &packets[0].0, &mut history)
                        .unwrap();
                    tracker.process_acks(base, 0);
                }
            }
            // Both later packets are coded against the first.
            for (bytes, _) in &packets[1..] {
                let mut fresh = ReceiveHistory::new(link.max_objects);
                assert!(matches!(
                    decode_packet::<ObjectState>(&link, &world.config, bytes, &mut fresh),
                    Err(CodecError::MissingBaseline { sequence, .. }) if sequence == base
                ));
            }
            for i in [2, 1, 2, 1] {
                let (bytes, states) = &packets[i];
                let decoded =
                    decode_packet::<ObjectState>(&link, &world.config, bytes, &mut history)
                        .unwrap_or_else(|e| panic!("{backend:?} packet {i}: {e}"));
                let expected: Vec<(u16, ObjectState)> = order
                    .iter()
                    .map(|&id| (id, states[usize::from(id)]))
                    .collect();
                assert_eq!(decoded.entries, expected, "{backend:?} packet {i}");
            }
        }
    }

    #[test]
    fn avatars_and_objects_share_a_packet() {
        let world = World::new(3, 20);
        let config = world.config;
        for backend in [Backend::Bitpack, Backend::Arith] {
            let link = LinkConfig {
                backend,
                ..LinkConfig::default()
            };
            let avatar = AvatarState {
                player: 2,
                ..AvatarState::default()
            };
            let mut avatars = AckTracker::new(4);
            let mut objects = AckTracker::new(link.max_objects);
            let mut w = PacketWriter::new(
                &link,
                PacketHeader {
                    sequence: 9,
                    ..PacketHeader::default()
                },
            )
            .unwrap();
            let sent_avatars = w
                .write_section(&config, &mut avatars, 5, &[2], |_| Some(avatar))
                .unwrap();
            let order: Vec<u16> = (0..20).collect();
            let sent_objects = w
                .write_section(&config, &mut objects, 5, &order, |id| {
                    world.states.get(usize::from(id)).copied()
                })
                .unwrap();
            assert_eq!((sent_avatars.len(), sent_objects.len()), (1, 20));
            let bytes = w.finish();
            let mut r = PacketReader::new(&link, &bytes).unwrap();
            assert_eq!(r.backend(), backend);
            let (_, a) = r
                .read_section::<AvatarState>(&config, &mut ReceiveHistory::new(4))
                .unwrap();
            let (_, o) = r
                .read_section::<ObjectState>(&config, &mut ReceiveHistory::new(link.max_objects))
                .unwrap();
            assert_eq!(a, vec![(2, avatar)]);
            assert_eq!(o.len(), 20);
            assert!(o.iter().all(|(id, s)| world.states[usize::from(*id)] == *s));
        }
    }
}
