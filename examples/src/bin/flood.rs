//! Floods a live server over real UDP on 127.0.0.1 and measures what it costs: a peer host with two bot guests (a
//! slot left free for a fake),
//! or a dedicated match with two bot clients, takes `--rate` hostile datagrams a second for `--seconds` from 256
//! source ports: random bytes, and real datagrams of a guest (recorded by a relay in front of it) replayed
//! exactly, with a flipped bit, or truncated. Prints the process's resident memory before, during and after,
//! the players the server holds (fakes included), whether the real players played on, and the connection layer's
//! drop counters. `--plain` runs the peer host without the connection layer, as it was before, for comparison.
//!
//! `cargo run --release -p physync-examples --bin flood -- --target peer --rate 10000 --seconds 10 --json`

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use physync_engine::connection::ConnectionStats;
use physync_engine::session::udp::{bind_peer_guest, bind_peer_host, pump_udp};
use physync_engine::shooter_net::{PlayerClaims, mint_token};
use physync_engine::transport::{DriverConfig, LaminarDriver};
use physync_engine::world::scene::SceneKind;
use physync_examples::relay::{Relay, RelayConfig};
use physync_examples::rss::rss_bytes;
use physync_guest::bots::{Bot, BotKind};
use physync_guest::dedicated::driver::UdpClient;
use physync_guest::dedicated::{BotConfig, ClientConfig, ClientPhase};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::dedicated::MatchConfig;
use physync_host::dedicated::driver::UdpMatch;
use physync_host::{HostConfig, PeerHost};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Target {
    Peer,
    Dedicated,
}

/// Floods a live server with hostile datagrams and reports memory and what got through.
#[derive(Debug, Parser)]
struct Args {
    /// What to flood.
    #[arg(long, value_enum, default_value = "peer")]
    target: Target,
    /// Hostile datagrams per second.
    #[arg(long, default_value_t = 10_000)]
    rate: u64,
    /// Seconds of flood.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Peer target only: no connection layer (the engine as it was), for comparison.
    #[arg(long)]
    plain: bool,
    /// Seed of the flood's dice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Summary {
    target: Target,
    plain: bool,
    rate: u64,
    seconds: f64,
    datagrams_sent: u64,
    recorded_real_datagrams: usize,
    rss_mb_start: f64,
    rss_mb_before_flood: f64,
    rss_mb_peak: f64,
    rss_mb_after: f64,
    rss_growth_mb: f64,
    real_players: usize,
    players_at_end: usize,
    fake_players: usize,
    real_players_still_playing: usize,
    connection: Option<ConnectionStats>,
}

/// What the server thread reports when stopped.
struct ServerReport {
    players: usize,
    connection: Option<ConnectionStats>,
}

fn mb(bytes: Option<u64>) -> f64 {
    bytes.unwrap_or(0) as f64 / 1e6
}

fn peer_server(plain: bool, stop: Arc<AtomicBool>) -> (SocketAddr, JoinHandle<ServerReport>) {
    let mut config = HostConfig::new(SceneKind::Table.spec());
    config.max_players = physync_engine::world::avatar::MAX_PLAYERS as u8;
    let mut host = PeerHost::new(config).expect("valid host config");
    let mut driver = if plain {
        LaminarDriver::bind("127.0.0.1:0", DriverConfig::default())
    } else {
        bind_peer_host("127.0.0.1:0", DriverConfig::default(), None)
    }
    .expect("bind host");
    let addr = driver.local_addr();
    let thread = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let wait =
                pump_udp(&mut driver, &mut host, |_, _| {}).unwrap_or(Duration::from_millis(1));
            std::thread::sleep(wait.min(Duration::from_millis(1)));
        }
        ServerReport {
            players: host.players().len() - 1,
            connection: driver.connection_stats().copied(),
        }
    });
    (addr, thread)
}

fn peer_guest(host: SocketAddr, plain: bool, seed: u64, stop: Arc<AtomicBool>) -> JoinHandle<bool> {
    std::thread::spawn(move || {
        let mut guest = PeerGuest::new(GuestConfig::new(host, seed));
        let mut bot = Bot::new(BotKind::Builder, seed);
        let mut driver = if plain {
            LaminarDriver::bind("127.0.0.1:0", DriverConfig::default())
        } else {
            bind_peer_guest("127.0.0.1:0", DriverConfig::default(), host, None)
        }
        .expect("bind guest");
        while !stop.load(Ordering::Relaxed) {
            let wait = pump_udp(&mut driver, &mut guest, |now, g| {
                if let Some(s) = g.session_mut() {
                    bot.act(now, s);
                }
            })
            .unwrap_or(Duration::from_millis(1));
            std::thread::sleep(wait.min(Duration::from_millis(1)));
        }
        guest.end_reason().is_none() && guest.session().is_some()
    })
}

fn dedicated_server(stop: Arc<AtomicBool>) -> (SocketAddr, JoinHandle<ServerReport>) {
    let config = MatchConfig {
        min_players: 1,
        time_limit: Duration::from_secs(3600),
        score_limit: 0,
        ..MatchConfig::default()
    };
    let mut m =
        UdpMatch::bind("127.0.0.1:0".parse().expect("address"), config).expect("bind match");
    let addr = m.local_addr();
    let thread = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let _ = m.pump();
            std::thread::sleep(Duration::from_millis(1));
        }
        ServerReport {
            players: m.server().connected(),
            connection: m.connection_stats(),
        }
    });
    (addr, thread)
}

