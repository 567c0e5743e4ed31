//! Settings of one dedicated-server match.

use std::net::SocketAddr;
use std::time::Duration;

use physync_codec::StateConfig;
use physync_engine::connection::{SymKey, key_from_passphrase};
use physync_engine::shooter::input_buffer::InputBufferConfig;
use physync_engine::shooter::{ArenaMap, GameRules};
use physync_engine::shooter_net::token::DEV_PASSPHRASE;

/// Everything a [`super::DedicatedServer`] runs a match with.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchConfig {
    /// The match's id; tokens name it.
    pub match_id: u32,
    /// Key shared with whoever issues connect tokens (the default is the development key, which the
    /// `physync-host` binary refuses without `--dev`).
    pub token_key: SymKey,
    /// Addresses clients reach the match at, beside the one it is bound to: a token must name one of them.
    pub public_addrs: Vec<SocketAddr>,
    /// Game rules (the tick rate among them: 30 Hz by default).
    pub rules: GameRules,
    /// The arena.
    pub map: ArenaMap,
    /// Most players (at most 16; 10 by default).
    pub max_players: u8,
    /// Connected players needed before the countdown starts.
    pub min_players: u8,
    /// Countdown before the match goes live.
    pub countdown: Duration,
    /// Match length.
    pub time_limit: Duration,
    /// Kills that end the match.
    pub score_limit: u16,
    /// Longest rewind granted to a shot (at most 1 s); views older than this are traced in the present.
    pub max_rewind: Duration,
    /// A client silent this long is disconnected (its slot is kept for the grace period).
    pub client_timeout: Duration,
    /// How long a disconnected player's slot waits for a reconnect with the same token name.
    pub reconnect_grace: Duration,
    /// How long results keep being resent after the match ends, before the match is finished.
    pub results_linger: Duration,
    /// Per-client input buffer limits.
    pub input: InputBufferConfig,
    /// Quantization and prediction of the physics cubes on the wire.
    pub cubes: StateConfig,
    /// Most bytes of one snapshot datagram: past it, the players and cubes of lowest accumulated priority wait
    /// for a later snapshot (the local player and the events always go). 600 bytes at 30 Hz is 144 kbps.
    pub snapshot_budget_bytes: usize,
    /// Range-code each snapshot when that makes it smaller (else always bit-pack). The range coder saves bytes
    /// and costs server time: see the README's shooter-match figures.
    pub range_coder: bool,
}

impl Default for MatchConfig {
    fn default() -> Self {
        Self {
            match_id: 1,
            token_key: key_from_passphrase(DEV_PASSPHRASE),
            public_addrs: Vec::new(),
            rules: GameRules::default(),
            map: ArenaMap::standard(),
            max_players: 10,
            min_players: 2,
            countdown: Duration::from_secs(3),
            time_limit: Duration::from_secs(300),
            score_limit: 25,
            max_rewind: Duration::from_secs(1),
            client_timeout: Duration::from_secs(3),
            reconnect_grace: Duration::from_secs(15),
            results_linger: Duration::from_secs(2),
            input: InputBufferConfig::default(),
            cubes: StateConfig::default(),
            snapshot_budget_bytes: 600,
            range_coder: true,
        }
    }
}
