//! A dedicated match behind the connection layer, attacked the way an off-path spoofer can: replayed tokens and
//! plaintext connects from fresh addresses, datagrams with a flipped bit, forged disconnects. The server and client
//! cores must never see any of it, and every forgery is counted.

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::connection::{
    ClientAuth, ClientConfig as ConnConfig, ConnectToken, Endpoint, SIM_UNIX_EPOCH, TokenIssuer,
};
use physync_engine::shooter_net::messages::ConnectRequest;
use physync_engine::shooter_net::{Message, PlayerClaims, mint_token};
use physync_engine::transport::{Delivery, LinkConfig, MemoryNetwork, Transmit};
use physync_guest::dedicated::{Bot, BotConfig, ClientConfig, ClientPhase, MemoryClient};
use physync_host::dedicated::{MatchConfig, MemoryServer};
use rand::{Rng, SeedableRng};
use rand_chacha::{ChaCha8Rng, ChaCha20Rng};

const SERVER: &str = "10.0.0.1:40000";

fn server_addr() -> SocketAddr {
    SERVER.parse().unwrap()
}

struct Sim {
    net: MemoryNetwork,
    now: Duration,
    server: MemoryServer,
    clients: Vec<MemoryClient>,
    strangers: Vec<SocketAddr>,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let link = LinkConfig::from_rtt(Duration::from_millis(80), Duration::ZERO, 0.0, 0.0);
        let mut net = MemoryNetwork::new(link, seed).unwrap();
        let config = MatchConfig {
            min_players: 1,
            time_limit: Duration::from_secs(600),
            score_limit: 0,
            ..MatchConfig::default()
        };
        let server = MemoryServer::new(&mut net, server_addr(), config, Duration::ZERO).unwrap();
        let mut sim = Self {
            net,
            now: Duration::ZERO,
            server,
            clients: Vec::new(),
            strangers: Vec::new(),
        };
        for i in 0..2u64 {
            let token = sim.token(i, &format!("bot{i}"));
            let addr = SocketAddr::from(([10, 0, 1, i as u8 + 1], 50_000));
            let bot = Bot::new(BotConfig::default(), i);
            let config = ClientConfig::new(server_addr(), token);
            let c = MemoryClient::new(&mut sim.net, addr, config, Some(bot), sim.now).unwrap();
            sim.clients.push(c);
        }
        sim.run(Duration::from_secs(3));
        assert_eq!(sim.server.server().connected(), 2);
        sim
    }

    fn token(&self, seed: u64, name: &str) -> ConnectToken {
        let c = self.server.server().config();
        let claims = PlayerClaims::new(c.match_id, name);
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let issuer = TokenIssuer::new(c.token_key);
        let valid = Duration::from_secs(600);
        mint_token(
            &issuer,
            &mut rng,
            SIM_UNIX_EPOCH,
            &claims,
            &[server_addr()],
            valid,
        )
        .unwrap()
    }

    fn run(&mut self, duration: Duration) {
        let end = self.now + duration;
        loop {
            let mut next = self.server.next_deadline();
            if let Some(t) = self.net.next_delivery() {
                next = next.min(t);
            }
            for c in &self.clients {
                if let Some(t) = c.next_deadline() {
                    next = next.min(t);
                }
            }
            if next > end {
                self.now = end;
                return;
            }
            self.now = self.now.max(next);
            let now = self.now;
            self.server.pump(&mut self.net, now).unwrap();
            for c in &mut self.clients {
                c.pump(&mut self.net, now, |_, _| None).unwrap();
            }
            for s in &self.strangers {
                while self.net.poll_receive(*s, now).is_some() {}
            }
        }
    }

    /// Sends `payload` from `from` to `to` (attaching `from` as a stranger when it is nobody's).
    fn inject(&mut self, from: SocketAddr, to: SocketAddr, payload: Vec<u8>) {
        if self.net.traffic(from).is_none() {
            self.net.add_endpoint(from).unwrap();
            self.strangers.push(from);
        }
        let t = Transmit {
            to,
            delivery: Delivery::Unreliable,
            payload,
        };
        self.net.send(self.now, from, t).unwrap();
    }

    fn all_playing(&self) -> bool {
        self.clients
            .iter()
            .all(|c| c.client().phase() == ClientPhase::Playing)
    }
}

