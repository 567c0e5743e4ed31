//! Running matches over real UDP: one [`LaminarDriver`] and one thread per match, pumping a
//! [`DedicatedServer`] with the wall clock mapped to session time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use physync_engine::connection::{
    ConnectionEvent, ConnectionStats, Endpoint, ServerAuth, ServerConfig, os_seed, unix_now,
};
use physync_engine::shooter_net::PlayerClaims;
use physync_engine::transport::{DriverConfig, DriverEvent, LaminarDriver, TransportError};
use serde::Serialize;

use super::cli::{DedicatedArgs, SecretError};
use super::config::MatchConfig;
use super::server::{DedicatedServer, ServerError, ServerEvent};

/// Longest the driver sleeps between pumps, so datagrams are taken promptly.
const MAX_IDLE: Duration = Duration::from_millis(1);

/// Why a match or the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The socket failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The match configuration was refused.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A match thread panicked.
    #[error("match thread {0} panicked")]
    Thread(u32),
    /// The token secret was refused.
    #[error(transparent)]
    Secret(#[from] SecretError),
}

/// What one match did, printed with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct MatchSummary {
    /// The match id.
    pub match_id: u32,
    /// Where it listened.
    pub addr: String,
    /// Ticks simulated.
    pub ticks: u64,
    /// Whether it ran to its end (results sent).
    pub finished: bool,
    /// Shots that struck a player.
    pub hits: u64,
    /// Datagrams dropped as hostile or broken by the match.
    pub hostile_dropped: u64,
    /// The connection layer: sessions and datagrams dropped by kind before the match saw them.
    pub connection: ConnectionStats,
}

/// A match bound to a UDP socket.
pub struct UdpMatch {
    driver: LaminarDriver,
    server: DedicatedServer,
}

impl UdpMatch {
    /// Binds `addr` and creates the match behind the connection layer: clients need a connect token minted under
    /// `config.token_key` that names the bound address (any IP with the bound port when bound to an unspecified
    /// address) or one of `config.public_addrs`.
    pub fn bind(addr: SocketAddr, config: MatchConfig) -> Result<Self, DriverError> {
        let auth = ServerAuth::Tokens {
            key: config.token_key,
            public_addrs: config.public_addrs.clone(),
            unix_at_epoch: unix_now(),
        };
        let mut server_config = ServerConfig::new(auth);
        server_config.max_sessions = 2 * usize::from(config.max_players);
        let endpoint = Endpoint::server(server_config, os_seed());
        let mut driver = LaminarDriver::bind_secure(addr, DriverConfig::default(), endpoint)?;
        let local = driver.local_addr();
        if let Some(connection) = driver.connection_mut() {
            connection.add_public_addr(local);
        }
        let server = DedicatedServer::new(config, driver.now())?;
        Ok(Self { driver, server })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.driver.local_addr()
    }

    /// The connection layer's counters (sessions, drops by kind).
    pub fn connection_stats(&self) -> Option<ConnectionStats> {
        self.driver.connection_stats().copied()
    }

    /// The core.
    pub fn server(&self) -> &DedicatedServer {
        &self.server
    }

    /// One pump: receive, tick if due, send. Returns when the core next wants to run.
    pub fn pump(&mut self) -> Result<Duration, DriverError> {
        let now = self.driver.now();
        self.driver.pump(now)?;
        while let Some(event) = self.driver.poll_connection_event() {
            apply_connection_event(&mut self.server, event);
        }
        while let Some(event) = self.driver.poll_event() {
            if let DriverEvent::Datagram(d) = event {
                self.server.handle_datagram(now, d.from, &d.payload);
            }
        }
        self.server.handle_timeout(now);
        while let Some(t) = self.server.poll_transmit() {
            // A send error to one peer must not stop the match.
            if let Err(e) = self.driver.send(now, t) {
                tracing::debug!("send failed: {e}");
            }
        }
        while let Some(event) = self.server.poll_event() {
            log_event(self.server.config().match_id, &event);
        }
        self.driver.pump(now)?;
        let next = self.server.poll_timeout();
        Ok(self.driver.next_deadline().map_or(next, |d| d.min(next)))
    }

    /// Runs until the match finishes, `stop` is set or `limit` passes.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        limit: Option<Duration>,
    ) -> Result<MatchSummary, DriverError> {
        while !self.server.is_finished() && !stop.load(Ordering::Relaxed) {
            let next = self.pump()?;
            let now = self.driver.now();
            if limit.is_some_and(|l| now >= l) {
                break;
            }
            std::thread::sleep(next.saturating_sub(now).min(MAX_IDLE));
        }
        let stats = self.server.stats();
        let h = self.server.hostile();
        Ok(MatchSummary {
            match_id: self.server.config().match_id,
            addr: self.local_addr().to_string(),
            ticks: stats.ticks,
            finished: self.server.is_finished(),
            hits: stats.hits,
            hostile_dropped: h.unknown_sender + h.bad_token + h.malformed + h.replayed,
            connection: self.driver.connection_stats().copied().unwrap_or_default(),
        })
    }
}

/// Hands the match what the connection layer verified: a token's claims when a client passes the challenge, and
/// the end of its session. A token whose user data is not shooter claims admits nobody.
pub fn apply_connection_event(server: &mut DedicatedServer, event: ConnectionEvent) {
    match event {
        ConnectionEvent::Connected {
            peer,
            identity: Some(identity),
        } => match PlayerClaims::from_user_data(&identity.user_data) {
            Some(claims) => server.authenticate(peer, claims),
            None => tracing::debug!(%peer, "token without shooter claims"),
        },
        ConnectionEvent::Connected { .. } => {}
        ConnectionEvent::Closed { peer, .. } => server.forget(peer),
    }
}

fn log_event(match_id: u32, event: &ServerEvent) {
    tracing::info!(match_id, ?event, "match event");
}

/// `physync-host --mode dedicated`: runs `args.matches` matches, one thread each, until they finish (or for
/// `--seconds`), and prints a JSON summary with `--json`.
pub fn run(args: DedicatedArgs) -> Result<Vec<MatchSummary>, DriverError> {
    let stop = Arc::new(AtomicBool::new(false));
    let limit = args.seconds.map(Duration::from_secs);
    let mut threads = Vec::new();
    let token_key = args.token_key()?;
    for i in 0..args.matches.max(1) {
        let m = UdpMatch::bind(args.match_addr(i), args.match_config(i, token_key))?;
        tracing::info!(match_id = i + 1, addr = %m.local_addr(), "match listening");
        let stop = Arc::clone(&stop);
        threads.push((i, std::thread::spawn(move || m.run(&stop, limit))));
    }
    let mut summaries = Vec::new();
    for (i, t) in threads {
        summaries.push(t.join().map_err(|_| DriverError::Thread(i))??);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&summaries).unwrap_or_else(|_| "[]".into())
        );
    }
    Ok(summaries)
}
