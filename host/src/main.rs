//! `physync-host`: hosts a peer session over UDP and plays as player 0.

use std::process::ExitCode;

use clap::Parser;
use physync_host::cli::{PeerHostArgs, run_peer_host};
use tracing_subscriber::EnvFilter;

/// Hosts a physync co-op session.
#[derive(Debug, Parser)]
#[command(name = "physync-host", version, about)]
struct Cli {
    #[command(flatten)]
    peer: PeerHostArgs,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run_peer_host(&cli.peer) {
        Ok(summary) => {
            if cli.peer.json {
                match serde_json::to_string(&summary) {
                    Ok(json) => println!("{json}"),
                    Err(e) => {
                        eprintln!("summary not serialised: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                println!("{summary:#?}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("physync-host: {e}");
            ExitCode::FAILURE
        }
    }
}
