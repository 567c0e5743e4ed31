//! The entropy-coding back end: the same [`Stream`] calls, coded with adaptive binary models per context.
//!
//! An integer of a small range (at most 16 values: tags, buckets) is coded through a binary tree of models over
//! its value, so its whole distribution is learned. A wider integer is coded relative to the point of its range
//! nearest zero (deltas and prediction errors cluster there): first its bit length `k` through a binary tree of
//! models just deep enough for the range, then its sign (when both signs are possible), then the two bits below
//! the leading one through a small tree of models chosen by `k`, and the remaining low bits at even odds. A flag is one adaptive bit.
//! Each [`Ctx`] owns its own set of models, and every packet starts from fresh models, so packets decode
//! independently of each other; a model is reset when a stream first uses it, so starting a stream costs
//! nothing.
//!
//! A fresh model starts from a trained probability (the table in `codec/src/priors.rs`, measured offline on recorded
//! katamari frames and shared by both ends as a constant), so a datagram does not spend its first decisions of
//! every context learning what every datagram looks like; models the recording never used start at even odds.
//! There are two tables ([`Priors`]): a pose-only link codes the same contexts as a full-state link with other
//! statistics, and each section names the table of its state type before its first value. Each table also gives
//! every model its rate of adaptation (see [`adapt`]), trained on the same recording.

use std::cell::{Cell, RefCell};
use std::sync::OnceLock;

use crate::error::CodecError;
use crate::range::{
    EncoderCheckpoint, EncoderRegisters, PROB_INIT, PROB_ONE, RangeDecoder, RangeEncoder,
};
use crate::stream::{Ctx, Stream, check_range};

const SMALL_SPAN: i64 = 15;
const FLAG: usize = 0;
const SIGN: usize = 1;
const SMALL: usize = 2;
const BUCKET: usize = SMALL + 32;
const MANTISSA: usize = BUCKET + 128;
/// Models per bit length for the bits below the leading one: the first bit, then the second under the first.
const MANTISSA_MODELS: usize = 3;
const PER_CTX: usize = MANTISSA + 34 * MANTISSA_MODELS;

/// The model of `node` (1..2^levels) in a tree of depth `levels`: trees of different depths in one context get
/// separate models, since the same node means a different thing in each.
#[inline]
fn tree_slot(levels: u32, node: usize) -> usize {
    (1 << levels) + node - 1
}

/// Whether a reader picks model `index` (an index into the model table, as [`FieldCosts::decisions`] names it) by
/// what it decoded just before: an inner node of a value's tree, which its parent's bit chose, or a mantissa
/// model, chosen by the bit length the tree decoded (and the second by the first). Such a decision cannot start
/// before the ones it follows end; a tree's root, a sign or a flag is named by its context alone.
pub fn model_waits_on_last_decision(index: u32) -> bool {
    let offset = index as usize % PER_CTX;
    let inner = |first: usize, end: usize| {
        (first..end).contains(&offset) && !(offset - first).is_power_of_two()
    };
    inner(SMALL, BUCKET) || inner(BUCKET, MANTISSA) || offset >= MANTISSA
}

/// Which trained table a stream's models start from. A pose-only link (bodies as pose and at-rest flag only,
/// predicted from two acked poses) codes the same contexts as a full-state link with other statistics: with one
/// table trained on both, each kind of link paid for what the other taught it (on the katamari ladder, the
/// pose-only rung's own table saved it 0.21 bits a changed cube).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priors {
    /// Full-state links: `priors::TRAINED`.
    #[default]
    Full,
    /// Pose-only links (see [`crate::StateConfig::pose_only`]): `priors::TRAINED_POSE_ONLY`.
    PoseOnly,
}

/// A model is one word: its probability of 0 (out of [`PROB_ONE`], always below it) in the low bits, and above them
/// the shift its rate of adaptation (see [`adapt`]) moves it by, [`STILL_SHIFT`] for rate 0. The shift travels with
/// the probability, from the table a model is reset from through every update, so coding a decision reads one word
/// and adapts it with one shift, without a branch on the rate.
const RATE_SHIFT: u32 = PROB_ONE.trailing_zeros();

/// The probability bits of a model word.
const PROB_MASK: u16 = PROB_ONE - 1;

/// The shift of a model that does not adapt (rate 0): any probability shifted by it is 0, so it never moves.
const STILL_SHIFT: u16 = 15;

/// The shift a model word holds for `rate` (at most [`MAX_RATE`]).
#[inline(always)]
fn shift_of(rate: u8) -> u16 {
    match rate {
        0 => STILL_SHIFT,
        r => u16::from(r.min(MAX_RATE)),
    }
}

/// A model word of probability `p` (below [`PROB_ONE`]) and rate `rate` (at most [`MAX_RATE`]).
#[inline(always)]
fn model(p: u16, rate: u8) -> u16 {
    (p & PROB_MASK) | (shift_of(rate) << RATE_SHIFT)
}

/// A model word after coding `bit`: its probability adapted at its rate, as [`adapt`] moves it. The step is added
/// to or taken from the whole word: the probability stays inside `1..PROB_ONE` (see [`adapt`]), so the shift above
/// it is never touched.
#[inline(always)]
fn adapt_model(word: u16, bit: bool) -> u16 {
    let shift = word >> RATE_SHIFT;
    let p = word & PROB_MASK;
    if bit {
        word - (p >> shift)
    } else {
        word + ((PROB_ONE - p) >> shift)
    }
}

/// Every model's starting word: the probability from `trained` over even odds, the rate from `rates` over
/// [`DEFAULT_RATE`].
fn table_of(trained: &[(u32, u16)], rates: &[(u32, u8)]) -> Vec<u16> {
    let mut t = vec![model(PROB_INIT, DEFAULT_RATE); PER_CTX * Ctx::COUNT];
    for &(index, p) in trained {
        if let Some(m) = t.get_mut(index as usize) {
            *m = model(p.clamp(PRIOR_MIN, PROB_ONE - PRIOR_MIN), DEFAULT_RATE);
        }
    }
    for &(index, rate) in rates {
        if let Some(m) = t.get_mut(index as usize) {
            *m = model(*m & PROB_MASK, rate);
        }
    }
    t
}

/// Every model's starting word: the trained tables of `priors`.
fn trained_priors(priors: Priors) -> &'static [u16] {
    static FULL: OnceLock<Vec<u16>> = OnceLock::new();
    static POSE_ONLY: OnceLock<Vec<u16>> = OnceLock::new();
    match priors {
        Priors::Full => FULL.get_or_init(|| table_of(crate::priors::TRAINED, crate::priors::RATES)),
        Priors::PoseOnly => POSE_ONLY.get_or_init(|| {
            table_of(
                crate::priors::TRAINED_POSE_ONLY,
                crate::priors::RATES_POSE_ONLY,
            )
        }),
    }
}

/// Every model's starting word when priors are off: even odds, [`DEFAULT_RATE`].
fn flat_priors() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| table_of(&[], &[]))
}

/// The most skewed starting probability a prior may give (out of [`PROB_ONE`]): a model must still adapt.
const PRIOR_MIN: u16 = 32;

/// Model tables no longer in use on this thread, reset and handed to the next stream: a sender or receiver
/// codes a datagram after another, and the table (164 KiB: 318 contexts of 264 two-byte models) is taken from
/// here instead of the allocator.
const POOLED_TABLES: usize = 4;

