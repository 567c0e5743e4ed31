//! What players see in a rough peer session: a host and three guests on the in-memory network (250 ms RTT, 50 ms
//! jitter, 5% loss, 1% duplication by default), bots grabbing, carrying, releasing, throwing and stacking, two
//! guests contesting one cube in the same frame every few seconds, then an idle settle. Every peer's render and
//! physics poses are read after every step (see `physync_engine::session::feel`): bodies drawn below the floor,
//! free-flying objects stepping backward on peers without authority over them (all of them, and by cause: the
//! authority's object turned on a contact there, the object changed authority shortly before, or neither: see
//! `physync_engine::session::flight`), rendered poses snapping; every
//! contest is timed until all four peers agree on who has the cube; and every guest is compared with the host
//! when the idle ends and again once every world has stood still long enough for the last return to default to
//! reach every peer (the idle goes on for that, up to `--settle-limit-seconds`). `--events` and `--trace` print what a peer knew when it showed a fault, and any
//! object on every peer frame by frame (how the traces in `docs/benchmark-history.md` were made).
//!
//! `cargo run --release -p physync-examples --bin peer_feel -- --json`

use std::time::{Duration, Instant};

use clap::Parser;
use physync_engine::session::sim::host_addr;
use physync_engine::session::{
    BackstepsByCause, Divergence, FeelFigures, FeelMeter, FlightLog, PlayerControls, SessionSim,
    Stillness, divergence, is_still, settle_time,
};
use physync_engine::world::World;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::{ObjectId, SceneKind};
use physync_examples::link_args::LinkArgs;
use physync_guest::bots::{Bot, BotKind, Duel};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Runs a bot-driven 4-player session and reports what every peer showed, frame by frame.
#[derive(Debug, Parser)]
struct Args {
    /// Seconds of play.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Seconds without input after play.
    #[arg(long, default_value_t = 5.0)]
    idle_seconds: f64,
    /// Longest the idle goes on past `--idle-seconds` for the settled reading: until every peer's world has stood
    /// still (every object at rest, none held) for the return to default and two trips through the host.
    #[arg(long, default_value_t = 10.0)]
    settle_limit_seconds: f64,
    /// The conditions of every link.
    #[command(flatten)]
    link: LinkArgs,
    /// Seconds between two contests of one cube by two guests.
    #[arg(long, default_value_t = 3.0)]
    duel_period: f64,
    /// Play-out delay of every peer's jitter buffer (ms): the longest, unless `--fixed-jitter-delay`.
    #[arg(long, default_value_t = 100)]
    jitter_delay_ms: u64,
    /// Play every link's frames the whole `--jitter-delay-ms` late instead of as late as its measured jitter
    /// needs (the buffers before they adapted).
    #[arg(long)]
    fixed_jitter_delay: bool,
    /// Seed of the network, the nonces and the bots.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Also print every snap and every backstep over 10 mm, one JSON object a line on stderr, with what the peer
    /// knew of the object on that frame.
    #[arg(long)]
    events: bool,
    /// Also print these objects (comma-separated ids) on every peer after every step, one JSON object a line on
    /// stderr: poses, velocity, authority, holder, contacts, the last received state written into them.
    #[arg(long, value_delimiter = ',')]
    trace: Vec<ObjectId>,
    /// Session seconds from which `--trace` prints.
    #[arg(long, default_value_t = 0.0)]
    trace_from: f64,
    /// Session seconds until which `--trace` prints.
    #[arg(long, default_value_t = f64::INFINITY)]
    trace_to: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    seconds: f64,
    idle_seconds: f64,
    #[serde(flatten)]
    link: LinkArgs,
    jitter_delay_ms: u64,
    fixed_jitter_delay: bool,
    /// Each guest's play-out delay of the host's frames at the end of play (ms).
    guest_jitter_delay_ms: Vec<f64>,
    throws_observed: u64,
    releases_observed: u64,
    frames_observed: u64,
    max_render_below_floor_mm: f64,
    max_backstep_mm: f64,
    max_render_backstep_mm: f64,
    max_physics_backstep_mm: f64,
    max_backstep_sync_mm: f64,
    /// The backsteps behind `max_backstep_mm`, by cause (see `physync_engine::session::flight::BackstepCause`).
    backsteps_by_cause: ByCause,
    snaps_over_5cm: u64,
    snaps_over_5cm_per_min: f64,
    worst_render_jump_mm: f64,
    longest_render_wait_ms: f64,
    contests: usize,
    conflicts_resolved: usize,
    conflict_resolution_ms_p50: f64,
    conflict_resolution_ms_p95: f64,
    conflict_resolution_ms_max: f64,
    /// Guests compared with the host when the idle ended, before the settled reading.
    authority_mismatches_at_idle_end: usize,
    holder_mismatches_at_idle_end: usize,
    /// Seconds the idle went on past `--idle-seconds` until the settled reading, and whether every world had
    /// stood still long enough by then (false: read at `--settle-limit-seconds`).
    settle_extra_seconds: f64,
    settled: bool,
    authority_mismatches_after_settle: usize,
    holder_mismatches_after_settle: usize,
    max_divergence_mm_after_settle: f64,
    bad_updates: u64,
    dropped_datagrams: u64,
    wall_seconds: f64,
}

