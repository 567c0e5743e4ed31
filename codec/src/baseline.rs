//! Per-object baselines: the sender's ack tracker and the receiver's history of received states.
//!
//! Both are generic over the state type, so rigid bodies, avatars and shooter snapshots share the machinery.

use crate::header::acked_sequences;
use crate::packet::SectionTables;
use crate::seq::seq_newer;

/// Packets the ack tracker remembers; acks for older packets are ignored (at 60 Hz, a little over four seconds).
pub const SENT_PACKETS: usize = 256;

/// The largest distance, in packets, between a packet and the baseline one of its entries names (a little over a
/// second at 60 Hz). An older acked baseline is not used, and the object goes absolute.
pub const MAX_BASELINE_OFFSET: u16 = 64;

/// Packet sequences whose states the receiving side keeps per object: twice the baseline window.
///
/// A state received in packet `b` sits in slot `b % HISTORY_PER_OBJECT` until a state from packet
/// `b + HISTORY_PER_OBJECT` replaces it, and packets naming `b` are at most `b + MAX_BASELINE_OFFSET`. So a packet
/// still finds its baselines when it arrives again (duplicated) or up to `HISTORY_PER_OBJECT - MAX_BASELINE_OFFSET`
/// packets behind the newest one received (reordered). A window of only `MAX_BASELINE_OFFSET` would put a packet at
/// the full offset into its own baseline's slot, so that its duplicate, or a late packet naming the same baseline,
/// no longer decodes.
pub const HISTORY_PER_OBJECT: usize = 2 * MAX_BASELINE_OFFSET as usize;

// Slots must follow sequences across the wrap from 65535 to 0.
const _: () = assert!(65536 % HISTORY_PER_OBJECT == 0);

/// A state both sides are known to hold: it arrived in packet `sequence`, sent at simulation frame `frame`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Baseline<T> {
    /// The packet that carried it.
    pub sequence: u16,
    /// The sender's frame when it was sent (the predictor runs from here).
    pub frame: u16,
    /// The state itself.
    pub state: T,
}

#[derive(Debug, Clone)]
struct SentPacket<T> {
    sequence: u16,
    frame: u16,
    live: bool,
    /// The ids the packet carried, and their states in the same order.
    ids: Vec<u16>,
    states: Vec<T>,
    /// The states' revisions in the same order (see [`AckTracker::baseline_revision`]), or empty when the sender
    /// named none.
    revisions: Vec<Option<u64>>,
}

/// Acked states the sender keeps per object besides its baseline, for predictors that extrapolate from two
/// states (see [`AckTracker::older_baseline`]).
pub const OLDER_KEPT: usize = 8;

/// The largest distance, in packets, from an entry's baseline back to the older state it names.
pub const MAX_OLDER_GAP: u16 = 15;

/// The sender's side: which states each sent packet carried, and each object's newest acked state.
#[derive(Debug, Clone)]
pub struct AckTracker<T> {
    sent: Vec<SentPacket<T>>,
    baselines: Vec<Option<Baseline<T>>>,
    /// Per object, acked states older than its baseline (any order; the oldest is replaced first).
    older: Vec<[Option<Baseline<T>>; OLDER_KEPT]>,
    /// Per object, the revision its sender named for the baseline's state, if it named one.
    revisions: Vec<Option<u64>>,
    /// The packet writer's working tables, kept here (the link's sender side) so that each datagram reuses them.
    pub(crate) tables: SectionTables<T>,
}

impl<T: Copy> AckTracker<T> {
    /// A tracker for object ids `0..max_objects`.
    pub fn new(max_objects: u16) -> Self {
        Self {
            sent: (0..SENT_PACKETS)
                .map(|_| SentPacket {
                    sequence: 0,
                    frame: 0,
                    live: false,
                    ids: Vec::new(),
                    states: Vec::new(),
                    revisions: Vec::new(),
                })
                .collect(),
            baselines: vec![None; usize::from(max_objects)],
            older: vec![[None; OLDER_KEPT]; usize::from(max_objects)],
            revisions: vec![None; usize::from(max_objects)],
            tables: SectionTables::default(),
        }
    }

    /// Records the states packet `sequence` (sent at `frame`) carried.
    pub fn record_sent(
        &mut self,
        sequence: u16,
        frame: u16,
        states: impl IntoIterator<Item = (u16, T)>,
    ) {
        let (ids, states) = states.into_iter().unzip();
        self.record_sent_split(sequence, frame, ids, states, Vec::new());
    }

    /// [`AckTracker::record_sent`] with each state's revision, as a sender that tracks its objects' changes
    /// records what it sent (see [`AckTracker::baseline_revision`]): a tracker set up by hand, as a test's or a
    /// benchmark's, with the revisions the packet writer would have recorded.
    pub fn record_sent_revised(
        &mut self,
        sequence: u16,
        frame: u16,
        states: impl IntoIterator<Item = (u16, T, u64)>,
    ) {
        let (mut ids, mut kept, mut revisions) = (Vec::new(), Vec::new(), Vec::new());
        for (id, state, revision) in states {
            ids.push(id);
            kept.push(state);
            revisions.push(Some(revision));
        }
        self.record_sent_split(sequence, frame, ids, kept, revisions);
    }

