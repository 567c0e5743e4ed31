//! The per-remote state-sync link: what one peer keeps for each peer it exchanges object and avatar states with
//! (the host one per guest, a guest one to the host).
//!
//! A [`StateLink`] is sans-IO. Call [`StateLink::build_packet`] once per simulation frame with the frame's object
//! states, priorities and avatars; at the send rate, and when the byte budget allows, it returns a datagram to
//! send. Hand every datagram from the remote to [`StateLink::receive`]; it returns the states it carried and feeds
//! the acks in its header back into the baselines. Both directions share one link, so each packet's header
//! acknowledges what arrived from the other side and the baselines each side codes against are ones the other
//! side is known to hold.
//!
//! It owns, per remote: the codec's ack trackers (acked baselines) and receive histories for objects and avatars,
//! the record of received packets for the acks it sends, the priority accumulator, the back end and quantization
//! ([`LinkSettings`]), the send timer and a token bucket of bytes from which each datagram's budget follows.

mod ages;
mod avatar;
mod stats;
#[cfg(test)]
mod tests;

use std::time::Duration;

use physync_codec::{
    AckTracker, Backend, CodecError, LinkConfig, ObjectState, PacketHeader, PacketReader,
    PacketWriter, PriorityAccumulator, ReceiveHistory, ReceivedPackets, StateConfig,
};

pub use ages::STALE_PACKETS;
pub use avatar::{MAX_SAMPLE_OFFSET_MS, TimedAvatar};
pub use stats::LinkStats;

use crate::world::avatar::MAX_PLAYERS;
use ages::{Ages, widen};
use stats::SendLog;

/// The largest datagram payload a link builds (no IP fragmentation anywhere).
pub const MAX_DATAGRAM_BYTES: usize = 1200;
/// The smallest datagram budget worth sending: a header, both section frames and a few entries.
pub const MIN_DATAGRAM_BYTES: usize = 48;
/// The most [`StateLink::skip_sequences`] skips at once: a gap the other side still reads as newer.
pub const MAX_SEQUENCE_SKIP: u16 = 16_384;
/// The packet type state datagrams carry by default.
pub const STATE_PACKET_TYPE: u8 = 1;

/// How a link codes and paces its datagrams. Both ends of a link must agree on `codec.protocol_id`,
/// `codec.max_objects`, `state` and `packet_type`; each end picks its own back end, rate and budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSettings {
    /// Protocol id, back end, the largest datagram (at most [`MAX_DATAGRAM_BYTES`]) and the object id range.
    pub codec: LinkConfig,
    /// Quantizers and predictor, shared with the world.
    pub state: StateConfig,
    /// The packet type of state datagrams (0..=127); datagrams of another type are rejected.
    pub packet_type: u8,
    /// Datagrams per second (60 by default).
    pub send_hz: u32,
    /// Byte budget per second across all datagrams (32,000: 256 kbps by default).
    pub bytes_per_second: u32,
}

impl Default for LinkSettings {
    fn default() -> Self {
        Self {
            codec: LinkConfig {
                backend: Backend::Arith,
                budget_bytes: MAX_DATAGRAM_BYTES,
                ..LinkConfig::default()
            },
            state: StateConfig::default(),
            packet_type: STATE_PACKET_TYPE,
            send_hz: 60,
            bytes_per_second: 32_000,
        }
    }
}

/// Why a link could not be built, or a datagram not built or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// The settings are out of range (named field).
    #[error("invalid link settings: {0}")]
    InvalidSettings(&'static str),
    /// The codec rejected the datagram (or, when building, a state).
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The datagram is of another packet type.
    #[error("packet type {0} is not a state packet")]
    WrongPacketType(u8),
    /// An avatar entry's id is not a player slot, or disagrees with the player in its state.
    #[error("avatar entry {id} is not a valid player")]
    BadAvatar {
        /// The entry id read.
        id: u16,
    },
}

