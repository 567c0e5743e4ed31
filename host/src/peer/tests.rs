//! The host against hostile and odd input: strangers, garbage, truncation, wrong protocols, refused joins.

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::session::{
    ControlMessage, PEER_PROTOCOL_ID, PEER_PROTOCOL_VERSION, RejectReason, decode_control,
    encode_control,
};
use physync_engine::transport::Delivery;
use physync_engine::world::scene::SceneKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 9000))
}

fn join(version: u16, nonce: u64) -> Vec<u8> {
    encode_control(
        PEER_PROTOCOL_ID,
        &ControlMessage::JoinRequest { version, nonce },
    )
    .unwrap()
}

/// The control messages the host queued for `to`, decoded.
fn answers(host: &mut PeerHost, to: SocketAddr) -> Vec<ControlMessage> {
    let mut out = Vec::new();
    while let Some(t) = host.poll_transmit() {
        if t.to == to && t.delivery == Delivery::ReliableOrdered {
            out.push(decode_control(PEER_PROTOCOL_ID, &t.payload).unwrap());
        }
    }
    out
}

fn host(players: u8) -> PeerHost {
    let mut config = HostConfig::new(SceneKind::Table.spec());
    config.max_players = players;
    config.banned = vec![addr(66).ip()];
    PeerHost::new(config).unwrap()
}

#[test]
fn joins_are_accepted_until_full_and_refused_for_version_and_ban() {
    let mut h = host(3);
    let t = Duration::ZERO;
    h.handle_datagram(
        t,
        addr(1),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 1),
    );
    let a = answers(&mut h, addr(1));
    assert!(
        matches!(
            a[0],
            ControlMessage::Accept {
                nonce: 1,
                player: 1,
                ..
            }
        ),
        "{a:?}"
    );
    // A retried join (its answer may have been slow) gets the same answer, not a second slot.
    h.handle_datagram(
        t,
        addr(1),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 1),
    );
    let a = answers(&mut h, addr(1));
    assert!(
        matches!(a[0], ControlMessage::Accept { player: 1, .. }),
        "{a:?}"
    );
    h.handle_datagram(
        t,
        addr(2),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION + 1, 2),
    );
    assert_eq!(
        answers(&mut h, addr(2)),
        vec![ControlMessage::Reject {
            nonce: 2,
            reason: RejectReason::WrongVersion {
                host_version: PEER_PROTOCOL_VERSION
            }
        }]
    );
    h.handle_datagram(
        t,
        addr(66),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 3),
    );
    assert_eq!(
        answers(&mut h, addr(66)),
        vec![ControlMessage::Reject {
            nonce: 3,
            reason: RejectReason::Banned
        }]
    );
    h.handle_datagram(
        t,
        addr(3),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 4),
    );
    assert!(matches!(
        answers(&mut h, addr(3))[0],
        ControlMessage::Accept { player: 2, .. }
    ));
    h.handle_datagram(
        t,
        addr(4),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 5),
    );
    assert_eq!(
        answers(&mut h, addr(4)),
        vec![ControlMessage::Reject {
            nonce: 5,
            reason: RejectReason::Full
        }]
    );
    assert_eq!(h.players().len(), 3);
    assert_eq!(h.counters().rejected, 3);
    // A clean leave frees the slot.
    let leave = encode_control(PEER_PROTOCOL_ID, &ControlMessage::Leave).unwrap();
    h.handle_datagram(t, addr(1), Delivery::ReliableOrdered, &leave);
    assert_eq!(h.players().len(), 2);
    h.handle_datagram(
        t,
        addr(4),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 6),
    );
    assert!(matches!(
        answers(&mut h, addr(4))[0],
        ControlMessage::Accept { player: 1, .. }
    ));
}