fn request_of(token: ConnectToken) -> Vec<u8> {
    let config = ConnConfig::new(server_addr(), ClientAuth::Token(Box::new(token)));
    let mut e = Endpoint::client(config, Duration::ZERO, [1; 32]);
    e.handle_timeout(Duration::ZERO);
    e.poll_transmit().unwrap().1
}

#[test]
fn replayed_tokens_and_spoofed_connects_take_no_slot_and_get_no_larger_reply() {
    let mut sim = Sim::new(1);
    // The token request of a client that is playing, replayed from 100 fresh addresses; plaintext shooter
    // connect requests from 100 more; and a fresh, valid token's request from 100 spoofed addresses.
    let replayed = request_of(sim.token(0, "bot0"));
    let fresh = request_of(sim.token(77, "newcomer"));
    let plain = Message::ConnectRequest(ConnectRequest { chunks_held: 0 })
        .encode(1, (0, 0))
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for i in 0..300u32 {
        let from = SocketAddr::from(([10, 66, (i / 200) as u8, (i % 200) as u8 + 1], rng.random()));
        let bytes = [&replayed, &plain, &fresh][(i / 100) as usize].clone();
        sim.inject(from, server_addr(), bytes);
    }
    sim.run(Duration::from_secs(3));
    assert_eq!(
        sim.server.server().connected(),
        2,
        "nobody else took a slot"
    );
    for s in sim.strangers.clone() {
        let t = sim.net.traffic(s).unwrap();
        assert!(t.bytes_received <= t.bytes_sent, "{s}: {t:?}");
    }
    let d = sim.server.connection().stats().dropped;
    assert_eq!(d.token_reused, 100, "{d:?}");
    assert!(d.malformed + d.wrong_protocol >= 100, "{d:?}");
    assert_eq!(
        sim.server.connection().sessions(),
        2,
        "challenges answered, no session without a response"
    );
    assert!(sim.all_playing());
}

#[test]
fn datagrams_with_a_flipped_bit_are_dropped_and_counted_both_ways() {
    let mut sim = Sim::new(2);
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let client_addr = sim.clients[0].addr();
    let bye = Message::Disconnect.encode(9, (0, 0)).unwrap();
    for _ in 0..200 {
        let now = sim.now;
        let mut up = sim.clients[0].seal(now, &bye).unwrap();
        let bit = rng.random_range(0..up.len() * 8);
        up[bit / 8] ^= 1 << (bit % 8);
        sim.inject(client_addr, server_addr(), up);
        let mut down = sim.server.seal(now, client_addr, &bye).unwrap();
        let bit = rng.random_range(0..down.len() * 8);
        down[bit / 8] ^= 1 << (bit % 8);
        sim.inject(server_addr(), client_addr, down);
        sim.run(Duration::from_millis(20));
    }
    sim.run(Duration::from_secs(1));
    assert_eq!(sim.server.connection().stats().dropped.total(), 200);
    assert_eq!(sim.clients[0].connection().stats().dropped.total(), 200);
    assert_eq!(
        sim.server.server().connected(),
        2,
        "an altered disconnect ended nothing"
    );
    assert!(sim.all_playing());
}

#[test]
fn a_spoofed_disconnect_does_not_end_a_session() {
    let mut sim = Sim::new(3);
    let bye = Message::Disconnect.encode(1, (0, 0)).unwrap();
    let client_addr = sim.clients[1].addr();
    for _ in 0..20 {
        sim.inject(client_addr, server_addr(), bye.clone());
        sim.inject(server_addr(), client_addr, bye.clone());
        sim.run(Duration::from_millis(50));
    }
    sim.run(Duration::from_secs(2));
    assert_eq!(sim.server.server().connected(), 2);
    assert!(sim.all_playing());
    assert!(sim.server.connection().stats().dropped.total() >= 20);
    assert!(sim.clients[1].connection().stats().dropped.total() >= 20);
}
