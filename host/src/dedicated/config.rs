//! Settings of one dedicated-server match.

use std::net::SocketAddr;
use std::time::Duration;

use physync_codec::StateConfig;
use physync_engine::connection::{SymKey, key_from_passphrase};
use physync_engine::shooter::input_buffer::InputBufferConfig;
use physync_engine::shooter::{ArenaMap, GameRules};
use physync_engine::shooter_net::token::DEV_PASSPHRASE;

/// Everything a [`super::DedicatedServer`] runs a match with. Its `Debug` leaves the token key out, so a logged
/// config cannot leak it.
#[derive(Clone, PartialEq)]
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

impl std::fmt::Debug for MatchConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            match_id,
            token_key: _,
            public_addrs,
            rules,
            map,
            max_players,
            min_players,
            countdown,
            time_limit,
            score_limit,
            max_rewind,
            client_timeout,
            reconnect_grace,
            results_linger,
            input,
            cubes,
            snapshot_budget_bytes,
            range_coder,
        } = self;
        f.debug_struct("MatchConfig")
            .field("match_id", match_id)
            .field("token_key", &"<redacted>")
            .field("public_addrs", public_addrs)
            .field("rules", rules)
            .field("map", map)
            .field("max_players", max_players)
            .field("min_players", min_players)
            .field("countdown", countdown)
            .field("time_limit", time_limit)
            .field("score_limit", score_limit)
            .field("max_rewind", max_rewind)
            .field("client_timeout", client_timeout)
            .field("reconnect_grace", reconnect_grace)
            .field("results_linger", results_linger)
            .field("input", input)
            .field("cubes", cubes)
            .field("snapshot_budget_bytes", snapshot_budget_bytes)
            .field("range_coder", range_coder)
            .finish()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_config_does_not_show_the_token_key() {
        let config = MatchConfig {
            token_key: [0xAB; 32],
            ..MatchConfig::default()
        };
        let logged = format!("{config:?}");
        assert!(logged.contains("<redacted>"), "{logged}");
        assert!(
            !logged.contains("171, 171"),
            "the key bytes [171, 171, ...] must not show: {logged}"
        );
    }
}
