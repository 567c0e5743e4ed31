//! The guest's control plane on its own: join retries, refusals, the host leaving or going silent, and
//! datagrams it must drop.

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::session::SceneUpload;
use physync_engine::session::scene_transfer::{TransferMessage, decode_transfer, encode_transfer};
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

fn upload() -> SceneUpload {
    SceneUpload::new(&SceneKind::Table.spec()).unwrap()
}

fn accept(nonce: u64) -> ControlMessage {
    ControlMessage::Accept {
        nonce,
        player: 2,
        setup: SceneSetup {
            scene: upload().offer(),
            max_players: 4,
            step_hz: 60,
            send_hz: 60,
        },
    }
}

/// The host's chunk datagrams for the table scene.
fn chunks() -> Vec<Vec<u8>> {
    let all: Vec<u16> = (0..upload().offer().chunk_count() as u16).collect();
    all.chunks(16).flat_map(|c| upload().answer(c)).collect()
}

/// Accepts the guest and hands it the whole scene.
fn join(g: &mut PeerGuest, now: Duration, nonce: u64) {
    from_host(g, now, accept(nonce));
    for chunk in chunks() {
        g.handle_datagram(now, host(), Delivery::Unreliable, &chunk);
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
    assert_eq!(g.phase(), GuestPhase::Joining, "the scene is still to come");
    // The guest asks for the chunks it lacks; the host's answers complete the scene.
    g.handle_timeout(ms(1300));
    let requests: Vec<Vec<u8>> = std::iter::from_fn(|| g.poll_transmit())
        .filter(|t| t.delivery == Delivery::Unreliable)
        .map(|t| t.payload)
        .collect();
    assert_eq!(requests.len(), 1);
    let Ok(TransferMessage::Request { chunks: asked }) = decode_transfer(&requests[0]) else {
        panic!("not a scene request");
    };
    assert_eq!(asked.len(), upload().offer().chunk_count().min(16));
    for chunk in upload().answer(&asked) {
        g.handle_datagram(ms(1300), host(), Delivery::Unreliable, &chunk);
    }
    for chunk in chunks() {
        g.handle_datagram(ms(1300), host(), Delivery::Unreliable, &chunk);
    }
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
    join(&mut g, ms(10), 1);
    from_host(&mut g, ms(20), ControlMessage::Leave);
    assert_eq!(g.end_reason(), Some(EndReason::HostLeft));

    let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
    g.handle_timeout(Duration::ZERO);
    join(&mut g, ms(10), 1);
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
    join(&mut g, ms(10), 1);
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
    join(&mut g, ms(2), 1);
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

/// A wrong content hash or a truncated chunk stops the guest with the reason, before any world is built.
#[test]
fn a_bad_scene_stops_the_guest_with_a_clear_error() {
    let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
    g.handle_timeout(Duration::ZERO);
    let mut wrong = accept(1);
    if let ControlMessage::Accept { setup, .. } = &mut wrong {
        setup.scene.hash ^= 0xFF;
    }
    from_host(&mut g, ms(10), wrong);
    for chunk in chunks() {
        g.handle_datagram(ms(20), host(), Delivery::Unreliable, &chunk);
    }
    let Some(EndReason::BadScene(e)) = g.end_reason() else {
        panic!("not refused: {:?}", g.phase());
    };
    assert!(matches!(e, SceneTransferError::HashMismatch { .. }));
    assert!(e.to_string().contains("does not match"), "{e}");
    assert!(g.world().is_none());
    assert_eq!(g.poll_timeout(), None);

    let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
    g.handle_timeout(Duration::ZERO);
    from_host(&mut g, ms(10), accept(1));
    let Ok(TransferMessage::Chunk { index, mut bytes }) = decode_transfer(&chunks()[0]) else {
        panic!("not a chunk");
    };
    bytes.truncate(bytes.len() / 2);
    let cut = encode_transfer(&TransferMessage::Chunk { index, bytes }).unwrap();
    g.handle_datagram(ms(20), host(), Delivery::Unreliable, &cut);
    assert!(matches!(
        g.end_reason(),
        Some(EndReason::BadScene(SceneTransferError::ChunkLength {
            index: 0,
            ..
        }))
    ));

    let mut g = PeerGuest::new(GuestConfig::new(host(), 1));
    g.handle_timeout(Duration::ZERO);
    let mut huge = accept(1);
    if let ControlMessage::Accept { setup, .. } = &mut huge {
        setup.scene.len = u32::MAX;
    }
    // An offer past the control message's bound does not even encode; one at the bound is refused as too large.
    assert!(encode_control(PEER_PROTOCOL_ID, &huge).is_err());
    if let ControlMessage::Accept { setup, .. } = &mut huge {
        setup.scene.len = physync_engine::session::scene_transfer::MAX_SCENE_BYTES as u32;
    }
    from_host(&mut g, ms(10), huge);
    assert_eq!(g.phase(), GuestPhase::Joining, "a 1 MiB scene is allowed");
}

#[test]
fn a_roster_sent_while_the_scene_downloads_is_the_sessions_roster() {
    let mut g = PeerGuest::new(GuestConfig::new(host(), 42));
    g.handle_timeout(ms(0));
    from_host(&mut g, ms(10), accept(42));
    // The host announces players 1 and 3 (and this guest, 2) before the scene is complete.
    from_host(&mut g, ms(20), ControlMessage::Roster { players: 0b1111 });
    for chunk in chunks() {
        g.handle_datagram(ms(30), host(), Delivery::Unreliable, &chunk);
    }
    assert_eq!(g.phase(), GuestPhase::Joined);
    assert_eq!(g.session().unwrap().players(), vec![0, 1, 2, 3]);
}
