//! A dedicated-server shooter match of headless bots on the in-memory network with a simulated clock: the
//! server core and every client core run for real, through the link conditioner, and the figures of the issue
//! are measured. `--json` prints one JSON object.
//!
//! The server tick time is wall-clock time spent in the server core per tick: the tick itself (inputs,
//! simulation, lag-compensated shots, per-client delta snapshots) plus the datagrams it handled since the
//! previous tick. It is wall-clock time: on a loaded machine preemption inflates the mean and the p99, while the
//! median stays close to the CPU cost. Beside it, `server_tick_cpu_us_*` is the same span measured on the thread's
//! CPU clock, which stops while the thread waits for a core: what the tick costs whatever else the machine runs.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Parser;
use physync_engine::connection::{Endpoint, SIM_UNIX_EPOCH, ServerAuth, ServerConfig, TokenIssuer};
use physync_engine::shooter::PlayerId;
use physync_engine::shooter_net::{PlayerClaims, mint_token};
use physync_engine::transport::{Delivery, LinkConfig, MemoryNetwork, Transmit};
use physync_guest::dedicated::{Bot, BotConfig, ClientConfig, MemoryClient};
use physync_host::dedicated::driver::apply_connection_event;
use physync_host::dedicated::{DedicatedServer, MatchConfig};
use rand::SeedableRng;
use serde::Serialize;