#[test]
fn hostile_datagrams_are_counted_by_kind_and_dropped() {
    let mut h = host(4);
    let t = Duration::ZERO;
    let guest = addr(1);
    h.handle_datagram(
        t,
        guest,
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 1),
    );
    let mut expected = DropCounters::default();
    // Strangers: state and keep-alives from addresses that never joined.
    h.handle_datagram(t, addr(9), Delivery::Unreliable, &[1, 2, 3]);
    let keepalive = encode_control(PEER_PROTOCOL_ID, &ControlMessage::KeepAlive).unwrap();
    h.handle_datagram(t, addr(9), Delivery::ReliableOrdered, &keepalive);
    expected.unknown_sender += 2;
    // Truncated and wrong-protocol control messages.
    let full = join(PEER_PROTOCOL_VERSION, 7);
    h.handle_datagram(
        t,
        addr(9),
        Delivery::ReliableOrdered,
        &full[..full.len() - 2],
    );
    expected.malformed += 1;
    let other = encode_control(0x1111, &ControlMessage::KeepAlive).unwrap();
    h.handle_datagram(t, guest, Delivery::ReliableOrdered, &other);
    expected.wrong_protocol += 1;
    // Oversized on both channels.
    h.handle_datagram(t, guest, Delivery::ReliableOrdered, &[0; 200]);
    h.handle_datagram(t, guest, Delivery::Unreliable, &[0; 1500]);
    expected.oversized += 2;
    // Garbage and truncated state packets from the joined guest.
    h.handle_datagram(t, guest, Delivery::Unreliable, &[0x50, 0x53, 1, 1, 0, 0]);
    expected.malformed += 1;
    // A host-only message from a guest makes no sense.
    let roster = encode_control(PEER_PROTOCOL_ID, &ControlMessage::Roster { players: 1 }).unwrap();
    h.handle_datagram(t, guest, Delivery::ReliableOrdered, &roster);
    expected.malformed += 1;
    assert_eq!(h.counters().drops, expected);
    // Random bytes on both channels from both kinds of sender: all dropped, none panics, the world goes on.
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for i in 0..2000 {
        let len = rng.random_range(0..1300);
        let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let from = if i % 2 == 0 { guest } else { addr(9) };
        let delivery = if rng.random_bool(0.5) {
            Delivery::Unreliable
        } else {
            Delivery::ReliableOrdered
        };
        h.handle_datagram(t, from, delivery, &bytes);
    }
    assert_eq!(h.counters().drops.total(), expected.total() + 2000);
    assert_eq!(h.players().len(), 2);
    h.handle_timeout(Duration::from_millis(100));
    assert!(h.world().frame() > 0);
}

#[test]
fn a_silent_guest_times_out_and_the_host_leaving_tells_the_rest() {
    let mut h = host(4);
    h.handle_datagram(
        Duration::ZERO,
        addr(1),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 1),
    );
    h.handle_datagram(
        Duration::ZERO,
        addr(2),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 2),
    );
    let keepalive = encode_control(PEER_PROTOCOL_ID, &ControlMessage::KeepAlive).unwrap();
    let mut now = Duration::ZERO;
    while now < Duration::from_secs(7) {
        now += Duration::from_millis(100);
        h.handle_datagram(now, addr(2), Delivery::ReliableOrdered, &keepalive);
        h.handle_timeout(now);
    }
    assert_eq!(h.counters().timeouts, 1);
    assert_eq!(
        h.players().iter().map(|p| p.player).collect::<Vec<_>>(),
        vec![0, 2]
    );
    while h.poll_transmit().is_some() {}
    h.leave();
    assert_eq!(answers(&mut h, addr(2)), vec![ControlMessage::Leave]);
    assert_eq!(h.poll_timeout(), None);
}

/// A leave repeated as an unreliable datagram (what a lingering guest sends when the ordered reliable channel is
/// stalled behind a lost message) ends that guest's stay as a leave, once; from a stranger it ends nothing.
#[test]
fn a_leave_outside_the_reliable_channel_counts_as_a_leave() {
    let mut h = host(4);
    let t = Duration::ZERO;
    h.handle_datagram(
        t,
        addr(1),
        Delivery::ReliableOrdered,
        &join(PEER_PROTOCOL_VERSION, 1),
    );
    assert_eq!(h.players().len(), 2);
    let leave = encode_control(PEER_PROTOCOL_ID, &ControlMessage::Leave).unwrap();
    h.handle_datagram(t, addr(9), Delivery::Unreliable, &leave);
    assert_eq!(h.players().len(), 2, "a stranger's leave ends nothing");
    for _ in 0..3 {
        h.handle_datagram(t, addr(1), Delivery::Unreliable, &leave);
    }
    assert_eq!(h.players().len(), 1);
    assert_eq!((h.counters().leaves, h.counters().timeouts), (1, 0));
}