thread_local! {
    static TABLES: RefCell<Vec<Vec<u16>>> = const { RefCell::new(Vec::new()) };
    static TABLES_ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

/// Model tables this thread has taken from the allocator so far (the rest came from the pool).
pub fn model_tables_allocated() -> u64 {
    TABLES_ALLOCATED.with(Cell::get)
}

/// The adaptive models of every context. Each part of a context's models (its flag and sign, its mantissa
/// models, each depth of its value trees) is reset to even odds the first time the stream uses it, not when the
/// stream starts: a datagram uses a few hundred of the table's 25,000 models, so a stream starts on a pooled
/// table in constant time whatever that table held before.
#[derive(Debug)]
struct Models {
    /// Every model's word (see [`model`]).
    probs: Vec<u16>,
    /// Where each model starts when first used in a stream (the trained priors and rates, or even odds).
    priors: &'static [u16],
    /// Whether `priors` is a trained table, which [`Models::use_priors`] may swap for another.
    trained: bool,
    /// Per context, bit `p` set: part `p` (see [`Models::part`]) has been reset in this stream.
    fresh: [u16; Ctx::COUNT],
}

/// Part of a context's models: the flag and sign models.
const PART_HEAD: u32 = 0;
/// Part of a context's models: the mantissa models.
const PART_MANTISSA: u32 = 1;
/// Parts `PART_SMALL + levels`: the small-value tree of that depth (at most 4).
const PART_SMALL: u32 = 2;
/// Parts `PART_BUCKET + levels`: the bit-length tree of that depth (at most 6).
const PART_BUCKET: u32 = 7;

impl Models {
    fn new(priors: Option<Priors>) -> Self {
        Self {
            probs: Self::table(),
            priors: priors.map_or_else(flat_priors, trained_priors),
            trained: priors.is_some(),
            fresh: [0; Ctx::COUNT],
        }
    }

    /// Models first used from now on start from the table of `priors`, probability and rate (unless the stream
    /// starts at even odds); models already used keep what they learned, and their rates.
    fn use_priors(&mut self, priors: Priors) {
        if self.trained {
            self.priors = trained_priors(priors);
        }
    }

    /// A table of the right length with any contents.
    fn table() -> Vec<u16> {
        TABLES.with(|t| t.borrow_mut().pop()).unwrap_or_else(|| {
            TABLES_ALLOCATED.with(|n| n.set(n.get() + 1));
            vec![PROB_INIT; PER_CTX * Ctx::COUNT]
        })
    }

    /// The index of the first model of `ctx`'s block, after resetting `part` of it (models `start..start + len`
    /// of the block) if this stream has not used that part yet.
    #[inline(always)]
    fn part(&mut self, ctx: Ctx, part: u32, start: usize, len: usize) -> usize {
        let slot = ctx.slot();
        let block = slot * PER_CTX;
        let fresh = &mut self.fresh[slot];
        if *fresh & (1 << part) == 0 {
            *fresh |= 1 << part;
            let range = block + start..block + start + len;
            if let (Some(models), Some(priors)) =
                (self.probs.get_mut(range.clone()), self.priors.get(range))
            {
                models.copy_from_slice(priors);
            }
        }
        block
    }

    /// Where part `part` of a block lies in it: its first model and its length.
    fn part_range(part: u32) -> (usize, usize) {
        match part {
            PART_HEAD => (FLAG, 2),
            PART_MANTISSA => (MANTISSA, PER_CTX - MANTISSA),
            p if p < PART_BUCKET => {
                let levels = p - PART_SMALL;
                (SMALL + tree_slot(levels, 1), 1 << levels)
            }
            p => {
                let levels = p - PART_BUCKET;
                (BUCKET + tree_slot(levels, 1), 1 << levels)
            }
        }
    }

    /// Calls `f` with the table range of every part this stream has used, in a fixed order.
    fn for_each_used(fresh: &[u16; Ctx::COUNT], mut f: impl FnMut(std::ops::Range<usize>)) {
        for (slot, &parts) in fresh.iter().enumerate() {
            let mut bits = parts;
            while bits != 0 {
                let part = bits.trailing_zeros();
                bits &= bits - 1;
                let (start, len) = Self::part_range(part);
                let at = slot * PER_CTX + start;
                f(at..at + len);
            }
        }
    }

    /// Copies the used parts into `saved`.
    fn save(&self, saved: &mut SavedModels) {
        saved.fresh = self.fresh;
        saved.probs.clear();
        Self::for_each_used(&self.fresh, |r| {
            if let Some(models) = self.probs.get(r) {
                saved.probs.extend_from_slice(models);
            }
        });
    }

    /// Returns to the models `saved` holds: its parts restored, parts used since forgotten.
    fn restore(&mut self, saved: &SavedModels) {
        self.fresh = saved.fresh;
        let mut from = 0;
        let probs = &mut self.probs;
        Self::for_each_used(&saved.fresh, |r| {
            let len = r.len();
            if let (Some(to), Some(src)) = (probs.get_mut(r), saved.probs.get(from..from + len)) {
                to.copy_from_slice(src);
            }
            from += len;
        });
    }

    /// [`Models::part`] for the flag and sign models.
    #[inline(always)]
    fn head(&mut self, ctx: Ctx) -> usize {
        self.part(ctx, PART_HEAD, FLAG, 2)
    }

    /// [`Models::part`] for the mantissa models.
    #[inline(always)]
    fn mantissa(&mut self, ctx: Ctx) -> usize {
        self.part(ctx, PART_MANTISSA, MANTISSA, PER_CTX - MANTISSA)
    }

    /// [`Models::part`] for the small-value tree of depth `levels`.
    #[inline(always)]
    fn small(&mut self, ctx: Ctx, levels: u32) -> usize {
        self.part(
            ctx,
            PART_SMALL + levels,
            SMALL + tree_slot(levels, 1),
            1 << levels,
        )
    }

    /// [`Models::part`] for the bit-length tree of depth `levels`.
    #[inline(always)]
    fn bucket(&mut self, ctx: Ctx, levels: u32) -> usize {
        self.part(
            ctx,
            PART_BUCKET + levels,
            BUCKET + tree_slot(levels, 1),
            1 << levels,
        )
    }
}

impl Clone for Models {
    fn clone(&self) -> Self {
        let mut probs = Self::table();
        probs.copy_from_slice(&self.probs);
        Self {
            probs,
            priors: self.priors,
            trained: self.trained,
            fresh: self.fresh,
        }
    }
}

impl Drop for Models {
    fn drop(&mut self) {
        let probs = std::mem::take(&mut self.probs);
        // During thread teardown the pool may be gone; the table is then simply freed.
        let _ = TABLES.try_with(|t| {
            let mut t = t.borrow_mut();
            if t.len() < POOLED_TABLES {
                t.push(probs);
            }
        });
    }
}

/// How a wide integer in `min..=max` is coded: its origin, whether it can lie below and above it, and the depth
/// of the tree its bit length goes through.
#[derive(Clone, Copy)]
struct Shape {
    base: i64,
    below: bool,
    above: bool,
    max_k: u32,
    levels: u32,
}

#[inline]
fn shape(min: i64, max: i64) -> Shape {
    let base = 0i64.clamp(min, max);
    let max_k = bit_length((base - min).max(max - base) as u64);
    Shape {
        base,
        below: min < base,
        above: max > base,
        max_k,
        levels: bit_length(u64::from(max_k)),
    }
}

#[inline]
fn bit_length(m: u64) -> u32 {
    64 - m.leading_zeros()
}

/// A model's probability of 0 after coding `bit`, moved toward it by a shift of `rate` (0: not moved; at most
/// [`MAX_RATE`]). A datagram's statistics stray from the trained priors it starts from by more for some models
/// than for others: a model that codes few decisions of a field whose odds change from datagram to datagram
/// learns fast (1, 2), one whose prior holds keeps it (0, or 6 and 7). Each model's rate is trained with its
/// prior ([`FieldCosts::trained_rates`]); on the katamari ladder the trained rates saved the pose-only rung 0.36
/// bits a changed cube over one shift of 3 for all (itself the best single shift). The coder's own update
/// is applied to a copy and discarded. Starting inside `1..PROB_ONE`, a model stays inside it.
#[inline(always)]
fn adapt(p0: u16, bit: bool, rate: u8) -> u16 {
    if rate == 0 {
        return p0;
    }
    let shift = u32::from(rate.min(MAX_RATE));
    if bit {
        p0 - (p0 >> shift)
    } else {
        p0 + ((PROB_ONE - p0) >> shift)
    }
}

/// The rate of a model the trained tables say nothing of.
const DEFAULT_RATE: u8 = 3;

/// The slowest rate a model may adapt at (a shift of 7).
const MAX_RATE: u8 = 7;

/// The rates [`FieldCosts::trained_rates`] chooses among: `0..=MAX_RATE`.
const RATES: usize = MAX_RATE as usize + 1;

/// The modelled probability of `bit` under a model whose probability of 0 is `p0`.
#[inline]
fn probability(p0: u16, bit: bool) -> f64 {
    let p0 = f64::from(p0) / f64::from(PROB_ONE);
    if bit { 1.0 - p0 } else { p0 }
}

/// The information each context's coded decisions carried, in bits (the negative log2 of each decision's modelled
/// probability): where a stream's bits go, field by field, without changing what is written.
#[derive(Debug, Clone)]
pub struct FieldCosts {
    bits: [f64; Ctx::COUNT],
    names: [&'static str; Ctx::COUNT],
    /// Per model, how many zeros and ones it coded: what [`FieldCosts::trained_priors`] learns from.
    uses: Vec<[u32; 2]>,
    /// The decisions of the stream tallying, each with its model and the probability it was coded at (the
    /// first of a model's in the stream is its prior): [`FieldCosts::add`] replays them at every rate.
    decisions: Vec<(u32, bool, u16)>,
    /// Per model, the bits its decisions would have cost at each rate: what [`FieldCosts::trained_rates`]
    /// learns from. Empty until a tally with decisions is added (a stream's own tally, copied at each checkpoint,
    /// does not carry the 5 MB).
    rate_costs: Vec<[f64; RATES]>,
}

impl Default for FieldCosts {
    fn default() -> Self {
        Self {
            bits: [0.0; Ctx::COUNT],
            names: [""; Ctx::COUNT],
            uses: vec![[0; 2]; PER_CTX * Ctx::COUNT],
            decisions: Vec::new(),
            rate_costs: Vec::new(),
        }
    }
}

impl FieldCosts {
    /// Every context that coded something: its field name and the bits it cost.
    pub fn by_field(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.bits
            .iter()
            .zip(self.names.iter())
            .filter(|(b, _)| **b > 0.0)
            .map(|(b, n)| (*n, *b))
    }

    /// The decisions of the stream tallying, in the order it coded them: each one's model (its index in the
    /// table), its bit, and the probability of 0 it was coded at. A benchmark replays them through the bare
    /// [`crate::range`] coder, to time the coding of a datagram's decisions apart from the modelling around them.
    /// A reading stream's tally records none.
    pub fn decisions(&self) -> &[(u32, bool, u16)] {
        &self.decisions
    }

    /// Adds another tally into this one, replaying the decisions of `other`'s stream at every rate.
    pub fn add(&mut self, other: &FieldCosts) {
        if self.rate_costs.is_empty()
            && !(other.decisions.is_empty() && other.rate_costs.is_empty())
        {
            self.rate_costs = vec![[0.0; RATES]; PER_CTX * Ctx::COUNT];
        }
        for (a, b) in self.rate_costs.iter_mut().zip(&other.rate_costs) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        // Per model of the stream, its probability under each rate so far.
        let mut replayed: std::collections::HashMap<u32, [u16; RATES]> = Default::default();
        for &(index, bit, p) in &other.decisions {
            let models = replayed.entry(index).or_insert([p; RATES]);
            if let Some(costs) = self.rate_costs.get_mut(index as usize) {
                for (rate, (m, cost)) in models.iter_mut().zip(costs.iter_mut()).enumerate() {
                    *cost -= probability(*m, bit).log2();
                    *m = adapt(*m, bit, rate as u8);
                }
            }
        }
        for i in 0..Ctx::COUNT {
            self.bits[i] += other.bits[i];
            if !other.names[i].is_empty() {
                self.names[i] = other.names[i];
            }
        }
        for (a, b) in self.uses.iter_mut().zip(&other.uses) {
            a[0] += b[0];
            a[1] += b[1];
        }
    }

    /// Starting probabilities learned from the decisions tallied: `(model, probability of 0 out of 4096)` for
    /// every model of a codec context (ids below [`Ctx::CODEC`]) that coded at least `min_uses` decisions, by the rule of
    /// succession. The table in `codec/src/priors.rs` is this, from a recorded run.
    pub fn trained_priors(&self, min_uses: u32) -> Vec<(u32, u16)> {
        let codec_models = Ctx::CODEC * PER_CTX;
        self.uses
            .iter()
            .enumerate()
            .take(codec_models)
            .filter(|(_, [z, o])| z + o >= min_uses)
            .map(|(i, &[z, o])| {
                let p = (f64::from(z) + 0.5) / (f64::from(z) + f64::from(o) + 1.0);
                let q = (p * f64::from(PROB_ONE)).round() as u16;
                (i as u32, q.clamp(PRIOR_MIN, PROB_ONE - PRIOR_MIN))
            })
            .filter(|&(_, q)| q != PROB_INIT)
            .collect()
    }

    /// Rates learned from the decisions tallied: `(model, rate)` for every model of a codec context that coded at
    /// least `min_uses` decisions and would have cost least at a rate other than [`DEFAULT_RATE`] (ties keep it).
    /// The rate tables in `codec/src/priors.rs` are this, from the run the priors come from.
    pub fn trained_rates(&self, min_uses: u32) -> Vec<(u32, u8)> {
        let codec_models = Ctx::CODEC * PER_CTX;
        self.rate_costs
            .iter()
            .zip(&self.uses)
            .enumerate()
            .take(codec_models)
            .filter(|(_, (_, [z, o]))| z + o >= min_uses)
            .filter_map(|(i, (costs, _))| {
                let mut best = DEFAULT_RATE;
                for (rate, &cost) in costs.iter().enumerate() {
                    if cost < costs[usize::from(best)] {
                        best = rate as u8;
                    }
                }
                (best != DEFAULT_RATE).then_some((i as u32, best))
            })
            .collect()
    }

    /// Charges `ctx` with `bits`. Out of line and cold, like [`FieldCosts::decision`].
    #[cold]
    #[inline(never)]
    fn charge(&mut self, ctx: Ctx, bits: f64) {
        let slot = ctx.slot();
        self.bits[slot] += bits;
        self.names[slot] = ctx.name;
    }

    /// Tallies a decision the writer coded: `bit` under model `index` at probability `p0` of 0. Out of line and
    /// cold: a stream tallies only in benchmarks, and the tally inlined into every decision kept the coder's
    /// registers spilled to memory.
    #[cold]
    #[inline(never)]
    fn decision(&mut self, index: usize, bit: bool, p0: u16) {
        self.decided(index, bit, p0);
        if let Some(u) = self.uses.get_mut(index) {
            u[usize::from(bit)] += 1;
        }
        self.decisions.push((index as u32, bit, p0));
    }

    /// Tallies a decision the reader decoded (the cost alone; see [`FieldCosts::decision`]).
    #[cold]
    #[inline(never)]
    fn decided(&mut self, index: usize, bit: bool, p0: u16) {
        if let Some(b) = self.bits.get_mut(index / PER_CTX) {
            *b -= probability(p0, bit).log2();
        }
    }
}

/// Codes values into a range-coded byte stream.
#[derive(Debug, Clone)]
pub struct ArithWriteStream {
    enc: RangeEncoder,
    models: Models,
    /// The models as they stood at the open checkpoint, if any.
    saved: Option<SavedModels>,
    costs: Option<Box<FieldCosts>>,
    costs_at_checkpoint: Option<Box<FieldCosts>>,
}

/// A point to return to if a tentative write does not fit.
#[derive(Debug, Clone, Copy)]
pub struct ArithCheckpoint {
    enc: EncoderCheckpoint,
}

/// The parts of a model table a stream had used, copied at a checkpoint: restoring them (and forgetting the
/// parts used since, which are reset on their next use) returns the models to the checkpoint.
#[derive(Debug, Clone)]
struct SavedModels {
    fresh: [u16; Ctx::COUNT],
    probs: Vec<u16>,
}

impl Default for ArithWriteStream {
    fn default() -> Self {
        Self::new()
    }
}

impl ArithWriteStream {
    /// An empty stream with fresh models, starting from the trained priors.
    pub fn new() -> Self {
        Self::with_priors(Some(Priors::Full))
    }

    /// An empty stream whose models start at even odds, ignoring the trained priors: to measure what they save.
    pub fn with_flat_priors() -> Self {
        Self::with_priors(None)
    }

    /// Models first used from now on start from the table of `priors` (see [`Priors`]); a packet section calls
    /// it before its first value, and its reader at the same point.
    pub fn use_priors(&mut self, priors: Priors) {
        self.models.use_priors(priors);
    }

    fn with_priors(priors: Option<Priors>) -> Self {
        Self {
            enc: RangeEncoder::new(),
            models: Models::new(priors),
            saved: None,
            costs: None,
            costs_at_checkpoint: None,
        }
    }

    /// Starts tallying what each context costs (see [`FieldCosts`]); slower, for benchmarks.
    pub fn track_costs(&mut self) {
        self.costs = Some(Box::default());
    }

    /// The tally since [`ArithWriteStream::track_costs`], if tracking.
    pub fn costs(&self) -> Option<&FieldCosts> {
        self.costs.as_deref()
    }

    /// The number of bytes [`ArithWriteStream::finish`] would return now.
    pub fn finished_len(&self) -> usize {
        self.enc.finished_len()
    }

    /// Starts a tentative write, to be kept by [`ArithWriteStream::commit`] or undone by
    /// [`ArithWriteStream::rollback`]: the models used so far are copied (a few hundred, not the table).
    pub fn checkpoint(&mut self) -> ArithCheckpoint {
        let mut saved = self.saved.take().unwrap_or_else(|| SavedModels {
            fresh: [0; Ctx::COUNT],
            probs: Vec::new(),
        });
        self.models.save(&mut saved);
        self.saved = Some(saved);
        if let Some(costs) = &self.costs {
            self.costs_at_checkpoint = Some(costs.clone());
        }
        ArithCheckpoint {
            enc: self.enc.checkpoint(),
        }
    }

    /// Keeps everything written since the checkpoint.
    pub fn commit(&mut self) {
        self.saved = None;
    }

    /// Undoes everything written since the checkpoint, models included.
    pub fn rollback(&mut self, c: ArithCheckpoint) {
        self.enc.rollback(c.enc);
        if let Some(saved) = self.saved.take() {
            self.models.restore(&saved);
        }
        if let Some(costs) = self.costs_at_checkpoint.take() {
            self.costs = Some(costs);
        }
    }

    /// A stream that prices values under this one's models as they stand, without coding or learning anything.
    pub fn pricing(&self) -> ArithPricing<'_> {
        ArithPricing {
            models: &self.models,
            table: price_table(),
            price: 0,
            limit: u32::MAX,
        }
    }

    /// Flushes the coder and returns the bytes.
    pub fn finish(self) -> Vec<u8> {
        self.enc.finish()
    }

    /// Runs `f` on a [`FlagRun`] over this stream: flags coded one after another with the coder's registers in
    /// locals, held across them instead of loaded and stored around each. `None` (and `f` not run) for a stream
    /// tallying costs, which codes its flags through [`Stream::bool`].
    #[inline(always)]
    pub fn flag_run<R>(&mut self, f: impl FnOnce(&mut FlagRun<'_>) -> R) -> Option<R> {
        if self.costs.is_some() {
            return None;
        }
        let mut run = FlagRun {
            r: self.enc.registers(),
            enc: &mut self.enc,
            models: &mut self.models,
        };
        let out = f(&mut run);
        let r = run.r;
        self.enc.set_registers(r);
        Some(out)
    }

    /// Codes one decision under model `index`.
    #[inline(always)]
    fn bit(&mut self, index: usize, bit: bool) {
        let Some(m) = self.models.probs.get_mut(index) else {
            return;
        };
        let word = *m;
        let p = word & PROB_MASK;
        if let Some(costs) = self.costs.as_deref_mut() {
            costs.decision(index, bit, p);
        }
        self.enc.encode_decision(p, bit);
        *m = adapt_model(word, bit);
    }

    #[inline]
    fn name(&mut self, ctx: Ctx) {
        if let Some(costs) = self.costs.as_deref_mut() {
            costs.charge(ctx, 0.0);
        }
    }

    #[inline]
    fn direct(&mut self, ctx: Ctx, value: u32, bits: u32) {
        if let Some(costs) = self.costs.as_deref_mut() {
            costs.charge(ctx, f64::from(bits));
        }
        self.enc.encode_direct(value, bits);
    }

    /// Codes `value` in `min..=max` ([`walk_value`]; without a tally through [`Self::small_value`] or
    /// [`Self::wide_value`]).
    #[inline(always)]
    fn value(&mut self, ctx: Ctx, value: i64, min: i64, max: i64) {
        self.name(ctx);
        if self.costs.is_none() {
            if max - min > SMALL_SPAN {
                self.wide_value(ctx, value, min, max);
            } else {
                self.small_value(ctx, value, min, max);
            }
            return;
        }
        walk_value(self, ctx, value, min, max);
    }

    /// Codes a value in `min..=max`, a range of at most 16 values, with the decisions [`walk_value`] makes: its
    /// tree's models reset up front if unused, the block borrowed once, and the coder's registers in locals across
    /// the tree's decisions (see [`RangeEncoder::registers`]), as [`Self::wide_value`] codes a wider value. Not
    /// for a stream tallying costs.
    #[inline(always)]
    fn small_value(&mut self, ctx: Ctx, value: i64, min: i64, max: i64) {
        let x = (value - min) as u32;
        let levels = bit_length((max - min) as u64);
        let block = self.models.small(ctx, levels);
        let Some(models) = self.models.probs.get_mut(block..block + PER_CTX) else {
            return;
        };
        let enc = &mut self.enc;
        let mut r = enc.registers();
        let mut node = 1usize;
        for i in (0..levels).rev() {
            let b = (x >> i) & 1 != 0;
            if let Some(model) = models.get_mut(SMALL + tree_slot(levels, node)) {
                let word = *model;
                enc.decision_in(&mut r, word & PROB_MASK, b);
                *model = adapt_model(word, b);
            }
            node = node * 2 + usize::from(b);
        }
        enc.set_registers(r);
    }

    /// Codes a value in `min..=max`, a range of more than 16 values, with the decisions [`walk_wide_value`] makes:
    /// the parts of its context's models it uses reset up front, the block borrowed once, and the coder's registers
    /// in locals across the value's decisions (see [`RangeEncoder::registers`]). Not for a stream tallying costs.
    fn wide_value(&mut self, ctx: Ctx, value: i64, min: i64, max: i64) {
        let sh = shape(min, max);
        // The residuals' ranges (up to ±15, ±255, ±8191) have bit-length trees of 3 and 4 levels: a copy for each
        // with its depth a constant walks the tree unrolled.
        match sh.levels {
            3 => self.wide_value_in(ctx, value, Shape { levels: 3, ..sh }),
            4 => self.wide_value_in(ctx, value, Shape { levels: 4, ..sh }),
            _ => self.wide_value_in(ctx, value, sh),
        }
    }

    /// [`Self::wide_value`] of a value in the range `sh` was made from.
    #[inline(always)]
    fn wide_value_in(&mut self, ctx: Ctx, value: i64, sh: Shape) {
        let d = value - sh.base;
        let m = d.unsigned_abs();
        let k = bit_length(m);
        let block = self.models.bucket(ctx, sh.levels);
        let signed = k > 0 && sh.below && sh.above;
        if signed {
            self.models.head(ctx);
        }
        if k >= 2 {
            self.models.mantissa(ctx);
        }
        let Some(models) = self.models.probs.get_mut(block..block + PER_CTX) else {
            return;
        };
        let enc = &mut self.enc;
        let mut r = enc.registers();
        let mut code = |index: usize, bit: bool| {
            if let Some(model) = models.get_mut(index) {
                let word = *model;
                enc.decision_in(&mut r, word & PROB_MASK, bit);
                *model = adapt_model(word, bit);
            }
        };
        let mut node = 1usize;
        for i in (0..sh.levels).rev() {
            let b = (k >> i) & 1 != 0;
            code(BUCKET + tree_slot(sh.levels, node), b);
            node = node * 2 + usize::from(b);
        }
        if signed {
            code(SIGN, d < 0);
        }
        if k >= 2 {
            let c = MANTISSA + MANTISSA_MODELS * k as usize;
            let first = (m >> (k - 2)) & 1 != 0;
            code(c, first);
            if k >= 3 {
                code(c + 1 + usize::from(first), (m >> (k - 3)) & 1 != 0);
            }
        }
        if k >= 4 {
            let rest = k - 3;
            let low = m & ((1u64 << rest) - 1);
            if rest > 16 {
                enc.direct_in(&mut r, (low >> 16) as u32, rest - 16);
                enc.direct_in(&mut r, (low & 0xFFFF) as u32, 16);
            } else {
                enc.direct_in(&mut r, low as u32, rest);
            }
        }
        enc.set_registers(r);
    }
}

/// Flags coded as [`Stream::bool`] codes them, on the coder's registers held in locals (see
/// [`ArithWriteStream::flag_run`]): the range-coded section writer codes a run of plain unchanged entries, two
/// flags each and most of a datagram, through one.
pub struct FlagRun<'s> {
    r: EncoderRegisters,
    enc: &'s mut RangeEncoder,
    models: &'s mut Models,
}

impl FlagRun<'_> {
    /// Codes `bit` under `ctx`'s flag model: the decision [`Stream::bool`] makes.
    #[inline(always)]
    pub fn flag(&mut self, ctx: Ctx, bit: bool) {
        let c = self.models.head(ctx);
        if let Some(m) = self.models.probs.get_mut(c + FLAG) {
            let word = *m;
            self.enc.decision_in(&mut self.r, word & PROB_MASK, bit);
            *m = adapt_model(word, bit);
        }
    }
}

