//! `physync-guest`: joins a peer session over UDP with a scripted bot.

use std::process::ExitCode;

use clap::Parser;
use physync_guest::cli::{PeerGuestArgs, run_peer_guest};
use tracing_subscriber::EnvFilter;

/// Joins a physync co-op session with a scripted player.
#[derive(Debug, Parser)]
#[command(name = "physync-guest", version, about)]
struct Cli {
    #[command(flatten)]
    peer: PeerGuestArgs,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run_peer_guest(&cli.peer) {
        Ok((summary, ours)) => {
            if cli.peer.json {
                match serde_json::to_string(&summary) {
                    Ok(json) => println!("{json}"),
                    Err(e) => eprintln!("summary not serialised: {e}"),
                }
            } else {
                println!("{summary:#?}");
            }
            if ours {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("physync-guest: {e}");
            ExitCode::FAILURE
        }
    }
}
