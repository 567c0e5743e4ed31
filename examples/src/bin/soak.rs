//! Long runs on simulated time, measuring what they leave behind: a 4-player peer session behind the connection
//! layer where a guest leaves and a new one joins every 10 s, and a dedicated match of 4 clients where one goes
//! silent and comes back (a reconnect from a new address with a new token) every 10 s. A counting allocator
//! measures live heap bytes, sampled right before every churn (the same point of each cycle, every bot playing):
//! `memory_growth_ratio` is the mean of the samples in the last window of the run (5 minutes) over the mean of
//! those in the window right after a 60 s warm-up (goal ≤ 1.05); the peak sample and the bytes after the settle
//! are printed beside it. `leaked` counts players, slots and connection
//! sessions still held for peers that are gone, after a settle longer than every timeout (goal 0).
//!
//! `cargo run --release -p physync-examples --bin soak -- --json [--minutes 30] [--churn-s 10] [--warmup-s 60]
//! [--window-s 300]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use physync_engine::connection::{SIM_UNIX_EPOCH, TokenIssuer};
use physync_engine::session::SessionSim;
use physync_engine::session::sim::host_addr;
use physync_engine::shooter_net::{PlayerClaims, mint_token};
use physync_engine::transport::{LinkConfig, MemoryNetwork};
use physync_engine::world::scene::SceneKind;
use physync_guest::bots::{Bot, BotKind};
use physync_guest::dedicated::{BotConfig, ClientConfig, MemoryClient};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::dedicated::{MatchConfig, MemoryServer};
use physync_host::{HostConfig, PeerHost};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

/// The system allocator, counting live bytes.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// Runs the two soaks and prints what they left behind.
#[derive(Debug, Parser)]
struct Args {
    /// Simulated minutes of each run.
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds between two churns (a guest leaving and another joining; a client dying).
    #[arg(long, default_value_t = 10.0)]
    churn_s: f64,
    /// Seconds of warm-up before the start window of `memory_growth_ratio` opens.
    #[arg(long, default_value_t = 60.0)]
    warmup_s: f64,
    /// Seconds of each of the two windows whose mean live bytes `memory_growth_ratio` compares: the first right
    /// after the warm-up, the last ending with the run.
    #[arg(long, default_value_t = 300.0)]
    window_s: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct RunReport {
    simulated_s: f64,
    wall_s: f64,
    churned: u64,
    live_bytes_start_mean: i64,
    live_bytes_end_mean: i64,
    live_bytes_peak: i64,
    live_bytes_after_settle: i64,
    memory_growth_ratio: f64,
    leaked: u64,
    leaked_detail: String,
}

#[derive(Debug, Serialize)]
struct Summary {
    peer: RunReport,
    dedicated: RunReport,
    memory_growth_ratio: f64,
    leaked: u64,
}

/// Longer than every timeout and grace period, so whatever is still held at the end is held for good.
const SETTLE: Duration = Duration::from_secs(40);
/// How long a dedicated client whose process died takes to come back (past the server's 3 s client timeout).
const REJOIN_AFTER: Duration = Duration::from_secs(5);

fn link() -> LinkConfig {
    LinkConfig::from_rtt(
        Duration::from_millis(100),
        Duration::from_millis(10),
        0.02,
        0.0,
    )
}

fn peer_soak(args: &Args) -> RunReport {
    let (minutes, seed) = (args.minutes, args.seed);
    let churn = Duration::from_secs_f64(args.churn_s);
    let started = Instant::now();
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).expect("table host");
    let mut sim = SessionSim::new_secure(host, link(), seed, None).expect("link");
    // The bots of the guests present, by guest index (a departed guest's bot goes with it).
    let mut bots = BTreeMap::new();
    let mut live_guests: Vec<usize> = Vec::new();
    let add =
        |sim: &mut SessionSim<PeerHost, PeerGuest>, bots: &mut BTreeMap<usize, Bot>, n: u64| {
            let i = sim
                .add_guest(PeerGuest::new(GuestConfig::new(
                    host_addr(),
                    seed * 1000 + n,
                )))
                .expect("guest");
            bots.insert(i, Bot::new(BotKind::Thrower, seed + n));
            i
        };
    for n in 0..3 {
        live_guests.push(add(&mut sim, &mut bots, n));
    }
    let end = Duration::from_secs_f64(minutes * 60.0);
    let mut next_churn = churn;
    let mut samples = LiveSamples::new(args, end);
    let mut churned = 0u64;
    while sim.now() < end {
        let until = next_churn.min(end);
        sim.run_until(
            until,
            |_, _| {},
            |i, now, g| {
                if let (Some(s), Some(bot)) = (g.session_mut(), bots.get_mut(&i)) {
                    bot.act(now, s);
                }
            },
        )
        .expect("run");
        if sim.now() >= next_churn || sim.now() >= end {
            samples.take(sim.now());
        }
        if sim.now() >= next_churn && sim.now() < end {
            // The oldest guest leaves (and is gone a second later); a new one joins.
            let leaving = live_guests.remove(0);
            if let Some(g) = sim.guest_mut(leaving) {
                g.leave();
            }
            let t = sim.now() + Duration::from_secs(1);
            sim.run_idle_until(t).expect("run");
            sim.remove_guest(leaving);
            bots.remove(&leaving);
            churned += 1;
            live_guests.push(add(&mut sim, &mut bots, 3 + churned));
            next_churn += churn;
        }
    }
    let t = sim.now() + SETTLE;
    sim.run_idle_until(t).expect("settle");
    let players = sim.host().players().len() as u64 - 1;
    let sessions = sim.host_connection().map_or(0, |c| c.sessions()) as u64;
    let expected = live_guests.len() as u64;
    let leaked = players.abs_diff(expected) + sessions.abs_diff(expected);
    report(
        started,
        sim.now(),
        churned,
        &samples,
        leaked,
        format!(
            "host players {players}, connection sessions {sessions}, guests present {expected}"
        ),
    )
}

