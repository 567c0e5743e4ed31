//! How the app turns a validated start-screen form into a running session.
//!
//! The app owns no protocol: it asks a [`SessionLauncher`] for a [`SessionHandle`]. [`CoreLauncher`] is the
//! real one: Host builds physync-host's `PeerHost` over a laminar UDP socket bound to `0.0.0.0:port`, Join
//! builds physync-guest's `PeerGuest` over a socket on a free port and starts asking the host in. Socket
//! errors (a port in use) come back as [`LaunchError::Socket`] at once; what happens later (no answer within
//! the timeout, a full session, a version mismatch, the host leaving) arrives as
//! [`crate::session::SessionStatus::Ended`].

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use physync_engine::session::udp::{bind_peer_guest, bind_peer_host};
use physync_engine::transport::DriverConfig;
use physync_engine::world::scene::SceneSpec;
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::PeerHost;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::live::LiveSession;
use crate::session::SessionHandle;

/// What the start screen's Host form asks for, already validated.
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    /// UDP port to listen on (0 lets the system pick one).
    pub port: u16,
    /// The scene to simulate (a demo scene or a loaded scene file); guests download it at join.
    pub scene: SceneSpec,
    /// Players allowed in the session, the host included.
    pub max_players: u8,
    /// The code a guest must give to join (`physync-guest --join-code`), or none for an open session.
    pub join_code: Option<String>,
}

/// What the start screen's Join form asks for, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinConfig {
    /// The host's address.
    pub address: SocketAddr,
    /// The join code the host shows (`physync-host --join-code`), if it asks for one.
    pub join_code: Option<String>,
}

/// Why a session could not be started. Failures that happen later arrive through
/// [`crate::session::SessionStatus::Ended`] instead.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LaunchError {
    /// The socket could not be opened.
    #[error("could not open the network socket: {0}")]
    Socket(String),
    /// The host core refused the settings.
    #[error("the session cannot be set up: {0}")]
    Config(String),
    /// The thread that runs the session could not be started.
    #[error("could not start the session thread: {0}")]
    Thread(String),
}

/// Starts real sessions for the app.
pub trait SessionLauncher {
    /// Start hosting a session.
    fn host(&mut self, config: &HostConfig) -> Result<Box<dyn SessionHandle>, LaunchError>;
    /// Start joining a session; the handle reports [`crate::session::SessionStatus::Connecting`] until the
    /// host accepts.
    fn join(&mut self, config: &JoinConfig) -> Result<Box<dyn SessionHandle>, LaunchError>;
}

/// The launcher over the real host and guest cores.
#[derive(Debug, Clone)]
pub struct CoreLauncher {
    rng: ChaCha8Rng,
    join_timeout: Option<Duration>,
}

impl CoreLauncher {
    /// A launcher whose join nonces and bot seeds come from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            join_timeout: None,
        }
    }

    /// A launcher seeded from the system clock, so two viewers on one machine pick different nonces.
    pub fn from_clock() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self::new(nanos ^ (u64::from(std::process::id()) << 32))
    }

    /// Give up joining (and on a silent host) after `timeout` instead of the guest core's default.
    pub fn with_join_timeout(mut self, timeout: Duration) -> Self {
        self.join_timeout = Some(timeout);
        self
    }

    fn driver_config(&mut self) -> DriverConfig {
        DriverConfig {
            seed: self.rng.random(),
            ..DriverConfig::default()
        }
    }
}

impl SessionLauncher for CoreLauncher {
    fn host(&mut self, config: &HostConfig) -> Result<Box<dyn SessionHandle>, LaunchError> {
        let mut host_config = physync_host::HostConfig::new(config.scene.clone());
        host_config.max_players = config.max_players;
        let core = PeerHost::new(host_config).map_err(|e| LaunchError::Config(e.to_string()))?;
        let driver = bind_peer_host(
            (Ipv4Addr::UNSPECIFIED, config.port),
            self.driver_config(),
            config.join_code.clone(),
        )
        .map_err(|e| LaunchError::Socket(format!("UDP port {}: {e}", config.port)))?;
        let mut title = format!(
            "Hosting '{}' on UDP port {} — up to {} players",
            config.scene.name,
            driver.local_addr().port(),
            config.max_players
        );
        if let Some(code) = &config.join_code {
            title.push_str(&format!(" — join code {code}"));
        }
        let session = LiveSession::new(core, driver, title, self.rng.random())
            .map_err(|e| LaunchError::Thread(e.to_string()))?;
        Ok(Box::new(session))
    }

    fn join(&mut self, config: &JoinConfig) -> Result<Box<dyn SessionHandle>, LaunchError> {
        let bind: SocketAddr = if config.address.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let driver = bind_peer_guest(
            bind,
            self.driver_config(),
            config.address,
            config.join_code.clone(),
        )
        .map_err(|e| LaunchError::Socket(e.to_string()))?;
        let mut guest_config = GuestConfig::new(config.address, self.rng.random());
        if let Some(timeout) = self.join_timeout {
            guest_config.timeout = timeout;
        }
        let title = format!("Guest of {}", config.address);
        let session = LiveSession::new(
            PeerGuest::new(guest_config),
            driver,
            title,
            self.rng.random(),
        )
        .map_err(|e| LaunchError::Thread(e.to_string()))?;
        Ok(Box::new(session))
    }
}
