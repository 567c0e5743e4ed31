//! A running shooter session: the local player's [`ShooterClient`] pumped by the viewer each frame over its own
//! UDP socket, plus, when asked for, a local match (physync-host's [`UdpMatch`] on its own thread) and headless
//! bots (physync-guest's [`UdpClient`] with a [`Bot`], all on one thread). Dropping the session stops and joins
//! those threads.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use physync_engine::connection::{ConnectToken, key_from_passphrase};
use physync_engine::shooter::PlayerInput;
use physync_engine::shooter_net::{PlayerClaims, RejectReason, mint_from_passphrase};
use physync_engine::transport::{DriverEvent, LaminarDriver};
use physync_guest::dedicated::driver::{UdpClient, client_driver};
use physync_guest::dedicated::sim::handshaking;
use physync_guest::dedicated::{
    Bot, BotConfig, ClientConfig, ClientEvent, ClientPhase, ShooterClient,
};
use physync_host::dedicated::MatchConfig;
use physync_host::dedicated::driver::UdpMatch;
use thiserror::Error;

use super::form::{DedicatedConfig, DedicatedTarget};

/// Id of the match the viewer starts or joins (a dedicated server's first match).
pub const MATCH_ID: u32 = 1;
/// Token lifetime from the moment it is minted.
const TOKEN_VALID: Duration = Duration::from_secs(86_400);
/// Pause of the bot thread between pumps.
const BOT_IDLE: Duration = Duration::from_millis(1);

/// Why a shooter session could not start.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShooterLaunchError {
    /// The local match could not listen on its port.
    #[error("could not start the dedicated server on port {port}: {reason}")]
    Server {
        /// The port asked for.
        port: u16,
        /// What went wrong.
        reason: String,
    },
    /// A client socket could not be opened.
    #[error("could not open the network socket: {0}")]
    Socket(String),
    /// No connect token could be minted.
    #[error("could not mint a connect token: {0}")]
    Token(String),
}

/// How the session stands, for the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShooterStatus {
    /// Waiting for the server's answer or the match data.
    Connecting,
    /// Playing.
    Playing,
    /// Over, with the reason to show on the start screen.
    Ended(String),
}

/// A thread and the flag that stops it.
struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn spawn(f: impl FnOnce(&AtomicBool) + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || f(&flag));
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::warn!("a shooter worker thread panicked");
        }
    }
}

/// The local player's client and whatever the viewer started for it.
pub struct ShooterSession {
    driver: LaminarDriver,
    client: ShooterClient,
    server: SocketAddr,
    /// How long the client waits for the server before giving up.
    timeout: Duration,
    local_match: bool,
    bots: u8,
    ended: Option<String>,
    events: Vec<ClientEvent>,
    // Declared last: dropped after the client said goodbye.
    _bots: Option<Worker>,
    _server: Option<Worker>,
}

/// A token for `name` at `server` under the key of `passphrase` (the viewer issues its own, as a development
/// setup does).
fn mint(
    passphrase: &str,
    name: &str,
    server: SocketAddr,
) -> Result<ConnectToken, ShooterLaunchError> {
    mint_from_passphrase(
        passphrase,
        &PlayerClaims::new(MATCH_ID, name),
        &[server],
        TOKEN_VALID,
    )
    .map_err(|e| ShooterLaunchError::Token(e.to_string()))
}