/// One frame's input to [`StateLink::build_packet`].
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    /// The sender's simulation frame (the predictor runs from frame differences; only its low 16 bits travel).
    pub frame: u64,
    /// Every object's current state, indexed by object id.
    pub objects: &'a [ObjectState],
    /// Every object's revision, indexed by id, as [`physync_codec::StateRevisions::note`] gave it for `objects`
    /// (noted once a step for all links): an object unchanged since the state its baseline holds is then written
    /// without a copy or a comparison. `None` compares every object with its baseline: the same bytes, more work.
    pub revisions: Option<&'a [u64]>,
    /// This frame's priority of every object, indexed by id (negative: never send); added to the accumulator.
    pub priorities: &'a [f32],
    /// Avatars to send, each every packet (their id on the wire is `state.player`).
    pub avatars: &'a [TimedAvatar],
}

impl Outgoing<'_> {
    /// A frame with nothing to send but acks: what a receiver that sends no state of its own answers with.
    pub fn acks_only(frame: u64) -> Self {
        Outgoing {
            frame,
            objects: &[],
            revisions: None,
            priorities: &[],
            avatars: &[],
        }
    }
}

/// A datagram built by [`StateLink::build_packet`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentPacket {
    /// The bytes to send (at most the link's datagram budget).
    pub bytes: Vec<u8>,
    /// Its sequence number on this link.
    pub sequence: u16,
    /// The object ids it carries, in the order written.
    pub objects: Vec<u16>,
    /// The players whose avatars it carries.
    pub avatars: Vec<u8>,
}

/// The states one received datagram carried: those newer than anything received before for each object or
/// avatar, and apart, those a newer datagram carried first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReceivedUpdate {
    /// The datagram's sequence number.
    pub sequence: u16,
    /// The sender's frame (low 16 bits) when it built the datagram.
    pub frame: u16,
    /// Object states, by id. Entries from a datagram that arrived after a newer one carrying the same object are
    /// left out (they are still kept as baselines).
    pub objects: Vec<(u16, ObjectState)>,
    /// Avatars with their sample-time offsets, with stale ones left out the same way.
    pub avatars: Vec<TimedAvatar>,
    /// What the datagram carried that a newer datagram carried first (link jitter reordered them).
    pub overtaken: Overtaken,
}

/// The entries of a datagram overtaken on the way: each object or avatar in it had already arrived in a newer
/// datagram. Stale for a receiver that applies states on arrival, but each is still the sender's state of the
/// datagram's frame, which a jitter buffer plays in its slot on the sender's timeline if it has not played past
/// it: a hand that opened there and the thrown object's first free state beside it, say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Overtaken {
    /// Object states, by id.
    pub objects: Vec<(u16, ObjectState)>,
    /// Avatars with their sample-time offsets.
    pub avatars: Vec<TimedAvatar>,
}

/// One datagram as written, with the players and objects it carries.
struct Written {
    bytes: Vec<u8>,
    avatars: Vec<u16>,
    objects: Vec<u16>,
}

/// The state-sync link to one remote peer. See the module documentation.
#[derive(Debug, Clone)]
pub struct StateLink {
    settings: LinkSettings,
    objects_sent: AckTracker<ObjectState>,
    avatars_sent: AckTracker<TimedAvatar>,
    objects_received: ReceiveHistory<ObjectState>,
    avatars_received: ReceiveHistory<TimedAvatar>,
    /// Per object: the newest packet (widened) it arrived in; stale ones are forgotten.
    newest_object: Ages,
    /// Per player: the newest packet (widened) its avatar arrived in.
    newest_avatar: Ages,
    /// The newest packet received, widened.
    newest_received: Option<u64>,
    /// Per object: the packet (counted from 0) it was last sent in; stale ones lose their baselines.
    last_sent: Ages,
    /// Datagrams built so far.
    packets_built: u64,
    received: ReceivedPackets,
    priorities: PriorityAccumulator,
    order: Vec<u16>,
    next_sequence: u16,
    send_interval: Duration,
    next_send: Duration,
    credit: f64,
    last_refill: Option<Duration>,
    log: SendLog,
    stats: LinkStats,
}

