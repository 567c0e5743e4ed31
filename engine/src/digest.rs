//! The desync detector: digests of the quantized world that host and guests exchange every few seconds.
//!
//! A world's digest hashes, in id order, every object's at-rest bit and, for a resting object, its quantized pose
//! (what goes on the wire, so both sides hash the same integers). Objects in motion count only as "moving": two
//! sides see a moving object at different moments, but once everything rests two worlds in sync have equal
//! digests, and two processes can be compared by the digests they print at exit.
//!
//! A [`DigestMessage`] carries the sender's whole-world digest and, for one page of object ids, a 32-bit hash of
//! each object's resting pose (0 for an object in motion); pages rotate so every object is covered every few
//! messages. The receiver compares each page with its own world and names the objects at rest on both sides whose
//! poses disagree: those are desynced (an object that rests on one side only is still settling).
//!
//! The message travels as an unreliable datagram beside the state packets, told apart by its first two bytes
//! ([`DIGEST_ID`]), and is never larger than [`MAX_DATAGRAM_PAYLOAD`].

use std::hash::Hasher;
use std::time::Duration;

use siphasher::sip::SipHasher13;

use crate::transport::MAX_DATAGRAM_PAYLOAD;
use crate::world::World;
use crate::world::scene::ObjectId;

/// The first two bytes of every digest datagram (unlike a state packet's protocol id or a scene transfer's).
pub const DIGEST_ID: u16 = 0x4447;
/// How often each side sends a digest page.
pub const DIGEST_INTERVAL: Duration = Duration::from_secs(2);
/// Object hashes in one page.
pub const PAGE_OBJECTS: usize = 256;
/// Bytes before the hashes: id, frame, digest, first id, count.
const HEADER_BYTES: usize = 2 + 4 + 8 + 2 + 2;

const _: () = assert!(HEADER_BYTES + 4 * PAGE_OBJECTS <= MAX_DATAGRAM_PAYLOAD);

/// Why a digest datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// Not a digest datagram, or cut short.
    #[error("not a digest message or truncated")]
    Malformed,
    /// More hashes than a page holds, or a length that disagrees with the count.
    #[error("bad object count")]
    BadCount,
}

/// One digest page as it goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestMessage {
    /// The sender's world frame when it hashed (for logs).
    pub frame: u32,
    /// The sender's whole-world digest.
    pub digest: u64,
    /// Id of the first object the page covers.
    pub first: ObjectId,
    /// Resting-pose hash of objects `first..first + len`; 0 for an object in motion.
    pub hashes: Vec<u32>,
}

/// True when `bytes` starts like a digest datagram.
pub fn is_digest(bytes: &[u8]) -> bool {
    bytes.len() >= 2 && u16::from_be_bytes([bytes[0], bytes[1]]) == DIGEST_ID
}

/// Writes a digest page as one datagram payload.
pub fn encode_digest(message: &DigestMessage) -> Vec<u8> {
    let count = message.hashes.len().min(PAGE_OBJECTS);
    let mut out = Vec::with_capacity(HEADER_BYTES + 4 * count);
    out.extend_from_slice(&DIGEST_ID.to_be_bytes());
    out.extend_from_slice(&message.frame.to_le_bytes());
    out.extend_from_slice(&message.digest.to_le_bytes());
    out.extend_from_slice(&message.first.to_le_bytes());
    out.extend_from_slice(&(count as u16).to_le_bytes());
    for h in &message.hashes[..count] {
        out.extend_from_slice(&h.to_le_bytes());
    }
    out
}

/// Reads a digest page; never trusts the count it carries.
pub fn decode_digest(bytes: &[u8]) -> Result<DigestMessage, DigestError> {
    if !is_digest(bytes) || bytes.len() < HEADER_BYTES {
        return Err(DigestError::Malformed);
    }
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
    let mut frame = [0u8; 4];
    frame.copy_from_slice(&bytes[2..6]);
    let mut digest = [0u8; 8];
    digest.copy_from_slice(&bytes[6..14]);
    let first = u16_at(14);
    let count = usize::from(u16_at(16));
    if count > PAGE_OBJECTS || bytes.len() != HEADER_BYTES + 4 * count {
        return Err(DigestError::BadCount);
    }
    let hashes = bytes[HEADER_BYTES..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(DigestMessage {
        frame: u32::from_le_bytes(frame),
        digest: u64::from_le_bytes(digest),
        first,
        hashes,
    })
}

/// Object `id`'s resting-pose hash in `world`: 0 while it moves, never 0 at rest.
pub fn object_hash(world: &World, id: ObjectId) -> u32 {
    let body = world.object_state(id).body;
    if !body.at_rest {
        return 0;
    }
    let mut h = SipHasher13::new();
    h.write_u16(id);
    for p in body.position {
        h.write_i32(p);
    }
    h.write_u8(body.rotation.largest);
    for c in body.rotation.components {
        h.write_i32(c);
    }
    (h.finish() as u32) | 1
}

/// The whole world's digest: every object's resting-pose hash (0 for one in motion), in id order.
pub fn world_digest(world: &World) -> u64 {
    let mut h = SipHasher13::new();
    for id in 0..world.object_count() {
        h.write_u32(object_hash(world, id as ObjectId));
    }
    h.finish()
}

/// A digest as the binaries print it: 16 hex digits.
pub fn digest_hex(digest: u64) -> String {
    format!("{digest:016x}")
}

/// What one side of the exchange counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DigestCounters {
    /// Pages sent.
    pub sent: u64,
    /// Pages received and compared.
    pub received: u64,
    /// Pages refused as malformed.
    pub malformed: u64,
    /// Pages in which some object resting on both sides disagreed.
    pub disagreeing_pages: u64,
    /// Objects found disagreeing, over all pages.
    pub disagreeing_objects: u64,
}

