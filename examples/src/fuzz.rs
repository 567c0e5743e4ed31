//! Structure-aware fuzzing of the four protocol cores (peer host, peer guest, dedicated server, shooter client).
//!
//! Each core is first brought deep into a session by replaying, in order, the datagrams it really received in a
//! short simulated session (joins, scene, snapshots). Then it takes hostile input built from those same real
//! datagrams: the header kept and the body mutated (flipped bits, extreme bytes, truncation, extension, splices of
//! two messages), valid messages replayed in hostile orders (stale, duplicated, from another sender), and a few
//! purely random datagrams. Time advances as it would in a session, so the cores step, send and time out between
//! inputs. Every input runs under `catch_unwind`; a panic is counted (with its first message) and the core is
//! rebuilt.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use physync_engine::connection::{SIM_UNIX_EPOCH, TokenIssuer};
use physync_engine::session::SessionSim;
use physync_engine::session::sim::{guest_addr, host_addr};
use physync_engine::shooter_net::{PlayerClaims, mint_token};
use physync_engine::transport::{Delivery, LinkConfig, MemoryNetwork};
use physync_engine::world::scene::SceneKind;
use physync_guest::bots::{Bot, BotKind};
use physync_guest::dedicated::{ClientConfig, ShooterClient};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::dedicated::{DedicatedServer, MatchConfig};
use physync_host::{HostConfig, PeerHost};
use rand::{Rng, SeedableRng};
use rand_chacha::{ChaCha8Rng, ChaCha20Rng};
use serde::Serialize;

/// One datagram a core received: from whom, on which channel, what.
#[derive(Debug, Clone)]
struct Received {
    from: SocketAddr,
    delivery: Delivery,
    bytes: Vec<u8>,
}

/// What one core went through.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CoreReport {
    /// Hostile inputs fed.
    pub inputs: u64,
    /// Inputs that panicked.
    pub panics: u64,
    /// The first panic's message.
    pub first_panic: Option<String>,
    /// The core's own drop counters at the end, by kind (summed over rebuilt instances).
    pub drops: BTreeMap<String, u64>,
}

/// The whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FuzzReport {
    /// Inputs over all cores.
    pub inputs: u64,
    /// Panics over all cores.
    pub panics: u64,
    /// Per core.
    pub cores: BTreeMap<String, CoreReport>,
}

/// A core under fuzzing.
trait Target {
    fn feed(&mut self, now: Duration, input: &Received);
    fn tick(&mut self, now: Duration);
    fn drops(&self) -> Vec<(&'static str, u64)>;
}

struct Host(PeerHost);
struct Guest(PeerGuest);
struct Server(DedicatedServer);
struct Client(ShooterClient);

impl Target for Host {
    fn feed(&mut self, now: Duration, r: &Received) {
        self.0.handle_datagram(now, r.from, r.delivery, &r.bytes);
    }
    fn tick(&mut self, now: Duration) {
        self.0.handle_timeout(now);
        while self.0.poll_transmit().is_some() {}
    }
    fn drops(&self) -> Vec<(&'static str, u64)> {
        let c = self.0.counters();
        vec![
            ("malformed", c.drops.malformed),
            ("oversized", c.drops.oversized),
            ("wrong_protocol", c.drops.wrong_protocol),
            ("unknown_sender", c.drops.unknown_sender),
            ("bad_updates", c.bad_updates.total()),
        ]
    }
}

impl Target for Guest {
    fn feed(&mut self, now: Duration, r: &Received) {
        self.0.handle_datagram(now, r.from, r.delivery, &r.bytes);
    }
    fn tick(&mut self, now: Duration) {
        self.0.handle_timeout(now);
        while self.0.poll_transmit().is_some() {}
    }
    fn drops(&self) -> Vec<(&'static str, u64)> {
        let d = self.0.drops();
        vec![
            ("malformed", d.malformed),
            ("oversized", d.oversized),
            ("wrong_protocol", d.wrong_protocol),
            ("unknown_sender", d.unknown_sender),
        ]
    }
}

impl Target for Server {
    fn feed(&mut self, now: Duration, r: &Received) {
        self.0.handle_datagram(now, r.from, &r.bytes);
    }
    fn tick(&mut self, now: Duration) {
        self.0.handle_timeout(now);
        while self.0.poll_transmit().is_some() {}
        while self.0.poll_event().is_some() {}
    }
    fn drops(&self) -> Vec<(&'static str, u64)> {
        let h = self.0.hostile();
        vec![
            ("malformed", h.malformed),
            ("unknown_sender", h.unknown_sender),
            ("bad_token", h.bad_token),
            ("wrong_match", h.wrong_match),
            ("replayed", h.replayed),
            ("far_behind_inputs", h.far_behind_inputs),
            ("far_ahead_inputs", h.far_ahead_inputs),
            ("over_batch", h.over_batch),
            ("clamped_inputs", h.clamped_inputs),
            ("view_outside_window", h.view_outside_window),
            ("refused", h.refused),
        ]
    }
}

impl Target for Client {
    fn feed(&mut self, now: Duration, r: &Received) {
        self.0.handle_datagram(now, r.from, &r.bytes);
    }
    fn tick(&mut self, now: Duration) {
        self.0.handle_timeout(now);
        while self.0.poll_transmit().is_some() {}
        while self.0.poll_event().is_some() {}
    }
    fn drops(&self) -> Vec<(&'static str, u64)> {
        let s = self.0.stats();
        vec![
            ("malformed", s.malformed),
            ("missing_baseline", s.missing_baseline),
        ]
    }
}

/// The datagrams a peer host and guest 0 received in a short session of two bot guests, and guest 0's nonce.
fn peer_corpus(seed: u64) -> (Vec<Received>, Vec<Received>, u64) {
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).expect("table host");
    let mut sim = SessionSim::new(host, LinkConfig::ideal(), seed).expect("ideal link");
    sim.set_tap(true);
    let nonce = seed ^ 0x5eed;
    for i in 0..2 {
        sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), nonce + i)))
            .expect("guest");
    }
    let mut bots: Vec<Bot> = (0..2)
        .map(|i| Bot::new(BotKind::Thrower, seed + i))
        .collect();
    sim.run_until(
        Duration::from_secs(3),
        |_, _| {},
        |i, now, g| {
            if let Some(s) = g.session_mut() {
                bots[i].act(now, s);
            }
        },
    )
    .expect("session");
    let (mut to_host, mut to_guest) = (Vec::new(), Vec::new());
    for (from, t) in sim.take_tapped() {
        let r = Received {
            from,
            delivery: t.delivery,
            bytes: t.payload,
        };
        if t.to == host_addr() {
            to_host.push(r);
        } else if t.to == guest_addr(0) {
            to_guest.push(r);
        }
    }
    (to_host, to_guest, nonce)
}