/// Live heap bytes sampled at the same point of every churn cycle (right before the churn, while every bot plays),
/// after the warm-up; the settle, with bots idle, is reported apart.
///
/// Live bytes follow what the session is doing: each link keeps the states its last 256 packets carried, so a
/// minute with many cubes in motion holds a megabyte more than a quiet one (samples of one 30-minute peer run span
/// 9.5 to 10.8 MB with no trend). One sample against another measures that swing, not growth, so the ratio
/// compares the mean of the samples in a window right after the warm-up with the mean of those in a window of the
/// same length at the end: anything held per churn, per join or per minute still shows, as the difference of the
/// two means over the whole run between them.
#[derive(Debug)]
struct LiveSamples {
    warmup: Duration,
    window: Duration,
    end: Duration,
    samples: Vec<(Duration, i64)>,
}

impl LiveSamples {
    fn new(args: &Args, end: Duration) -> Self {
        // Room for every sample up front, so the samples themselves do not grow the heap during the run.
        let cycles = (end.as_secs_f64() / args.churn_s.max(0.1)) as usize + 2;
        Self {
            warmup: Duration::from_secs_f64(args.warmup_s),
            window: Duration::from_secs_f64(args.window_s),
            end,
            samples: Vec::with_capacity(cycles),
        }
    }

    /// Samples live bytes at `now`, unless still warming up.
    fn take(&mut self, now: Duration) {
        if now >= self.warmup {
            self.samples.push((now, live()));
        }
    }

    fn mean(&self, from: Duration, to: Duration) -> Option<i64> {
        let inside: Vec<i64> = self
            .samples
            .iter()
            .filter(|(t, _)| (from..=to).contains(t))
            .map(|&(_, b)| b)
            .collect();
        (!inside.is_empty()).then(|| inside.iter().sum::<i64>() / inside.len() as i64)
    }

    /// Mean live bytes of the start window and of the end window.
    fn windows(&self) -> (i64, i64) {
        let start = self.mean(self.warmup, self.warmup + self.window);
        let end = self.mean(self.end.saturating_sub(self.window), self.end);
        let last = self.samples.last().map_or(live(), |&(_, b)| b);
        (start.unwrap_or(last), end.unwrap_or(last))
    }
}

fn report(
    started: Instant,
    simulated: Duration,
    churned: u64,
    samples: &LiveSamples,
    leaked: u64,
    leaked_detail: String,
) -> RunReport {
    let (warm, end) = samples.windows();
    RunReport {
        simulated_s: simulated.as_secs_f64(),
        wall_s: started.elapsed().as_secs_f64(),
        churned,
        live_bytes_start_mean: warm,
        live_bytes_end_mean: end,
        live_bytes_peak: samples.samples.iter().map(|&(_, b)| b).max().unwrap_or(0),
        live_bytes_after_settle: live(),
        memory_growth_ratio: end as f64 / warm.max(1) as f64,
        leaked,
        leaked_detail,
    }
}

