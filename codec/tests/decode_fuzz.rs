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
