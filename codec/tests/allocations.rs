//! The bit-packed packet path allocates only what it hands back once a link is running: the writer's working
//! tables (candidates drawn, the selection's entries and id tables, the states and predictions) are the link's
//! ack tracker's from one datagram to the next; the reader keeps no tables of its own (the receive history allocates
//! a block of neighbouring ids in a slot at its first store, which a duplicate datagram finds in place). A counting
//! global allocator counts the allocations of one steady-state encode and decode.

use physync_codec::alloc_count::{CountingAllocator, counted};
use physync_codec::{
    AckTracker, Backend, BodyState, LinkConfig, ObjectState, PacketHeader, QuantConfig,
    ReceiveHistory, StateConfig, decode_packet, encode_packet,
};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Object `id`'s state in packet `seq`: one in five moves, the rest rest where they are.
fn state(quant: &QuantConfig, id: u16, seq: u16) -> ObjectState {
    let moving = id.is_multiple_of(5);
    let (i, t) = (f32::from(id), if moving { f32::from(seq) } else { 0.0 });
    ObjectState {
        body: BodyState::quantize(
            quant,
            [i * 0.3 - 30.0 + t * 0.05, 0.5 + t * 0.01, i * 0.1],
            [0.1, i * 0.01, 0.2, 0.9],
            [if moving { 3.0 } else { 0.0 }, 0.0, 0.0],
            [0.0, 0.0, 0.0],
            !moving,
        ),
        authority: 0,
        authority_seq: 1,
        ownership_seq: 1,
    }
}

#[test]
fn a_steady_bit_packed_link_allocates_only_what_it_hands_back() {
    let config = StateConfig::default();
    let link = LinkConfig {
        backend: Backend::Bitpack,
        max_objects: 1000,
        ..LinkConfig::default()
    };
    let order: Vec<u16> = (0..link.max_objects).collect();
    let mut tracker = AckTracker::new(link.max_objects);
    let mut history = ReceiveHistory::new(link.max_objects);
    let mut last = (0, 0, 0);
    for seq in 1..40u16 {
        let header = PacketHeader {
            sequence: seq,
            ack: seq.wrapping_sub(1),
            ..PacketHeader::default()
        };
        let state_of = |id: u16| Some(state(&config.quant, id, seq));
        let (encoding, packet) =
            counted(|| encode_packet(&link, &config, header, seq, &order, state_of, &mut tracker));
        let packet = packet.expect("encode");
        let decoded = decode_packet::<ObjectState>(&link, &config, &packet.bytes, &mut history);
        let decoded = decoded.expect("decode");
        assert!(
            decoded
                .entries
                .iter()
                .all(|&(id, s)| s == state(&config.quant, id, seq)),
            "packet {seq} decodes to what was encoded"
        );
        // The same datagram again (a duplicate): its history blocks exist now.
        let (decoding, again) =
            counted(|| decode_packet::<ObjectState>(&link, &config, &packet.bytes, &mut history));
        assert_eq!(again.expect("decode again").entries, decoded.entries);
        tracker.process_acks(seq, 0);
        last = (encoding, decoding, packet.included.len());
    }
    assert!(
        last.2 > 100 && last.2 < order.len(),
        "the budget cuts a section of changed and unchanged entries: {} entries",
        last.2
    );
    // Encoding: the datagram's bytes, the ids included, and the ids and states the tracker records as sent.
    // Decoding (a duplicate, into blocks that exist): the entries returned.
    assert_eq!(
        (last.0, last.1),
        (4, 1),
        "allocations of one encode and one decode"
    );
}

#[test]
fn a_history_copied_again_into_the_same_copy_allocates_nothing() {
    // A copy of a receive history taken again and again into the same copy (to decode against the same history
    // each time, as the codec benchmark does) reuses the copy's blocks once it has them.
    let quant = QuantConfig::default();
    let mut history = ReceiveHistory::new(40);
    for seq in 1..200u16 {
        for id in (0..40).filter(|id| (id + seq).is_multiple_of(3)) {
            history.insert(id, seq, seq, state(&quant, id, seq));
        }
    }
    let mut copy = history.clone();
    for seq in 200..210u16 {
        history.insert(seq % 40, seq, seq, state(&quant, seq % 40, seq));
        let (allocations, ()) = counted(|| copy.clone_from(&history));
        assert_eq!(
            allocations, 0,
            "copying the history again after packet {seq}"
        );
        for id in 0..40 {
            for back in 0..300u16 {
                let s = seq.wrapping_sub(back);
                assert_eq!(
                    copy.get(id, s),
                    history.get(id, s),
                    "object {id}, packet {s}"
                );
            }
        }
    }
}
