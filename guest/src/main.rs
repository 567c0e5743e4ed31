//! `physync-guest`: joins a peer session over UDP with a scripted bot (`--mode peer`, the default), or plays a
//! dedicated-server shooter match as a headless bot (`--mode dedicated`).

use std::process::ExitCode;

use clap::Parser;
use physync_engine::mode::Mode;
use physync_guest::cli::{PeerGuestArgs, run_peer_guest};
use physync_guest::dedicated::{DedicatedArgs, run as run_dedicated};
use tracing_subscriber::EnvFilter;

/// Joins a physync co-op session with a scripted player (peer mode).
#[derive(Debug, Parser)]
#[command(name = "physync-guest", version, about)]
struct PeerCli {
    /// peer (join a co-op session) or dedicated (play a shooter match; see `--mode dedicated --help` for its
    /// flags).
    #[arg(long, default_value_t = Mode::Peer)]
    mode: Mode,
    #[command(flatten)]
    peer: PeerGuestArgs,
}

/// Plays a dedicated-server shooter match as a headless bot (dedicated mode).
#[derive(Debug, Parser)]
#[command(name = "physync-guest", version, about)]
struct DedicatedCli {
    /// dedicated (this mode) or peer.
    #[arg(long)]
    mode: Mode,
    #[command(flatten)]
    dedicated: DedicatedArgs,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Mode::from_args(std::env::args()) {
        Mode::Peer => peer(PeerCli::parse()),
        Mode::Dedicated => dedicated(DedicatedCli::parse()),
    }
}

fn dedicated(cli: DedicatedCli) -> ExitCode {
    match run_dedicated(cli.dedicated) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("physync-guest: {e}");
            ExitCode::FAILURE
        }
    }
}

fn peer(cli: PeerCli) -> ExitCode {
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