/// The largest backstep of each cause, render or physics pose, and how many of each went over 10 mm.
#[derive(Debug, Serialize)]
struct ByCause {
    /// The authority's own object turned (it touched something there that this peer's world had elsewhere).
    authority_contact_mm: f64,
    /// Within the rendered pose's longest wait after the object changed authority on this peer.
    after_handover_mm: f64,
    /// Neither: what the sync itself got wrong.
    sync_mm: f64,
    over_10mm_authority_contact: u32,
    over_10mm_after_handover: u32,
    over_10mm_sync: u32,
}

impl From<BackstepsByCause> for ByCause {
    fn from(b: BackstepsByCause) -> Self {
        let mm = |m: f32| f64::from(m) * 1000.0;
        let [authority_contact, after_handover, sync] = b.over_goal;
        Self {
            authority_contact_mm: mm(b.authority_contact),
            after_handover_mm: mm(b.after_handover),
            sync_mm: mm(b.sync),
            over_10mm_authority_contact: authority_contact,
            over_10mm_after_handover: after_handover,
            over_10mm_sync: sync,
        }
    }
}

type Sim = SessionSim<PeerHost, PeerGuest>;

/// Who has a cube on one peer: its authority and the player holding it.
fn who(world: &World, id: ObjectId) -> (u8, Option<u8>) {
    (
        world.authority(id).view.authority,
        world.holder(id).map(|h| h.player),
    )
}

/// Whether every peer agrees on who has `id`.
fn agreed(sim: &Sim, id: ObjectId) -> bool {
    let host = who(sim.host().world(), id);
    sim.guests()
        .all(|(_, g)| g.world().is_some_and(|w| who(w, id) == host))
}

/// Every guest compared with the host: mismatches summed, the largest distance.
fn compare_guests(sim: &Sim) -> Divergence {
    let host_world = sim.host().world();
    sim.guests()
        .filter_map(|(_, g)| g.world())
        .map(|w| divergence(host_world, w))
        .fold(Divergence::default(), |a, d| Divergence {
            max_position_m: a.max_position_m.max(d.max_position_m),
            max_rotation_rad: a.max_rotation_rad.max(d.max_rotation_rad),
            authority_mismatches: a.authority_mismatches + d.authority_mismatches,
            holder_mismatches: a.holder_mismatches + d.holder_mismatches,
        })
}

/// Whether every peer's world stands still.
fn all_still(sim: &Sim) -> bool {
    is_still(sim.host().world()) && sim.guests().all(|(_, g)| g.world().is_some_and(is_still))
}