fn server_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 40_000))
}

fn shooter_client_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, i as u8 + 1], 50_000))
}

fn match_config() -> MatchConfig {
    MatchConfig {
        min_players: 1,
        countdown: Duration::from_millis(500),
        time_limit: Duration::from_secs(3600),
        score_limit: 0,
        ..MatchConfig::default()
    }
}

fn shooter_client(seed: u64) -> ShooterClient {
    let issuer = TokenIssuer::new(match_config().token_key);
    let token = mint_token(
        &issuer,
        &mut ChaCha20Rng::seed_from_u64(seed),
        SIM_UNIX_EPOCH,
        &PlayerClaims::new(1, "c0"),
        &[server_addr()],
        Duration::from_secs(3600),
    )
    .expect("one address");
    ShooterClient::new(ClientConfig::new(server_addr(), token), Duration::ZERO)
}

fn shooter_server() -> DedicatedServer {
    let mut server = DedicatedServer::new(match_config(), Duration::ZERO).expect("valid match");
    for i in 0..2 {
        server.authenticate(
            shooter_client_addr(i),
            PlayerClaims::new(1, &format!("c{i}")),
        );
    }
    server
}

/// The datagrams the server and client 0 received in a short match of two clients (the cores talk plaintext
/// here: the connection layer is not what is fuzzed).
fn shooter_corpus(seed: u64) -> (Vec<Received>, Vec<Received>) {
    let mut net = MemoryNetwork::new(LinkConfig::ideal(), seed).expect("ideal link");
    net.add_endpoint(server_addr()).expect("server");
    let mut server = shooter_server();
    let mut clients: Vec<ShooterClient> = (0..2).map(|i| shooter_client(seed + i as u64)).collect();
    for i in 0..2 {
        net.add_endpoint(shooter_client_addr(i)).expect("client");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut to_server, mut to_client) = (Vec::new(), Vec::new());
    let mut now = Duration::ZERO;
    while now < Duration::from_secs(4) {
        now += Duration::from_millis(5);
        while let Some(d) = net.poll_receive(server_addr(), now) {
            server.handle_datagram(now, d.from, &d.payload);
            to_server.push(Received {
                from: d.from,
                delivery: d.delivery,
                bytes: d.payload,
            });
        }
        server.handle_timeout(now);
        while let Some(t) = server.poll_transmit() {
            net.send(now, server_addr(), t).expect("server");
        }
        for (i, c) in clients.iter_mut().enumerate() {
            while let Some(d) = net.poll_receive(shooter_client_addr(i), now) {
                c.handle_datagram(now, d.from, &d.payload);
                if i == 0 {
                    to_client.push(Received {
                        from: d.from,
                        delivery: d.delivery,
                        bytes: d.payload,
                    });
                }
            }
            let mut input = physync_engine::shooter::PlayerInput {
                move_x: rng.random_range(-127..=127),
                yaw: rng.random(),
                ..Default::default()
            };
            if rng.random_bool(0.1) {
                input.buttons = physync_engine::shooter::input::buttons::FIRE;
            }
            c.set_input(input);
            c.handle_timeout(now);
            while let Some(t) = c.poll_transmit() {
                net.send(now, shooter_client_addr(i), t).expect("client");
            }
        }
    }
    (to_server, to_client)
}

