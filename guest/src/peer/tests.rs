//! The guest's control plane on its own: join retries, refusals, the host leaving or going silent, and
//! datagrams it must drop.

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::session::{
    ControlMessage, PEER_PROTOCOL_ID, PEER_PROTOCOL_VERSION, RejectReason, SceneSetup,
    decode_control, encode_control,
};
use physync_engine::transport::Delivery;
use physync_engine::world::scene::SceneKind;

use super::*;

fn host() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 7000))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn from_host(g: &mut PeerGuest, now: Duration, m: ControlMessage) {
    let bytes = encode_control(PEER_PROTOCOL_ID, &m).unwrap();
    g.handle_datagram(now, host(), Delivery::ReliableOrdered, &bytes);
}

fn sent(g: &mut PeerGuest) -> Vec<ControlMessage> {
    let mut out = Vec::new();
    while let Some(t) = g.poll_transmit() {
        assert_eq!(t.to, host());
        if t.delivery == Delivery::ReliableOrdered {
            out.push(decode_control(PEER_PROTOCOL_ID, &t.payload).unwrap());
        }
    }
    out
}

fn accept(nonce: u64) -> ControlMessage {
    ControlMessage::Accept {
        nonce,
        player: 2,
        setup: SceneSetup {
            scene: SceneKind::Table,
            max_players: 4,
            step_hz: 60,
            send_hz: 60,
        },
    }
}

#[test]
fn join_is_retried_until_accepted_then_the_guest_plays() {
    let mut g = PeerGuest::new(GuestConfig::new(host(), 42));
    let mut joins = 0;
    for t in (0..=1200).step_by(100) {
        if g.poll_timeout().is_some_and(|d| d <= ms(t)) {
            g.handle_timeout(ms(t));
        }
        joins += sent(&mut g)
            .iter()
            .filter(|m| {
                **m == ControlMessage::JoinRequest {
                    version: PEER_PROTOCOL_VERSION,
                    nonce: 42,
                }
            })
            .count();
    }
    assert_eq!(joins, 3, "a join at 0, 500 and 1000 ms");
    // An answer to someone else's request changes nothing.
    from_host(&mut g, ms(1250), accept(7));
    assert_eq!(g.phase(), GuestPhase::Joining);
    from_host(&mut g, ms(1300), accept(42));
    assert_eq!(g.phase(), GuestPhase::Joined);
    let s = g.session().unwrap();
    assert_eq!(s.player(), 2);
    assert_eq!(s.world().object_count(), 64);
    g.handle_timeout(ms(1400));
    let packets = std::iter::from_fn(|| g.poll_transmit())
        .filter(|t| t.delivery == Delivery::Unreliable)
        .count();
    assert!(packets >= 1);
    assert!(g.world().unwrap().frame() >= 6);
}

#[test]
fn refusals_and_endings_are_reported() {
    for reason in [
        RejectReason::Full,
        RejectReason::Banned,
        RejectReason::WrongVersion { host_version: 9 },
    ] {
        let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
        g.handle_timeout(Duration::ZERO);
        from_host(&mut g, ms(50), ControlMessage::Reject { nonce: 1, reason });
        assert_eq!(g.end_reason(), Some(EndReason::Rejected(reason)));
        assert_eq!(g.poll_timeout(), None);
    }
    let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
    g.handle_timeout(Duration::ZERO);
    g.handle_timeout(ms(5001));
    assert_eq!(g.end_reason(), Some(EndReason::Timeout), "nobody answered");

    let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
    g.handle_timeout(Duration::ZERO);
    from_host(&mut g, ms(10), accept(1));
    from_host(&mut g, ms(20), ControlMessage::Leave);
    assert_eq!(g.end_reason(), Some(EndReason::HostLeft));

    let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
    g.handle_timeout(Duration::ZERO);
    from_host(&mut g, ms(10), accept(1));
    let mut t = 10;
    while g.end_reason().is_none() {
        t += 100;
        assert!(t < 10_000);
        g.handle_timeout(ms(t));
    }
    assert_eq!(
        g.end_reason(),
        Some(EndReason::Timeout),
        "the host went silent"
    );
    assert!(t > 5000);

    let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
    g.handle_timeout(Duration::ZERO);
    from_host(&mut g, ms(10), accept(1));
    sent(&mut g);
    g.leave();
    assert_eq!(sent(&mut g), vec![ControlMessage::Leave]);
    assert_eq!(g.end_reason(), Some(EndReason::Left));
}

#[test]
fn stray_and_broken_datagrams_are_counted() {
    let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
    g.handle_timeout(Duration::ZERO);
    let stranger = SocketAddr::from(([10, 0, 0, 9], 7000));
    g.handle_datagram(ms(1), stranger, Delivery::ReliableOrdered, &[1, 2]);
    g.handle_datagram(ms(1), host(), Delivery::Unreliable, &[1, 2, 3]);
    let other = encode_control(0x4242, &ControlMessage::KeepAlive).unwrap();
    g.handle_datagram(ms(1), host(), Delivery::ReliableOrdered, &other);
    g.handle_datagram(ms(1), host(), Delivery::ReliableOrdered, &[0; 64]);
    from_host(&mut g, ms(2), accept(1));
    g.handle_datagram(ms(3), host(), Delivery::Unreliable, &[0x50, 0x53, 1, 0]);
    g.handle_datagram(ms(3), host(), Delivery::Unreliable, &[0; 1300]);
    from_host(
        &mut g,
        ms(3),
        ControlMessage::JoinRequest {
            version: 1,
            nonce: 1,
        },
    );
    assert_eq!(
        *g.drops(),
        GuestDrops {
            malformed: 2,
            oversized: 2,
            wrong_protocol: 1,
            unknown_sender: 1,
            before_join: 1,
        }
    );
    assert_eq!(g.phase(), GuestPhase::Joined);
}