impl DecisionSink for ArithWriteStream {
    type Block = usize;

    #[inline(always)]
    fn block(&mut self, ctx: Ctx, part: u32) -> usize {
        let (start, len) = Models::part_range(part);
        self.models.part(ctx, part, start, len)
    }

    #[inline(always)]
    fn decide(&mut self, block: usize, offset: usize, bit: bool) {
        self.bit(block + offset, bit);
    }

    fn raw(&mut self, ctx: Ctx, value: u64, bits: u32) {
        if bits > 16 {
            self.direct(ctx, (value >> 16) as u32, bits - 16);
            self.direct(ctx, (value & 0xFFFF) as u32, 16);
        } else {
            self.direct(ctx, value as u32, bits);
        }
    }
}

/// Where the decisions a value is coded as go: the writer codes them, the pricer prices them. Both walk a value
/// through [`walk_value`], so they cannot disagree on which model a decision uses.
trait DecisionSink {
    /// How the sink addresses a context's block of models.
    type Block: Copy;
    /// The block of `ctx` holding part `part` of its models (`PART_*`).
    fn block(&mut self, ctx: Ctx, part: u32) -> Self::Block;
    /// One decision under model `offset` of `block`.
    fn decide(&mut self, block: Self::Block, offset: usize, bit: bool);
    /// The low `bits` bits of `value` at even odds (at most 32).
    fn raw(&mut self, ctx: Ctx, value: u64, bits: u32);
}