    /// [`AckTracker::record_sent`] with the ids and their states (in the same order) in two vectors, taken over
    /// as they are: the packet writer builds them so, which spares it assembling an `(id, state)` pair per entry
    /// (a copy of each state through the stack). `revisions` is empty, or each state's revision in the same order.
    pub(crate) fn record_sent_split(
        &mut self,
        sequence: u16,
        frame: u16,
        ids: Vec<u16>,
        states: Vec<T>,
        revisions: Vec<Option<u64>>,
    ) {
        debug_assert_eq!(ids.len(), states.len());
        debug_assert!(revisions.is_empty() || revisions.len() == ids.len());
        // Each slot holds exactly what its packet carried: a slot that kept the largest capacity it ever needed
        // would make a long session's memory creep with every new record.
        let slot = &mut self.sent[usize::from(sequence) % SENT_PACKETS];
        slot.sequence = sequence;
        slot.frame = frame;
        slot.live = true;
        slot.ids = ids;
        slot.states = states;
        slot.revisions = revisions;
    }

    /// Processes the ack fields of a header from the other side: every newly acked packet's states become their
    /// objects' baselines (unless a newer baseline is already known). Returns the newly acked sequences.
    pub fn process_acks(&mut self, ack: u16, ack_bits: u32) -> Vec<u16> {
        let mut newly = Vec::new();
        for sequence in acked_sequences(ack, ack_bits) {
            let slot = &mut self.sent[usize::from(sequence) % SENT_PACKETS];
            if !slot.live || slot.sequence != sequence {
                continue;
            }
            slot.live = false;
            newly.push(sequence);
            for (k, (&id, &state)) in slot.ids.iter().zip(&slot.states).enumerate() {
                let (Some(b), Some(older), Some(revision)) = (
                    self.baselines.get_mut(usize::from(id)),
                    self.older.get_mut(usize::from(id)),
                    self.revisions.get_mut(usize::from(id)),
                ) else {
                    continue;
                };
                let acked = Baseline {
                    sequence,
                    frame: slot.frame,
                    state,
                };
                let newer = b.is_none_or(|old| seq_newer(sequence, old.sequence));
                let demoted = if newer {
                    *revision = slot.revisions.get(k).copied().flatten();
                    b.replace(acked)
                } else {
                    Some(acked)
                };
                if let Some(d) = demoted {
                    keep_older(older, d);
                }
            }
        }
        newly
    }

    /// The baseline to encode object `id` against in packet `sequence`, if one is acked and not too old.
    #[inline]
    pub fn baseline(&self, id: u16, sequence: u16) -> Option<&Baseline<T>> {
        self.baselines
            .get(usize::from(id))?
            .as_ref()
            .filter(|b| (1..=MAX_BASELINE_OFFSET).contains(&sequence.wrapping_sub(b.sequence)))
    }

    /// The revision the sender named for the state of object `id`'s baseline, if it named one: a number it changes
    /// whenever the object's state changes (for example the frame of the last change), recorded with each state
    /// it sends. An object whose revision now is its baseline's still holds the baseline's state, which the packet
    /// writer then takes without a copy or a comparison (see `PacketWriter::write_section_revised`).
    #[inline]
    pub fn baseline_revision(&self, id: u16) -> Option<u64> {
        self.revisions.get(usize::from(id)).copied().flatten()
    }

    /// The baseline slots of objects `first..` and the revisions named for them (see
    /// [`AckTracker::baseline_revision`]), both indexed from `first`: the packet writer walks a run of neighbouring
    /// ids through them, one step of two slices an object rather than two lookups.
    #[inline]
    pub(crate) fn slots_from(&self, first: usize) -> (&[Option<Baseline<T>>], &[Option<u64>]) {
        (
            self.baselines.get(first..).unwrap_or_default(),
            self.revisions.get(first..).unwrap_or_default(),
        )
    }

    /// An acked state of object `id` older than `baseline` to extrapolate from in packet `sequence` (sent at
    /// `frame`): at most [`MAX_OLDER_GAP`] packets before the baseline and [`MAX_BASELINE_OFFSET`] before
    /// `sequence` (so the receiver still holds it), as many frames before the baseline as the baseline is before
    /// `frame` or as near to that as kept.
    pub fn older_baseline(
        &self,
        id: u16,
        baseline: &Baseline<T>,
        sequence: u16,
        frame: u16,
    ) -> Option<&Baseline<T>> {
        let target = i32::from(frame.wrapping_sub(baseline.frame));
        self.older
            .get(usize::from(id))?
            .iter()
            .flatten()
            .filter(|o| {
                (1..=MAX_OLDER_GAP).contains(&baseline.sequence.wrapping_sub(o.sequence))
                    && sequence.wrapping_sub(o.sequence) <= MAX_BASELINE_OFFSET
                    && seq_newer(baseline.frame, o.frame)
            })
            .min_by_key(|o| {
                let span = i32::from(baseline.frame.wrapping_sub(o.frame));
                (
                    (span - target).abs(),
                    baseline.sequence.wrapping_sub(o.sequence),
                )
            })
    }

    /// Forgets object `id`'s baseline. A 16-bit sequence cannot say how old a baseline is once the counter may
    /// have wrapped since: a link forgets the baselines of objects it has not sent for a long while, so the
    /// next state goes absolute and promotes afresh (ids out of range are ignored).
    pub fn forget(&mut self, id: u16) {
        if let Some(b) = self.baselines.get_mut(usize::from(id)) {
            *b = None;
        }
        if let Some(o) = self.older.get_mut(usize::from(id)) {
            *o = [None; OLDER_KEPT];
        }
        if let Some(r) = self.revisions.get_mut(usize::from(id)) {
            *r = None;
        }
    }

