//! Step cost of the peer world: 1000 cubes dropped into a pile (seeded), with quantize-both-sides and at-rest
//! detection, against rapier alone (its own sleep, none of the rules) on the same scene. Steps of the two
//! worlds are timed alternately.

use std::time::Instant;

use clap::Parser;
use physync_engine::world::scene::SceneSpec;
use physync_engine::world::{World, WorldConfig};
use serde::Serialize;

#[derive(Parser)]
#[command(about = "Benchmark the peer world's fixed step against rapier alone")]
struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Cubes in the pile.
    #[arg(long, default_value_t = 1000)]
    cubes: usize,
    /// Steps measured per run (60 per simulated second).
    #[arg(long, default_value_t = 600)]
    frames: usize,
    /// Scene seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Serialize)]
struct Report {
    cubes: usize,
    frames: usize,
    step_ms_mean: f64,
    step_ms_p99: f64,
    rapier_step_ms_mean: f64,
    rapier_step_ms_p99: f64,
    overhead_ms_mean: f64,
    overhead_ratio: f64,
    at_rest_at_end: usize,
    /// Bodies rapier simulated per step (its awake island), mean over the run, in the peer world.
    awake_bodies_mean: f64,
    /// The same in rapier alone.
    rapier_awake_bodies_mean: f64,
    /// Collider pairs in contact per step, mean, in the peer world.
    contacts_mean: f64,
    /// The same in rapier alone.
    rapier_contacts_mean: f64,
}

struct Timings {
    mean: f64,
    p99: f64,
}

impl Timings {
    fn of(mut samples: Vec<f64>) -> Self {
        let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
        samples.sort_by(f64::total_cmp);
        let p99 = samples
            .get(((samples.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0);
        Self { mean, p99 }
    }
}

fn timed(step: impl FnOnce()) -> f64 {
    let start = Instant::now();
    step();
    start.elapsed().as_secs_f64() * 1000.0
}

fn main() {
    let args = Args::parse();
    let scene = SceneSpec::pile(args.cubes, args.seed);

    // The two worlds step alternately, so load from other processes falls on both alike.
    let mut world = World::new(WorldConfig::default(), &scene);
    let mut baseline = World::new(WorldConfig::rapier_only(), &scene);
    let mut ours = Vec::with_capacity(args.frames);
    let mut rapier = Vec::with_capacity(args.frames);
    let (mut load, mut rapier_load) = ([0usize; 2], [0usize; 2]);
    for _ in 0..args.frames {
        ours.push(timed(|| world.step()));
        rapier.push(timed(|| baseline.step_physics_only()));
        for (sum, (awake, contacts)) in [
            (&mut load, world.simulated_load()),
            (&mut rapier_load, baseline.simulated_load()),
        ] {
            sum[0] += awake;
            sum[1] += contacts;
        }
    }
    let mean = |sum: usize| sum as f64 / args.frames.max(1) as f64;
    let (ours, rapier) = (Timings::of(ours), Timings::of(rapier));
    let at_rest_at_end = (0..world.object_count() as u16)
        .filter(|&id| world.is_at_rest(id))
        .count();

    let report = Report {
        cubes: args.cubes,
        frames: args.frames,
        step_ms_mean: ours.mean,
        step_ms_p99: ours.p99,
        rapier_step_ms_mean: rapier.mean,
        rapier_step_ms_p99: rapier.p99,
        overhead_ms_mean: ours.mean - rapier.mean,
        overhead_ratio: ours.mean / rapier.mean,
        at_rest_at_end,
        awake_bodies_mean: mean(load[0]),
        rapier_awake_bodies_mean: mean(rapier_load[0]),
        contacts_mean: mean(load[1]),
        rapier_contacts_mean: mean(rapier_load[1]),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("report serializes")
        );
    } else {
        println!(
            "{} cubes, {} steps: world {:.3} ms mean / {:.3} ms p99; rapier alone {:.3} / {:.3} ms; \
             overhead {:.3} ms ({:.2}x); {} at rest at the end; awake bodies {:.0} / {:.0}, contacts {:.0} / {:.0}",
            report.cubes,
            report.frames,
            report.step_ms_mean,
            report.step_ms_p99,
            report.rapier_step_ms_mean,
            report.rapier_step_ms_p99,
            report.overhead_ms_mean,
            report.overhead_ratio,
            report.at_rest_at_end,
            report.awake_bodies_mean,
            report.rapier_awake_bodies_mean,
            report.contacts_mean,
            report.rapier_contacts_mean
        );
    }
}