/// Walks `value` in `min..=max` through `sink` as the range coder codes it: a range of at most 16 values as a
/// binary tree of its offset; a wider one as its distance from the range's base, by bit length, sign, the two
/// modelled bits below the leading one and the rest at even odds ([`walk_wide_value`]). Inlined, so that a small
/// range known where it is called walks its tree without branching on the range.
#[inline(always)]
fn walk_value<S: DecisionSink>(sink: &mut S, ctx: Ctx, value: i64, min: i64, max: i64) {
    if max - min <= SMALL_SPAN {
        let x = (value - min) as u32;
        let levels = bit_length((max - min) as u64);
        let block = sink.block(ctx, PART_SMALL + levels);
        let mut node = 1usize;
        for i in (0..levels).rev() {
            let b = (x >> i) & 1 != 0;
            sink.decide(block, SMALL + tree_slot(levels, node), b);
            node = node * 2 + usize::from(b);
        }
        return;
    }
    walk_wide_value(sink, ctx, value, min, max);
}

/// [`walk_value`] for a range of more than 16 values.
fn walk_wide_value<S: DecisionSink>(sink: &mut S, ctx: Ctx, value: i64, min: i64, max: i64) {
    let sh = shape(min, max);
    // As in `ArithWriteStream::wide_value`: the common depths walked unrolled.
    match sh.levels {
        3 => walk_shaped(sink, ctx, value, Shape { levels: 3, ..sh }),
        4 => walk_shaped(sink, ctx, value, Shape { levels: 4, ..sh }),
        _ => walk_shaped(sink, ctx, value, sh),
    }
}