    /// Forgets every baseline (a new connection, or a resynchronisation).
    pub fn reset(&mut self) {
        self.baselines.iter_mut().for_each(|b| *b = None);
        self.older.iter_mut().for_each(|o| *o = [None; OLDER_KEPT]);
        self.revisions.iter_mut().for_each(|r| *r = None);
        self.sent.iter_mut().for_each(|p| p.live = false);
    }
}

impl<T: Copy + Default> AckTracker<T> {
    /// Appends the id and the baseline state of each object `first..first + count` that has a baseline in packet
    /// `sequence` (see [`AckTracker::baseline`]), and to `revisions` if any its baseline's revision (see
    /// [`AckTracker::baseline_revision`]): the packet writer records so a run of objects sent unchanged, as their
    /// baselines' states, in one walk of the slots rather than a lookup per object.
    #[inline]
    pub(crate) fn extend_with_baselines(
        &self,
        first: u16,
        count: u16,
        sequence: u16,
        ids: &mut Vec<u16>,
        states: &mut Vec<T>,
        mut revisions: Option<&mut Vec<Option<u64>>>,
    ) {
        let first = usize::from(first);
        let end = (first + usize::from(count)).min(self.baselines.len());
        let Some(slots) = self.baselines.get(first..end) else {
            return;
        };
        let held = |slot: &Option<Baseline<T>>| matches!(slot, Some(b) if (1..=MAX_BASELINE_OFFSET).contains(&sequence.wrapping_sub(b.sequence)));
        // A run's objects all have one (the writer took them so): copied into the vector's spare room in place (states
        // pushed one by one, or collected, went through a temporary on the stack, at twice the instructions; made
        // room for as defaults first, they were written twice), each checked as it is copied, a default where
        // there is none.
        let at = states.len();
        states.reserve(slots.len());
        let mut all = true;
        for (to, slot) in states.spare_capacity_mut().iter_mut().zip(slots) {
            match slot {
                Some(b) if held(slot) => to.write(b.state),
                _ => {
                    all = false;
                    to.write(T::default())
                }
            };
        }
        // SAFETY: the spare room holds at least `slots.len()` elements after the reserve, and the loop wrote each of
        // the first `slots.len()` of them.
        unsafe { states.set_len(at + slots.len()) };
        if all {
            ids.extend((first..end).map(|id| id as u16));
            if let Some(r) = revisions {
                match self.revisions.get(first..end) {
                    Some(named) => r.extend_from_slice(named),
                    None => r.extend((first..end).map(|id| self.baseline_revision(id as u16))),
                }
            }
            return;
        }
        states.truncate(at);
        for (id, slot) in (first..).zip(slots) {
            if let Some(b) = slot
                && held(slot)
            {
                ids.push(id as u16);
                states.push(b.state);
                if let Some(r) = revisions.as_deref_mut() {
                    r.push(self.baseline_revision(id as u16));
                }
            }
        }
    }
}

/// Keeps `state` among an object's older acked states: in a free slot, else in place of the oldest one if it is
/// newer than that.
fn keep_older<T: Copy>(older: &mut [Option<Baseline<T>>; OLDER_KEPT], state: Baseline<T>) {
    if older.iter().flatten().any(|o| o.sequence == state.sequence) {
        return;
    }
    let slot = older.iter().position(Option::is_none).or_else(|| {
        (0..OLDER_KEPT)
            .filter(|&i| older[i].is_some_and(|o| seq_newer(state.sequence, o.sequence)))
            .min_by(|&a, &b| {
                let (sa, sb) = (older[a].map(|o| o.sequence), older[b].map(|o| o.sequence));
                match (sa, sb) {
                    (Some(x), Some(y)) if seq_newer(x, y) => std::cmp::Ordering::Greater,
                    (Some(x), Some(y)) if x == y => std::cmp::Ordering::Equal,
                    _ => std::cmp::Ordering::Less,
                }
            })
    });
    if let Some(i) = slot {
        older[i] = Some(state);
    }
}

/// The receiver's side: for each object, the states received in the last [`HISTORY_PER_OBJECT`] packet
/// sequences. Slots are indexed by sequence modulo the window, so a lookup is one comparison, and a packet that
/// arrives late never evicts a newer one.
///
/// Laid out for decoding a datagram, which reads one held state and stores another for each entry at ids spread
/// over the whole scene, ascending, nearly all of them in the same one or two slots: per slot, the objects come in
/// blocks of [`HISTORY_BLOCK`] neighbouring ids, each block one allocation holding its objects' tags (one cache
/// line) and then their states (a cache line each, so that a 64-byte state, a rigid body's, never straddles two).
/// A datagram's lookups so walk each slot's blocks forward, several entries a block, instead of missing a line, and
/// often a page, per entry in per-object storage of the whole window. A block is allocated at the first store into
/// it, so a link that sends a few objects holds a few blocks per slot, not whole rows of the scene.
///
/// A copy taken again and again into the same history ([`Clone::clone_from`]) reuses its blocks: a benchmark that
/// decodes against the same history again and again allocates nothing for it once the copy has them. A reader needs
/// no copy to keep a bad datagram out: it reads every section first and stores them only once the whole datagram
/// has passed (see [`crate::packet::PacketReader::read_section_unstored`]).
#[derive(Debug)]
pub struct ReceiveHistory<T> {
    /// Slot `s`, block `b` at `s * blocks + b`, allocated at its first store. Slot `s` of an object holds a state
    /// exactly when its tag's sequence is `s` modulo the window: an empty slot's tag names a sequence that cannot
    /// sit there.
    slots: Vec<Option<Box<Block<T>>>>,
    /// Blocks per slot.
    blocks: usize,
    /// Per object: the newest packet sequence stored. A slot more than the window behind it is stale, however
    /// its 16-bit sequence compares: an object sent now and then keeps some slots untouched for so long that
    /// their sequences read as newer than the one arriving.
    newest: Vec<Option<u16>>,
}