fn dedicated_client(
    to: SocketAddr,
    server: SocketAddr,
    config: &MatchConfig,
    i: u64,
    stop: Arc<AtomicBool>,
) -> JoinHandle<bool> {
    let issuer = physync_engine::connection::TokenIssuer::new(config.token_key);
    let claims = PlayerClaims::new(config.match_id, &format!("bot{i}"));
    let now = physync_engine::connection::unix_now();
    let token = mint_token(
        &issuer,
        &mut rand::rng(),
        now,
        &claims,
        &[to, server],
        Duration::from_secs(3600),
    )
    .expect("token");
    std::thread::spawn(move || {
        let bot = physync_guest::dedicated::Bot::new(BotConfig::default(), i);
        let mut c = UdpClient::bind(
            "127.0.0.1:0".parse().expect("address"),
            ClientConfig::new(to, token),
            Some(bot),
        )
        .expect("bind client");
        while !stop.load(Ordering::Relaxed) {
            let _ = c.pump();
            std::thread::sleep(Duration::from_millis(1));
        }
        matches!(c.client().phase(), ClientPhase::Playing)
    })
}

fn main() {
    let args = Args::parse();
    let rss_start = rss_bytes();
    let stop = Arc::new(AtomicBool::new(false));
    let (server, server_thread, players): (SocketAddr, JoinHandle<ServerReport>, usize) =
        match args.target {
            Target::Peer => {
                let (a, t) = peer_server(args.plain, Arc::clone(&stop));
                (a, t, 3)
            }
            Target::Dedicated => {
                let (a, t) = dedicated_server(Arc::clone(&stop));
                (a, t, 2)
            }
        };
    let match_config = MatchConfig::default();
    let relay = Relay::start(
        server,
        RelayConfig {
            loss: 0.0,
            delay: Duration::ZERO,
            record: 4000,
            seed: args.seed,
        },
    )
    .expect("relay");
    let guests: Vec<JoinHandle<bool>> = (0..players as u64)
        .map(|i| {
            let to = if i == 0 { relay.addr() } else { server };
            match args.target {
                Target::Peer => peer_guest(to, args.plain, 100 + i, Arc::clone(&stop)),
                Target::Dedicated => {
                    dedicated_client(to, server, &match_config, i, Arc::clone(&stop))
                }
            }
        })
        .collect();
    std::thread::sleep(Duration::from_secs(4));
    let recorded = relay.recorded();
    let rss_before = rss_bytes();

    let sockets: Vec<UdpSocket> = (0..256)
        .filter_map(|_| UdpSocket::bind("127.0.0.1:0").ok())
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let started = Instant::now();
    let flood_for = Duration::from_secs_f64(args.seconds);
    let mut sent = 0u64;
    let mut peak = rss_before.unwrap_or(0);
    let mut next_sample = Instant::now();
    while started.elapsed() < flood_for {
        let due = (started.elapsed().as_secs_f64() * args.rate as f64) as u64;
        while sent < due {
            let socket = &sockets[sent as usize % sockets.len()];
            let bytes: Vec<u8> = match (rng.random_range(0..4), recorded.is_empty()) {
                (0, _) | (_, true) => (0..rng.random_range(0..1300))
                    .map(|_| rng.random())
                    .collect(),
                (k, false) => {
                    let mut b = recorded[rng.random_range(0..recorded.len())].clone();
                    if k == 2 && !b.is_empty() {
                        let bit = rng.random_range(0..b.len() * 8);
                        b[bit / 8] ^= 1 << (bit % 8);
                    } else if k == 3 {
                        b.truncate(rng.random_range(0..=b.len()));
                    }
                    b
                }
            };
            let _ = socket.send_to(&bytes, server);
            sent += 1;
        }
        if Instant::now() >= next_sample {
            peak = peak.max(rss_bytes().unwrap_or(0));
            next_sample += Duration::from_millis(100);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_secs(2));
    let rss_after = rss_bytes();
    peak = peak.max(rss_after.unwrap_or(0));
    stop.store(true, Ordering::Relaxed);
    let playing = guests
        .into_iter()
        .map(|g| g.join().unwrap_or(false))
        .filter(|&p| p)
        .count();
    let report = server_thread.join().expect("server thread");
    drop(relay);
    let summary = Summary {
        target: args.target,
        plain: args.plain,
        rate: args.rate,
        seconds: args.seconds,
        datagrams_sent: sent,
        recorded_real_datagrams: recorded.len(),
        rss_mb_start: mb(rss_start),
        rss_mb_before_flood: mb(rss_before),
        rss_mb_peak: mb(Some(peak)),
        rss_mb_after: mb(rss_after),
        rss_growth_mb: mb(Some(peak)) - mb(rss_before),
        real_players: players,
        players_at_end: report.players,
        fake_players: report.players.saturating_sub(players),
        real_players_still_playing: playing,
        connection: report.connection,
    };
    if args.json {
        println!("{}", serde_json::to_string(&summary).expect("serializable"));
    } else {
        println!("{summary:#?}");
    }
}
