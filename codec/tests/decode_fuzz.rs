//! Hostile input into the packet decoder: random bytes, random payloads behind a valid header, and valid packets
//! (with baselines) truncated, bit-flipped and overwritten. The decoder must return, never panic, and whatever it
//! returns must respect the bounds of the format. Run with `PROPTEST_CASES=100000` for a long campaign.

use std::sync::OnceLock;

use physync_codec::{
    AckTracker, AvatarState, Backend, BodyState, LinkConfig, ObjectState, PacketHeader,
    PacketReader, QuantConfig, ReceiveHistory, StateConfig, decode_packet, encode_packet,
};
use proptest::prelude::*;

/// Valid packets of both back ends, delta-coded against baselines the receiver holds, and that receiver history.
struct Corpus {
    packets: Vec<(LinkConfig, Vec<u8>)>,
    history: ReceiveHistory<ObjectState>,
}

fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let config = StateConfig::default();
        let quant = QuantConfig::default();
        let states: Vec<ObjectState> = (0..40)
            .map(|i| {
                let f = i as f32;
                ObjectState {
                    body: BodyState::quantize(
                        &quant,
                        [f * 0.3 - 9.0, f * 0.1, 2.0],
                        [0.1, f * 0.01, 0.2, 0.9],
                        [f * 0.05, 1.0, -0.5],
                        [0.0, f * 0.02, 0.0],
                        i % 3 == 0,
                    ),
                    authority: (i % 4) as u8,
                    authority_seq: i,
                    ownership_seq: 7,
                }
            })
            .collect();
        let order: Vec<u16> = (0..40).collect();
        let mut packets = Vec::new();
        let mut history = ReceiveHistory::new(1024);
        for backend in [Backend::Bitpack, Backend::Arith] {
            let link = LinkConfig {
                backend,
                ..LinkConfig::default()
            };
            let mut tracker = AckTracker::new(link.max_objects);
            for seq in 1..4u16 {
                let header = PacketHeader {
                    sequence: seq,
                    ..PacketHeader::default()
                };
                let moved = |id: u16| {
                    let mut s = states[usize::from(id)];
                    if !s.body.at_rest {
                        s.body.position[0] += i32::from(seq) * i32::from(id % 5);
                    }
                    Some(s)
                };
                let p = encode_packet(&link, &config, header, seq * 6, &order, moved, &mut tracker)
                    .unwrap();
                decode_packet(&link, &config, &p.bytes, &mut history).unwrap();
                tracker.process_acks(seq, 0);
                packets.push((link, p.bytes));
            }
        }
        Corpus { packets, history }
    })
}

/// Decodes `bytes` as an object packet and as an avatar-then-object packet, checking any success for sanity.
fn decode_all(link: &LinkConfig, bytes: &[u8]) {
    let config = StateConfig::default();
    let quant = config.quant;
    let mut history = corpus().history.clone();
    if let Ok(d) = decode_packet::<ObjectState>(link, &config, bytes, &mut history) {
        assert!(d.entries.len() <= usize::from(link.max_objects));
        for (id, s) in &d.entries {
            assert!(*id < link.max_objects);
            assert!(quant.position.contains(s.body.position));
            assert!(quant.linear_velocity.contains(s.body.linear_velocity));
            assert!(!s.body.at_rest || s.body.linear_velocity == [0; 3]);
        }
    }
    if let Ok(mut r) = PacketReader::new(link, bytes) {
        let mut avatars = ReceiveHistory::<AvatarState>::new(8);
        if r.read_section(&config, &mut avatars).is_ok() {
            let _ = r.read_section(&config, &mut history);
        }
    }
}

fn link(arith: bool) -> LinkConfig {
    LinkConfig {
        backend: if arith {
            Backend::Arith
        } else {
            Backend::Bitpack
        },
        ..LinkConfig::default()
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..1300), arith in any::<bool>()) {
        decode_all(&link(arith), &bytes);
    }

    #[test]
    fn random_payload_behind_a_valid_header_never_panics(
        payload in prop::collection::vec(any::<u8>(), 0..1200),
        which in 0usize..6,
    ) {
        let (link, packet) = &corpus().packets[which];
        let mut bytes = packet[..12].to_vec();
        bytes.extend_from_slice(&payload);
        bytes.truncate(1200);
        decode_all(link, &bytes);
    }

    #[test]
    fn mutated_packets_never_panic(
        which in 0usize..6,
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let (link, packet) = &corpus().packets[which];
        let mut bytes = packet.clone();
        for (at, bit) in &flips {
            let i = 12 + at.index(bytes.len() - 12);
            bytes[i] ^= 1 << bit;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        decode_all(link, &bytes);
    }
}

#[test]
fn corpus_packets_decode() {
    for (link, bytes) in &corpus().packets {
        let mut history = corpus().history.clone();
        let d = decode_packet::<ObjectState>(link, &StateConfig::default(), bytes, &mut history)
            .unwrap();
        assert_eq!(d.entries.len(), 40);
    }
}

#[test]
fn single_bit_flips_reach_deep_into_the_payload() {
    // Every single-bit flip of every corpus packet: some still decode (a flipped value bit), others fail on a tag,
    // a bound or a baseline; none panic. Both outcomes must occur, or the fuzzing above would be shallow.
    let config = StateConfig::default();
    let (mut ok, mut failed) = (0, 0);
    for (link, packet) in &corpus().packets {
        for bit in 12 * 8..packet.len() * 8 {
            let mut bytes = packet.clone();
            bytes[bit / 8] ^= 1 << (bit % 8);
            let mut history = corpus().history.clone();
            match decode_packet::<ObjectState>(link, &config, &bytes, &mut history) {
                Ok(_) => ok += 1,
                Err(_) => failed += 1,
            }
        }
    }
    assert!(ok > 100 && failed > 100, "ok {ok}, failed {failed}");
}

