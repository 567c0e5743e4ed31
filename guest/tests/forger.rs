//! A guest that lies: it joins properly, then sends updates for objects it has no authority over, with forged
//! sequences and with positions outside the world. The host must count, refuse and correct them, and an honest
//! guest in the same session must still agree with the host.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use nalgebra::Isometry3;
use physync_codec::ObjectState;
use physync_engine::link::{LinkSettings, Outgoing, StateLink};
use physync_engine::session::PlayerControls;
use physync_engine::session::sim::host_addr;
use physync_engine::session::{
    ControlMessage, PEER_PROTOCOL_ID, PEER_PROTOCOL_VERSION, SessionCore, SessionSim,
    decode_control, divergence, encode_control,
};
use physync_engine::transport::{Datagram, Delivery, LinkConfig, Transmit};
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::SceneKind;
use physync_engine::world::{World, WorldConfig};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};

/// Object claimed under another player's authority.
const STOLEN: u16 = 5;
/// Object sent outside the world.
const FLUNG: u16 = 6;
/// Object sent with a forged ownership sequence.
const FORGED: u16 = 7;
const FORGED_SEQ: u16 = 1000;
/// Object sent with an ownership lead of exactly half the sequence space.
const HALF: u16 = 8;
/// Object claimed by a touch and moved 5 m in one frame.
const TELEPORTED: u16 = 9;
/// Object claimed by a touch and given 32 m/s.
const SPEEDING: u16 = 10;
/// Object the honest guest holds; the forger claims it with ownership +1.
const SNATCHED: u16 = 11;

/// A hand-built guest speaking the protocol correctly but sending lies.
struct Forger {
    link: StateLink,
    outbox: VecDeque<Transmit>,
    player: Option<u8>,
    next: Duration,
    frame: u64,
    states: Vec<ObjectState>,
    /// The newest state the host sent for each object.
    seen: BTreeMap<u16, ObjectState>,
}

impl Forger {
    fn new() -> Self {
        let world = World::new(WorldConfig::default(), &SceneKind::Table.spec());
        let mut settings = LinkSettings::default();
        settings.codec.max_objects = world.object_count() as u16;
        Self {
            link: StateLink::new(settings).unwrap(),
            outbox: VecDeque::new(),
            player: None,
            next: Duration::ZERO,
            frame: 0,
            states: world.object_states(),
            seen: BTreeMap::new(),
        }
    }

    fn control(&mut self, message: ControlMessage) {
        self.outbox.push_back(Transmit {
            to: host_addr(),
            delivery: Delivery::ReliableOrdered,
            payload: encode_control(PEER_PROTOCOL_ID, &message).unwrap(),
        });
    }

    fn lies(&self, me: u8) -> Vec<ObjectState> {
        let quant = WorldConfig::default().quant;
        let mut states = self.states.clone();
        states[usize::from(STOLEN)].authority = if me == 3 { 2 } else { 3 };
        states[usize::from(STOLEN)].body.position[1] += 512;
        states[usize::from(FLUNG)].authority = me;
        states[usize::from(FLUNG)].authority_seq = 1;
        states[usize::from(FLUNG)].body.position = quant.position.quantize([40.0, 0.25, 0.0]);
        states[usize::from(FORGED)].authority = me;
        states[usize::from(FORGED)].ownership_seq = FORGED_SEQ;
        states[usize::from(FORGED)].body.position[1] += 512;
        states[usize::from(HALF)].authority = me;
        states[usize::from(HALF)].ownership_seq = 32_768;
        let teleported = &mut states[usize::from(TELEPORTED)];
        teleported.authority = me;
        teleported.authority_seq = 1;
        teleported.body.position[0] += 5 * 512;
        let speeding = &mut states[usize::from(SPEEDING)];
        speeding.authority = me;
        speeding.authority_seq = 1;
        speeding.body.at_rest = false;
        speeding.body.linear_velocity = quant.linear_velocity.quantize([32.0, 0.0, 0.0]);
        let snatched = &mut states[usize::from(SNATCHED)];
        snatched.authority = me;
        snatched.ownership_seq = self.seen.get(&SNATCHED).map_or(0, |s| s.ownership_seq) + 1;
        states
    }
}