/// [`walk_wide_value`] of a value in the range `sh` was made from.
#[inline(always)]
fn walk_shaped<S: DecisionSink>(sink: &mut S, ctx: Ctx, value: i64, sh: Shape) {
    let d = value - sh.base;
    let m = d.unsigned_abs();
    let k = bit_length(m);
    let block = sink.block(ctx, PART_BUCKET + sh.levels);
    let mut node = 1usize;
    for i in (0..sh.levels).rev() {
        let b = (k >> i) & 1 != 0;
        sink.decide(block, BUCKET + tree_slot(sh.levels, node), b);
        node = node * 2 + usize::from(b);
    }
    if k == 0 {
        return;
    }
    if sh.below && sh.above {
        let block = sink.block(ctx, PART_HEAD);
        sink.decide(block, SIGN, d < 0);
    }
    if k >= 2 {
        let block = sink.block(ctx, PART_MANTISSA);
        let c = MANTISSA + MANTISSA_MODELS * k as usize;
        let first = (m >> (k - 2)) & 1 != 0;
        sink.decide(block, c, first);
        if k >= 3 {
            sink.decide(block, c + 1 + usize::from(first), (m >> (k - 3)) & 1 != 0);
        }
    }
    if k >= 4 {
        let rest = k - 3;
        sink.raw(ctx, m & ((1u64 << rest) - 1), rest);
    }
}

impl Stream for ArithWriteStream {
    const READING: bool = false;

    #[inline(always)]
    fn bool(&mut self, ctx: Ctx, value: &mut bool) -> Result<(), CodecError> {
        self.name(ctx);
        let c = self.models.head(ctx);
        self.bit(c + FLAG, *value);
        Ok(())
    }

    #[inline(always)]
    fn int(&mut self, ctx: Ctx, value: &mut i32, min: i32, max: i32) -> Result<(), CodecError> {
        check_range(ctx, i64::from(*value), min, max)?;
        self.value(ctx, i64::from(*value), i64::from(min), i64::from(max));
        Ok(())
    }

    fn bits(&mut self, ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError> {
        let max = (1u64 << bits.min(32)) - 1;
        if u64::from(*value) > max {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        self.value(ctx, i64::from(*value), 0, max as i64);
        Ok(())
    }
}

/// Bits a decision costs, in units of `1 / PRICE_SCALE` bits.
const PRICE_SCALE: f64 = 256.0;

/// What coding a 0 costs under each probability of 0 (`-log2(p0 / PROB_ONE)` in units of `1 / PRICE_SCALE`
/// bits, `p0` in `0..=PROB_ONE`); a 1 costs the entry at `PROB_ONE - p0`.
/// A fixed-length array, so that a price looked up at a probability (at most `PROB_ONE`) needs no bounds check.
fn price_table() -> &'static PriceTable {
    static TABLE: OnceLock<Box<PriceTable>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Box::new([0; PROB_ONE as usize + 1]);
        for (p, price) in (0..=PROB_ONE).zip(table.iter_mut()) {
            let p = f64::from(p.max(1)) / f64::from(PROB_ONE);
            *price = (-p.log2() * PRICE_SCALE).round() as u32;
        }
        table
    })
}

/// [`price_table`]'s type: a price per probability `0..=PROB_ONE`.
type PriceTable = [u32; PROB_ONE as usize + 1];

/// What the pricer reads for a context outside the table (none is: every context has a block): even odds.
static EVEN_ODDS: [u16; PER_CTX] = [PROB_INIT; PER_CTX];

/// Prices values as an [`ArithWriteStream`] would code them now, under its current models, without coding them or
/// updating the models: the encoder runs each path an entry could take through one and codes the cheapest (see
/// [`ArithWriteStream::pricing`]). Decisions of one value that share a model are priced at the model's current
/// probability, not the one the coder would have adapted to after the first.
#[derive(Debug, Clone, Copy)]
pub struct ArithPricing<'a> {
    models: &'a Models,
    table: &'a PriceTable,
    price: u32,
    /// The price at which pricing gives up (see [`ArithPricing::stopping_at`]).
    limit: u32,
}

impl<'a> ArithPricing<'a> {
    /// Bits priced so far.
    pub fn priced_bits(&self) -> f64 {
        f64::from(self.price) / PRICE_SCALE
    }

    /// What has been priced so far, in units of `1 / PRICE_SCALE` bits: [`ArithPricing::priced_bits`] as an
    /// integer, to compare with another pricing's exactly.
    pub fn price(&self) -> u32 {
        self.price
    }

    /// This pricer, told to give up once its price reaches `limit` ([`ArithPricing::price`] units): from then on a
    /// wide value priced fails with [`CodecError::Overflow`], which ends the walk. A price only grows, so a path
    /// priced against the price of a cheaper one already priced stops where it can no longer undercut it, instead
    /// of being priced to its end. The limit is checked after wide values only (the ones that cost several
    /// decisions): a check after every flag cost more than the walks it cut short.
    pub fn stopping_at(self, limit: u32) -> Self {
        Self { limit, ..self }
    }

    /// The models the stream would code `part` of `ctx`'s block with, the block whole: the models themselves if
    /// the stream has used that part, else their priors (the stream resets a part on first use). Of a fixed
    /// length, so that a decision at an offset the walk bounds needs no bounds check.
    #[inline(always)]
    fn part_models(&self, ctx: Ctx, part: u32) -> &'a [u16; PER_CTX] {
        let slot = ctx.slot();
        let used = self
            .models
            .fresh
            .get(slot)
            .is_some_and(|f| f & (1 << part) != 0);
        let models: &'a Models = self.models;
        let table: &'a [u16] = if used { &models.probs } else { models.priors };
        table
            .get(slot * PER_CTX..)
            .and_then(|block| block.first_chunk::<PER_CTX>())
            .unwrap_or(&EVEN_ODDS)
    }

    #[inline(always)]
    fn bit(&mut self, models: &[u16; PER_CTX], offset: usize, bit: bool) {
        let p0 = models.get(offset).copied().unwrap_or(PROB_INIT) & PROB_MASK;
        let p = if bit { PROB_ONE - p0 } else { p0 };
        let cost = self.table.get(usize::from(p)).copied().unwrap_or(0);
        self.price = self.price.saturating_add(cost);
    }
}

impl<'a> DecisionSink for ArithPricing<'a> {
    type Block = &'a [u16; PER_CTX];

    #[inline(always)]
    fn block(&mut self, ctx: Ctx, part: u32) -> &'a [u16; PER_CTX] {
        self.part_models(ctx, part)
    }

    #[inline(always)]
    fn decide(&mut self, block: &'a [u16; PER_CTX], offset: usize, bit: bool) {
        self.bit(block, offset, bit);
    }

    fn raw(&mut self, _ctx: Ctx, _value: u64, bits: u32) {
        self.price = self.price.saturating_add(bits * PRICE_SCALE as u32);
    }
}

impl Stream for ArithPricing<'_> {
    const READING: bool = false;

    #[inline(always)]
    fn bool(&mut self, ctx: Ctx, value: &mut bool) -> Result<(), CodecError> {
        self.bit(self.part_models(ctx, PART_HEAD), FLAG, *value);
        Ok(())
    }

    #[inline(always)]
    fn int(&mut self, ctx: Ctx, value: &mut i32, min: i32, max: i32) -> Result<(), CodecError> {
        check_range(ctx, i64::from(*value), min, max)?;
        let (value, min, max) = (i64::from(*value), i64::from(min), i64::from(max));
        if max - min <= SMALL_SPAN {
            walk_value(self, ctx, value, min, max);
            return Ok(());
        }
        walk_wide_value(self, ctx, value, min, max);
        if self.price >= self.limit {
            return Err(CodecError::Overflow);
        }
        Ok(())
    }

    fn bits(&mut self, ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError> {
        let max = (1u64 << bits.min(32)) - 1;
        if u64::from(*value) > max {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        walk_value(self, ctx, i64::from(*value), 0, max as i64);
        Ok(())
    }
}

/// Decodes what [`ArithWriteStream`] wrote.
#[derive(Debug, Clone)]
pub struct ArithReadStream<'a> {
    dec: RangeDecoder<'a>,
    models: Models,
    costs: Option<Box<FieldCosts>>,
}

impl<'a> ArithReadStream<'a> {
    /// A stream over `bytes` with fresh models, starting from the trained priors.
    pub fn new(bytes: &'a [u8]) -> Result<Self, CodecError> {
        Self::with_priors(bytes, Some(Priors::Full))
    }

    /// A stream over what [`ArithWriteStream::with_flat_priors`] wrote.
    pub fn with_flat_priors(bytes: &'a [u8]) -> Result<Self, CodecError> {
        Self::with_priors(bytes, None)
    }

    /// [`ArithWriteStream::use_priors`], at the point the writer called it.
    pub fn use_priors(&mut self, priors: Priors) {
        self.models.use_priors(priors);
    }

    fn with_priors(bytes: &'a [u8], priors: Option<Priors>) -> Result<Self, CodecError> {
        Ok(Self {
            dec: RangeDecoder::new(bytes)?,
            models: Models::new(priors),
            costs: None,
        })
    }

    /// Starts tallying what each context cost the sender (see [`FieldCosts`]); slower, for benchmarks.
    pub fn track_costs(&mut self) {
        self.costs = Some(Box::default());
    }

    /// The tally since [`ArithReadStream::track_costs`], if tracking.
    pub fn costs(&self) -> Option<&FieldCosts> {
        self.costs.as_deref()
    }

    #[inline]
    fn name(&mut self, ctx: Ctx) {
        if let Some(costs) = self.costs.as_deref_mut() {
            costs.charge(ctx, 0.0);
        }
    }

