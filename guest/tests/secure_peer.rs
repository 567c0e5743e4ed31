//! A peer-hosted session behind the connection layer, attacked the way an off-path spoofer can: plaintext and
//! replayed joins from fresh source ports, datagrams with flipped bits, forged leaves. The cores must never see any
//! of it: no slot taken, no session ended, no authority moved, and every forgery counted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::session::sim::{guest_addr, host_addr};
use physync_engine::session::{
    ControlMessage, PEER_PROTOCOL_ID, PEER_PROTOCOL_VERSION, SessionSim, encode_control,
};
use physync_engine::transport::{Delivery, LinkConfig, Transmit};
use physync_engine::world::scene::SceneKind;
use physync_guest::bots::{Bot, BotKind};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Sim = SessionSim<PeerHost, PeerGuest>;

const CODE: &str = "QX7M-4KDP";

fn link() -> LinkConfig {
    LinkConfig::from_rtt(
        Duration::from_millis(100),
        Duration::from_millis(10),
        0.02,
        0.0,
    )
}

fn session(seed: u64, guests: usize) -> Sim {
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).unwrap();
    let mut sim = SessionSim::new_secure(host, link(), seed, Some(CODE.into())).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..guests {
        sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), rng.random())))
            .unwrap();
    }
    sim.run_idle_until(Duration::from_secs(2)).unwrap();
    assert_eq!(sim.host().players().len(), guests + 1, "everyone joined");
    sim
}

/// Runs a builder bot on every guest until `until`.
fn play(sim: &mut Sim, bots: &mut [Bot], until: Duration) {
    sim.run_until(
        until,
        |_, _| {},
        |i, now, guest| {
            if let (Some(bot), Some(s)) = (bots.get_mut(i), guest.session_mut()) {
                bot.act(now, s);
            }
        },
    )
    .unwrap();
}

/// Sends `payload` from `from` (attached for the send only when it is not a session member: replies to it are
/// then undeliverable, as to a spoofed address).
fn inject(sim: &mut Sim, from: SocketAddr, to: SocketAddr, payload: Vec<u8>) {
    let now = sim.now();
    let net = sim.network_mut();
    let stranger = net.traffic(from).is_none();
    if stranger {
        net.add_endpoint(from).unwrap();
    }
    let t = Transmit {
        to,
        delivery: Delivery::Unreliable,
        payload,
    };
    net.send(now, from, t).unwrap();
    if stranger {
        net.remove_endpoint(from);
    }
}

fn all_guests_in_session(sim: &Sim) -> bool {
    sim.guests()
        .all(|(_, g)| g.end_reason().is_none() && g.session().is_some())
}

#[test]
fn spoofed_and_replayed_joins_take_no_slot_and_get_no_larger_reply() {
    let mut sim = session(1, 2);
    // An eavesdropper records two seconds of the session, joins included (a third guest joins meanwhile).
    sim.set_tap(true);
    sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), 77)))
        .unwrap();
    sim.run_idle_until(Duration::from_secs(4)).unwrap();
    let recorded = sim.take_tapped();
    let to_host: Vec<Vec<u8>> = recorded
        .iter()
        .filter(|(_, t)| t.to == host_addr())
        .map(|(_, t)| t.payload.clone())
        .collect();
    assert!(to_host.len() > 50);
    let plain_join = encode_control(
        PEER_PROTOCOL_ID,
        &ControlMessage::JoinRequest {
            version: PEER_PROTOCOL_VERSION,
            nonce: 5,
        },
    )
    .unwrap();
    // Then replays every datagram and sends plaintext joins, each from a fresh source port.
    let mut sent_by: HashMap<SocketAddr, usize> = HashMap::new();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for (i, payload) in to_host
        .iter()
        .chain(std::iter::repeat_n(&plain_join, 200))
        .enumerate()
    {
        let spoofed =
            SocketAddr::from(([10, 66, (i / 250) as u8, (i % 250) as u8 + 1], rng.random()));
        *sent_by.entry(spoofed).or_default() += payload.len();
        inject(&mut sim, spoofed, host_addr(), payload.clone());
    }
    sim.set_tap(true);
    sim.run_idle_until(Duration::from_secs(8)).unwrap();
    let host = sim.host();
    assert_eq!(
        host.players().len(),
        4,
        "host and the three real guests, nobody else"
    );
    assert_eq!(host.counters().joins, 3);
    for (from, t) in sim.take_tapped() {
        if let Some(&sent) = sent_by.get(&t.to) {
            assert_eq!(from, host_addr());
            assert!(
                t.payload.len() <= sent,
                "{} bytes back for {sent}",
                t.payload.len()
            );
        }
    }
    let c = sim.host_connection().unwrap();
    assert_eq!(c.sessions(), 3, "sessions only for the real guests");
    assert!(
        c.stats().dropped.total() >= to_host.len() as u64 / 2,
        "{:?}",
        c.stats().dropped
    );
    assert!(all_guests_in_session(&sim));
}