impl SessionCore for Forger {
    fn handle_datagram(&mut self, now: Duration, d: Datagram) {
        match d.delivery {
            Delivery::ReliableOrdered => {
                if let Ok(ControlMessage::Accept { player, .. }) =
                    decode_control(PEER_PROTOCOL_ID, &d.payload)
                {
                    self.player = Some(player);
                }
            }
            Delivery::Unreliable => {
                if let Ok(update) = self.link.receive(now, &d.payload) {
                    self.seen.extend(update.objects);
                }
            }
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        Some(self.next)
    }

    fn handle_timeout(&mut self, now: Duration) {
        let Some(me) = self.player else {
            self.control(ControlMessage::JoinRequest {
                version: PEER_PROTOCOL_VERSION,
                nonce: 99,
            });
            self.next = now + Duration::from_millis(500);
            return;
        };
        if self.frame.is_multiple_of(15) {
            self.control(ControlMessage::KeepAlive);
        }
        self.frame += 1;
        let states = self.lies(me);
        let mut priorities = vec![-1.0; states.len()];
        for id in [STOLEN, FLUNG, FORGED, HALF, TELEPORTED, SPEEDING, SNATCHED] {
            priorities[usize::from(id)] = 1.0;
        }
        let out = Outgoing {
            frame: self.frame,
            objects: &states,
            revisions: None,
            priorities: &priorities,
            avatars: &[],
        };
        if let Some(p) = self.link.build_packet(now, &out).unwrap() {
            self.outbox.push_back(Transmit {
                to: host_addr(),
                delivery: Delivery::Unreliable,
                payload: p.bytes,
            });
        }
        self.next = now + Duration::from_secs(1) / 60;
    }
}

enum Guest {
    Honest(Box<PeerGuest>),
    Liar(Box<Forger>),
}

impl SessionCore for Guest {
    fn handle_datagram(&mut self, now: Duration, d: Datagram) {
        match self {
            Guest::Honest(g) => SessionCore::handle_datagram(g.as_mut(), now, d),
            Guest::Liar(g) => g.handle_datagram(now, d),
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        match self {
            Guest::Honest(g) => SessionCore::poll_transmit(g.as_mut()),
            Guest::Liar(g) => g.poll_transmit(),
        }
    }

    fn poll_timeout(&self) -> Option<Duration> {
        match self {
            Guest::Honest(g) => SessionCore::poll_timeout(g.as_ref()),
            Guest::Liar(g) => g.poll_timeout(),
        }
    }

    fn handle_timeout(&mut self, now: Duration) {
        match self {
            Guest::Honest(g) => SessionCore::handle_timeout(g.as_mut(), now),
            Guest::Liar(g) => g.handle_timeout(now),
        }
    }
}

fn addr_of(sim: &SessionSim<PeerHost, Guest>, player: u8) -> Option<SocketAddr> {
    sim.host()
        .players()
        .into_iter()
        .find(|p| p.player == player)
        .and_then(|p| p.addr)
}

#[test]
fn a_forging_guest_is_counted_refused_and_corrected() {
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).unwrap();
    let link = LinkConfig::from_rtt(
        Duration::from_millis(100),
        Duration::from_millis(10),
        0.05,
        0.0,
    );
    let mut sim = SessionSim::new(host, link, 21).unwrap();
    sim.add_guest(Guest::Honest(Box::new(PeerGuest::new(GuestConfig::new(
        host_addr(),
        1,
    )))))
    .unwrap();
    sim.add_guest(Guest::Liar(Box::new(Forger::new()))).unwrap();
    let before = World::new(WorldConfig::default(), &SceneKind::Table.spec());
    // The honest guest holds one cube throughout.
    sim.run_until(
        Duration::from_secs(6),
        |_, _| {},
        |_, _, guest| {
            if let Guest::Honest(g) = guest
                && let Some(s) = g.session_mut()
                && s.world().holder(SNATCHED).is_none()
            {
                let cube = s.world().physics_pose(SNATCHED);
                s.set_hand_pose(Hand::Left, Isometry3::translation(0.0, 0.1, 0.0) * cube);
                s.grab(Hand::Left, SNATCHED).unwrap();
            }
        },
    )
    .unwrap();

    let c = *sim.host().counters();
    assert!(c.bad_updates.no_authority > 10, "{c:?}");
    assert!(c.bad_updates.out_of_bounds > 10, "{c:?}");
    assert!(c.bad_updates.forged_sequence >= 2, "{c:?}");
    assert!(c.bad_updates.implausible > 10, "{c:?}");
    assert!(c.corrections >= 3, "{c:?}");
    let liar = match sim.guest(1) {
        Some(Guest::Liar(f)) => f,
        _ => unreachable!(),
    };
    let liar_player = liar.player.unwrap();
    let report = sim
        .host()
        .guest_reports()
        .into_iter()
        .find(|r| Some(r.addr) == addr_of(&sim, liar_player))
        .unwrap();
    assert_eq!(report.bad_updates.total(), c.bad_updates.total());
    // The host's world kept every lied-about object where it was.
    let host = sim.host().world();
    for id in [STOLEN, FLUNG, FORGED, HALF, TELEPORTED, SPEEDING] {
        let moved = (host.physics_pose(id).translation.vector
            - before.physics_pose(id).translation.vector)
            .norm();
        assert!(moved < 0.01, "object {id} moved {moved} m");
        assert_eq!(host.authority(id).view.authority, 0, "object {id}");
    }
    // Nothing leaves a hand through an object update.
    let honest_player = sim.guest(0).and_then(|g| match g {
        Guest::Honest(g) => g.session().map(|s| s.player()),
        Guest::Liar(_) => None,
    });
    assert_eq!(host.holder(SNATCHED).map(|h| h.player), honest_player);
    // The forged sequence was overtaken, so the host's correction wins even on the forger.
    assert_eq!(host.authority(FORGED).view.ownership_seq, FORGED_SEQ + 1);
    assert_eq!(liar.seen[&FORGED].ownership_seq, FORGED_SEQ + 1);
    // The honest guest saw none of it.
    let Some(Guest::Honest(honest)) = sim.guest(0) else {
        unreachable!()
    };
    let d = divergence(host, honest.world().unwrap());
    assert!(d.max_position_m < 0.003, "{d:?}");
    assert_eq!(d.authority_mismatches, 0, "{d:?}");
}
