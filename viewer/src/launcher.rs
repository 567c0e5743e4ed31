//! How the app turns a validated start-screen form into a running session.
//!
//! The app owns no protocol: it asks a [`SessionLauncher`] — implemented over physync-host's and
//! physync-guest's session cores — for a [`SessionHandle`]. A viewer built without a launcher says so in the
//! window instead of pretending to host or join.
//!
//! A launcher over the real cores opens the socket in `host`/`join` (socket errors become
//! [`LaunchError::Socket`]) and returns a handle that owns the core, its driver and the engine world. The
//! handle's [`SessionHandle::update`] pumps the driver up to `now`, then refreshes the body, avatar, player
//! and link views from the world's render poses and the core's counters; grab/move/release/add-bot calls
//! become the core's local inputs. Failures after the start (no answer within the timeout, a full session,
//! a version mismatch, the host leaving) are reported as [`crate::session::SessionStatus::Ended`].

use std::net::SocketAddr;

use thiserror::Error;

use crate::scene_choice::SceneChoice;
use crate::session::SessionHandle;

/// What the start screen's Host form asks for, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// UDP port to listen on (checked free when the form was submitted).
    pub port: u16,
    /// The scene to simulate.
    pub scene: SceneChoice,
    /// Players allowed in the session, the host included.
    pub max_players: u8,
}

/// What the start screen's Join form asks for, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinConfig {
    /// The host's address.
    pub address: SocketAddr,
}

/// Why a session could not be started. Failures that happen later (no answer within the timeout, a full
/// session, a version mismatch) arrive through [`crate::session::SessionStatus::Ended`] instead.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LaunchError {
    /// This viewer was built without the session cores.
    #[error(
        "{0} is not available in this build of the viewer: it is not wired to the session cores yet"
    )]
    NotAvailable(&'static str),
    /// The socket could not be opened.
    #[error("could not open the network socket: {0}")]
    Socket(String),
}

/// Starts real sessions for the app.
pub trait SessionLauncher {
    /// Start hosting a session.
    fn host(&mut self, config: &HostConfig) -> Result<Box<dyn SessionHandle>, LaunchError>;
    /// Start joining a session; the handle reports [`crate::session::SessionStatus::Connecting`] until the
    /// host accepts.
    fn join(&mut self, config: &JoinConfig) -> Result<Box<dyn SessionHandle>, LaunchError>;
}
