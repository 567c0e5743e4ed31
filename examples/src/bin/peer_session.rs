//! A peer-hosted session on the in-memory network: a host and guests playing with bots over a conditioned link
//! for a while, then a settle without input; prints traffic per guest and at the host, conflicts, corrections,
//! authority transfers, and whether every guest ended within quantization error of the host.
//!
//! With `--hold-minutes` and `--idle-minutes`, a long session's script runs beside the bots: the first guest
//! holds one cube in its left hand for that long, and seven cubes the bots leave alone stay idle until another
//! guest touches each of them; the report says how many objects the links forgot after long silence (each one an
//! object unsent across a large part of the 16-bit sequence space) and whether anything was dropped.
//!
//! `cargo run --release -p physync-examples --bin peer_session -- --players 4 --seconds 60 --rtt-ms 250
//! --jitter-ms 50 --loss 0.05 --json`; `--scene-file examples/scenes/playground.ron` hosts a scene file (every
//! guest downloads it at join), `--players` goes up to 16.
//!
//! `cargo run --release -p physync-examples --bin peer_session -- --minutes 30 --hold-minutes 12
//! --idle-minutes 12 --json`; `RUST_LOG=physync_host=debug` also logs every refused update on stderr (who sent it,
//! why it was refused, what it claimed and where the host had the object).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use physync_engine::session::sim::host_addr;
use physync_engine::session::{PlayerControls, SessionSim, divergence};
use physync_engine::transport::TrafficCounters;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::SceneKind;
use physync_engine::world::scene_file::load_scene;
use physync_examples::link_args::LinkArgs;
use physync_guest::bots::{Bot, BotKind, LongHaul};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::peer::BadUpdates;
use physync_host::{HostConfig, PeerHost};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tracing_subscriber::EnvFilter;

/// Runs a bot-driven peer session on the in-memory network and reports traffic and convergence.
#[derive(Debug, Parser)]
struct Args {
    /// Players, the host included (2..=16).
    #[arg(long, default_value_t = 4)]
    players: u8,
    /// Seconds of play.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Minutes of play (overrides `--seconds`).
    #[arg(long)]
    minutes: Option<f64>,
    /// Minutes the first guest holds one cube in its left hand (0: no long hold).
    #[arg(long, default_value_t = 0.0)]
    hold_minutes: f64,
    /// Minutes seven cubes stay idle before another guest touches each (0: none kept idle).
    #[arg(long, default_value_t = 0.0)]
    idle_minutes: f64,
    /// Seconds without input after play, before convergence is measured.
    #[arg(long, default_value_t = 5.0)]
    settle_seconds: f64,
    /// The conditions of every link.
    #[command(flatten)]
    link: LinkArgs,
    /// Byte budget of every link, kbps.
    #[arg(long, default_value_t = 256)]
    budget_kbps: u32,
    /// The host's own bot (builder, thrower, grabber), or none.
    #[arg(long, default_value = "builder")]
    host_bot: String,
    /// Scene: table, katamari or tower.
    #[arg(long, default_value = "table")]
    scene: SceneKind,
    /// A scene file (RON) to host instead of a named scene.
    #[arg(long, conflicts_with = "scene")]
    scene_file: Option<PathBuf>,
    /// Seed of the network, the nonces and the bots.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    scene: String,
    objects: usize,
    players: u8,
    players_joined: usize,
    seconds: f64,
    #[serde(flatten)]
    link: LinkArgs,
    budget_kbps: u32,
    kbps_per_guest_up: Vec<f64>,
    kbps_per_guest_down: Vec<f64>,
    host_kbps_up_total: f64,
    host_kbps_down_total: f64,
    conflicts: u64,
    corrections: u64,
    authority_transfers: u64,
    bad_updates: u64,
    bad_updates_by_kind: BadUpdates,
    respawns: u64,
    dropped_datagrams: u64,
    guest_dropped_datagrams: u64,
    held_minutes: f64,
    idle_cubes_touched: usize,
    stale_forgotten: u64,
    converged: bool,
    max_divergence_mm: f64,
    authority_mismatches: usize,
    holder_mismatches: usize,
    objects_moving_after_settle: usize,
    bot_grabs: u64,
    bot_throws: u64,
    bot_placements: u64,
    wall_seconds: f64,
}

/// The cube the long-session script holds for minutes (the table's last).
const LONG_HELD: u16 = 63;
/// The cubes it keeps idle for minutes (the rest of the table's last row).
const LONG_IDLE: [u16; 7] = [56, 57, 58, 59, 60, 61, 62];

/// Two peers holding the same quantized state differ by at most this much (half a 1/512 m step on three axes).
const QUANTIZATION_MM: f64 = 3.0;

