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
    /// Passphrase shared with the server (dev setups issue their own tokens).
    #[arg(long, default_value = "physync-dev")]
    pub secret: String,
    /// Token lifetime from now, seconds of the server's session clock.
    #[arg(long, default_value_t = 86_400)]
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