fn dedicated_soak(args: &Args) -> RunReport {
    let (minutes, seed) = (args.minutes, args.seed);
    let churn = Duration::from_secs_f64(args.churn_s);
    let started = Instant::now();
    let server_addr = SocketAddr::from(([10, 0, 0, 1], 40_000));
    let mut net = MemoryNetwork::new(link(), seed).expect("link");
    let end = Duration::from_secs_f64(minutes * 60.0);
    let config = MatchConfig {
        min_players: 1,
        time_limit: end + SETTLE + Duration::from_secs(60),
        score_limit: 0,
        ..MatchConfig::default()
    };
    let issuer = TokenIssuer::new(config.token_key);
    let mut server =
        MemoryServer::new(&mut net, server_addr, config, Duration::ZERO).expect("server");
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut now = Duration::ZERO;
    let mut clients: Vec<Option<MemoryClient>> = Vec::new();
    let mut next_addr = 0u32;
    let mut join = |net: &mut MemoryNetwork, now: Duration, name: &str| {
        next_addr += 1;
        let addr = SocketAddr::from((
            [10, 1, (next_addr / 250) as u8, (next_addr % 250) as u8 + 1],
            50_000,
        ));
        let claims = PlayerClaims::new(1, name);
        let valid = Duration::from_secs(3600 * 24);
        let token = mint_token(
            &issuer,
            &mut rng,
            SIM_UNIX_EPOCH,
            &claims,
            &[server_addr],
            valid,
        )
        .expect("token");
        let bot = physync_guest::dedicated::Bot::new(BotConfig::default(), u64::from(next_addr));
        let config = ClientConfig::new(server_addr, token);
        MemoryClient::new(net, addr, config, Some(bot), now).expect("client")
    };
    for i in 0..4 {
        clients.push(Some(join(&mut net, now, &format!("p{i}"))));
    }
    let mut next_churn = churn;
    let mut rejoin: Option<(Duration, usize)> = None;
    let mut samples = LiveSamples::new(args, end);
    let mut churned = 0u64;
    let mut sampled_end = false;
    let stop_at = end + SETTLE;
    while now < stop_at {
        let mut next = server.next_deadline();
        if let Some(t) = net.next_delivery() {
            next = next.min(t);
        }
        for c in clients.iter().flatten() {
            if let Some(t) = c.next_deadline() {
                next = next.min(t);
            }
        }
        if let Some((t, _)) = rejoin {
            next = next.min(t);
        }
        now = now.max(next.min(stop_at));
        server.pump(&mut net, now).expect("server");
        while server.server_mut().poll_event().is_some() {}
        for c in clients.iter_mut().flatten() {
            c.pump(&mut net, now, |_, _| None).expect("client");
            // A game takes its client's events (shots, hits, kills) every frame.
            while c.client_mut().poll_event().is_some() {}
        }
        if (now >= next_churn && now < end && rejoin.is_none()) || (now >= end && !sampled_end) {
            samples.take(now);
            sampled_end = now >= end;
        }
        if let Some((t, k)) = rejoin
            && now >= t
        {
            // The same player comes back from a new address with a new token, into its kept slot.
            clients[k] = Some(join(&mut net, now, &format!("p{k}")));
            rejoin = None;
        }
        if now >= next_churn && now < end && rejoin.is_none() {
            // Client k's process dies: its socket is gone without a word.
            let k = (churned % 4) as usize;
            if let Some(gone) = clients[k].take() {
                net.remove_endpoint(gone.addr());
            }
            rejoin = Some((now + REJOIN_AFTER, k));
            churned += 1;
            next_churn += churn;
        }
    }
    let connected = server.server().connected() as u64;
    let in_world = server.server().world().players().count() as u64;
    let sessions = server.connection().sessions() as u64;
    let expected = clients.len() as u64;
    let leaked =
        connected.abs_diff(expected) + in_world.abs_diff(expected) + sessions.abs_diff(expected);
    report(
        started,
        now,
        churned,
        &samples,
        leaked,
        format!(
            "connected {connected}, players in world {in_world}, connection sessions {sessions}, clients present {expected}"
        ),
    )
}

fn main() {
    let args = Args::parse();
    let peer = peer_soak(&args);
    let dedicated = dedicated_soak(&args);
    let summary = Summary {
        memory_growth_ratio: peer.memory_growth_ratio.max(dedicated.memory_growth_ratio),
        leaked: peer.leaked + dedicated.leaked,
        peer,
        dedicated,
    };
    if args.json {
        println!("{}", serde_json::to_string(&summary).expect("serializable"));
    } else {
        println!("{summary:#?}");
    }
}
