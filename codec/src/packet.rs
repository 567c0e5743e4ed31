//! Whole datagrams: a header, then sections of delta-coded entries, filled in priority order to a byte budget.
//!
//! A section holds entries of one state type: the sender's frame number, then per entry a "more" flag, the object
//! id, whether it has a baseline and which one (as an offset back from the packet's own sequence, so that the
//! receiver finds it in its history), and the entry along its delta path. The header's `ack` field acknowledges the
//! other direction's packets, so baselines are named relative to this packet's `sequence`.

use crate::arith::{ArithReadStream, ArithWriteStream};
use crate::baseline::{AckTracker, MAX_BASELINE_OFFSET, ReceiveHistory};
use crate::bitpack::{BitReadStream, BitWriteStream};
use crate::delta::{DeltaPath, DeltaState, plan, serialize_entry};
use crate::error::CodecError;
use crate::header::{Backend, HEADER_BYTES, PacketHeader, serialize_header};
use crate::quant::bits_for;
use crate::stream::{Ctx, Stream};

/// The default datagram budget: no IP fragmentation anywhere.
pub const DEFAULT_BUDGET_BYTES: usize = 1200;

/// Consecutive entries that may fail to fit before the writer stops trying smaller ones further down the order.
const MAX_MISSES: usize = 8;