impl<T: Copy> Clone for ReceiveHistory<T> {
    fn clone(&self) -> Self {
        Self {
            slots: self.slots.clone(),
            blocks: self.blocks,
            newest: self.newest.clone(),
        }
    }

    /// Copies `source` into the blocks this history already has where `source` has one at the same place (a
    /// block's `clone_from` through its box), allocating only the others.
    fn clone_from(&mut self, source: &Self) {
        self.slots.clone_from(&source.slots);
        self.blocks = source.blocks;
        self.newest.clone_from(&source.newest);
    }
}

/// Neighbouring object ids whose states in one slot share an allocation (see [`ReceiveHistory`]): their 16 tags
/// fill one cache line.
pub const HISTORY_BLOCK: usize = 16;

/// One slot's tags and states of [`HISTORY_BLOCK`] neighbouring objects.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Block<T> {
    tags: CacheLine<[SlotTag; HISTORY_BLOCK]>,
    states: [CacheLine<T>; HISTORY_BLOCK],
}

/// The packet a slot's state came in and the sender's frame then.
#[derive(Debug, Clone, Copy)]
struct SlotTag {
    sequence: u16,
    frame: u16,
}

impl SlotTag {
    /// The tag of slot `slot` holding nothing: it names a sequence that cannot sit there.
    #[inline]
    fn empty(slot: usize) -> Self {
        Self {
            sequence: (slot + 1) as u16,
            frame: 0,
        }
    }

    /// This tag, if it is slot `slot`'s and holds a state.
    #[inline]
    fn held(self, slot: usize) -> Option<Self> {
        (slot_of(self.sequence) == slot).then_some(self)
    }
}

/// The slot of packet `sequence`.
#[inline]
fn slot_of(sequence: u16) -> usize {
    usize::from(sequence) % HISTORY_PER_OBJECT
}