/// The ack a link sends before anything arrived. The codec's header has no "nothing acked" flag and `ack` names a
/// received sequence, so links never send this sequence (they skip it when the counter wraps) and read an ack of
/// it as no ack at all.
const NOTHING_RECEIVED: u16 = 0;

/// Lateness forgiven on the send timer, so that callers whose frame clock rounds differently from the interval
/// do not skip a send.
const SEND_TOLERANCE: Duration = Duration::from_millis(1);

impl StateLink {
    /// A fresh link: no baselines, nothing received, the first datagram due at once with a full budget.
    pub fn new(settings: LinkSettings) -> Result<Self, LinkError> {
        if settings.packet_type > 127 {
            return Err(LinkError::InvalidSettings("packet_type"));
        }
        if settings.send_hz == 0 {
            return Err(LinkError::InvalidSettings("send_hz"));
        }
        if !(MIN_DATAGRAM_BYTES..=MAX_DATAGRAM_BYTES).contains(&settings.codec.budget_bytes) {
            return Err(LinkError::InvalidSettings("codec.budget_bytes"));
        }
        if (settings.bytes_per_second as usize) < MIN_DATAGRAM_BYTES {
            return Err(LinkError::InvalidSettings("bytes_per_second"));
        }
        let max_objects = settings.codec.max_objects;
        let players = MAX_PLAYERS as u16;
        Ok(Self {
            settings,
            objects_sent: AckTracker::new(max_objects),
            avatars_sent: AckTracker::new(players),
            objects_received: ReceiveHistory::new(max_objects),
            avatars_received: ReceiveHistory::new(players),
            newest_object: Ages::new(usize::from(max_objects)),
            newest_avatar: Ages::new(MAX_PLAYERS),
            newest_received: None,
            last_sent: Ages::new(usize::from(max_objects)),
            packets_built: 0,
            received: ReceivedPackets::new(),
            priorities: PriorityAccumulator::new(usize::from(max_objects)),
            order: Vec::new(),
            next_sequence: NOTHING_RECEIVED + 1,
            send_interval: Duration::from_secs(1) / settings.send_hz,
            next_send: Duration::ZERO,
            credit: settings.codec.budget_bytes as f64,
            last_refill: None,
            log: SendLog::new(),
            stats: LinkStats::default(),
        })
    }

    /// The settings the link was built with.
    pub fn settings(&self) -> &LinkSettings {
        &self.settings
    }

    /// Traffic counters and the round-trip and loss estimates.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Changes the byte budget per second (a session adapting to the link); takes effect from the next call.
    pub fn set_bytes_per_second(&mut self, bytes_per_second: u32) -> Result<(), LinkError> {
        if (bytes_per_second as usize) < MIN_DATAGRAM_BYTES {
            return Err(LinkError::InvalidSettings("bytes_per_second"));
        }
        self.settings.bytes_per_second = bytes_per_second;
        Ok(())
    }

    /// Advances the packet sequence by `n` (at most [`MAX_SEQUENCE_SKIP`]) as if `n` datagrams had been built
    /// and lost on the way: what a long session does to the 16-bit sequence space, reached in a short test.
    pub fn skip_sequences(&mut self, n: u16) {
        let n = n.min(MAX_SEQUENCE_SKIP);
        self.next_sequence = match self.next_sequence.wrapping_add(n) {
            NOTHING_RECEIVED => NOTHING_RECEIVED + 1,
            next => next,
        };
        self.packets_built += u64::from(n);
    }

    /// The earliest time the next datagram may be built (the send timer; the budget may delay it further).
    pub fn next_send_at(&self) -> Duration {
        self.next_send
    }

