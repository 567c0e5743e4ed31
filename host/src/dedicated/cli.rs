//! Command-line arguments of `physync-host --mode dedicated`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use physync_engine::shooter::GameRules;
use physync_engine::shooter_net::token::secret_from_passphrase;

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
    /// Passphrase shared with the token issuer (clients in dev setups).
    #[arg(long, default_value = "physync-dev")]
    pub secret: String,
    /// Stop after this many seconds (runs until every match finishes otherwise).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Print one JSON summary per run on stdout.
    #[arg(long)]
    pub json: bool,
}

impl DedicatedArgs {
    /// The configuration of match `index` (match ids start at 1).
    pub fn match_config(&self, index: u32) -> MatchConfig {
        MatchConfig {
            match_id: index + 1,
            secret: secret_from_passphrase(&self.secret),
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
        let c = args.match_config(2);
        assert_eq!(c.match_id, 3);
        assert_eq!(c.max_rewind, Duration::from_secs(1));
        assert_eq!(c.rules.tick_rate_hz, 60);
        assert_eq!(c.secret, parse(&[]).match_config(0).secret);
        assert_ne!(
            c.secret,
            parse(&["--secret", "other"]).match_config(0).secret
        );
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