    /// Runs `f` on a [`FlagReadRun`] over this stream: flags read one after another on a copy of the decoder in
    /// locals, and what was kept written back. `None` (and `f` not run) for a stream tallying costs, which reads
    /// its flags through [`Stream::bool`].
    #[inline(always)]
    pub fn flag_run<R>(&mut self, f: impl FnOnce(&mut FlagReadRun<'_, 'a>) -> R) -> Option<R> {
        if self.costs.is_some() {
            return None;
        }
        let mut run = FlagReadRun {
            dec: self.dec,
            kept: self.dec,
            models: &mut self.models,
            undo: [(0, 0); RUN_UNDO],
            unkept: 0,
        };
        let out = f(&mut run);
        let FlagReadRun {
            kept,
            models,
            undo,
            unkept,
            ..
        } = run;
        for &(index, word) in undo.iter().take(unkept).rev() {
            if let Some(m) = models.probs.get_mut(index) {
                *m = word;
            }
        }
        self.dec = kept;
        Some(out)
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.dec.position()
    }

    /// Checks that the decoder consumed every byte: the encoder's flush ends exactly where the decoder stops.
    pub fn finish(&self) -> Result<(), CodecError> {
        if !self.dec.is_at_end() {
            return Err(CodecError::Invalid {
                field: "trailing bytes",
            });
        }
        Ok(())
    }

    #[inline(always)]
    fn bit(&mut self, index: usize) -> Result<bool, CodecError> {
        decode_bit(
            &mut self.dec,
            &mut self.models.probs,
            self.costs.as_deref_mut(),
            index,
        )
    }

    /// Decodes a value in `min..=max`; inlined like [`ArithWriteStream::value`].
    #[inline(always)]
    fn value(&mut self, ctx: Ctx, min: i64, max: i64) -> Result<i64, CodecError> {
        self.name(ctx);
        if max - min <= SMALL_SPAN {
            let levels = bit_length((max - min) as u64);
            let c = self.models.small(ctx, levels);
            let mut node = 1usize;
            if self.costs.is_none() {
                // As a wide value's decisions are decoded: on a local copy of the decoder, the block borrowed once.
                let block = block_at(&mut self.models.probs, c)?;
                let mut dec = self.dec;
                let mut decoded = Ok(());
                for _ in 0..levels {
                    let offset = SMALL + tree_slot(levels, node);
                    match decide_in::<false>(&mut dec, block, c, offset, &mut None) {
                        Ok(b) => node = node * 2 + usize::from(b),
                        Err(e) => {
                            decoded = Err(e);
                            break;
                        }
                    }
                }
                self.dec = dec;
                decoded?;
            } else {
                for _ in 0..levels {
                    let b = self.bit(c + SMALL + tree_slot(levels, node))?;
                    node = node * 2 + usize::from(b);
                }
            }
            let v = min + (node - (1 << levels)) as i64;
            if v > max {
                return Err(CodecError::Invalid { field: ctx.name });
            }
            return Ok(v);
        }
        self.wide_value(ctx, min, max)
    }

    /// [`ArithReadStream::value`] for a range of more than 16 values, decoded on a local copy of the decoder (see
    /// [`Decoding`]).
    fn wide_value(&mut self, ctx: Ctx, min: i64, max: i64) -> Result<i64, CodecError> {
        match self.costs.as_deref_mut() {
            None => {
                let mut d = Decoding::<false> {
                    dec: self.dec,
                    models: &mut self.models,
                    costs: None,
                };
                let v = d.wide_value(ctx, min, max);
                self.dec = d.dec;
                v
            }
            costs => {
                let mut d = Decoding::<true> {
                    dec: self.dec,
                    models: &mut self.models,
                    costs,
                };
                let v = d.wide_value(ctx, min, max);
                self.dec = d.dec;
                v
            }
        }
    }
}

/// Model updates a [`FlagReadRun`] may hold unkept.
const RUN_UNDO: usize = 4;

/// Flags read as [`Stream::bool`] reads them, on a copy of the stream's decoder held in locals (see
/// [`ArithReadStream::flag_run`]): the range-coded section reader reads a run of plain unchanged entries, two flags
/// each and most of a datagram, through one. What is read after the last [`FlagReadRun::keep`] is undone when the
/// run ends (the decoder and every model it adapted as they were), so that the entry that ends a run is read again
/// from its start by the general path.
pub struct FlagReadRun<'s, 'a> {
    dec: RangeDecoder<'a>,
    kept: RangeDecoder<'a>,
    models: &'s mut Models,
    /// The models adapted since the last keep, each with the word it held before.
    undo: [(usize, u16); RUN_UNDO],
    unkept: usize,
}

impl FlagReadRun<'_, '_> {
    /// Reads a flag under `ctx`'s flag model: the decision [`Stream::bool`] reads. `None` on a decoding error, or
    /// past [`RUN_UNDO`] flags since the last keep (nothing read then).
    #[inline(always)]
    pub fn flag(&mut self, ctx: Ctx) -> Option<bool> {
        let undo = self.undo.get_mut(self.unkept)?;
        let index = self.models.head(ctx) + FLAG;
        let m = self.models.probs.get_mut(index)?;
        let word = *m;
        let bit = self.dec.decode_decision(word & PROB_MASK).ok()?;
        *m = adapt_model(word, bit);
        *undo = (index, word);
        self.unkept += 1;
        Some(bit)
    }

    /// Keeps every flag read so far.
    #[inline(always)]
    pub fn keep(&mut self) {
        self.kept = self.dec;
        self.unkept = 0;
    }
}

/// Decodes one decision under model `index` of `probs` and adapts the model (tallying its cost in `costs`).
#[inline(always)]
fn decode_bit(
    dec: &mut RangeDecoder<'_>,
    probs: &mut [u16],
    costs: Option<&mut FieldCosts>,
    index: usize,
) -> Result<bool, CodecError> {
    let m = probs
        .get_mut(index)
        .ok_or(CodecError::Invalid { field: "model" })?;
    let word = *m;
    let p0 = word & PROB_MASK;
    let bit = dec.decode_decision(p0)?;
    *m = adapt_model(word, bit);
    if let Some(costs) = costs {
        costs.decided(index, bit, p0);
    }
    Ok(bit)
}

/// A wide value's decisions decoded on a copy of the stream's decoder: a local whose registers stay in machine
/// registers across the decisions rather than going through memory on each (the caller writes the copy back).
/// `TALLY` says whether the stream tallies costs (`costs` is then `Some`): a stream that does not (any but a
/// benchmark's) decodes without asking at every decision.
struct Decoding<'s, 'a, const TALLY: bool> {
    dec: RangeDecoder<'a>,
    models: &'s mut Models,
    costs: Option<&'s mut FieldCosts>,
}

impl<const TALLY: bool> Decoding<'_, '_, TALLY> {
    /// Decodes a value in `min..=max`, a range of more than 16 values, as [`walk_wide_value`] coded it.
    #[inline(always)]
    fn wide_value(&mut self, ctx: Ctx, min: i64, max: i64) -> Result<i64, CodecError> {
        let sh = shape(min, max);
        // As in `ArithWriteStream::wide_value`: the common depths walked unrolled.
        match sh.levels {
            3 => self.wide_value_in(ctx, min, max, Shape { levels: 3, ..sh }),
            4 => self.wide_value_in(ctx, min, max, Shape { levels: 4, ..sh }),
            _ => self.wide_value_in(ctx, min, max, sh),
        }
    }