#[test]
fn datagrams_with_flipped_bits_are_dropped_and_counted() {
    let mut sim = session(2, 3);
    let mut bots: Vec<Bot> = (0..3).map(|i| Bot::new(BotKind::Thrower, i)).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut altered = 0u64;
    let mut end = Duration::from_secs(2);
    sim.set_tap(true);
    // 10 s of play; every 100 ms, 3% of what crossed the network arrives again with one bit flipped, from its
    // real sender (an off-path attacker can send exactly that).
    while end < Duration::from_secs(12) {
        end += Duration::from_millis(100);
        play(&mut sim, &mut bots, end);
        for (from, t) in sim.take_tapped() {
            if rng.random_bool(0.03) && !t.payload.is_empty() {
                let mut payload = t.payload;
                let bit = rng.random_range(0..payload.len() * 8);
                payload[bit / 8] ^= 1 << (bit % 8);
                inject(&mut sim, from, t.to, payload);
                altered += 1;
            }
        }
    }
    play(&mut sim, &mut bots, Duration::from_secs(13));
    assert!(altered > 100, "{altered}");
    let host = sim.host();
    assert_eq!(host.players().len(), 4);
    assert_eq!(
        host.counters().bad_updates.total(),
        0,
        "no altered state reached the host's checks"
    );
    assert_eq!(host.counters().timeouts + host.counters().leaves, 0);
    assert!(all_guests_in_session(&sim), "no guest saw its session end");
    let mut dropped = sim.host_connection().unwrap().stats().dropped.total();
    for i in 0..3 {
        dropped += sim.guest_connection(i).unwrap().stats().dropped.total();
    }
    assert!(
        dropped + 10 >= altered,
        "every altered datagram counted ({dropped} of {altered}; a few are still in flight)"
    );
}

#[test]
fn a_spoofed_leave_does_not_end_a_session() {
    let mut sim = session(3, 2);
    let leave = encode_control(PEER_PROTOCOL_ID, &ControlMessage::Leave).unwrap();
    for round in 0..20 {
        // "The host leaves", sent to each guest from the host's address; "guest 0 leaves", to the host.
        for g in 0..2 {
            inject(&mut sim, host_addr(), guest_addr(g), leave.clone());
        }
        inject(&mut sim, guest_addr(0), host_addr(), leave.clone());
        sim.run_idle_until(Duration::from_secs(2) + Duration::from_millis(100 * (round + 1)))
            .unwrap();
    }
    sim.run_idle_until(Duration::from_secs(6)).unwrap();
    assert!(all_guests_in_session(&sim), "guests still in");
    assert_eq!(sim.host().players().len(), 3, "host still has both guests");
    assert_eq!(sim.host().counters().leaves, 0);
    assert!(sim.host_connection().unwrap().stats().dropped.total() >= 20);
}

#[test]
fn a_guest_with_the_wrong_join_code_never_joins() {
    let mut sim = session(4, 1);
    sim.add_guest_with_code(
        PeerGuest::new(GuestConfig::new(host_addr(), 3)),
        Some("AAAA-BBBB".into()),
    )
    .unwrap();
    sim.run_idle_until(Duration::from_secs(14)).unwrap();
    assert_eq!(sim.host().players().len(), 2);
    assert!(sim.host_connection().unwrap().stats().dropped.bad_proof > 0);
    assert!(sim.guest(1).unwrap().session().is_none());
}
