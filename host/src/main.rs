//! `physync-host`: hosts a peer session over UDP and plays as player 0 (`--mode peer`, the default), runs
//! dedicated shooter matches (`--mode dedicated`), or mints their connect tokens (`physync-host token`).

use std::process::ExitCode;

use clap::Parser;
use physync_engine::mode::Mode;
use physync_host::cli::{PeerHostArgs, run_peer_host};
use physync_host::dedicated::token_cli::{TokenArgs, run_token};
use physync_host::dedicated::{DedicatedArgs, run as run_dedicated};
use tracing_subscriber::EnvFilter;

/// Hosts a physync co-op session (peer mode).
#[derive(Debug, Parser)]
#[command(name = "physync-host", version, about)]
struct PeerCli {
    /// peer (co-op session, this host plays and arbitrates) or dedicated (shooter matches; see
    /// `--mode dedicated --help` for its flags).
    #[arg(long, default_value_t = Mode::Peer)]
    mode: Mode,
    #[command(flatten)]
    peer: PeerHostArgs,
}

/// Runs dedicated shooter matches (dedicated mode).
#[derive(Debug, Parser)]
#[command(name = "physync-host", version, about)]
struct DedicatedCli {
    /// dedicated (this mode) or peer.
    #[arg(long)]
    mode: Mode,
    #[command(flatten)]
    dedicated: DedicatedArgs,
}

/// Mints a connect token for the dedicated mode (`physync-host token --help`).
#[derive(Debug, Parser)]
#[command(name = "physync-host token", version, about)]
struct TokenCli {
    #[command(flatten)]
    token: TokenArgs,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    if std::env::args().nth(1).as_deref() == Some("token") {
        let args = std::env::args()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(_, a)| a);
        return token(TokenCli::parse_from(args));
    }
    match Mode::from_args(std::env::args()) {
        Mode::Peer => peer(PeerCli::parse()),
        Mode::Dedicated => dedicated(DedicatedCli::parse()),
    }
}

fn peer(cli: PeerCli) -> ExitCode {
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

fn dedicated(cli: DedicatedCli) -> ExitCode {
    match run_dedicated(cli.dedicated) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("physync-host: {e}");
            ExitCode::FAILURE
        }
    }
}

fn token(cli: TokenCli) -> ExitCode {
    match run_token(&cli.token) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("physync-host token: {e}");
            ExitCode::FAILURE
        }
    }
}