    /// [`Self::wide_value`] of a value in `min..=max`, whose shape is `sh`. Each part of the context's models is
    /// borrowed as the context's whole block once, and its decisions address models at offsets into it.
    #[inline(always)]
    fn wide_value_in(
        &mut self,
        ctx: Ctx,
        min: i64,
        max: i64,
        sh: Shape,
    ) -> Result<i64, CodecError> {
        let Decoding { dec, models, costs } = self;
        let start = models.bucket(ctx, sh.levels);
        let block = block_at(&mut models.probs, start)?;
        let mut node = 1usize;
        for _ in 0..sh.levels {
            let offset = BUCKET + tree_slot(sh.levels, node);
            let b = decide_in::<TALLY>(dec, block, start, offset, costs)?;
            node = node * 2 + usize::from(b);
        }
        let k = (node - (1 << sh.levels)) as u32;
        if k == 0 {
            return Ok(sh.base);
        }
        if k > sh.max_k {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        let negative = if sh.below && sh.above {
            let start = models.head(ctx);
            let block = block_at(&mut models.probs, start)?;
            decide_in::<TALLY>(dec, block, start, SIGN, costs)?
        } else {
            sh.below
        };
        let mut m = 1u64;
        if k >= 2 {
            let start = models.mantissa(ctx);
            let block = block_at(&mut models.probs, start)?;
            let c = MANTISSA + MANTISSA_MODELS * k as usize;
            let first = decide_in::<TALLY>(dec, block, start, c, costs)?;
            m = (m << 1) | u64::from(first);
            if k >= 3 {
                let second =
                    decide_in::<TALLY>(dec, block, start, c + 1 + usize::from(first), costs)?;
                m = (m << 1) | u64::from(second);
            }
        }
        if k >= 4 {
            let rest = k - 3;
            let mut direct = |bits: u32| {
                if TALLY && let Some(costs) = costs.as_deref_mut() {
                    costs.charge(ctx, f64::from(bits));
                }
                dec.decode_direct(bits)
            };
            let low = if rest > 16 {
                let hi = u64::from(direct(rest - 16)?);
                (hi << 16) | u64::from(direct(16)?)
            } else {
                u64::from(direct(rest)?)
            };
            m = (m << rest) | low;
        }
        let d = if negative { -(m as i64) } else { m as i64 };
        let v = sh.base + d;
        if v < min || v > max {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        Ok(v)
    }
}

/// The block of models of one context, from model `start` of `probs` on.
#[inline(always)]
fn block_at(probs: &mut [u16], start: usize) -> Result<&mut [u16; PER_CTX], CodecError> {
    probs
        .get_mut(start..)
        .and_then(|rest| rest.first_chunk_mut::<PER_CTX>())
        .ok_or(CodecError::Invalid { field: "model" })
}

/// [`decode_bit`] under model `offset` of a context's block (see [`block_at`]), which starts at model `start`: an
/// offset the walk bounds is checked against the block's constant length, or not at all.
#[inline(always)]
fn decide_in<const TALLY: bool>(
    dec: &mut RangeDecoder<'_>,
    block: &mut [u16; PER_CTX],
    start: usize,
    offset: usize,
    costs: &mut Option<&mut FieldCosts>,
) -> Result<bool, CodecError> {
    let m = block
        .get_mut(offset)
        .ok_or(CodecError::Invalid { field: "model" })?;
    let word = *m;
    let p0 = word & PROB_MASK;
    let bit = dec.decode_decision(p0)?;
    *m = adapt_model(word, bit);
    if TALLY && let Some(costs) = costs.as_deref_mut() {
        costs.decided(start + offset, bit, p0);
    }
    Ok(bit)
}

impl Stream for ArithReadStream<'_> {
    const READING: bool = true;

    #[inline(always)]
    fn bool(&mut self, ctx: Ctx, value: &mut bool) -> Result<(), CodecError> {
        self.name(ctx);
        let c = self.models.head(ctx);
        *value = self.bit(c + FLAG)?;
        Ok(())
    }

    #[inline(always)]
    fn int(&mut self, ctx: Ctx, value: &mut i32, min: i32, max: i32) -> Result<(), CodecError> {
        *value = self.value(ctx, i64::from(min), i64::from(max))? as i32;
        Ok(())
    }

    fn bits(&mut self, ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError> {
        let max = (1u64 << bits.min(32)) - 1;
        *value = self.value(ctx, 0, max as i64)? as u32;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitpack::BitWriteStream;
    use proptest::prelude::*;

    const A: Ctx = Ctx::new(1, "a");
    const B: Ctx = Ctx::new(2, "b");

    /// A tally names each decision's model; of a wide value's, only the bit-length tree's root and the sign are
    /// picked by their context alone, and of a small value's only the root; a flag always is.
    #[test]
    fn only_a_value_tree_s_inner_nodes_and_mantissa_wait_on_the_last_decision() {
        let mut w = ArithWriteStream::new();
        w.track_costs();
        w.bool(A, &mut true).unwrap();
        // -21: bit length 5 (a four-level tree), a sign, two modelled mantissa bits.
        w.int(A, &mut -21, -255, 255).unwrap();
        w.int(B, &mut 6, 0, 9).unwrap();
        let waits: Vec<bool> = w
            .costs()
            .unwrap()
            .decisions()
            .iter()
            .map(|&(model, _, _)| model_waits_on_last_decision(model))
            .collect();
        let flag = [false];
        let wide = [false, true, true, true, false, true, true];
        let small = [false, true, true, true];
        assert_eq!(waits, [&flag[..], &wide[..], &small[..]].concat());
    }

    /// The writer codes a wide value through its own path ([`ArithWriteStream::wide_value`]) unless it tallies
    /// costs, when it walks [`walk_wide_value`] as the pricer does: the two must make the same decisions (the same
    /// bytes), and the reader must read them back, tallying or not.
    #[test]
    fn a_value_codes_alike_with_and_without_a_tally() {
        let ranges = [
            (0, 1),
            (0, 3),
            (-7, 7),
            (0, 15),
            (-2, 9),
            (-15, 15),
            (-255, 255),
            (-8191, 8191),
            (0, 100),
            (-3, 40),
            (1, 1 << 20),
            (i32::MIN, i32::MAX),
        ];
        let mut seed = 0x9E37_79B9u32;
        let values: Vec<(Ctx, i32, i32, i32)> = (0..3000)
            .map(|i| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                let (min, max) = ranges[i % ranges.len()];
                let span = (i64::from(max) - i64::from(min)) as u64 + 1;
                // Mostly near zero, where residuals cluster, sometimes anywhere in the range.
                let near = i64::from(seed % 9) - 4;
                let v = if seed.is_multiple_of(4) {
                    i64::from(min) + (u64::from(seed) * 2_654_435_761 % span) as i64
                } else {
                    near.clamp(i64::from(min), i64::from(max))
                };
                let ctx = if i.is_multiple_of(3) { A } else { B };
                (ctx, v as i32, min, max)
            })
            .collect();
        let mut fast = ArithWriteStream::new();
        let mut walked = ArithWriteStream::new();
        walked.track_costs();
        for &(ctx, v, min, max) in &values {
            fast.int(ctx, &mut { v }, min, max).unwrap();
            walked.int(ctx, &mut { v }, min, max).unwrap();
        }
        let bytes = fast.finish();
        let written: Vec<(&str, f64)> = walked.costs().unwrap().by_field().collect();
        assert_eq!(bytes, walked.finish());
        // The reader decodes alike whether it tallies (through its general path) or not, and tallies what the
        // writer coded.
        for tally in [false, true] {
            let mut r = ArithReadStream::new(&bytes).unwrap();
            if tally {
                r.track_costs();
            }
            for &(ctx, v, min, max) in &values {
                let mut read = 0;
                r.int(ctx, &mut read, min, max).unwrap();
                assert_eq!(read, v);
            }
            r.finish().unwrap();
            if tally {
                let read: Vec<(&str, f64)> = r.costs().unwrap().by_field().collect();
                assert_eq!(read, written);
            }
        }
    }

    #[test]
    fn model_tables_are_reused_across_datagrams() {
        // A fresh thread, so the count is this test's alone: a writer and a reader per datagram, 50 datagrams.
        std::thread::spawn(|| {
            for i in 0..50 {
                let mut w = ArithWriteStream::new();
                w.int(A, &mut (i % 7), -10, 10).unwrap();
                let bytes = w.finish();
                let mut r = ArithReadStream::new(&bytes).unwrap();
                let mut v = 0;
                r.int(A, &mut v, -10, 10).unwrap();
                assert_eq!(v, i % 7);
            }
            assert!(
                model_tables_allocated() <= 2,
                "{}",
                model_tables_allocated()
            );
        })
        .join()
        .unwrap();
    }

    /// Writes a fixed mix of fields under contexts `A` and `B`, skewed by `bias`, and returns the bytes.
    fn mixed(bias: i32) -> Vec<u8> {
        let mut w = ArithWriteStream::new();
        for i in 0..200 {
            w.int(A, &mut ((i * 7 + bias) % 9 - 4), -4, 4).unwrap();
            w.int(A, &mut ((i * 13 + bias) % 5000 - 2500), -4096, 4095)
                .unwrap();
            w.bool(B, &mut ((i + bias) % 3 == 0)).unwrap();
            w.bits(B, &mut ((i * 31 + bias) as u32 % 65536), 16)
                .unwrap();
        }
        w.finish()
    }

    #[test]
    fn a_pooled_table_codes_like_a_fresh_one() {
        // A fresh thread: the first stream gets a newly allocated table, the later ones tables other streams
        // skewed; the bytes and the decoded values must not depend on which.
        std::thread::spawn(|| {
            let fresh = mixed(0);
            for bias in 1..6 {
                let _ = mixed(bias * 1000 + 3);
                assert_eq!(mixed(0), fresh);
                let other = mixed(bias);
                let mut r = ArithReadStream::new(&other).unwrap();
                for i in 0..200 {
                    let (mut a, mut b, mut f, mut raw) = (0, 0, false, 0);
                    r.int(A, &mut a, -4, 4).unwrap();
                    r.int(A, &mut b, -4096, 4095).unwrap();
                    r.bool(B, &mut f).unwrap();
                    r.bits(B, &mut raw, 16).unwrap();
                    assert_eq!(a, (i * 7 + bias) % 9 - 4);
                    assert_eq!(b, (i * 13 + bias) % 5000 - 2500);
                    assert_eq!(f, (i + bias) % 3 == 0);
                    assert_eq!(raw, (i * 31 + bias) as u32 % 65536);
                }
                r.finish().unwrap();
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn small_deltas_cost_less_than_bitpacking() {
        let mut a = ArithWriteStream::new();
        let mut p = BitWriteStream::new();
        for i in 0..500 {
            let mut v = (i % 5) - 2;
            a.int(A, &mut v, -4096, 4095).unwrap();
            p.int(A, &mut v, -4096, 4095).unwrap();
        }
        let arith = a.finish().len();
        let packed = p.finish().len();
        assert!(
            arith * 3 < packed,
            "arith {arith} bytes, bitpack {packed} bytes"
        );
    }

    #[test]
    fn two_bits_below_the_leading_one_are_modelled() {
        // Values 8 and 9 (bit length 4, the two bits below the leading one always 0): only the lowest bit is left
        // at even odds, so each costs little more than one bit (with one modelled bit it cost over two).
        let mut w = ArithWriteStream::new();
        for i in 0..500 {
            w.int(A, &mut (8 + i % 2), -4096, 4095).unwrap();
        }
        let bytes = w.finish();
        assert!(bytes.len() * 8 < 500 * 3 / 2, "{} bytes", bytes.len());
        let mut r = ArithReadStream::new(&bytes).unwrap();
        for i in 0..500 {
            let mut v = 0;
            r.int(A, &mut v, -4096, 4095).unwrap();
            assert_eq!(v, 8 + i % 2);
        }
        r.finish().unwrap();
    }

    /// Two of the codec's contexts whose trained tables differ: a position residual component and the unchanged
    /// flag.
    const TRAINED_A: Ctx = Ctx::new(5, "a");
    const TRAINED_B: Ctx = Ctx::new(0, "b");

    /// Writes values under `TRAINED_A` and `TRAINED_B`, switching to the pose-only priors after the first
    /// `switch_at` (never if it is past the end), and returns the bytes.
    fn switched(switch_at: usize) -> Vec<u8> {
        let mut w = ArithWriteStream::new();
        for i in 0..40 {
            if i == switch_at {
                w.use_priors(Priors::PoseOnly);
            }
            w.int(TRAINED_A, &mut (i as i32 % 5 - 2), -300, 300)
                .unwrap();
            w.bool(TRAINED_B, &mut (i % 3 == 0)).unwrap();
        }
        w.finish()
    }

    #[test]
    fn a_switch_of_priors_mid_stream_round_trips() {
        // Models used before the switch keep what they learned; models first used after it start from the
        // pose-only table. The reader switches at the same point and reads back every value.
        for switch_at in [0, 1, 17] {
            let bytes = switched(switch_at);
            let mut r = ArithReadStream::new(&bytes).unwrap();
            for i in 0..40 {
                if i == switch_at {
                    r.use_priors(Priors::PoseOnly);
                }
                let (mut v, mut f) = (0, false);
                r.int(TRAINED_A, &mut v, -300, 300).unwrap();
                r.bool(TRAINED_B, &mut f).unwrap();
                assert_eq!((v, f), (i as i32 % 5 - 2, i % 3 == 0));
            }
            r.finish().unwrap();
        }
        // The tables differ on these contexts, so where the switch happens shows in the bytes.
        assert_ne!(switched(0), switched(usize::MAX));
        // A stream at even odds ignores the switch.
        let mut flat = ArithWriteStream::with_flat_priors();
        flat.use_priors(Priors::PoseOnly);
        assert_eq!(flat.models.priors, flat_priors());
    }

    #[test]
    fn every_rate_keeps_a_model_inside_the_coder_range_and_its_word() {
        for rate in 0..=MAX_RATE {
            for start in [1, PRIOR_MIN, PROB_INIT, PROB_ONE - PRIOR_MIN, PROB_ONE - 1] {
                for bit in [false, true] {
                    let (mut p, mut word) = (start, model(start, rate));
                    for _ in 0..200 {
                        p = adapt(p, bit, rate);
                        assert!((1..PROB_ONE).contains(&p), "rate {rate}, from {start}: {p}");
                        // A model word keeps its rate through every update, and its probability is the same.
                        word = adapt_model(word, bit);
                        assert_eq!((word & PROB_MASK, word >> RATE_SHIFT), (p, shift_of(rate)));
                    }
                }
            }
        }
    }

    #[test]
    fn trained_rates_pick_the_cheapest_rate() {
        // Under `A` a run of ones (learned fastest at rate 1), under `B` ones and zeros in turn (even odds,
        // the prior, kept best at rate 0).
        let mut total = FieldCosts::default();
        for _ in 0..20 {
            let mut w = ArithWriteStream::with_flat_priors();
            w.track_costs();
            for i in 0..30 {
                w.bool(A, &mut true).unwrap();
                w.bool(B, &mut (i % 2 == 0)).unwrap();
            }
            total.add(w.costs().unwrap());
        }
        let rates = total.trained_rates(50);
        let flag = |ctx: Ctx| (ctx.slot() * PER_CTX + FLAG) as u32;
        assert!(rates.contains(&(flag(A), 1)), "{rates:?}");
        assert!(rates.contains(&(flag(B), 0)), "{rates:?}");
        assert_eq!(rates.len(), 2);
    }

    #[test]
    fn every_codec_context_round_trips_at_its_trained_rates() {
        // Each context's models adapt at the rates its table gives them (0 to 7): extreme and ordinary values
        // under every codec context, from both tables, read back exactly.
        let values = [0, 1, -1, 5, -300, 4095, -4096, 17, 0, 0, 2, -2];
        for priors in [Priors::Full, Priors::PoseOnly] {
            let mut w = ArithWriteStream::new();
            w.use_priors(priors);
            for id in 0..Ctx::CODEC as u16 {
                let ctx = Ctx::new(id, "c");
                for (i, &v) in values.iter().enumerate() {
                    w.int(ctx, &mut v.clone(), -4096, 4095).unwrap();
                    w.int(ctx, &mut (v & 3), 0, 3).unwrap();
                    w.bool(ctx, &mut (i % 3 == 0)).unwrap();
                }
            }
            let bytes = w.finish();
            let mut r = ArithReadStream::new(&bytes).unwrap();
            r.use_priors(priors);
            for id in 0..Ctx::CODEC as u16 {
                let ctx = Ctx::new(id, "c");
                for (i, &v) in values.iter().enumerate() {
                    let (mut x, mut y, mut f) = (0, 0, false);
                    r.int(ctx, &mut x, -4096, 4095).unwrap();
                    r.int(ctx, &mut y, 0, 3).unwrap();
                    r.bool(ctx, &mut f).unwrap();
                    assert_eq!((x, y, f), (v, v & 3, i % 3 == 0), "context {id}");
                }
            }
            r.finish().unwrap();
        }
    }

    #[test]
    fn rollback_restores_models() {
        let mut w = ArithWriteStream::new();
        let mut v = 3;
        w.int(A, &mut v, -10, 10).unwrap();
        let c = w.checkpoint();
        for _ in 0..50 {
            w.int(A, &mut 7, -10, 10).unwrap();
            // A context first used after the checkpoint must be fresh again after the rollback.
            w.int(B, &mut 900, -1000, 1000).unwrap();
            w.bool(B, &mut true).unwrap();
        }
        w.rollback(c);
        w.int(A, &mut -2, -10, 10).unwrap();
        w.int(B, &mut -5, -1000, 1000).unwrap();
        w.bool(B, &mut false).unwrap();
        let bytes = w.finish();
        let mut r = ArithReadStream::new(&bytes).unwrap();
        let (mut x, mut f) = (0, true);
        r.int(A, &mut x, -10, 10).unwrap();
        assert_eq!(x, 3);
        r.int(A, &mut x, -10, 10).unwrap();
        assert_eq!(x, -2);
        r.int(B, &mut x, -1000, 1000).unwrap();
        assert_eq!(x, -5);
        r.bool(B, &mut f).unwrap();
        assert!(!f);
        r.finish().unwrap();
    }

    #[test]
    fn garbage_is_rejected_without_panic() {
        // Pseudo-random bytes (a repeated byte can settle fast-adapting models into a cycle of valid values).
        let mut x = 0x9E37_79B9u32;
        let bytes: Vec<u8> = (0..64)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let mut r = ArithReadStream::new(&bytes).unwrap();
        let mut errors = 0;
        for _ in 0..200 {
            let mut v = 0;
            if r.int(A, &mut v, -3, 3).is_err() {
                errors += 1;
            } else {
                assert!((-3..=3).contains(&v));
            }
        }
        assert!(errors > 0);
    }

    proptest! {
        #[test]
        fn round_trips_ranges(ops in prop::collection::vec(
            (any::<i32>(), any::<i32>(), any::<i32>(), any::<bool>(), any::<u32>(), 1u32..=32), 0..100)
        ) {
            let mut w = ArithWriteStream::new();
            let mut expect = Vec::new();
            for &(a, b, c, flag, raw, n) in &ops {
                let (min, max) = (a.min(b), a.max(b));
                let v = (i64::from(min) + (i64::from(c).rem_euclid(i64::from(max) - i64::from(min) + 1))) as i32;
                let raw = if n == 32 { raw } else { raw & ((1 << n) - 1) };
                w.int(A, &mut v.clone(), min, max).unwrap();
                w.bool(B, &mut flag.clone()).unwrap();
                w.bits(B, &mut raw.clone(), n).unwrap();
                expect.push((v, min, max, flag, raw, n));
            }
            let bytes = w.finish();
            let mut r = ArithReadStream::new(&bytes).unwrap();
            for &(v, min, max, flag, raw, n) in &expect {
                let (mut x, mut f, mut y) = (0, false, 0);
                r.int(A, &mut x, min, max).unwrap();
                r.bool(B, &mut f).unwrap();
                r.bits(B, &mut y, n).unwrap();
                prop_assert_eq!((x, f, y), (v, flag, raw));
            }
        }
    }
}