impl ShooterSession {
    /// Start what `config` asks for: a local match and its bots when local, bots for the remote server
    /// otherwise, and the local player's client connecting to the match.
    pub fn start(config: &DedicatedConfig) -> Result<Self, ShooterLaunchError> {
        let (server, server_worker) = match config.target {
            DedicatedTarget::Local { port } => {
                let match_config = MatchConfig {
                    match_id: MATCH_ID,
                    token_key: key_from_passphrase(&config.passphrase),
                    min_players: if config.bots > 0 { 2 } else { 1 },
                    ..MatchConfig::default()
                };
                let bind = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
                let m =
                    UdpMatch::bind(bind, match_config).map_err(|e| ShooterLaunchError::Server {
                        port,
                        reason: e.to_string(),
                    })?;
                let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, m.local_addr().port()));
                let worker = Worker::spawn(move |stop| {
                    if let Err(e) = m.run(stop, None) {
                        tracing::warn!("local dedicated server stopped: {e}");
                    }
                });
                (addr, Some(worker))
            }
            DedicatedTarget::Remote { address } => (address, None),
        };
        let any_port = if server.is_ipv6() {
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
        };
        let bots = (0..config.bots)
            .map(|i| {
                let name = format!("bot-{}", i + 1);
                let token = mint(&config.passphrase, &name, server)?;
                let bot = Bot::new(BotConfig::default(), u64::from(i) + 1);
                UdpClient::bind(any_port, ClientConfig::new(server, token), Some(bot))
                    .map_err(|e| ShooterLaunchError::Socket(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bot_worker =
            (!bots.is_empty()).then(|| Worker::spawn(move |stop| run_bots(bots, stop)));
        let token = mint(&config.passphrase, &config.name, server)?;
        let client_config = ClientConfig::new(server, token);
        let driver = client_driver(any_port, &client_config)
            .map_err(|e| ShooterLaunchError::Socket(e.to_string()))?;
        let timeout = client_config.timeout;
        let client = ShooterClient::new(client_config, driver.now());
        Ok(Self {
            driver,
            client,
            server,
            timeout,
            local_match: server_worker.is_some(),
            bots: config.bots,
            ended: None,
            events: Vec::new(),
            _bots: bot_worker,
            _server: server_worker,
        })
    }

    /// The session clock the client runs on (remote poses are sampled at this time).
    pub fn now(&self) -> Duration {
        self.driver.now()
    }

    /// The client core (predicted local player, interpolated others, scores, roster, match phase).
    pub fn client(&self) -> &ShooterClient {
        &self.client
    }

    /// The match's address.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// Whether the viewer runs the match itself.
    pub fn is_local_match(&self) -> bool {
        self.local_match
    }

    /// Bots the viewer added.
    pub fn bots(&self) -> u8 {
        self.bots
    }

    /// Feed `input` for the coming ticks and run the client up to now: datagrams in, due ticks, datagrams out.
    /// Returns the client's events of this update.
    pub fn update(&mut self, input: PlayerInput) -> &[ClientEvent] {
        self.events.clear();
        if self.ended.is_some() {
            return &self.events;
        }
        let now = self.driver.now();
        if let Err(e) = self.driver.pump(now) {
            self.ended = Some(format!("the network failed: {e}"));
            return &self.events;
        }
        while let Some(event) = self.driver.poll_event() {
            if let DriverEvent::Datagram(d) = event {
                self.client.handle_datagram(now, d.from, &d.payload);
            }
        }
        if self.driver.connection().is_some_and(handshaking) {
            // The core starts once the connection layer is up, so its connect's round trip is the channel's.
            return &self.events;
        }
        self.client.set_input(input);
        self.client.handle_timeout(now);
        while let Some(t) = self.client.poll_transmit() {
            if let Err(e) = self.driver.send(now, t) {
                tracing::debug!("send failed: {e}");
            }
        }
        if let Err(e) = self.driver.pump(now) {
            self.ended = Some(format!("the network failed: {e}"));
        }
        let was_accepted = self.client.slot().is_some();
        while let Some(event) = self.client.poll_event() {
            match &event {
                ClientEvent::Rejected(reason) => {
                    self.ended = Some(format!(
                        "the server at {} refused to connect: {}",
                        self.server,
                        reject_text(*reason)
                    ));
                }
                ClientEvent::TimedOut if self.client.results().is_some() => {
                    self.ended = Some("the match is over and its server closed".into());
                }
                ClientEvent::TimedOut if was_accepted => {
                    self.ended = Some(format!("the server at {} went silent", self.server));
                }
                ClientEvent::TimedOut => {
                    self.ended = Some(format!(
                        "no answer from {} within {} s: is a dedicated server running there, with this passphrase? \
                         (a server ignores tokens from another passphrase)",
                        self.server,
                        self.timeout.as_secs()
                    ));
                }
                _ => {}
            }
            self.events.push(event);
        }
        &self.events
    }

    /// Where the session stands.
    pub fn status(&self) -> ShooterStatus {
        if let Some(reason) = &self.ended {
            return ShooterStatus::Ended(reason.clone());
        }
        match self.client.phase() {
            ClientPhase::Playing => ShooterStatus::Playing,
            ClientPhase::Connecting | ClientPhase::Loading => ShooterStatus::Connecting,
            ClientPhase::Rejected(r) => ShooterStatus::Ended(reject_text(r).to_owned()),
            ClientPhase::TimedOut => ShooterStatus::Ended("the server went silent".into()),
        }
    }

    /// Say goodbye to the server (the threads stop when the session is dropped).
    pub fn leave(&mut self) {
        self.client.disconnect();
        let now = self.driver.now();
        while let Some(t) = self.client.poll_transmit() {
            if self.driver.send(now, t).is_err() {
                break;
            }
        }
        if let Err(e) = self.driver.pump(now) {
            tracing::debug!("could not send the goodbye: {e}");
        }
    }
}

/// Pumps every bot until `stop` is set; a bot whose session ended is dropped.
fn run_bots(mut bots: Vec<UdpClient>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) && !bots.is_empty() {
        bots.retain_mut(|b| match b.pump() {
            Ok(_) => !matches!(
                b.client().phase(),
                ClientPhase::Rejected(_) | ClientPhase::TimedOut
            ),
            Err(e) => {
                tracing::debug!("a bot stopped: {e}");
                false
            }
        });
        std::thread::sleep(BOT_IDLE);
    }
}

/// A reject reason in words.
fn reject_text(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::Full => "the match is full",
        RejectReason::BadToken => "the passphrase does not match the server's",
        RejectReason::Expired => "the connect token has expired",
        RejectReason::WrongMatch => "the token names another match",
        RejectReason::MatchOver => "the match is over",
    }
}