#[derive(Debug, Parser)]
#[command(about = "A dedicated-server shooter match of bots on a simulated network")]
struct Args {
    /// Players (bots).
    #[arg(long, default_value_t = 10)]
    players: usize,
    /// Seconds of match time to simulate.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Round-trip time of every client's link, milliseconds.
    #[arg(long, default_value_t = 200)]
    rtt_ms: u64,
    /// One-way jitter, milliseconds.
    #[arg(long, default_value_t = 0)]
    jitter_ms: u64,
    /// Loss probability per datagram, each way.
    #[arg(long, default_value_t = 0.05)]
    loss: f64,
    /// Seed of the network and the bots.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Bit-pack every snapshot instead of range-coding those it makes smaller.
    #[arg(long)]
    bitpack: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Summary {
    players: usize,
    seconds: u64,
    rtt_ms: u64,
    jitter_ms: u64,
    loss: f64,
    full_snapshot_bytes: usize,
    delta_snapshot_bytes_mean: f64,
    kbps_per_client_down: f64,
    kbps_per_client_up: f64,
    mispredictions_per_min: f64,
    max_correction_cm: f64,
    hits_registered: u64,
    kills: u64,
    server_tick_us_mean: f64,
    server_tick_us_p99: f64,
    server_tick_us_median: f64,
    /// The server tick on the thread's CPU clock (time waiting for a core left out), mean and median.
    server_tick_cpu_us_mean: f64,
    server_tick_cpu_us_median: f64,
    server_ticks: u64,
    client_tick_adjustments: u64,
    hostile_dropped: u64,
    /// Other players' shots the clients were told of (summed over clients).
    remote_shots_seen: u64,
    /// Cubes the server simulates.
    cube_count_on_server: usize,
    /// Cubes the client that knows the fewest knows of.
    cube_count_on_client: usize,
    /// The lower of the two shares below.
    predicted_vs_server_hit_agreement: f64,
    /// Share of the hits clients predicted for their own shots that the server judged hits on the same player.
    predicted_hits_confirmed: f64,
    /// Predicted hits of shots the server never resolved (their input came too late).
    unjudged_predicted_hits: u64,
    /// Predicted hits of shots fired after the server had killed the shooter (it learns a round trip later);
    /// the server's word overrules them and they are left out of the shares.
    overruled_predicted_hits: u64,
    /// Share of the hits the server judged that the shooting client had predicted.
    server_hits_predicted: f64,
    /// Share of the snapshots sent range-coded (the rest were smaller bit-packed).
    range_coded_share: f64,
    /// Players and cubes the byte budget held back, per snapshot.
    held_entities_per_snapshot: f64,
    /// Events sent again for want of an acknowledgement, per event.
    event_resends_per_event: f64,
}

fn main() {
    let args = Args::parse();
    let players = args.players.clamp(1, 16);
    let link = LinkConfig::from_rtt(
        Duration::from_millis(args.rtt_ms),
        Duration::from_millis(args.jitter_ms),
        args.loss,
        0.0,
    );
    let server_addr: SocketAddr = "10.0.0.1:40000".parse().expect("valid address");
    let mut net = MemoryNetwork::new(link, args.seed).expect("valid link");
    net.add_endpoint(server_addr).expect("fresh endpoint");
    let config = MatchConfig {
        max_players: players as u8,
        min_players: 1,
        countdown: Duration::from_secs(1),
        time_limit: Duration::from_secs(args.seconds + 60),
        score_limit: 0,
        range_coder: !args.bitpack,
        ..MatchConfig::default()
    };
    let (issuer, match_id) = (TokenIssuer::new(config.token_key), config.match_id);
    // The server's connection layer: every datagram the core sees was authenticated and decrypted here, and the
    // time it takes counts into the server's tick time.
    let auth = ServerAuth::Tokens {
        key: config.token_key,
        public_addrs: vec![server_addr],
        unix_at_epoch: SIM_UNIX_EPOCH,
    };
    let mut connection = Endpoint::server(ServerConfig::new(auth), [5; 32]);
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(args.seed);
    let mut server = DedicatedServer::new(config, Duration::ZERO).expect("valid config");
    let mut clients: Vec<MemoryClient> = (0..players)
        .map(|i| {
            let addr = SocketAddr::from(([10, 0, 1, i as u8 + 1], 50_000));
            let claims = PlayerClaims::new(match_id, &format!("bot{i}"));
            let valid = Duration::from_secs(args.seconds + 3600);
            let token = mint_token(
                &issuer,
                &mut rng,
                SIM_UNIX_EPOCH,
                &claims,
                &[server_addr],
                valid,
            )
            .expect("one server address");
            let bot = Bot::new(BotConfig::default(), args.seed * 1000 + i as u64);
            let config = ClientConfig::new(server_addr, token);
            MemoryClient::new(&mut net, addr, config, Some(bot), Duration::ZERO)
                .expect("fresh endpoint")
        })
        .collect();

    let end = Duration::from_secs(args.seconds);
    let mut now = Duration::ZERO;
    let mut tick_times: Vec<f64> = Vec::new();
    let mut tick_cpu_times: Vec<f64> = Vec::new();
    let mut pending = Duration::ZERO;
    let mut pending_cpu = Duration::ZERO;
    loop {
        let mut next = server.poll_timeout();
        for t in [net.next_delivery(), connection.poll_timeout()]
            .into_iter()
            .flatten()
        {
            next = next.min(t);
        }
        for c in &clients {
            if let Some(t) = c.next_deadline() {
                next = next.min(t);
            }
        }
        if next > end {
            break;
        }
        now = now.max(next);
        let started = Instant::now();
        let started_cpu = thread_cpu_time();
        while let Some(d) = net.poll_receive(server_addr, now) {
            let plain = connection.handle_datagram(now, d.from, &d.payload);
            while let Some(event) = connection.poll_event() {
                apply_connection_event(&mut server, event);
            }
            if let Some(plain) = plain {
                server.handle_datagram(now, d.from, &plain);
            }
        }
        if connection.poll_timeout().is_some_and(|t| t <= now) {
            connection.handle_timeout(now);
        }
        pending += started.elapsed();
        pending_cpu += thread_cpu_time().saturating_sub(started_cpu);
        let ticks_before = server.stats().ticks;
        let started = Instant::now();
        let started_cpu = thread_cpu_time();
        server.handle_timeout(now);
        let spent = started.elapsed();
        let spent_cpu = thread_cpu_time().saturating_sub(started_cpu);
        let ran = server.stats().ticks - ticks_before;
        if ran > 0 {
            let per_tick = (spent + pending).as_secs_f64() * 1e6 / ran as f64;
            tick_times.extend(std::iter::repeat_n(per_tick, ran as usize));
            let per_tick_cpu = (spent_cpu + pending_cpu).as_secs_f64() * 1e6 / ran as f64;
            tick_cpu_times.extend(std::iter::repeat_n(per_tick_cpu, ran as usize));
            pending = Duration::ZERO;
            pending_cpu = Duration::ZERO;
        }
        while let Some(t) = server.poll_transmit() {
            if let Some(payload) = connection.seal(now, t.to, &t.payload) {
                net.send(now, server_addr, Transmit { payload, ..t })
                    .expect("server attached");
            }
        }
        while let Some((to, payload)) = connection.poll_transmit() {
            let t = Transmit {
                to,
                delivery: Delivery::Unreliable,
                payload,
            };
            net.send(now, server_addr, t).expect("server attached");
        }
        for c in clients.iter_mut() {
            c.pump(&mut net, now, |_, _| None).expect("client attached");
        }
    }

    let stats = server.stats();
    let full_snapshot_bytes = (0..players as u8)
        .filter_map(|s| server.full_snapshot_bytes(PlayerId(s)))
        .max()
        .unwrap_or(0);
    let seconds = end.as_secs_f64();
    let (mut down, mut up, mut mispredictions, mut max_correction) = (0.0, 0.0, 0u64, 0.0f32);
    let mut adjustments = 0;
    let (mut remote_shots, mut predicted, mut judged, mut agreed) = (0, 0, 0, 0);
    let (mut unjudged, mut overruled) = (0, 0);
    let mut cube_count_on_client = usize::MAX;
    for c in &clients {
        let s = c.client().stats();
        remote_shots += s.remote_shots_seen;
        predicted += s.predicted_hits;
        judged += s.server_hits;
        agreed += s.agreed_hits;
        unjudged += s.unjudged_hits;
        overruled += s.overruled_hits;
        cube_count_on_client = cube_count_on_client.min(c.client().cube_count());
        let traffic = net.traffic(c.addr()).expect("client attached");
        down += traffic.bytes_received as f64 * 8.0 / 1000.0 / seconds;
        up += traffic.bytes_sent as f64 * 8.0 / 1000.0 / seconds;
        let stats = c.client().stats();
        adjustments += stats.added_ticks + stats.skipped_ticks;
        let p = stats.prediction;
        mispredictions += p.mispredictions;
        max_correction = max_correction.max(p.max_correction_m);
    }
    tick_times.sort_by(f64::total_cmp);
    tick_cpu_times.sort_by(f64::total_cmp);
    let mean = tick_times.iter().sum::<f64>() / tick_times.len().max(1) as f64;
    let cpu_mean = tick_cpu_times.iter().sum::<f64>() / tick_cpu_times.len().max(1) as f64;
    let p99 = tick_times
        .get((tick_times.len() as f64 * 0.99) as usize)
        .or(tick_times.last())
        .copied()
        .unwrap_or(0.0);
    let h = server.hostile();
    let kills = (0..players as u8)
        .filter_map(|s| server.score(PlayerId(s)))
        .map(|s| u64::from(s.kills))
        .sum();
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            1.0
        } else {
            part as f64 / whole as f64
        }
    };
    let snapshots = stats.full_snapshots + stats.delta_snapshots;
    let summary = Summary {
        players,
        seconds: args.seconds,
        rtt_ms: args.rtt_ms,
        jitter_ms: args.jitter_ms,
        loss: args.loss,
        full_snapshot_bytes,
        delta_snapshot_bytes_mean: stats.delta_snapshot_bytes as f64
            / stats.delta_snapshots.max(1) as f64,
        kbps_per_client_down: down / players as f64,
        kbps_per_client_up: up / players as f64,
        mispredictions_per_min: mispredictions as f64 / players as f64 / (seconds / 60.0),
        max_correction_cm: f64::from(max_correction) * 100.0,
        hits_registered: stats.hits,
        kills,
        server_tick_us_mean: mean,
        server_tick_us_p99: p99,
        server_tick_us_median: tick_times.get(tick_times.len() / 2).copied().unwrap_or(0.0),
        server_tick_cpu_us_mean: cpu_mean,
        server_tick_cpu_us_median: tick_cpu_times
            .get(tick_cpu_times.len() / 2)
            .copied()
            .unwrap_or(0.0),
        server_ticks: stats.ticks,
        client_tick_adjustments: adjustments,
        hostile_dropped: h.malformed + h.unknown_sender + h.bad_token + h.replayed,
        remote_shots_seen: remote_shots,
        cube_count_on_server: server.world().map().cubes.len(),
        cube_count_on_client,
        predicted_vs_server_hit_agreement: share(agreed, predicted).min(share(agreed, judged)),
        predicted_hits_confirmed: share(agreed, predicted),
        unjudged_predicted_hits: unjudged,
        overruled_predicted_hits: overruled,
        server_hits_predicted: share(agreed, judged),
        range_coded_share: share(stats.range_coded_snapshots, snapshots),
        held_entities_per_snapshot: stats.held_entities as f64 / snapshots.max(1) as f64,
        event_resends_per_event: stats.event_resends as f64 / stats.events.max(1) as f64,
    };
    if args.json {
        println!("{}", serde_json::to_string(&summary).expect("serializable"));
    } else {
        println!("{summary:#?}");
    }
}

/// CPU time this thread has run, from the kernel's per-thread clock: unlike the wall clock it stops while the
/// thread waits for a core. Zero if the clock cannot be read.
fn thread_cpu_time() -> Duration {
    cpu_time::ThreadTime::try_now().map_or(Duration::ZERO, |t| t.as_duration())
}
