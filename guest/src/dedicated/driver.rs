//! Running a shooter client over real UDP: a [`LaminarDriver`] pumping a [`ShooterClient`] driven by a
//! [`Bot`], with the wall clock mapped to session time.

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::connection::{self, ClientAuth, ConnectToken, Endpoint, TokenError, os_seed};
use physync_engine::shooter_net::{PlayerClaims, mint_from_passphrase};
use physync_engine::transport::{DriverConfig, DriverEvent, LaminarDriver, TransportError};
use serde::Serialize;

use super::bot::{Bot, BotConfig};
use super::cli::DedicatedArgs;
use super::client::{ClientConfig, ClientEvent, ClientPhase, ShooterClient};
use super::sim::handshaking;

/// Longest the driver sleeps between pumps.
const MAX_IDLE: Duration = Duration::from_millis(1);
/// How long a client stays after the results arrived (so the server sees it leave cleanly).
const AFTER_RESULTS: Duration = Duration::from_millis(500);

/// Why the client could not run.
#[derive(Debug, thiserror::Error)]
pub enum ClientDriverError {
    /// The socket failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The server refused or dropped the session.
    #[error("session ended: {0:?}")]
    Session(ClientPhase),
    /// The token given does not read, or one could not be minted.
    #[error("connect token: {0}")]
    Token(#[from] TokenError),
}

/// What a client run did, printed with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct ClientSummary {
    /// The slot held.
    pub slot: Option<u8>,
    /// Snapshots decoded.
    pub snapshots: u64,
    /// Mispredictions of the local player.
    pub mispredictions: u64,
    /// Largest correction, centimetres.
    pub max_correction_cm: f64,
    /// Hits the server confirmed.
    pub hits_confirmed: u64,
    /// Smoothed RTT, milliseconds.
    pub rtt_ms: f64,
    /// Whether the match's results arrived.
    pub got_results: bool,
}

/// A shooter client bound to a UDP socket.
pub struct UdpClient {
    driver: LaminarDriver,
    client: ShooterClient,
    bot: Option<Bot>,
}

impl UdpClient {
    /// Binds `bind` and starts connecting to `config.server` through the connection layer with `config.token`;
    /// with `bot`, a bot plays.
    pub fn bind(
        bind: SocketAddr,
        config: ClientConfig,
        bot: Option<Bot>,
    ) -> Result<Self, ClientDriverError> {
        let driver = client_driver(bind, &config)?;
        let client = ShooterClient::new(config, driver.now());
        Ok(Self {
            driver,
            client,
            bot,
        })
    }

    /// The core.
    pub fn client(&self) -> &ShooterClient {
        &self.client
    }

    /// One pump; returns when the core next wants to run.
    pub fn pump(&mut self) -> Result<Option<Duration>, ClientDriverError> {
        let now = self.driver.now();
        self.driver.pump(now)?;
        while let Some(event) = self.driver.poll_event() {
            if let DriverEvent::Datagram(d) = event {
                self.client.handle_datagram(now, d.from, &d.payload);
            }
        }
        if self.driver.connection().is_some_and(handshaking) {
            return Ok(Some(now + MAX_IDLE));
        }
        if let Some(bot) = &mut self.bot {
            let input = bot.input(&self.client, now);
            self.client.set_input(input);
        }
        self.client.handle_timeout(now);
        while let Some(t) = self.client.poll_transmit() {
            self.driver.send(now, t)?;
        }
        self.driver.pump(now)?;
        Ok(self.client.poll_timeout())
    }

    /// Runs until the results arrived (plus a moment), the session ended, or `limit` passed.
    pub fn run(mut self, limit: Option<Duration>) -> Result<ClientSummary, ClientDriverError> {
        let mut results_at = None;
        loop {
            let next = self.pump()?;
            let now = self.driver.now();
            while let Some(event) = self.client.poll_event() {
                match event {
                    ClientEvent::Results(_) => {
                        results_at.get_or_insert(now);
                    }
                    ClientEvent::Rejected(_) | ClientEvent::TimedOut => {
                        return Err(ClientDriverError::Session(self.client.phase()));
                    }
                    other => tracing::debug!(?other, "client event"),
                }
            }
            if results_at.is_some_and(|t| now >= t + AFTER_RESULTS)
                || limit.is_some_and(|l| now >= l)
            {
                break;
            }
            let wait = next.map_or(MAX_IDLE, |n| n.saturating_sub(now).min(MAX_IDLE));
            std::thread::sleep(wait);
        }
        self.client.disconnect();
        if let Some(t) = self.client.poll_transmit() {
            let now = self.driver.now();
            self.driver.send(now, t)?;
            self.driver.pump(now)?;
        }
        Ok(summary(&self.client))
    }
}

/// The summary of a client's session.
pub fn summary(client: &ShooterClient) -> ClientSummary {
    let s = client.stats();
    ClientSummary {
        slot: client.slot().map(|p| p.0),
        snapshots: s.snapshots,
        mispredictions: s.prediction.mispredictions,
        max_correction_cm: f64::from(s.prediction.max_correction_m) * 100.0,
        hits_confirmed: s.hits_confirmed,
        rtt_ms: s.rtt_s * 1000.0,
        got_results: client.results().is_some(),
    }
}

/// A UDP driver bound at `bind` whose connection layer connects to `config.server` with `config.token`: what a
/// shooter client runs over.
pub fn client_driver(
    bind: SocketAddr,
    config: &ClientConfig,
) -> Result<LaminarDriver, TransportError> {
    let auth = ClientAuth::Token(Box::new(config.token.clone()));
    let endpoint = Endpoint::client(
        connection::ClientConfig::new(config.server, auth),
        Duration::ZERO,
        os_seed(),
    );
    LaminarDriver::bind_secure(bind, DriverConfig::default(), endpoint)
}

/// The token `args` name: the one given with `--token`, or one minted from `--secret` for `--connect`.
pub fn token_of(args: &DedicatedArgs) -> Result<ConnectToken, TokenError> {
    if let Some(hex) = &args.token {
        return ConnectToken::from_hex(hex);
    }
    mint_from_passphrase(
        &args.secret,
        &PlayerClaims::new(args.match_id, &args.name),
        &[args.connect],
        Duration::from_secs(u64::from(args.token_valid_s)),
    )
}

/// `physync-guest --mode dedicated`: a headless bot that joins a match with its connect token and plays until the
/// results arrive (or `--seconds`).
pub fn run(args: DedicatedArgs) -> Result<ClientSummary, ClientDriverError> {
    let token = token_of(&args)?;
    let config = ClientConfig::new(args.connect, token);
    let bot = Bot::new(BotConfig::default(), args.seed);
    let client = UdpClient::bind(args.bind, config, Some(bot))?;
    let summary = client.run(args.seconds.map(Duration::from_secs))?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&summary).unwrap_or_else(|_| "{}".into())
        );
    }
    Ok(summary)
}
