//! Structure-aware fuzzing of PeerHost, PeerGuest, DedicatedServer and ShooterClient (see
//! `physync_examples::fuzz`): prints inputs, panics and each core's drops by kind.
//!
//! `cargo run --release -p physync-examples --bin fuzz_cores -- --json [--inputs N] [--seed S]`

use std::time::Instant;

use clap::Parser;
use physync_examples::fuzz;

/// Fuzzes the four protocol cores with well-framed hostile datagrams.
#[derive(Debug, Parser)]
struct Args {
    /// Hostile datagrams in all (a quarter per core).
    #[arg(long, default_value_t = 2_000_000)]
    inputs: u64,
    /// Seed of the session the corpus comes from and of the mutations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

fn main() {
    let args = Args::parse();
    let started = Instant::now();
    let report = fuzz::run(args.seed, args.inputs);
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        let mut value = serde_json::to_value(&report).expect("serializable");
        value["seconds"] = serde_json::json!(seconds);
        println!("{value}");
    } else {
        println!("{report:#?}\n{seconds:.1} s");
    }
    if report.panics > 0 {
        std::process::exit(1);
    }
}