    /// Adds this frame's priorities to the accumulator and, when the send timer is due and the byte budget has
    /// room for a datagram, builds one: the avatars, then objects in priority order while the budget lasts, each
    /// delta-coded against the newest state the remote acknowledged. Call once per simulation frame. `Ok(None)`
    /// means not yet. A datagram is built even with nothing to carry, so acks keep flowing.
    pub fn build_packet(
        &mut self,
        now: Duration,
        out: &Outgoing<'_>,
    ) -> Result<Option<SentPacket>, LinkError> {
        self.priorities.add_all(out.priorities);
        self.refill(now);
        if now + SEND_TOLERANCE < self.next_send {
            return Ok(None);
        }
        let budget = (self.credit.max(0.0) as usize).min(self.settings.codec.budget_bytes);
        if budget < MIN_DATAGRAM_BYTES {
            return Ok(None);
        }
        self.next_send = if now >= self.next_send + self.send_interval {
            now + self.send_interval
        } else {
            self.next_send + self.send_interval
        };
        // Sequence 0 is never sent, so `ack == 0` tells the remote that nothing has arrived yet.
        let (ack, ack_bits) = self.received.ack().unwrap_or((NOTHING_RECEIVED, 0));
        let sequence = self.next_sequence;
        let header = PacketHeader {
            packet_type: self.settings.packet_type,
            sequence,
            ack,
            ack_bits,
        };
        let codec = LinkConfig {
            budget_bytes: budget,
            ..self.settings.codec
        };
        self.priorities.order_into(&mut self.order);
        let Written {
            bytes,
            avatars,
            objects,
        } = match self.write(&codec, header, out, true) {
            // The avatars left no room for the objects section to start: send the objects alone this time.
            Err(LinkError::Codec(CodecError::Overflow)) => {
                self.write(&codec, header, out, false)?
            }
            written => written?,
        };
        self.priorities.mark_sent(&objects);
        let built = self.packets_built;
        for &id in &objects {
            self.last_sent.advance(usize::from(id), built);
        }
        let (objects_sent, stats) = (&mut self.objects_sent, &mut self.stats);
        self.last_sent.sweep(built, |id| {
            objects_sent.forget(id);
            stats.stale_forgotten += 1;
        });
        self.packets_built += 1;
        self.credit -= bytes.len() as f64;
        self.next_sequence = match sequence.wrapping_add(1) {
            NOTHING_RECEIVED => NOTHING_RECEIVED + 1,
            next => next,
        };
        self.log.record(sequence, now, &mut self.stats);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += bytes.len() as u64;
        Ok(Some(SentPacket {
            bytes,
            sequence,
            objects,
            avatars: avatars.into_iter().map(|p| p as u8).collect(),
        }))
    }

    /// Writes one datagram: the avatar section (empty unless `with_avatars`), then objects in accumulator order.
    /// Both trackers record what went in under the header's sequence.
    fn write(
        &mut self,
        codec: &LinkConfig,
        header: PacketHeader,
        out: &Outgoing<'_>,
        with_avatars: bool,
    ) -> Result<Written, LinkError> {
        let frame = out.frame as u16;
        let config = self.settings.state;
        let mut writer = PacketWriter::new(codec, header)?;
        let avatar_ids: Vec<u16> = out
            .avatars
            .iter()
            .map(|a| u16::from(a.state.player))
            .filter(|&p| with_avatars && usize::from(p) < MAX_PLAYERS)
            .collect();
        let avatars =
            writer.write_section(&config, &mut self.avatars_sent, frame, &avatar_ids, |id| {
                out.avatars
                    .iter()
                    .find(|a| u16::from(a.state.player) == id)
                    .map(|a| TimedAvatar {
                        sample_offset_ms: a.sample_offset_ms.min(MAX_SAMPLE_OFFSET_MS),
                        ..*a
                    })
            })?;
        let state_of = |id: u16| out.objects.get(usize::from(id)).copied();
        let objects = match out.revisions {
            Some(revisions) => writer.write_section_revised(
                &config,
                &mut self.objects_sent,
                frame,
                &self.order,
                state_of,
                // Only for an object that has a state: the writer takes one with a revision as tracked.
                |id| {
                    let id = usize::from(id);
                    revisions
                        .get(id)
                        .filter(|_| id < out.objects.len())
                        .copied()
                },
            )?,
            None => writer.write_section(
                &config,
                &mut self.objects_sent,
                frame,
                &self.order,
                state_of,
            )?,
        };
        Ok(Written {
            bytes: writer.finish(),
            avatars,
            objects,
        })
    }

