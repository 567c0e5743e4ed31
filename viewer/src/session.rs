//! What the viewer needs from a running session, and nothing more.
//!
//! The viewer holds no protocol logic: a [`SessionHandle`] is implemented over the real host or guest core
//! (which owns the sockets, the engine world and the rules), and the viewer only reads render poses and
//! statistics from it and forwards the local player's intentions to it.

use std::fmt;

use std::sync::Arc;

use egui::Color32;
use nalgebra::{Isometry3, Point3, UnitQuaternion, Vector3};
pub use physync_engine::world::shape::Tessellation;
pub use physync_guest::bots::BotKind;

/// A player's index in the session (the host is player 0).
pub type PlayerId = u8;

/// A simulated body's stable id within the session.
pub type BodyId = u32;

/// One dynamic body as it should be drawn this frame.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyView {
    /// Stable id, used to grab it.
    pub id: BodyId,
    /// Render position (smoothed pose, not necessarily the raw physics pose).
    pub position: Point3<f32>,
    /// Render orientation.
    pub rotation: UnitQuaternion<f32>,
    /// Half the size of the box around the body's shape along its local axes, metres (picking uses it).
    pub half_extents: Vector3<f32>,
    /// The body's shape as triangles in its own frame; `None` draws the box of `half_extents`.
    pub mesh: Option<Arc<Tessellation>>,
    /// The colour the game's tag gives it, shown while no player has authority.
    pub tag_color: Option<Color32>,
    /// The player whose simulation is authoritative for it; `None` is default authority.
    pub authority: Option<PlayerId>,
    /// The player holding it, if anyone.
    pub owner: Option<PlayerId>,
}

/// A piece of static level geometry as it should be drawn (floors are drawn as the checkerboard instead).
#[derive(Debug, Clone, PartialEq)]
pub struct LevelView {
    /// Where it stands.
    pub pose: Isometry3<f32>,
    /// Its triangles in its own frame.
    pub mesh: Arc<Tessellation>,
    /// Its colour.
    pub color: Color32,
}

/// A player's avatar: a head and two hands, each a pose whose local +Z is where it points.
#[derive(Debug, Clone, PartialEq)]
pub struct AvatarView {
    /// Whose avatar it is (chooses its colour).
    pub player: PlayerId,
    /// Head pose; local +Z is the view direction.
    pub head: Isometry3<f32>,
    /// Left and right hand poses.
    pub hands: [Isometry3<f32>; 2],
}

/// One entry of the player list.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerView {
    /// The player's index.
    pub id: PlayerId,
    /// Display name.
    pub name: String,
    /// Whether this is the player at this window.
    pub is_local: bool,
    /// Set when the player is a scripted bot.
    pub bot: Option<BotKind>,
}

/// Traffic and sync figures of one link (host↔guest) over the last second.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkStats {
    /// The player at the other end of the link.
    pub peer: PlayerId,
    /// Kilobits per second sent to the peer.
    pub kbps_up: f64,
    /// Kilobits per second received from the peer.
    pub kbps_down: f64,
    /// Smoothed round-trip time, milliseconds.
    pub rtt_ms: f64,
    /// Packets lost, percent.
    pub loss_percent: f64,
    /// How far behind the fastest arrival the peer's frames play, milliseconds (it follows the link's jitter).
    pub playout_ms: f64,
    /// Authority conflicts resolved per second.
    pub conflicts_per_s: f64,
    /// Corrections applied to local state per second.
    pub corrections_per_s: f64,
}

/// Link-conditioner settings applied to this peer's outgoing and incoming traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConditionerSettings {
    /// Added one-way latency, milliseconds.
    pub latency_ms: u32,
    /// Random extra latency up to this many milliseconds.
    pub jitter_ms: u32,
    /// Probability of dropping a datagram, percent.
    pub loss_percent: f32,
    /// Probability of delivering a datagram twice, percent.
    pub duplicate_percent: f32,
}

impl Default for ConditionerSettings {
    fn default() -> Self {
        Self {
            latency_ms: 0,
            jitter_ms: 0,
            loss_percent: 0.0,
            duplicate_percent: 0.0,
        }
    }
}

/// What kind of session a handle drives; the session screen labels itself from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    /// This window hosts the session.
    Host,
    /// This window is a guest of a remote host.
    Guest,
}

/// Whether the session still runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStatus {
    /// Waiting for the host to accept this guest.
    Connecting,
    /// Running; keep drawing.
    Running,
    /// Over, with the reason to show on the start screen (host left, timed out, kicked…).
    Ended(String),
}

/// Why a request to the session was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// The cube is held by another player (no snatching from hands).
    HeldByOther(PlayerId),
    /// The session has no room for another player.
    Full,
    /// The host has not let this guest in yet.
    NotJoined,
    /// No cube has this id.
    NoSuchCube(BodyId),
    /// A socket could not be opened or used.
    Network(String),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::HeldByOther(p) => write!(f, "that cube is held by player {p}"),
            SessionError::Full => write!(f, "the session is full"),
            SessionError::NotJoined => {
                write!(f, "not in the session yet: the host has not answered")
            }
            SessionError::NoSuchCube(id) => write!(f, "there is no cube {id}"),
            SessionError::Network(e) => write!(f, "network error: {e}"),
        }
    }
}

impl std::error::Error for SessionError {}

/// The viewer's window onto a running session.
///
/// Implementations pump the real host/guest core in [`SessionHandle::update`] and refresh the views the
/// getters return; the getters are cheap and called every frame. A session over UDP runs on its driver's wall
/// clock, so `update` takes no time from the screen.
pub trait SessionHandle {
    /// Host or guest.
    fn kind(&self) -> SessionKind;
    /// A one-line description for the window (scene, address…).
    fn title(&self) -> String;
    /// Advance the session to the present: receive, step, send (and the same for the bots it runs).
    fn update(&mut self);
    /// Whether the session goes on.
    fn status(&self) -> SessionStatus;
    /// The local player's index (0, the host's, until a guest is let in).
    fn local_player(&self) -> PlayerId;
    /// Every dynamic body with its render pose, authority and owner.
    fn bodies(&self) -> &[BodyView];
    /// The static level geometry to draw besides the floor.
    fn level(&self) -> &[LevelView] {
        &[]
    }
    /// Every player's avatar, the local one included.
    fn avatars(&self) -> &[AvatarView];
    /// Everyone in the session.
    fn players(&self) -> &[PlayerView];
    /// One entry per link this peer has (a guest has one, the host one per guest).
    fn link_stats(&self) -> Vec<LinkStats>;
    /// Change the link conditioner on this peer's traffic.
    fn apply_conditioner(&mut self, settings: ConditionerSettings) -> Result<(), SessionError>;
    /// The local player grabs a body (takes ownership), effective on this frame.
    fn grab(&mut self, body: BodyId) -> Result<(), SessionError>;
    /// Move the held body's centre towards `target`.
    fn move_held(&mut self, target: Point3<f32>);
    /// Let go of the held body with the given linear velocity (zero to drop it, otherwise a throw).
    fn release(&mut self, velocity: Vector3<f32>);
    /// Add a scripted bot guest to the session.
    fn add_bot(&mut self, kind: BotKind) -> Result<(), SessionError>;
    /// Something that happened on its own since the last call (a bot refused by the host…), to show once.
    fn take_notice(&mut self) -> Option<String>;
    /// Leave the session (the host leaving ends it for every guest).
    fn leave(&mut self);
}