/// Prints the `--trace` objects of one peer's world (peer 0 is the host) after a step.
fn trace(args: &Args, peer: usize, now: Duration, world: &World) {
    let t = now.as_secs_f64();
    if args.trace.is_empty() || t < args.trace_from || t > args.trace_to {
        return;
    }
    for &id in &args.trace {
        if usize::from(id) >= world.object_count() {
            continue;
        }
        let authority = world.authority(id);
        let applied = world.last_applied(id);
        let line = serde_json::json!({
            "t": t,
            "peer": peer,
            "player": world.local_player(),
            "frame": world.frame(),
            "object": id,
            "physics": <[f32; 3]>::from(world.physics_pose(id).translation.vector),
            "render": <[f32; 3]>::from(world.render_pose(id).translation.vector),
            "velocity": <[f32; 3]>::from(world.linear_velocity(id)),
            "authority": authority.view.authority,
            "authority_seq": authority.view.authority_seq,
            "ownership_seq": authority.view.ownership_seq,
            "confirmed": authority.confirmed,
            "holder": world.holder(id).map(|h| h.player),
            "at_rest": world.is_at_rest(id),
            "contacts": world.contacts(id).collect::<Vec<_>>(),
            "frames_since_applied": applied.map(|a| world.frame() - a.frame),
            "applied_jump_m": applied.map(|a| a.jump_m),
        });
        eprintln!("{line}");
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let wall = Instant::now();
    let jitter_delay = Duration::from_millis(args.jitter_delay_ms);
    let mut config = HostConfig::new(SceneKind::Table.spec());
    config.jitter_delay = jitter_delay;
    config.adaptive_jitter_delay = !args.fixed_jitter_delay;
    let host = PeerHost::new(config)?;
    let link = args.link.link_config();
    let mut sim: Sim = SessionSim::new(host, link, args.seed)?;
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let kinds = [BotKind::Thrower, BotKind::Grabber, BotKind::Thrower];
    let mut bots = Vec::new();
    for kind in kinds {
        let mut guest_config = GuestConfig::new(host_addr(), rng.random());
        guest_config.jitter_delay = jitter_delay;
        guest_config.adaptive_jitter_delay = !args.fixed_jitter_delay;
        sim.add_guest(PeerGuest::new(guest_config))?;
        bots.push(Bot::new(kind, rng.random()));
    }
    let mut host_bot = Bot::new(BotKind::Builder, rng.random());
    let mut duel = Duel::new(
        [0, 1],
        Duration::from_secs(2),
        Duration::from_secs_f64(args.duel_period),
        Duration::from_millis(1500),
        rng.random(),
    );
    let meter = || {
        if args.events {
            FeelMeter::logging()
        } else {
            FeelMeter::new()
        }
    };
    let mut host_meter = meter();
    let mut guest_meters = vec![meter(); kinds.len()];
    let mut host_log = FlightLog::new();
    let mut guest_logs = vec![FlightLog::new(); kinds.len()];
    let mut resolved: Vec<Option<f64>> = Vec::new();

    let frame = Duration::from_secs(1) / 60;
    let play = Duration::from_secs_f64(args.seconds);
    let idle_end = play + Duration::from_secs_f64(args.idle_seconds);
    let limit = idle_end + Duration::from_secs_f64(args.settle_limit_seconds);
    // The longest one-way trip of a frame: half the round trip, the jitter, and the jitter buffer's play-out.
    let trip =
        Duration::from_millis(args.link.rtt_ms / 2 + args.link.jitter_ms + args.jitter_delay_ms);
    let quiet = settle_time(60, trip);
    let mut stillness = Stillness::new();
    let mut at_idle_end = None;
    let mut released = false;
    let mut guest_jitter_delay_ms = Vec::new();
    loop {
        if sim.now() >= idle_end {
            at_idle_end.get_or_insert_with(|| compare_guests(&sim));
            if stillness.still_for(sim.now()) >= quiet || sim.now() >= limit {
                break;
            }
        }
        let until = sim.now() + frame;
        let until = if until > idle_end && sim.now() < idle_end {
            idle_end
        } else {
            until.min(limit)
        };
        let playing = until <= play;
        sim.run_until(
            until,
            |now, host| {
                trace(&args, 0, now, host.world());
                host_meter.observe(host.world());
                host_log.record(host.world());
                if playing {
                    host_bot.act(now, host);
                }
            },
            |i, now, guest| {
                if let Some(w) = guest.world() {
                    trace(&args, i + 1, now, w);
                    guest_meters[i].observe(w);
                    guest_logs[i].record(w);
                }
                let Some(s) = guest.session_mut() else { return };
                if playing {
                    bots[i].act(now, s);
                    duel.act(i, now, s);
                }
            },
        )?;
        if !playing && !released {
            released = true;
            guest_jitter_delay_ms = sim
                .guests()
                .filter_map(|(_, g)| g.session())
                .map(|s| s.jitter_delay().as_secs_f64() * 1000.0)
                .collect();
            for hand in Hand::BOTH {
                sim.host_mut().release(hand);
            }
            for i in 0..kinds.len() {
                if let Some(s) = sim.guest_mut(i).and_then(|g| g.session_mut()) {
                    for hand in Hand::BOTH {
                        s.release(hand);
                    }
                }
            }
        }
        let rounds = duel.rounds();
        resolved.resize(rounds.len(), None);
        for (round, done) in rounds.iter().zip(resolved.iter_mut()) {
            let Some(first) = round.grabbed.iter().flatten().min() else {
                continue;
            };
            if round.contested() && done.is_none() && agreed(&sim, round.cube) {
                *done = Some(sim.now().saturating_sub(*first).as_secs_f64() * 1000.0);
            }
        }
        stillness.observe(sim.now(), all_still(&sim));
    }

    if args.events {
        let meters = std::iter::once(&host_meter).chain(&guest_meters);
        for (peer, m) in meters.enumerate() {
            for e in m.events() {
                let line = serde_json::json!({ "peer": peer, "event": e });
                eprintln!("{line}");
            }
        }
    }
    let settled_reading = compare_guests(&sim);
    let at_idle_end = at_idle_end.unwrap_or(settled_reading);
    let figures = guest_meters
        .iter()
        .fold(host_meter.figures(), |f, m| f.merge(m.figures()));
    let logs: Vec<FlightLog> = std::iter::once(host_log).chain(guest_logs).collect();
    let by_cause = std::iter::once(&host_meter)
        .chain(&guest_meters)
        .map(|m| BackstepsByCause::of(m.backsteps(), &logs))
        .fold(BackstepsByCause::default(), BackstepsByCause::merge);
    let max_backstep_sync_m = by_cause.free_flight();
    let contests = duel.rounds().iter().filter(|r| r.contested()).count();
    let mut times: Vec<f64> = resolved.iter().flatten().copied().collect();
    times.sort_by(f64::total_cmp);
    let minutes = sim.now().as_secs_f64() / 60.0;
    let all_bots = bots.iter().chain(std::iter::once(&host_bot));
    let c = sim.host().counters();
    let guest_drops: u64 = sim.guests().map(|(_, g)| g.drops().malformed).sum();
    let FeelFigures {
        frames,
        max_render_below_floor_m,
        max_backstep_m,
        max_render_backstep_m,
        max_physics_backstep_m,
        snaps,
        worst_jump_m,
        longest_render_wait_s,
    } = figures;
    let report = Report {
        seconds: args.seconds,
        idle_seconds: args.idle_seconds,
        link: args.link,
        jitter_delay_ms: args.jitter_delay_ms,
        fixed_jitter_delay: args.fixed_jitter_delay,
        guest_jitter_delay_ms,
        throws_observed: all_bots.clone().map(|b| b.actions().thrown).sum(),
        releases_observed: all_bots
            .map(|b| b.actions().released + b.actions().placed)
            .sum(),
        frames_observed: frames,
        max_render_below_floor_mm: f64::from(max_render_below_floor_m.max(0.0)) * 1000.0,
        max_backstep_mm: f64::from(max_backstep_m.max(0.0)) * 1000.0,
        max_render_backstep_mm: f64::from(max_render_backstep_m.max(0.0)) * 1000.0,
        max_physics_backstep_mm: f64::from(max_physics_backstep_m.max(0.0)) * 1000.0,
        max_backstep_sync_mm: f64::from(max_backstep_sync_m) * 1000.0,
        backsteps_by_cause: by_cause.into(),
        snaps_over_5cm: snaps,
        snaps_over_5cm_per_min: snaps as f64 / minutes,
        worst_render_jump_mm: f64::from(worst_jump_m.max(0.0)) * 1000.0,
        longest_render_wait_ms: f64::from(longest_render_wait_s) * 1000.0,
        contests,
        conflicts_resolved: times.len(),
        conflict_resolution_ms_p50: percentile(&times, 0.5),
        conflict_resolution_ms_p95: percentile(&times, 0.95),
        conflict_resolution_ms_max: times.last().copied().unwrap_or(0.0),
        authority_mismatches_at_idle_end: at_idle_end.authority_mismatches,
        holder_mismatches_at_idle_end: at_idle_end.holder_mismatches,
        settle_extra_seconds: sim.now().saturating_sub(idle_end).as_secs_f64(),
        settled: stillness.still_for(sim.now()) >= quiet,
        authority_mismatches_after_settle: settled_reading.authority_mismatches,
        holder_mismatches_after_settle: settled_reading.holder_mismatches,
        max_divergence_mm_after_settle: f64::from(settled_reading.max_position_m) * 1000.0,
        bad_updates: c.bad_updates.total(),
        dropped_datagrams: c.drops.total() + guest_drops,
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{report:#?}");
    }
    Ok(())
}
