//! Command-line arguments of `physync-host --mode dedicated`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use physync_engine::connection::{SymKey, key_from_passphrase};
use physync_engine::shooter::GameRules;
use physync_engine::shooter_net::token::DEV_PASSPHRASE;

use super::config::MatchConfig;

/// Arguments of the dedicated server: how many matches, where, and their rules.
#[derive(Debug, Clone, Args)]
pub struct DedicatedArgs {
    /// Address of the first match; match `i` listens on the same IP at port + i (every match on a port the
    /// system picks when the port is 0).
    #[arg(long, default_value = "0.0.0.0:40000")]
    pub listen: SocketAddr,
    /// Matches to run, one thread each.
    #[arg(long, default_value_t = 1)]
    pub matches: u32,
    /// Players per match (at most 16).
    #[arg(long, default_value_t = 10)]
    pub max_players: u8,
    /// Players needed to start the countdown.
    #[arg(long, default_value_t = 2)]
    pub min_players: u8,
    /// Simulation ticks per second.
    #[arg(long, default_value_t = 30)]
    pub tick_hz: u32,
    /// Countdown, seconds.
    #[arg(long, default_value_t = 3)]
    pub countdown_s: u64,
    /// Match length, seconds.
    #[arg(long, default_value_t = 300)]
    pub time_limit_s: u64,
    /// Kills that end a match.
    #[arg(long, default_value_t = 25)]
    pub score_limit: u16,
    /// Longest lag-compensation rewind, milliseconds (at most 1000).
    #[arg(long, default_value_t = 1000)]
    pub max_rewind_ms: u64,
    /// Passphrase shared with the token issuer (`physync-host token --new-secret` makes one up). Also read from
    /// the PHYSYNC_SECRET environment variable, which keeps it out of process listings.
    #[arg(long, env = "PHYSYNC_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// Development mode: accept the public development passphrase (the default secret with this flag). Never on a
    /// server others can reach: anyone can mint tokens for it.
    #[arg(long)]
    pub dev: bool,
    /// An address clients reach the server at (repeatable), when it differs from the one it listens on; tokens
    /// must name one of them or the listening address.
    #[arg(long = "public-addr")]
    pub public_addrs: Vec<SocketAddr>,
    /// Stop after this many seconds (runs until every match finishes otherwise).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Print one JSON summary per run on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Why the server will not take its secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Neither a secret nor development mode.
    #[error("give --secret (shared with the token issuer) or --dev for local development")]
    Missing,
    /// The public development passphrase without `--dev`.
    #[error(
        "the development passphrase is public: anyone could mint tokens; start with --dev to use it"
    )]
    DevWithoutFlag,
}

/// The token key from a passphrase and the development flag: the development passphrase only with `dev`, and
/// it is what `dev` means when no passphrase is given.
pub fn token_key(secret: Option<&str>, dev: bool) -> Result<SymKey, SecretError> {
    match (secret, dev) {
        (None, false) => Err(SecretError::Missing),
        (Some(DEV_PASSPHRASE), false) => Err(SecretError::DevWithoutFlag),
        (None, true) => Ok(key_from_passphrase(DEV_PASSPHRASE)),
        (Some(secret), _) => Ok(key_from_passphrase(secret)),
    }
}

impl DedicatedArgs {
    /// The token key these arguments give (see [`token_key`]).
    pub fn token_key(&self) -> Result<SymKey, SecretError> {
        token_key(self.secret.as_deref(), self.dev)
    }

    /// The configuration of match `index` (match ids start at 1) under `token_key`.
    pub fn match_config(&self, index: u32, token_key: SymKey) -> MatchConfig {
        MatchConfig {
            match_id: index + 1,
            token_key,
            public_addrs: self
                .public_addrs
                .iter()
                .map(|a| {
                    let mut a = *a;
                    if a.port() != 0 && self.listen.port() != 0 {
                        a.set_port(a.port().wrapping_add(index as u16));
                    }
                    a
                })
                .collect(),
            rules: GameRules {
                tick_rate_hz: self.tick_hz.clamp(1, 240),
                ..GameRules::default()
            },
            max_players: self.max_players,
            min_players: self.min_players,
            countdown: Duration::from_secs(self.countdown_s),
            time_limit: Duration::from_secs(self.time_limit_s),
            score_limit: self.score_limit,
            max_rewind: Duration::from_millis(self.max_rewind_ms.min(1000)),
            ..MatchConfig::default()
        }
    }

    /// Where match `index` listens (port 0 lets the system pick a port for every match).
    pub fn match_addr(&self, index: u32) -> SocketAddr {
        let mut addr = self.listen;
        if self.listen.port() != 0 {
            addr.set_port(self.listen.port().wrapping_add(index as u16));
        }
        addr
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: DedicatedArgs,
    }

    fn parse(line: &[&str]) -> DedicatedArgs {
        Wrapper::parse_from(std::iter::once("physync-host").chain(line.iter().copied())).args
    }

    #[test]
    fn match_configs_follow_the_arguments() {
        let args = parse(&[
            "--listen",
            "127.0.0.1:5000",
            "--matches",
            "3",
            "--max-rewind-ms",
            "5000",
            "--tick-hz",
            "60",
        ]);
        assert_eq!(args.match_addr(2), "127.0.0.1:5002".parse().unwrap());
        let any = parse(&["--listen", "127.0.0.1:0"]);
        assert_eq!(any.match_addr(1).port(), 0);
        let c = args.match_config(2, [1; 32]);
        assert_eq!(c.match_id, 3);
        assert_eq!(c.max_rewind, Duration::from_secs(1));
        assert_eq!(c.rules.tick_rate_hz, 60);
        assert_eq!(c.token_key, [1; 32]);
    }

    #[test]
    fn the_development_passphrase_needs_the_dev_flag() {
        assert_eq!(parse(&[]).token_key(), Err(SecretError::Missing));
        assert_eq!(
            parse(&["--secret", DEV_PASSPHRASE]).token_key(),
            Err(SecretError::DevWithoutFlag)
        );
        let dev = parse(&["--dev"]).token_key().unwrap();
        assert_eq!(
            parse(&["--dev", "--secret", DEV_PASSPHRASE]).token_key(),
            Ok(dev)
        );
        let real = parse(&["--secret", "correct horse battery staple"])
            .token_key()
            .unwrap();
        assert_ne!(real, dev);
    }

    #[test]
    fn run_serves_several_matches_on_their_own_threads_for_the_time_asked() {
        let args = parse(&[
            "--listen",
            "127.0.0.1:0",
            "--matches",
            "2",
            "--seconds",
            "1",
            "--dev",
        ]);
        let summaries = super::super::driver::run(args).unwrap();
        assert_eq!(summaries.len(), 2);
        assert_eq!(
            summaries.iter().map(|s| s.match_id).collect::<Vec<_>>(),
            [1, 2]
        );
        for s in &summaries {
            assert!((20..=40).contains(&s.ticks), "{s:?}");
            assert!(!s.finished);
        }
    }
}