/// Asks the processor to bring every cache line of `value` toward the first-level cache, without waiting for them.
#[inline]
fn prefetch<V>(value: &V) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = (value as *const V).cast::<i8>();
        for offset in (0..size_of::<V>()).step_by(64) {
            // SAFETY: a prefetch is a hint: it never faults, whatever the address, and neither reads nor writes
            // anything the program can observe; SSE, whose instruction it is, is part of every x86_64 processor.
            // The address stays within `value` (`wrapping_add`, no pointer arithmetic beyond it).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// A value aligned to a cache line, so that one of 64 bytes or less is read in one line.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct CacheLine<T>(T);

impl<T: Copy> ReceiveHistory<T> {
    /// A history for object ids `0..max_objects` (blocks are allocated at their first store).
    pub fn new(max_objects: u16) -> Self {
        let blocks = usize::from(max_objects).div_ceil(HISTORY_BLOCK);
        Self {
            slots: (0..HISTORY_PER_OBJECT * blocks).map(|_| None).collect(),
            blocks,
            newest: vec![None; usize::from(max_objects)],
        }
    }

    /// Stores the state of object `id` received in packet `sequence` (sent at `frame`), unless its slot holds a
    /// newer packet's state. Ids out of range are ignored (decoders reject them before this).
    #[inline]
    pub fn insert(&mut self, id: u16, sequence: u16, frame: u16, state: T) {
        self.insert_packet(sequence, frame, &[(id, state)]);
    }

    /// [`ReceiveHistory::insert`] for every `(id, state)` of packet `sequence` at once, as a decoder stores a
    /// section: the slot's row of blocks is found once, not per entry. Kept out of line: inlined into a decoder's
    /// section loop, its values were kept on the stack rather than in registers.
    #[inline(never)]
    pub fn insert_packet(&mut self, sequence: u16, frame: u16, entries: &[(u16, T)]) {
        let slot = slot_of(sequence);
        let row = &mut self.slots[slot * self.blocks..(slot + 1) * self.blocks];
        for (id, state) in entries {
            let i = usize::from(*id);
            let Some(newest) = self.newest.get_mut(i) else {
                continue;
            };
            // A packet no older than the newest stored (the commonest case: every entry of a packet that arrives in
            // order) replaces whatever its slot holds: a held state there of another packet is a whole number of
            // windows older, so stale (see below).
            let latest = match *newest {
                Some(n) => n == sequence || seq_newer(sequence, n),
                None => true,
            };
            let newest = if latest {
                *newest = Some(sequence);
                sequence
            } else {
                newest.unwrap_or(sequence)
            };
            // In range: `newest` has an entry per object, the row a block per `HISTORY_BLOCK` of them.
            let Some(block) = row.get_mut(i / HISTORY_BLOCK) else {
                continue;
            };
            let block = block.get_or_insert_with(|| {
                Box::new(Block {
                    tags: CacheLine([SlotTag::empty(slot); HISTORY_BLOCK]),
                    states: [CacheLine(*state); HISTORY_BLOCK],
                })
            });
            let k = i % HISTORY_BLOCK;
            // A late packet replaces its slot's state unless that holds a newer packet's that is not stale.
            let old = block.tags.0[k];
            if latest
                || seq_newer(sequence, old.sequence)
                || old.sequence == sequence
                || old.held(slot).is_none()
                || usize::from(newest.wrapping_sub(old.sequence)) >= HISTORY_PER_OBJECT
            {
                block.tags.0[k] = SlotTag { sequence, frame };
                block.states[k] = CacheLine(*state);
            }
        }
    }

    /// The state of object `id` received in packet `sequence`, if still held.
    #[inline]
    pub fn get(&self, id: u16, sequence: u16) -> Option<Baseline<T>> {
        let (frame, state) = self.get_ref(id, sequence)?;
        Some(Baseline {
            sequence,
            frame,
            state: *state,
        })
    }

    /// [`ReceiveHistory::get`] by reference: the sender's frame and the state where it is held, so that a decoder
    /// copies a baseline once, straight into the state it decodes, rather than through temporaries.
    #[inline]
    pub(crate) fn get_ref(&self, id: u16, sequence: u16) -> Option<(u16, &T)> {
        let i = usize::from(id);
        if i >= self.newest.len() {
            return None;
        }
        let block = self
            .slots
            .get(slot_of(sequence) * self.blocks + i / HISTORY_BLOCK)?
            .as_deref()?;
        let k = i % HISTORY_BLOCK;
        // A slot's tag names a sequence of the slot only when it holds a state, so equality is enough.
        let tag = block.tags.0[k];
        (tag.sequence == sequence).then_some((tag.frame, &block.states[k].0))
    }

    /// Appends `(id, state)` for each object `first..=last` (ids of one block of [`HISTORY_BLOCK`]) from its state
    /// received in packet `sequence`, as [`ReceiveHistory::get_ref`] of each in turn would find it: a decoder's run
    /// of unchanged entries, whose tags are checked and states copied a block at a time rather than each looked up
    /// on its own. `Err` names the first of them whose state is not held, with nothing appended.
    #[inline]
    pub(crate) fn extend_with_run(
        &self,
        first: u16,
        last: u16,
        sequence: u16,
        out: &mut Vec<(u16, T)>,
    ) -> Result<(), u16> {
        let (i, j) = (usize::from(first), usize::from(last));
        debug_assert!(i <= j && i / HISTORY_BLOCK == j / HISTORY_BLOCK);
        // Objects past those kept hold nothing: the run's ids up to the last one kept are checked, and if they
        // all hold a state, the first past them is the one missing.
        let Some(kept) = self.newest.len().checked_sub(1).map(|k| j.min(k)) else {
            return Err(first);
        };
        if i > kept {
            return Err(first);
        }
        let block = self
            .slots
            .get(slot_of(sequence) * self.blocks + i / HISTORY_BLOCK)
            .and_then(|b| b.as_deref())
            .ok_or(first)?;
        let (k, l) = (i % HISTORY_BLOCK, kept % HISTORY_BLOCK);
        let (Some(tags), Some(states)) = (block.tags.0.get(k..=l), block.states.get(k..=l)) else {
            return Err(first);
        };
        // Written in place, a field at a time, into room made for them: states collected as new pairs went through
        // a temporary on the stack, whose wide loads stalled on the narrow stores just made to it, and room made as
        // defaults cost a store of each default. Each tag is checked in the same loop, before its state is written:
        // a run's length is data, and a loop of its own to check the tags first cost a second loop exit a run, each
        // as hard to predict as the other. What was written before a missing state is left beyond the length, so
        // nothing is appended.
        out.reserve(states.len());
        let mut id = first;
        let mut written = 0;
        for ((to, tag), state) in out.spare_capacity_mut().iter_mut().zip(tags).zip(states) {
            // A slot's tag names a sequence of the slot only when it holds a state, so equality is enough.
            if tag.sequence != sequence {
                return Err(id);
            }
            let to = to.as_mut_ptr();
            // SAFETY: `to` points to one element of the vector's spare capacity, valid for writes; its fields are
            // written through raw pointers, so nothing reads or drops what the memory held.
            unsafe {
                std::ptr::addr_of_mut!((*to).0).write(id);
                std::ptr::addr_of_mut!((*to).1).write(state.0);
            }
            id = id.wrapping_add(1);
            written += 1;
        }
        if kept < j {
            return Err(kept as u16 + 1);
        }
        // SAFETY: the `written` elements after the length were initialized above.
        unsafe { out.set_len(out.len() + written) };
        Ok(())
    }

    /// Starts loading the blocks that the entries after object `id` in a datagram (ids ascending) read their
    /// baselines from, in packet `baseline`'s slot, and store their states into, in packet `sequence`'s slot: the
    /// next block of [`HISTORY_BLOCK`] ids in each, whole. A decoder calls it as its entries enter a block, so the
    /// lines load while it decodes the block's entries: a history that a frame of other work has evicted from the
    /// caches otherwise costs a miss on each block's tags and on each state.
    #[inline]
    pub(crate) fn prefetch_block_after(&self, id: u16, baseline: u16, sequence: u16) {
        let next = usize::from(id) / HISTORY_BLOCK + 1;
        if next >= self.blocks {
            return;
        }
        for slot in [slot_of(baseline), slot_of(sequence)] {
            if let Some(Some(block)) = self.slots.get(slot * self.blocks + next) {
                prefetch(&**block);
            }
        }
    }

    /// Forgets what was received for object `id`. A 16-bit sequence cannot say how old a held state is once the
    /// counter may have wrapped since (an older state would refuse a newer one into its slot): a link forgets
    /// objects it has not heard of for a long while (ids out of range are ignored). The blocks it shares with its
    /// neighbours stay.
    pub fn forget(&mut self, id: u16) {
        let i = usize::from(id);
        let Some(newest) = self.newest.get_mut(i) else {
            return;
        };
        *newest = None;
        for slot in 0..HISTORY_PER_OBJECT {
            if let Some(block) = self.slots[slot * self.blocks + i / HISTORY_BLOCK].as_deref_mut() {
                block.tags.0[i % HISTORY_BLOCK] = SlotTag::empty(slot);
            }
        }
    }

    /// Forgets everything.
    pub fn reset(&mut self) {
        self.slots.iter_mut().for_each(|b| *b = None);
        self.newest.iter_mut().for_each(|n| *n = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_baseline_carries_the_revision_its_state_was_sent_with() {
        let mut t = AckTracker::<u32>::new(8);
        t.record_sent_revised(10, 100, [(1, 11, 5), (2, 21, 6)]);
        t.record_sent_revised(11, 101, [(1, 12, 7)]);
        // Packet 11 acked first; 10's late ack leaves object 1 on 11's state and revision.
        t.process_acks(11, 0);
        t.process_acks(11, 0b1);
        assert_eq!(t.baseline(1, 12).map(|b| b.state), Some(12));
        assert_eq!(t.baseline_revision(1), Some(7));
        assert_eq!(t.baseline_revision(2), Some(6));
        // A state sent without a revision leaves its baseline without one.
        t.record_sent(12, 102, [(1, 13)]);
        t.process_acks(12, 0);
        assert_eq!(t.baseline_revision(1), None);
        assert_eq!(t.baseline_revision(2), Some(6));
        t.forget(2);
        assert_eq!(t.baseline_revision(2), None);
        t.record_sent_revised(13, 103, [(3, 31, 9)]);
        t.process_acks(13, 0);
        t.reset();
        assert_eq!(t.baseline_revision(3), None);
    }

    #[test]
    fn acks_promote_states_to_baselines() {
        let mut t = AckTracker::<u32>::new(8);
        t.record_sent(10, 100, [(1, 11), (2, 21)]);
        t.record_sent(11, 101, [(1, 12)]);
        t.record_sent(12, 102, [(2, 22)]);
        assert!(t.baseline(1, 13).is_none());
        // Packet 12 acked first, 10 and 11 later through the ack bits.
        assert_eq!(t.process_acks(12, 0), vec![12]);
        assert_eq!(t.baseline(2, 13).map(|b| b.state), Some(22));
        assert!(t.baseline(1, 13).is_none());
        assert_eq!(t.process_acks(12, 0b11), vec![11, 10]);
        let b1 = t.baseline(1, 13).unwrap();
        assert_eq!((b1.sequence, b1.frame, b1.state), (11, 101, 12));
        // The older packet 10 must not replace the newer baseline of object 2.
        assert_eq!(t.baseline(2, 13).map(|b| b.state), Some(22));
        // Acking again changes nothing.
        assert!(t.process_acks(12, 0b11).is_empty());
    }

    #[test]
    fn older_acked_states_are_offered_at_the_mirrored_frame() {
        let mut t = AckTracker::<u32>::new(2);
        // One packet a frame carrying object 0, each acked at once: the baseline is the newest, the rest are kept.
        for seq in 1..=12u16 {
            t.record_sent(seq, seq * 10, [(0, u32::from(seq))]);
            t.process_acks(seq, 0);
        }
        let base = *t.baseline(0, 13).unwrap();
        assert_eq!(base.state, 12);
        // Coding frame 130 (one frame after the baseline's 120): the older state one frame before it.
        assert_eq!(
            t.older_baseline(0, &base, 13, 130).map(|o| o.state),
            Some(11)
        );
        // Coding frame 180: six frames after the baseline, so six before it.
        assert_eq!(
            t.older_baseline(0, &base, 13, 180).map(|o| o.state),
            Some(6)
        );
        // Far in the future: the oldest kept (eight of them: 4..=11).
        assert_eq!(
            t.older_baseline(0, &base, 13, 1000).map(|o| o.state),
            Some(4)
        );
        // The receiver must still hold the older state: not past the baseline window of the coding packet.
        assert_eq!(
            t.older_baseline(0, &base, 4 + MAX_BASELINE_OFFSET + 1, 1000)
                .map(|o| o.state),
            Some(5)
        );
        // Object 1 was never acked; a forgotten object has no older states either.
        t.forget(0);
        assert!(t.older_baseline(0, &base, 13, 180).is_none());
    }

    #[test]
    fn stale_baselines_are_not_offered() {
        let mut t = AckTracker::<u32>::new(2);
        t.record_sent(5, 0, [(0, 1)]);
        t.process_acks(5, 0);
        assert!(t.baseline(0, 5).is_none());
        assert!(t.baseline(0, 5 + MAX_BASELINE_OFFSET).is_some());
        assert!(t.baseline(0, 6 + MAX_BASELINE_OFFSET).is_none());
        assert!(t.baseline(7, 6).is_none());
    }

    #[test]
    fn a_late_packet_does_not_evict_a_newer_one() {
        let mut h = ReceiveHistory::<u16>::new(1);
        let window = HISTORY_PER_OBJECT as u16;
        h.insert(0, 100 + window, 0, 2);
        h.insert(0, 100, 0, 1);
        assert!(h.get(0, 100).is_none());
        assert_eq!(h.get(0, 100 + window).map(|b| b.state), Some(2));
        // Across the wrap, 3 is newer than 3 - window and takes its slot.
        h.insert(0, 3u16.wrapping_sub(window), 0, 3);
        h.insert(0, 3, 0, 4);
        assert_eq!(h.get(0, 3).map(|b| b.state), Some(4));
        assert!(h.get(0, 3u16.wrapping_sub(window)).is_none());
    }

    #[test]
    fn a_baseline_outlives_the_packets_that_may_name_it() {
        let mut h = ReceiveHistory::<u16>::new(1);
        let base = 65500u16;
        h.insert(0, base, 0, 1);
        // Every packet up to the full offset may name `base`, and may arrive again or after any of the next
        // MAX_BASELINE_OFFSET - 1 packets, each carrying the object too.
        for s in 1..2 * MAX_BASELINE_OFFSET {
            h.insert(0, base.wrapping_add(s), s, 2);
            assert_eq!(h.get(0, base).map(|b| b.state), Some(1), "after {s}");
        }
        h.insert(0, base.wrapping_add(HISTORY_PER_OBJECT as u16), 0, 3);
        assert!(h.get(0, base).is_none());
    }

    #[test]
    fn a_slot_left_untouched_for_half_the_sequence_space_takes_a_new_state() {
        // An object sent now and then: slot 0 last held sequence 0; sequences 100..33000 went to other slots.
        let mut h = ReceiveHistory::<u16>::new(1);
        h.insert(0, 0, 0, 1);
        for s in (100..33_000).step_by(300) {
            h.insert(0, s, 0, 2);
        }
        // 33,024 is a multiple of the window: it lands in slot 0, where 0 reads as newer than it.
        let late = 33_024;
        assert_eq!(late % HISTORY_PER_OBJECT as u16, 0);
        h.insert(0, late, 0, 3);
        assert_eq!(h.get(0, late).map(|b| b.state), Some(3));
    }

    #[test]
    fn empty_slots_hold_nothing_at_any_sequence() {
        // A block is allocated for all its objects at the first state stored in it: the rest of it, and the
        // other slots, must answer no sequence at all.
        let mut h = ReceiveHistory::<u16>::new(2);
        h.insert(0, 5, 50, 7);
        let found: Vec<u16> = (0..=u16::MAX).filter(|&s| h.get(0, s).is_some()).collect();
        assert_eq!(found, vec![5]);
        assert!((0..=u16::MAX).all(|s| h.get(1, s).is_none()));
        let b = h.get(0, 5).unwrap();
        assert_eq!((b.sequence, b.frame, b.state), (5, 50, 7));
        h.forget(0);
        assert!(h.get(0, 5).is_none());
    }

    #[test]
    fn forgetting_an_object_clears_its_tags_only() {
        // Neighbouring objects share blocks: forgetting one must empty its tags in every slot (else it would
        // answer for the sequences it held before) and leave the others' alone.
        let mut h = ReceiveHistory::<u16>::new(2);
        for s in 0..3 {
            h.insert(0, s, s, s);
            h.insert(1, s, s, 10 + s);
        }
        h.forget(0);
        h.insert(0, 7, 7, 70);
        assert!((0..3).all(|s| h.get(0, s).is_none()));
        assert_eq!(h.get(0, 7).map(|b| b.state), Some(70));
        assert!((0..3).all(|s| h.get(1, s).map(|b| b.state) == Some(10 + s)));
        h.reset();
        assert!(h.get(1, 2).is_none() && h.get(0, 7).is_none());
    }

    #[test]
    fn a_run_taken_a_block_at_a_time_is_its_states_looked_up_one_by_one() {
        // A history with holes (objects never stored, slots overwritten by later packets, forgotten objects) of a
        // scene whose last block is partly past its objects: a run's states taken at once must be each state
        // get_ref finds, or the first id it does not find, with nothing taken.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let objects = 40u16;
        let mut h = ReceiveHistory::<u64>::new(objects);
        for sequence in 0..300u16 {
            for id in 0..objects {
                if rng.random_bool(0.9) {
                    h.insert(
                        id,
                        sequence,
                        sequence / 2,
                        u64::from(sequence) << 16 | u64::from(id),
                    );
                }
            }
            if rng.random_bool(0.05) {
                h.forget(rng.random_range(0..objects));
            }
        }
        for trial in 0..5000 {
            let sequence = rng.random_range(150..310u16);
            let first = rng.random_range(0..48u16);
            let last = rng.random_range(first..=(first | 15));
            let mut out = vec![(7, 7)];
            let got = h.extend_with_run(first, last, sequence, &mut out);
            let expected: Result<Vec<(u16, u64)>, u16> = (first..=last)
                .map(|id| h.get_ref(id, sequence).map(|(_, &s)| (id, s)).ok_or(id))
                .collect();
            match expected {
                Ok(states) => {
                    assert_eq!(got, Ok(()), "trial {trial}");
                    assert_eq!(out[1..], states[..], "trial {trial}");
                }
                Err(id) => {
                    assert_eq!(got, Err(id), "trial {trial}");
                    assert_eq!(out, [(7, 7)], "trial {trial}");
                }
            }
        }
    }

    #[test]
    fn history_keeps_the_latest_states() {
        let mut h = ReceiveHistory::<u16>::new(2);
        let window = HISTORY_PER_OBJECT as u16;
        let end = window + 16;
        for s in 0..end {
            h.insert(1, s, s, s * 10);
        }
        assert!(h.get(1, end - window - 1).is_none());
        assert_eq!(h.get(1, end - window).map(|b| b.state), Some(160));
        assert_eq!(h.get(1, end - 1).map(|b| b.state), Some((end - 1) * 10));
        assert!(h.get(0, end - 1).is_none());
        h.insert(5, 1, 1, 1);
        assert!(h.get(5, 1).is_none());
    }

    /// A packet's states stored at once are the states stored one by one, over a seeded mix of packets arriving
    /// late, twice and out of order, ids out of range among them.
    #[test]
    fn storing_a_packet_at_once_is_storing_its_states_one_by_one() {
        use rand::{Rng, SeedableRng};
        let n = 2 * HISTORY_BLOCK as u16 + 3;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(10);
        let (mut one_by_one, mut at_once) = (ReceiveHistory::<u32>::new(n), ReceiveHistory::new(n));
        let mut sequence = 65_000u16;
        for _ in 0..2000 {
            sequence = sequence.wrapping_add(rng.random_range(0..3));
            let arriving = sequence.wrapping_sub(rng.random_range(0..200));
            let entries: Vec<(u16, u32)> = (0..rng.random_range(0..12))
                .map(|_| (rng.random_range(0..n + 2), rng.random()))
                .collect();
            for &(id, state) in &entries {
                one_by_one.insert(id, arriving, arriving / 2, state);
            }
            at_once.insert_packet(arriving, arriving / 2, &entries);
            for id in 0..n {
                for back in 0..HISTORY_PER_OBJECT as u16 + 2 {
                    let s = sequence.wrapping_sub(back);
                    assert_eq!(one_by_one.get(id, s), at_once.get(id, s));
                }
            }
        }
    }

    /// [`ReceiveHistory::insert`] by the rule in full, every condition tested for every state: whether the slot
    /// holds this packet's state, a state of another slot's packet, an older packet's, or a stale newer one.
    fn insert_by_the_full_rule(
        h: &mut ReceiveHistory<u32>,
        id: u16,
        sequence: u16,
        frame: u16,
        state: u32,
    ) {
        let (i, slot) = (usize::from(id), slot_of(sequence));
        let Some(newest) = h.newest.get_mut(i) else {
            return;
        };
        let newest = match *newest {
            Some(n) if !seq_newer(sequence, n) => n,
            _ => {
                *newest = Some(sequence);
                sequence
            }
        };
        let block = h.slots[slot * h.blocks + i / HISTORY_BLOCK].get_or_insert_with(|| {
            Box::new(Block {
                tags: CacheLine([SlotTag::empty(slot); HISTORY_BLOCK]),
                states: [CacheLine(state); HISTORY_BLOCK],
            })
        });
        let k = i % HISTORY_BLOCK;
        let old = block.tags.0[k];
        if seq_newer(sequence, old.sequence)
            || old.sequence == sequence
            || old.held(slot).is_none()
            || usize::from(newest.wrapping_sub(old.sequence)) >= HISTORY_PER_OBJECT
        {
            block.tags.0[k] = SlotTag { sequence, frame };
            block.states[k] = CacheLine(state);
        }
    }

    /// Storing a packet keeps what the rule in full keeps, over a seeded mix of packets in order, late, twice, and
    /// after long silences (the counter wrapped, slots left stale), ids out of range among them.
    #[test]
    fn a_packet_stores_what_the_rule_in_full_stores() {
        use rand::{Rng, SeedableRng};
        let n = 2 * HISTORY_BLOCK as u16 + 3;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (mut by_rule, mut stored) = (ReceiveHistory::<u32>::new(n), ReceiveHistory::new(n));
        let mut sequence = 65_000u16;
        for _ in 0..3000 {
            let step = match rng.random_range(0..20) {
                0 => rng.random_range(0..=u16::MAX),
                1 => 32_768,
                _ => rng.random_range(0..3),
            };
            sequence = sequence.wrapping_add(step);
            let arriving = sequence.wrapping_sub(rng.random_range(0..300));
            let entries: Vec<(u16, u32)> = (0..rng.random_range(0..12))
                .map(|_| (rng.random_range(0..n + 2), rng.random()))
                .collect();
            for &(id, state) in &entries {
                insert_by_the_full_rule(&mut by_rule, id, arriving, arriving / 2, state);
            }
            stored.insert_packet(arriving, arriving / 2, &entries);
            assert_eq!(by_rule.newest, stored.newest);
            for id in 0..n {
                for back in 0..HISTORY_PER_OBJECT as u16 + 2 {
                    let s = sequence.wrapping_sub(back);
                    assert_eq!(by_rule.get(id, s), stored.get(id, s));
                }
            }
        }
    }

    #[test]
    fn loading_blocks_ahead_reaches_every_block_and_changes_nothing() {
        // Three blocks and a part, in one slot held and one empty; the last ids have no block after theirs.
        let n = 3 * HISTORY_BLOCK as u16 + 5;
        let mut h = ReceiveHistory::<[u64; 8]>::new(n);
        for id in (0..n).step_by(2) {
            h.insert(id, 7, 70, [u64::from(id); 8]);
        }
        let before = h.clone();
        for id in 0..n {
            // Baselines in packet 7's slot (held for the even ids), stores into packet 8's (nothing there yet), and
            // the same slot twice.
            h.prefetch_block_after(id, 7, 8);
            h.prefetch_block_after(id, 7, 7);
        }
        h.prefetch_block_after(u16::MAX, 7, 8);
        for id in 0..n {
            assert_eq!(h.get(id, 7), before.get(id, 7));
            assert!(h.get(id, 8).is_none());
        }
    }
}