    /// Decodes a datagram from the remote: its avatar and object states (each against the baseline it names in
    /// this link's receive history), and its acks, which promote what this side sent to baselines. A datagram that
    /// fails to decode changes no baseline and is not acknowledged.
    pub fn receive(&mut self, now: Duration, bytes: &[u8]) -> Result<ReceivedUpdate, LinkError> {
        self.stats.bytes_received += bytes.len() as u64;
        if let Some(newest) = self.newest_received {
            let (history, stats) = (&mut self.objects_received, &mut self.stats);
            self.newest_object.sweep(newest, |id| {
                history.forget(id);
                stats.stale_forgotten += 1;
            });
        }
        match self.decode(bytes) {
            Ok(update) => {
                self.stats.packets_received += 1;
                Ok(self.accept(now, update))
            }
            Err(e) => {
                self.stats.decode_errors += 1;
                Err(e)
            }
        }
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<(PacketHeader, ReceivedUpdate), LinkError> {
        let mut reader = PacketReader::new(&self.settings.codec, bytes)?;
        let header = *reader.header();
        if header.packet_type != self.settings.packet_type {
            return Err(LinkError::WrongPacketType(header.packet_type));
        }
        let config = self.settings.state;
        // Both sections are read before either is stored, and stored only once the whole datagram has passed: a
        // datagram rejected part way (a bad avatar, an object section that fails, bytes past the last section)
        // stores nothing.
        let (frame, avatars) = reader.read_section_unstored(&config, &self.avatars_received)?;
        if let Some(&(id, _)) = avatars
            .iter()
            .find(|(id, a)| usize::from(*id) >= MAX_PLAYERS || *id != u16::from(a.state.player))
        {
            return Err(LinkError::BadAvatar { id });
        }
        let (objects_frame, objects) =
            reader.read_section_unstored(&config, &self.objects_received)?;
        reader.finish()?;
        self.avatars_received
            .insert_packet(header.sequence, frame, &avatars);
        self.objects_received
            .insert_packet(header.sequence, objects_frame, &objects);
        Ok((
            header,
            ReceivedUpdate {
                sequence: header.sequence,
                frame,
                objects,
                avatars: avatars.into_iter().map(|(_, a)| a).collect(),
                overtaken: Overtaken::default(),
            },
        ))
    }

    fn accept(
        &mut self,
        now: Duration,
        (header, mut update): (PacketHeader, ReceivedUpdate),
    ) -> ReceivedUpdate {
        let sequence = header.sequence;
        self.received.record(sequence);
        if header.ack != NOTHING_RECEIVED {
            let newly = self.objects_sent.process_acks(header.ack, header.ack_bits);
            self.avatars_sent.process_acks(header.ack, header.ack_bits);
            self.log.acked(now, header.ack, &newly, &mut self.stats);
        }
        let at = widen(self.newest_received, sequence);
        self.newest_received = Some(self.newest_received.map_or(at, |n| n.max(at)));
        let newest_object = &mut self.newest_object;
        (update.objects, update.overtaken.objects) = std::mem::take(&mut update.objects)
            .into_iter()
            .partition(|(id, _)| newest_object.advance(usize::from(*id), at));
        let newest_avatar = &mut self.newest_avatar;
        (update.avatars, update.overtaken.avatars) = std::mem::take(&mut update.avatars)
            .into_iter()
            .partition(|a| newest_avatar.advance(usize::from(a.state.player), at));
        update
    }

    /// Adds the bytes earned since the last call to the budget, up to one full datagram.
    fn refill(&mut self, now: Duration) {
        if let Some(last) = self.last_refill {
            let earned =
                now.saturating_sub(last).as_secs_f64() * f64::from(self.settings.bytes_per_second);
            self.credit = (self.credit + earned).min(self.settings.codec.budget_bytes as f64);
        }
        self.last_refill = Some(now);
    }
}