const FRAME: Ctx = Ctx::new(40, "frame");
const MORE: Ctx = Ctx::new(41, "more entries");
const OBJECT_ID: Ctx = Ctx::new(42, "object id");
const HAS_BASELINE: Ctx = Ctx::new(43, "has baseline");
const SAME_OFFSET: Ctx = Ctx::new(44, "same baseline offset");
const OFFSET: Ctx = Ctx::new(45, "baseline offset");

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
    fn max_id(&self) -> i32 {
        i32::from(self.max_objects.max(1)) - 1
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

/// The most bytes an entry of `bitpack_bits` bit-packed bits can add to a range-coded stream. Every adaptive model
/// keeps its probability within 15/4096 of certainty, so one coded decision costs at most 8.1 bits; a flag or a
/// small integer (at most 16 values) takes one decision per bit-packed bit, and a wider integer of `b` bit-packed
/// bits takes at most `bit_length(b) + 2` decisions and `b - 2` even-odds bits, under `10 * b` bits in all. The
/// coder's registers hold up to one more byte than the information coded.
fn arith_worst_case_bytes(bitpack_bits: u64) -> usize {
    (10 * bitpack_bits).div_ceil(8) as usize + 2
}

/// Writes one datagram: the header at creation, then any number of sections, then [`PacketWriter::finish`].
pub struct PacketWriter {
    link: LinkConfig,
    header: PacketHeader,
    sink: Sink,
}

/// One entry ready to write: everything [`serialize_section_entry`] needs.
struct Entry<T> {
    id: u16,
    state: T,
    offset: Option<u16>,
    baseline: Option<T>,
    prediction: Option<T>,
    path: DeltaPath,
}

fn serialize_section_entry<S: Stream, T: DeltaState>(
    s: &mut S,
    link: &LinkConfig,
    config: &T::Config,
    e: &mut Entry<T>,
    previous_offset: u16,
) -> Result<(), CodecError> {
    let mut more = true;
    s.bool(MORE, &mut more)?;
    let mut id = i32::from(e.id);
    s.int(OBJECT_ID, &mut id, 0, link.max_id())?;
    let mut has = e.offset.is_some();
    s.bool(HAS_BASELINE, &mut has)?;
    if has {
        let mut offset = e.offset.unwrap_or(0);
        let mut same = offset == previous_offset;
        s.bool(SAME_OFFSET, &mut same)?;
        if !same {
            let mut o = i32::from(offset);
            s.int(OFFSET, &mut o, 1, i32::from(MAX_BASELINE_OFFSET))?;
            offset = o as u16;
        }
        e.offset = Some(offset);
    }
    serialize_entry(
        s,
        config,
        &mut e.state,
        &mut e.path,
        e.baseline.as_ref(),
        e.prediction.as_ref(),
    )
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

    /// Writes a section of entries of type `T`: objects are taken from `order` (the priority accumulator's order)
    /// while the budget lasts; `state_of(id)` gives each object's current state (`None` skips it); each is coded
    /// against its acked baseline in `tracker`. The states sent are recorded in `tracker` under this packet's
    /// sequence, and the ids sent are returned in the order written.
    pub fn write_section<T: DeltaState>(
        &mut self,
        config: &T::Config,
        tracker: &mut AckTracker<T>,
        frame: u16,
        order: &[u16],
        mut state_of: impl FnMut(u16) -> Option<T>,
    ) -> Result<Vec<u16>, CodecError> {
        let link = self.link;
        let sequence = self.header.sequence;
        // The frame number and the final "no more" flag must fit, with room for the entropy coder's terminator.
        let reserve_bytes = 4;
        if self.len() + reserve_bytes > link.budget_bytes {
            return Err(CodecError::Overflow);
        }
        let mut f = u32::from(frame);
        match &mut self.sink {
            Sink::Bit(s) => s.bits(FRAME, &mut f, 16)?,
            Sink::Arith { stream, .. } => stream.bits(FRAME, &mut f, 16)?,
        }
        let budget_bits = (link.budget_bytes as u64) * 8;
        let id_bits = u64::from(bits_for(link.max_id() as u32));
        let mut sent: Vec<(u16, T)> = Vec::with_capacity(order.len().min(link.budget_bytes));
        let mut previous_offset = 0u16;
        let mut misses = 0;
        for &id in order {
            if misses >= MAX_MISSES || i32::from(id) > link.max_id() {
                if misses >= MAX_MISSES {
                    break;
                }
                continue;
            }
            let Some(state) = state_of(id) else { continue };
            let base = tracker.baseline(id, sequence).copied();
            let prediction =
                base.and_then(|b| T::predict(config, &b.state, frame.wrapping_sub(b.frame)));
            let decision = plan(
                config,
                &state,
                base.as_ref().map(|b| &b.state),
                prediction.as_ref(),
            )?;
            let offset = base.map(|b| sequence.wrapping_sub(b.sequence));
            let mut entry = Entry {
                id,
                state,
                offset,
                baseline: base.map(|b| b.state),
                prediction,
                path: decision.path,
            };
            let offset_bits = match offset {
                None => 0,
                Some(o) if o == previous_offset => 1,
                Some(_) => 1 + u64::from(bits_for(u32::from(MAX_BASELINE_OFFSET) - 1)),
            };
            // The entry's exact size with bit-packing.
            let total = 1 + id_bits + 1 + offset_bits + decision.bits;
            let fitted = match &mut self.sink {
                Sink::Bit(s) => {
                    // One bit stays reserved for the final "no more entries" flag.
                    if s.bits_written() + total < budget_bits {
                        let before = s.bits_written();
                        serialize_section_entry(s, &link, config, &mut entry, previous_offset)?;
                        debug_assert_eq!(s.bits_written() - before, total, "entry size estimate");
                        true
                    } else {
                        false
                    }
                }
                Sink::Arith { header, stream }
                    if header.len() + stream.finished_len() + arith_worst_case_bytes(total) + 2
                        <= link.budget_bytes =>
                {
                    // Far from the budget the entry fits whatever it codes to: no tentative write, no undo log.
                    let before = stream.finished_len();
                    serialize_section_entry(
                        stream.as_mut(),
                        &link,
                        config,
                        &mut entry,
                        previous_offset,
                    )?;
                    debug_assert!(
                        stream.finished_len() - before <= arith_worst_case_bytes(total),
                        "range-coded entry beyond its worst case"
                    );
                    true
                }
                Sink::Arith { header, stream } => {
                    let checkpoint = stream.checkpoint();
                    serialize_section_entry(
                        stream.as_mut(),
                        &link,
                        config,
                        &mut entry,
                        previous_offset,
                    )?;
                    if header.len() + stream.finished_len() + 2 <= link.budget_bytes {
                        stream.commit();
                        true
                    } else {
                        stream.rollback(checkpoint);
                        false
                    }
                }
            };
            if fitted {
                misses = 0;
                if let Some(o) = offset {
                    previous_offset = o;
                }
                sent.push((id, state));
            } else {
                misses += 1;
            }
        }
        let mut more = false;
        match &mut self.sink {
            Sink::Bit(s) => s.bool(MORE, &mut more)?,
            Sink::Arith { stream, .. } => stream.bool(MORE, &mut more)?,
        }
        let ids = sent.iter().map(|&(id, _)| id).collect();
        tracker.record_sent(sequence, frame, sent);
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

enum Source<'a> {
    Bit(BitReadStream<'a>),
    Arith(Box<ArithReadStream<'a>>),
}

/// Reads one datagram: the header at creation, then the sections in the order they were written.
pub struct PacketReader<'a> {
    link: LinkConfig,
    header: PacketHeader,
    backend: Backend,
    source: Source<'a>,
}

fn read_section_entries<S: Stream, T: DeltaState>(
    s: &mut S,
    link: &LinkConfig,
    config: &T::Config,
    sequence: u16,
    history: &ReceiveHistory<T>,
) -> Result<(u16, Vec<(u16, T)>), CodecError> {
    let mut f = 0u32;
    s.bits(FRAME, &mut f, 16)?;
    let frame = f as u16;
    let limit = usize::from(link.max_objects);
    let mut out = Vec::with_capacity(limit.min(256));
    let mut previous_offset = 0u16;
    loop {
        let mut more = false;
        s.bool(MORE, &mut more)?;
        if !more {
            break;
        }
        if out.len() >= limit {
            return Err(CodecError::TooLarge {
                field: "entries",
                value: out.len() as u64 + 1,
                limit: limit as u64,
            });
        }
        let mut id = 0i32;
        s.int(OBJECT_ID, &mut id, 0, link.max_id())?;
        let id = id as u16;
        let mut has = false;
        s.bool(HAS_BASELINE, &mut has)?;
        let mut baseline = None;
        let mut prediction = None;
        if has {
            let mut same = false;
            s.bool(SAME_OFFSET, &mut same)?;
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
            let b = history.get(id, named).ok_or(CodecError::MissingBaseline {
                object: id,
                sequence: named,
            })?;
            prediction = T::predict(config, &b.state, frame.wrapping_sub(b.frame));
            baseline = Some(b.state);
        }
        let mut state = T::default();
        let mut path = DeltaPath::Absolute;
        serialize_entry(
            s,
            config,
            &mut state,
            &mut path,
            baseline.as_ref(),
            prediction.as_ref(),
        )?;
        out.push((id, state));
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

    /// Reads the next section as entries of type `T`, decoding each against the baseline named in `history`. On
    /// success the decoded states are stored in `history` under this packet's sequence and returned with the
    /// sender's frame; on error nothing is stored.
    pub fn read_section<T: DeltaState>(
        &mut self,
        config: &T::Config,
        history: &mut ReceiveHistory<T>,
    ) -> Result<(u16, Vec<(u16, T)>), CodecError> {
        let sequence = self.header.sequence;
        let (frame, entries) = match &mut self.source {
            Source::Bit(s) => read_section_entries(s, &self.link, config, sequence, history)?,
            Source::Arith(s) => {
                read_section_entries(s.as_mut(), &self.link, config, sequence, history)?
            }
        };
        for &(id, state) in &entries {
            history.insert(id, sequence, frame, state);
        }
        Ok((frame, entries))
    }
}

/// A datagram and the objects it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPacket {
    /// The bytes to send.
    pub bytes: Vec<u8>,
    /// The ids included, in the order written: pass them to the priority accumulator's `mark_sent`.
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
    Ok(DecodedPacket {
        header: *r.header(),
        frame,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::StateConfig;
    use crate::header::ReceivedPackets;
    use crate::priority::PriorityAccumulator;
    use crate::state::{AvatarState, BodyState, ObjectState};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

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
    fn session(backend: Backend, seed: u64, ack_delay: usize) -> usize {
        let link = LinkConfig {
            backend,
            ..LinkConfig::default()
        };
        let mut world = World::new(seed, 400);
        let config = world.config;
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
                |id| world.states.get(usize::from(id)).copied(),
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
                    world.states[usize::from(*id)],
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

    #[test]
    fn lossy_session_delivers_exact_states() {
        let bitpack = session(Backend::Bitpack, 7, 0);
        let arith = session(Backend::Arith, 7, 0);
        // Absolute states alone fit about 45 to a packet; delta coding must do far better once acks flow (about
        // 180 packets arrive).
        assert!(bitpack > 180 * 150, "bitpack delivered {bitpack}");
        assert!(
            arith > bitpack * 6 / 5,
            "arith {arith} vs bitpack {bitpack}"
        );
    }

    #[test]
    fn slow_acks_fall_back_to_absolute_without_errors() {
        // Acks 20 frames late still allow deltas; 80 frames late is past the baseline window, so every entry goes
        // absolute (about 45 to a packet) and nothing names a baseline the receiver dropped.
        let slow = session(Backend::Bitpack, 9, 20);
        let stalled = session(Backend::Bitpack, 9, 80);
        assert!(slow > 180 * 100, "slow {slow}");
        assert!(stalled < 180 * 55, "stalled {stalled}");
        assert!(slow > 2 * stalled);
    }

    #[test]
    fn range_coded_entries_stay_within_their_worst_case() {
        // Models first trained hard on one kind of entry (zero residuals, one id), then surprised by random ones:
        // the most a skewed model can cost. Every entry must stay within the bound the writer relies on.
        let config = StateConfig::default();
        let link = LinkConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let world = World::new(4, 64);
        let mut stream = ArithWriteStream::new();
        for round in 0..4000 {
            let surprise = round >= 2000 && round % 3 == 0;
            let base = world.states[rng.random_range(0..64)];
            let mut state = base;
            if surprise {
                let q = config.quant;
                state.body.position = q.position.clamp(
                    [0, 1, 2].map(|i| base.body.position[i] + rng.random_range(-9000..9000)),
                );
                state.body.linear_velocity = q
                    .linear_velocity
                    .clamp([0, 1, 2].map(|_| rng.random_range(-9000..9000)));
                state.body.at_rest = rng.random_bool(0.2);
                if state.body.at_rest {
                    state.body.linear_velocity = [0; 3];
                    state.body.angular_velocity = [0; 3];
                }
                state.authority = rng.random();
            } else {
                state.body.position[0] += 1;
            }
            let id = if surprise {
                rng.random_range(0..1024)
            } else {
                5
            };
            let offset = if surprise {
                rng.random_range(1..=MAX_BASELINE_OFFSET)
            } else {
                1
            };
            let prediction = ObjectState::predict(&config, &base, 6);
            let decision = plan(&config, &state, Some(&base), prediction.as_ref()).unwrap();
            let mut entry = Entry {
                id,
                state,
                offset: Some(offset),
                baseline: Some(base),
                prediction,
                path: decision.path,
            };
            let previous = 1;
            let offset_bits = if offset == previous { 1 } else { 7 };
            let total = 1 + 10 + 1 + offset_bits + decision.bits;
            let before = stream.finished_len();
            serialize_section_entry(&mut stream, &link, &config, &mut entry, previous).unwrap();
            let grown = stream.finished_len() - before;
            assert!(
                grown <= arith_worst_case_bytes(total),
                "round {round}: {grown} bytes for {total} bit-packed bits"
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