fn kbps(t: &TrafficCounters, elapsed: Duration) -> (f64, f64) {
    (t.kbps_sent(elapsed), t.kbps_received(elapsed))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Some(minutes) = args.minutes {
        args.seconds = minutes * 60.0;
    }
    let wall = Instant::now();
    let scene = match &args.scene_file {
        Some(path) => load_scene(path)?,
        None => args.scene.spec(),
    };
    let mut config = HostConfig::new(scene);
    config.max_players = args.players;
    config.link.bytes_per_second = args.budget_kbps * 1000 / 8;
    let host = PeerHost::new(config)?;
    let link = args.link.link_config();
    let mut sim: SessionSim<PeerHost, PeerGuest> = SessionSim::new(host, link, args.seed)?;
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let guests = usize::from(args.players.saturating_sub(1));
    let mut bots = Vec::new();
    for i in 0..guests {
        let mut guest_config = GuestConfig::new(host_addr(), rng.random());
        guest_config.link.bytes_per_second = args.budget_kbps * 1000 / 8;
        sim.add_guest(PeerGuest::new(guest_config))?;
        bots.push(Bot::new(BotKind::ALL[i % BotKind::ALL.len()], rng.random()));
    }
    let mut host_bot = match args.host_bot.as_str() {
        "none" => None,
        name => Some(Bot::new(name.parse()?, rng.random())),
    };
    let mut long_haul = (args.hold_minutes > 0.0 || args.idle_minutes > 0.0).then(|| {
        let minutes = |m: f64| Duration::from_secs_f64(m * 60.0);
        let toucher = 1.min(guests.saturating_sub(1));
        LongHaul::new(
            (0, LONG_HELD, minutes(args.hold_minutes)),
            (toucher, LONG_IDLE.to_vec(), minutes(args.idle_minutes)),
        )
    });
    if let Some(script) = &long_haul {
        for bot in bots.iter_mut().chain(host_bot.iter_mut()) {
            bot.avoid(&script.reserved());
        }
    }

    let play = Duration::from_secs_f64(args.seconds);
    sim.run_until(
        play,
        |now, host| {
            if let Some(bot) = &mut host_bot {
                bot.act(now, host);
            }
        },
        |i, now, guest| {
            let Some(s) = guest.session_mut() else { return };
            if let Some(bot) = bots.get_mut(i) {
                bot.act(now, s);
            }
            if let Some(script) = &mut long_haul {
                script.act(i, now, s);
            }
        },
    )?;
    let host_traffic = sim.host_traffic();
    let guest_traffic: Vec<TrafficCounters> = (0..guests).map(|i| sim.guest_traffic(i)).collect();

    for hand in Hand::BOTH {
        sim.host_mut().release(hand);
    }
    for i in 0..guests {
        if let Some(s) = sim.guest_mut(i).and_then(|g| g.session_mut()) {
            for hand in Hand::BOTH {
                s.release(hand);
            }
        }
    }
    sim.run_idle_until(play + Duration::from_secs_f64(args.settle_seconds))?;

    let host_world = sim.host().world();
    let mut max_mm = 0.0f64;
    let (mut authority_mismatches, mut holder_mismatches) = (0, 0);
    let mut joined = 0;
    for (_, g) in sim.guests() {
        let Some(world) = g.world() else { continue };
        joined += 1;
        let d = divergence(host_world, world);
        max_mm = max_mm.max(f64::from(d.max_position_m) * 1000.0);
        authority_mismatches += d.authority_mismatches;
        holder_mismatches += d.holder_mismatches;
    }
    let moving = (0..host_world.object_count() as u16)
        .filter(|&id| !host_world.is_at_rest(id))
        .count();
    let (host_up, host_down) = kbps(&host_traffic, play);
    let (up, down): (Vec<f64>, Vec<f64>) = guest_traffic.iter().map(|t| kbps(t, play)).unzip();
    let c = sim.host().counters();
    let host_forgot: u64 = sim
        .host()
        .guest_reports()
        .iter()
        .map(|r| r.stale_forgotten)
        .sum();
    let guests_forgot: u64 = sim
        .guests()
        .filter_map(|(_, g)| g.session())
        .map(|s| s.stale_forgotten())
        .sum();
    let guest_dropped: u64 = sim.guests().map(|(_, g)| g.drops().malformed).sum();
    let all_bots = bots.iter().chain(host_bot.iter());
    let report = Report {
        scene: host_world.scene().name.clone(),
        objects: host_world.object_count(),
        players: args.players,
        players_joined: joined + 1,
        seconds: args.seconds,
        link: args.link,
        budget_kbps: args.budget_kbps,
        kbps_per_guest_up: up,
        kbps_per_guest_down: down,
        host_kbps_up_total: host_up,
        host_kbps_down_total: host_down,
        conflicts: c.conflicts,
        corrections: c.corrections,
        authority_transfers: c.authority_transfers,
        bad_updates: c.bad_updates.total(),
        bad_updates_by_kind: c.bad_updates,
        respawns: c.respawns,
        dropped_datagrams: c.drops.total(),
        guest_dropped_datagrams: guest_dropped,
        held_minutes: long_haul
            .as_ref()
            .and_then(LongHaul::held_for)
            .map_or(0.0, |d| d.as_secs_f64() / 60.0),
        idle_cubes_touched: long_haul.as_ref().map_or(0, LongHaul::touched),
        stale_forgotten: host_forgot + guests_forgot,
        converged: joined == guests
            && max_mm <= QUANTIZATION_MM
            && authority_mismatches == 0
            && holder_mismatches == 0,
        max_divergence_mm: max_mm,
        authority_mismatches,
        holder_mismatches,
        objects_moving_after_settle: moving,
        bot_grabs: all_bots.clone().map(|b| b.actions().grabs).sum(),
        bot_throws: all_bots.clone().map(|b| b.actions().thrown).sum(),
        bot_placements: all_bots.map(|b| b.actions().placed).sum(),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{report:#?}");
    }
    Ok(())
}