/// One field of a hand-built section: a value the format allows, an edge of its range, or one past it.
#[derive(Debug, Clone, Copy)]
enum Field {
    Valid,
    Edge,
    Beyond,
}

fn field() -> impl Strategy<Value = Field> {
    prop_oneof![8 => Just(Field::Valid), 1 => Just(Field::Edge), 1 => Just(Field::Beyond)]
}

/// Picks a value in `min..=max` (or just past it) as `f` says, from `seed`.
fn pick(f: Field, seed: u32, min: i64, max: i64) -> i64 {
    match f {
        Field::Valid => min + i64::from(seed) % (max - min + 1),
        Field::Edge => {
            if seed.is_multiple_of(2) {
                min
            } else {
                max
            }
        }
        Field::Beyond => {
            if seed.is_multiple_of(2) {
                min - 1
            } else {
                max + 1
            }
        }
    }
}

proptest! {
    /// Bit-packed sections built field by field in the section layout (frame, entry count, id gap as a bit length
    /// and its low bits, baseline flags and offset, the delta path tags, then state fields), each field valid,
    /// at an edge or one past it: the decoder meets every branch of the format, not just a failed header check.
    #[test]
    fn structured_sections_never_panic(
        which in 0usize..3,
        count in field(),
        entries in prop::collection::vec((field(), field(), field(), field(), any::<bool>(), any::<u32>(), prop::collection::vec((field(), any::<u32>()), 0..24)), 0..12),
    ) {
        use physync_codec::bitpack::BitWriteStream;
        use physync_codec::{Ctx, Stream};
        const C: Ctx = Ctx::new(0, "fuzz");
        let (link, packet) = &corpus().packets[which];
        let mut w = BitWriteStream::with_bytes(packet[..12].to_vec());
        let put = |w: &mut BitWriteStream, v: i64, bits: u32| {
            let v = (v.rem_euclid(1 << bits)) as u32;
            let mut v = v;
            w.bits(C, &mut v, bits).unwrap();
        };
        put(&mut w, 18, 16);
        put(&mut w, pick(count, entries.len() as u32, 0, 1024), 11);
        for (gap, has, offset, path, same, seed, values) in &entries {
            let length = pick(*gap, *seed, 0, 10);
            put(&mut w, length, 4);
            if length >= 2 {
                put(&mut w, i64::from(*seed), (length - 1) as u32);
            }
            let has = pick(*has, *seed >> 3, 0, 1);
            put(&mut w, has, 1);
            if has != 0 {
                put(&mut w, i64::from(*same), 1);
                if !*same {
                    put(&mut w, pick(*offset, *seed >> 5, 1, 64) - 1, 6);
                }
                // Unchanged, perfect prediction, then the path tag.
                put(&mut w, i64::from(*seed >> 7 & 1), 1);
                put(&mut w, i64::from(*seed >> 8 & 1), 1);
                put(&mut w, pick(*path, *seed >> 9, 0, 2), 2);
            }
            for (f, v) in values {
                let bits = 1 + v % 17;
                put(&mut w, pick(*f, *v, 0, (1 << bits) - 1), bits);
            }
        }
        let bytes = w.finish();
        decode_all(link, &bytes);
    }

    /// Range-coded packets written by the real writer from random states (extremes included), random id orders
    /// with repeats and random baselines, then hit by a few bit flips: a flip desynchronizes the coder, so the
    /// decoder meets structured garbage from that point on.
    #[test]
    fn random_range_coded_sections_survive_flips(
        ids in prop::collection::vec(0u16..1024, 1..60),
        positions in prop::collection::vec(prop::array::uniform3(-40000i32..40000), 1..60),
        acked in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..4),
    ) {
        let config = StateConfig::default();
        let quant = config.quant;
        let link = link(true);
        let state = |id: u16| {
            let p = positions[usize::from(id) % positions.len()];
            Some(ObjectState {
                body: BodyState {
                    position: quant.position.clamp(p),
                    linear_velocity: quant.linear_velocity.clamp(p.map(|x| x / 3)),
                    ..BodyState::default()
                },
                authority: (id % 3) as u8,
                ..ObjectState::default()
            })
        };
        let mut tracker = AckTracker::new(link.max_objects);
        let mut history = ReceiveHistory::new(link.max_objects);
        let first = encode_packet(&link, &config, PacketHeader { sequence: 1, ..PacketHeader::default() }, 6, &ids, state, &mut tracker).unwrap();
        decode_packet::<ObjectState>(&link, &config, &first.bytes, &mut history).unwrap();
        if acked {
            tracker.process_acks(1, 0);
        }
        let moved = |id: u16| state(id).map(|mut s| { s.body.position[0] = quant.position.clamp([s.body.position[0] + 9, 0, 0])[0]; s });
        let second = encode_packet(&link, &config, PacketHeader { sequence: 2, ..PacketHeader::default() }, 12, &ids, moved, &mut tracker).unwrap();
        let mut bytes = second.bytes.clone();
        for (at, bit) in &flips {
            let i = 12 + at.index(bytes.len() - 12);
            bytes[i] ^= 1 << bit;
        }
        let mut h = history.clone();
        let _ = decode_packet::<ObjectState>(&link, &config, &bytes, &mut h);
        if flips.is_empty() {
            let d = decode_packet::<ObjectState>(&link, &config, &bytes, &mut history).unwrap();
            prop_assert_eq!(d.entries.len(), second.included.len());
        }
    }
}
