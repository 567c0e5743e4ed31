//! Command-line arguments of `physync-guest --mode dedicated`.

use std::net::SocketAddr;

use clap::Args;

/// Arguments of a headless shooter client (a bot).
#[derive(Debug, Clone, Args)]
pub struct DedicatedArgs {
    /// The match's address.
    #[arg(long, default_value = "127.0.0.1:40000")]
    pub connect: SocketAddr,
    /// Local address to bind.
    #[arg(long, default_value = "0.0.0.0:0")]
    pub bind: SocketAddr,
    /// The match id (match `i` of a server listens on port + i and has id i + 1).
    #[arg(long, default_value_t = 1)]
    pub match_id: u32,
    /// Player name (at most 16 bytes; it keys the slot for reconnects).
    #[arg(long, default_value = "bot")]
    pub name: String,
    /// A connect token from the match's token issuer (`physync-host token` prints one), as hex. Without it the
    /// client mints its own from `--secret`, which only a server sharing that secret accepts.
    #[arg(long, env = "PHYSYNC_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Passphrase to mint its own token with when no `--token` is given (development: servers refuse the default
    /// development passphrase unless started with `--dev`).
    #[arg(
        long,
        default_value = "physync-dev",
        env = "PHYSYNC_SECRET",
        hide_env_values = true
    )]
    pub secret: String,
    /// Lifetime of a self-minted token from now, seconds (an absolute expiry: a server restart does not revive
    /// it).
    #[arg(long, default_value_t = 3_600)]
    pub token_valid_s: u32,
    /// Seed of the bot's dice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Leave after this many seconds (otherwise when the match's results arrive).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Print one JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}