/// A hostile datagram made from the real ones: mostly the header kept and the body mutated.
fn mutate(rng: &mut ChaCha8Rng, corpus: &[Received]) -> Received {
    let mut r = corpus[rng.random_range(0..corpus.len())].clone();
    let header = if r.delivery == Delivery::ReliableOrdered {
        3
    } else {
        12
    }
    .min(r.bytes.len());
    let body = r.bytes.len() - header;
    match rng.random_range(0..10) {
        // Valid, in a hostile order: stale, duplicated.
        0 | 1 => {}
        2 | 3 if body > 0 => {
            for _ in 0..rng.random_range(1..=4) {
                let bit = header * 8 + rng.random_range(0..body * 8);
                r.bytes[bit / 8] ^= 1 << (bit % 8);
            }
        }
        4 if body > 0 => {
            let at = header + rng.random_range(0..body);
            r.bytes[at] = [0, 0xff, 0x7f, 0x80, 1][rng.random_range(0..5)];
        }
        5 => r.bytes.truncate(header + rng.random_range(0..=body)),
        6 => r
            .bytes
            .extend((0..rng.random_range(1..64)).map(|_| rng.random::<u8>())),
        7 => {
            let other = &corpus[rng.random_range(0..corpus.len())];
            let cut = rng.random_range(0..=other.bytes.len());
            r.bytes.truncate(header + body / 2);
            r.bytes.extend_from_slice(&other.bytes[cut..]);
        }
        8 => {
            let from = SocketAddr::from(([10, 9, rng.random(), rng.random()], rng.random()));
            r.from = from;
        }
        _ => {
            r.bytes = (0..rng.random_range(0..1200))
                .map(|_| rng.random())
                .collect();
        }
    }
    r
}

/// Feeds `target` (rebuilt by `make`, then warmed with `warm` in order) `inputs` hostile datagrams.
fn fuzz_core<T: Target>(
    make: &dyn Fn() -> T,
    warm: &[Received],
    inputs: u64,
    rng: &mut ChaCha8Rng,
) -> CoreReport {
    let mut report = CoreReport::default();
    let warm_up = |t: &mut T| -> Duration {
        let mut now = Duration::ZERO;
        for r in warm {
            now += Duration::from_millis(4);
            t.feed(now, r);
            t.tick(now);
        }
        now
    };
    let fold = |report: &mut CoreReport, t: &T| {
        for (k, v) in t.drops() {
            *report.drops.entry(k.to_owned()).or_default() += v;
        }
    };
    let mut target = make();
    let mut now = warm_up(&mut target);
    let mut since_rebuild = 0u64;
    while report.inputs < inputs {
        let input = mutate(rng, warm);
        report.inputs += 1;
        since_rebuild += 1;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            target.feed(now, &input);
            if report.inputs.is_multiple_of(16) {
                now += Duration::from_millis(16);
                target.tick(now);
            }
        }));
        let panicked = outcome.is_err();
        if let Err(panic) = outcome {
            report.panics += 1;
            if report.first_panic.is_none() {
                let text = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                report.first_panic = Some(text);
            }
        }
        // Rebuilt after a panic, and every 20,000 inputs so hostile input meets fresh sessions too.
        if panicked || since_rebuild >= 20_000 {
            fold(&mut report, &target);
            target = make();
            now = warm_up(&mut target);
            since_rebuild = 0;
        }
    }
    fold(&mut report, &target);
    report
}

/// Fuzzes the four cores with `inputs` hostile datagrams in all (a quarter each), from `seed`.
pub fn run(seed: u64, inputs: u64) -> FuzzReport {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (to_host, to_guest, nonce) = peer_corpus(seed);
    let (to_server, to_client) = shooter_corpus(seed);
    let each = inputs / 4;
    let mut cores = BTreeMap::new();
    let host =
        || Host(PeerHost::new(HostConfig::new(SceneKind::Table.spec())).expect("table host"));
    cores.insert(
        "peer_host".to_owned(),
        fuzz_core(&host, &to_host, each, &mut rng),
    );
    let guest = || Guest(PeerGuest::new(GuestConfig::new(host_addr(), nonce)));
    cores.insert(
        "peer_guest".to_owned(),
        fuzz_core(&guest, &to_guest, each, &mut rng),
    );
    let server = || Server(shooter_server());
    cores.insert(
        "dedicated_server".to_owned(),
        fuzz_core(&server, &to_server, each, &mut rng),
    );
    let client = || Client(shooter_client(seed));
    let rest = inputs - 3 * each;
    cores.insert(
        "shooter_client".to_owned(),
        fuzz_core(&client, &to_client, rest, &mut rng),
    );
    std::panic::set_hook(previous);
    FuzzReport {
        inputs: cores.values().map(|c| c.inputs).sum(),
        panics: cores.values().map(|c| c.panics).sum(),
        cores,
    }
}