/// One side's part in the exchange: when to send the next page, which page is next, and what was counted.
#[derive(Debug, Clone)]
pub struct DigestExchange {
    next_send: Duration,
    next_page: usize,
    counters: DigestCounters,
}

impl Default for DigestExchange {
    fn default() -> Self {
        Self::new()
    }
}

impl DigestExchange {
    /// An exchange that sends its first page after one interval.
    pub fn new() -> Self {
        Self {
            next_send: DIGEST_INTERVAL,
            next_page: 0,
            counters: DigestCounters::default(),
        }
    }

    /// What was counted so far.
    pub fn counters(&self) -> &DigestCounters {
        &self.counters
    }

    /// The next page to send when one is due at `now` (the caller sends it to its peers), `None` otherwise.
    pub fn poll(&mut self, now: Duration, world: &World) -> Option<Vec<u8>> {
        if now < self.next_send {
            return None;
        }
        self.next_send = now + DIGEST_INTERVAL;
        let objects = world.object_count();
        let pages = objects.div_ceil(PAGE_OBJECTS).max(1);
        let page = self.next_page % pages;
        self.next_page = (page + 1) % pages;
        let first = page * PAGE_OBJECTS;
        let last = (first + PAGE_OBJECTS).min(objects);
        let message = DigestMessage {
            frame: world.frame() as u32,
            digest: world_digest(world),
            first: first as ObjectId,
            hashes: (first..last)
                .map(|id| object_hash(world, id as ObjectId))
                .collect(),
        };
        self.counters.sent += 1;
        Some(encode_digest(&message))
    }

    /// Compares a received page with `world`: returns the objects at rest on both sides whose poses differ (and
    /// logs them), or the error for a malformed page (counted).
    pub fn receive(&mut self, world: &World, bytes: &[u8]) -> Result<Vec<ObjectId>, DigestError> {
        let message = decode_digest(bytes).inspect_err(|_| self.counters.malformed += 1)?;
        self.counters.received += 1;
        let objects = world.object_count();
        let disagree: Vec<ObjectId> = message
            .hashes
            .iter()
            .enumerate()
            .filter_map(|(i, &theirs)| {
                let id = usize::from(message.first) + i;
                (id < objects).then_some((id as ObjectId, theirs))
            })
            .filter(|&(id, theirs)| {
                let ours = object_hash(world, id);
                theirs != 0 && ours != 0 && ours != theirs
            })
            .map(|(id, _)| id)
            .collect();
        if !disagree.is_empty() {
            self.counters.disagreeing_pages += 1;
            self.counters.disagreeing_objects += disagree.len() as u64;
            tracing::warn!(
                objects = ?disagree,
                their_frame = message.frame,
                our_frame = world.frame(),
                "resting objects disagree with the peer's digest"
            );
        }
        Ok(disagree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::WorldConfig;
    use crate::world::scene::SceneKind;

    fn settled_table() -> World {
        let mut w = World::new(WorldConfig::default(), &SceneKind::Table.spec());
        for _ in 0..240 {
            w.step();
        }
        w
    }

    #[test]
    fn a_page_round_trips_and_hostile_bytes_are_refused() {
        let m = DigestMessage {
            frame: 7,
            digest: 0x1234_5678_9abc_def0,
            first: 3,
            hashes: vec![0, 5, u32::MAX],
        };
        let bytes = encode_digest(&m);
        assert_eq!(decode_digest(&bytes), Ok(m));
        assert_eq!(
            decode_digest(&bytes[..bytes.len() - 1]),
            Err(DigestError::BadCount)
        );
        assert_eq!(decode_digest(&bytes[..5]), Err(DigestError::Malformed));
        let mut lying = bytes.clone();
        lying[16] = 0xff;
        assert_eq!(decode_digest(&lying), Err(DigestError::BadCount));
    }

    #[test]
    fn equal_worlds_agree_and_a_moved_resting_object_is_named() {
        let host = settled_table();
        let mut guest = settled_table();
        assert_eq!(world_digest(&host), world_digest(&guest));
        let mut exchange = DigestExchange::new();
        let page = exchange.poll(DIGEST_INTERVAL, &host).expect("due");
        assert_eq!(exchange.receive(&guest, &page), Ok(vec![]));
        // Move one resting object on the guest's side and let it settle where it was put.
        let id = (0..guest.object_count() as ObjectId)
            .find(|&id| guest.is_at_rest(id))
            .expect("a resting object");
        let mut state = guest.object_state(id).body;
        state.position[0] += 200;
        guest.apply_body_state(id, &state);
        for _ in 0..240 {
            guest.step();
        }
        assert_ne!(world_digest(&host), world_digest(&guest));
        let named = exchange.receive(&guest, &page).unwrap();
        assert!(named.contains(&id), "{named:?} should name {id}");
        assert_eq!(exchange.counters().disagreeing_pages, 1);
    }
}
