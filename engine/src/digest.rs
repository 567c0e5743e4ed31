//! The desync detector: digests of the quantized world that host and guests exchange every few seconds.
//!
//! A world's digest hashes, in id order, every object's at-rest bit and, for a resting object, its quantized pose
//! (what goes on the wire, so both sides hash the same integers). Objects in motion count only as "moving": two
//! sides see a moving object at different moments, but once everything rests two worlds in sync have equal
//! digests, and two processes can be compared by the digests they print at exit.
//!
//! A [`DigestMessage`] carries the sender's whole-world digest and, for one page of object ids, a 32-bit hash of
//! each object's resting pose (0 for an object in motion or not yet settled); pages rotate so every object is
//! covered every few messages. The receiver compares each page with its own world and names the objects settled
//! on both sides whose poses disagree: those are desynced. An object counts as settled once this side has seen it
//! rest at one pose for [`SETTLED_FOR`]: a cube one side has just put down while the other, its copy of the move
//! still in flight, shows it resting where it lay is latency, not a desync (each side judges by its own frames).
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
/// How long this side must have seen an object rest at one pose before it sends or compares that pose: longer than
/// a state takes to arrive, so that only a disagreement that stays is named.
pub const SETTLED_FOR: Duration = DIGEST_INTERVAL;
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
    /// Resting-pose hash of objects `first..first + len`; 0 for an object in motion or not yet settled.
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

/// One side's part in the exchange: when to send the next page, which page is next, what was counted, and each
/// object's resting-pose hash as this side last saw it, with the frame it first saw that hash.
#[derive(Debug, Clone)]
pub struct DigestExchange {
    next_send: Duration,
    next_page: usize,
    counters: DigestCounters,
    seen: Vec<Seen>,
}

/// An object's resting-pose hash (0 in motion) as last seen, and the world frame it was first seen at.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    hash: u32,
    since: u64,
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
            seen: Vec::new(),
        }
    }

    /// Object `id`'s resting-pose hash if this side has seen it rest at that pose for [`SETTLED_FOR`] of `world`'s
    /// frames, 0 otherwise. Each look is noted: an object is seen when a page naming it is sent or received.
    fn settled_hash(&mut self, world: &World, id: ObjectId) -> u32 {
        let hash = object_hash(world, id);
        let frame = world.frame();
        if self.seen.len() < world.object_count() {
            self.seen.resize(world.object_count(), Seen::default());
        }
        let Some(seen) = self.seen.get_mut(usize::from(id)) else {
            return 0;
        };
        if seen.hash != hash {
            *seen = Seen { hash, since: frame };
        }
        let settle_frames =
            u64::from(world.config().step_hz) * SETTLED_FOR.as_millis() as u64 / 1000;
        if frame.saturating_sub(seen.since) >= settle_frames {
            hash
        } else {
            0
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
                .map(|id| self.settled_hash(world, id as ObjectId))
                .collect(),
        };
        self.counters.sent += 1;
        Some(encode_digest(&message))
    }

    /// Compares a received page with `world`: returns the objects settled on both sides whose poses differ (and
    /// logs them), or the error for a malformed page (counted).
    pub fn receive(&mut self, world: &World, bytes: &[u8]) -> Result<Vec<ObjectId>, DigestError> {
        let message = decode_digest(bytes).inspect_err(|_| self.counters.malformed += 1)?;
        self.counters.received += 1;
        let objects = world.object_count();
        let mut disagree = Vec::new();
        for (i, &theirs) in message.hashes.iter().enumerate() {
            let id = usize::from(message.first) + i;
            if id >= objects {
                break;
            }
            let ours = self.settled_hash(world, id as ObjectId);
            if theirs != 0 && ours != 0 && ours != theirs {
                disagree.push(id as ObjectId);
            }
        }
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

    /// Two sides of an exchange, each with its world: the sender's pages go to the receiver.
    struct Sides {
        host: World,
        guest: World,
        sender: DigestExchange,
        receiver: DigestExchange,
        now: Duration,
    }

    impl Sides {
        fn settled() -> Self {
            Self {
                host: settled_table(),
                guest: settled_table(),
                sender: DigestExchange::new(),
                receiver: DigestExchange::new(),
                now: DIGEST_INTERVAL,
            }
        }

        /// Two settled tables whose sides have each seen the other's settle over two pages, and agree.
        fn agreeing() -> Self {
            let mut sides = Self::settled();
            assert_eq!(world_digest(&sides.host), world_digest(&sides.guest));
            assert_eq!(sides.page_then_step(120), vec![]);
            assert_eq!(sides.page_then_step(120), vec![]);
            sides
        }

        /// One page from the host compared with the guest's world, then `frames` steps of both worlds.
        fn page_then_step(&mut self, frames: u32) -> Vec<ObjectId> {
            let page = self.sender.poll(self.now, &self.host).expect("due");
            let named = self
                .receiver
                .receive(&self.guest, &page)
                .expect("a valid page");
            self.now += DIGEST_INTERVAL;
            for _ in 0..frames {
                self.host.step();
                self.guest.step();
            }
            named
        }

        fn resting_object(&self) -> ObjectId {
            (0..self.host.object_count() as ObjectId)
                .find(|&id| self.host.is_at_rest(id))
                .expect("a resting object")
        }
    }

    /// Moves resting object `id` by `dx` position steps and lets it settle for `frames` frames.
    fn put_down(world: &mut World, id: ObjectId, dx: i32, frames: u32) {
        let mut state = world.object_state(id).body;
        state.position[0] += dx;
        world.apply_body_state(id, &state);
        for _ in 0..frames {
            world.step();
        }
    }

    #[test]
    fn equal_worlds_agree_and_a_moved_resting_object_is_named() {
        // Each side settles on what it sees over the first page, and the second finds them agreeing.
        let mut sides = Sides::agreeing();
        // Move one resting object on the guest's side and let it settle where it was put.
        let id = sides.resting_object();
        put_down(&mut sides.guest, id, 200, 240);
        assert_ne!(world_digest(&sides.host), world_digest(&sides.guest));
        // The guest sees it resting there on the next page and names it on the one after.
        assert_eq!(sides.page_then_step(120), vec![]);
        assert_eq!(sides.page_then_step(120), vec![id]);
        assert_eq!(sides.receiver.counters().disagreeing_pages, 1);
    }

    #[test]
    fn a_cube_just_put_down_on_one_side_is_not_a_desync_until_it_stays_apart() {
        // The host puts a cube down; half a second later the guest, whose copy of the move is still in flight,
        // shows it resting where it lay. That is latency, not a desync: the 30-minute peer session logged 43
        // such warnings, each a single page 20-65 frames apart, none repeated.
        let mut sides = Sides::agreeing();
        let id = sides.resting_object();
        put_down(&mut sides.host, id, 200, 30);
        assert!(sides.host.is_at_rest(id), "the cube rests where it was put");
        assert_eq!(sides.page_then_step(120), vec![], "a move in flight");
        // Two seconds on, the guest still shows the cube where it lay: now it is a desync.
        assert_eq!(sides.page_then_step(120), vec![id]);
    }

    #[test]
    fn a_cube_the_guest_just_put_down_is_not_named_against_the_hosts_older_page() {
        // The other way round: the guest has just put the cube down, the host's page still shows it where it lay.
        let mut sides = Sides::agreeing();
        let id = sides.resting_object();
        put_down(&mut sides.guest, id, 200, 30);
        assert_eq!(sides.page_then_step(0), vec![], "a move in flight");
    }
}
