//! A running session over UDP: a host or guest core ([`Role`]) on a [`LaminarDriver`], the bots this viewer
//! added, and the views the session screen draws.
//!
//! A pump thread drives the core and the bots on the wall clock (every core deadline, and at least every
//! [`MAX_PUMP_INTERVAL`]), so the session's timing and round trips do not depend on the window's frame rate.
//! Each frame the screen takes the lock briefly to refresh its views from the core's world and counters.
//!
//! The viewer decides nothing here: datagrams, deadlines and rules are the core's; local input goes through
//! the core's [`physync_engine::session::PlayerControls`] under the same lock, so the local player's moves land in the world, and on
//! the screen, on the frame they happen.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nalgebra::{Isometry3, Point3, UnitQuaternion, Vector3};
use physync_engine::session::RejectReason;
use physync_engine::session::udp::{MAX_PUMP_INTERVAL, pump_udp};
use physync_engine::transport::{LaminarDriver, LinkConfig};
use physync_engine::world::avatar::Hand;
use physync_engine::world::interaction::InteractionError;
use physync_engine::world::scene::ObjectId;
use physync_guest::cli::{leave_linger, leave_repeat};
use physync_guest::peer::EndReason;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::bot_guest::BotGuest;
use crate::count_rate::CountRate;
use crate::roles::Role;
use crate::session::{
    AvatarView, BodyId, BodyView, BotKind, ConditionerSettings, LevelView, LinkStats, PlayerId,
    PlayerView, SessionError, SessionHandle, SessionKind, SessionStatus,
};
use crate::world_view;

/// The hand the mouse drives.
pub const MOUSE_HAND: Hand = Hand::Right;
/// Fastest throw the mouse may give (m/s): a flick across the window stays on the floor's side of the
/// host's world bounds.
pub const MAX_THROW_SPEED: f32 = 12.0;
/// How far beyond the floor's edge the mouse may carry a cube (the host refuses positions 5 m beyond it).
const CARRY_MARGIN: f32 = 3.0;
/// Shortest pause of the pump thread, so a core that is behind does not starve the window of the lock.
const MIN_PUMP_PAUSE: Duration = Duration::from_micros(200);

/// What the pump thread and the window share.
struct Shared<R> {
    core: R,
    driver: LaminarDriver,
    bots: Vec<BotGuest>,
    failure: Option<String>,
    notice: Option<String>,
    /// Set on leaving: the thread pumps until then so the goodbyes leave, then stops.
    linger_until: Option<Instant>,
    /// While lingering: when the goodbyes are said again (see [`physync_guest::PeerGuest::repeat_leave`]), and how often.
    leave_repeat: Option<(Instant, Duration)>,
}

impl<R: Role> Shared<R> {
    /// One turn for the core and every bot; returns how long the thread may pause.
    fn pump(&mut self) -> Duration {
        if let Some((due, every)) = self.leave_repeat {
            let now = Instant::now();
            if now >= due {
                self.core.repeat_leave();
                for bot in &mut self.bots {
                    bot.repeat_leave();
                }
                self.leave_repeat = Some((now + every, every));
            }
        }
        let lingering = self.linger_until.is_some();
        let wait = match pump_udp(&mut self.driver, &mut self.core, |_, _| {}) {
            Ok(wait) => wait,
            Err(e) => {
                if self.linger_until.is_none() {
                    self.failure = Some(format!("network error: {e}"));
                }
                MAX_PUMP_INTERVAL
            }
        };
        let mut notice = None;
        self.bots.retain_mut(|bot| {
            if let Err(e) = bot.pump() {
                notice = Some(format!("the {} bot lost its socket: {e}", bot.kind()));
                return false;
            }
            match bot.end_reason() {
                None => true,
                Some(EndReason::Left) if lingering => true,
                Some(EndReason::Rejected(RejectReason::Full)) => {
                    notice = Some(format!(
                        "the {} bot was refused: the session is full",
                        bot.kind()
                    ));
                    false
                }
                Some(reason) => {
                    notice = Some(format!(
                        "the {} bot's session ended: {reason:?}",
                        bot.kind()
                    ));
                    false
                }
            }
        });
        if notice.is_some() && self.linger_until.is_none() {
            self.notice = notice;
        }
        wait
    }

    /// Whether the thread should stop: the lingering after a goodbye is over, or the socket failed.
    fn finished(&self) -> bool {
        self.failure.is_some() || self.linger_until.is_some_and(|t| Instant::now() >= t)
    }
}

/// The error for a request after the pump thread died holding the lock.
fn thread_stopped() -> SessionError {
    SessionError::Network("the session thread stopped".into())
}

/// The pump thread's loop.
fn pump_thread<R: Role>(shared: Arc<Mutex<Shared<R>>>) {
    loop {
        let wait = {
            let Ok(mut s) = shared.lock() else {
                return;
            };
            if s.finished() {
                return;
            }
            s.pump()
        };
        std::thread::sleep(wait.clamp(MIN_PUMP_PAUSE, MAX_PUMP_INTERVAL));
    }
}

/// A host or guest core running over UDP, with its bots. See the module documentation.
pub struct LiveSession<R: Role> {
    shared: Arc<Mutex<Shared<R>>>,
    local_addr: SocketAddr,
    title: String,
    rng: ChaCha8Rng,
    bodies: Vec<BodyView>,
    shapes: world_view::ShapeCache,
    avatars: Vec<AvatarView>,
    players: Vec<PlayerView>,
    links: Vec<LinkStats>,
    rates: BTreeMap<PlayerId, [CountRate; 2]>,
    status: SessionStatus,
    local: Option<PlayerId>,
    notice: Option<String>,
    carry_limit: Option<f32>,
    left: bool,
}

impl<R: Role + Send + 'static> LiveSession<R> {
    /// Wraps a core and the driver it talks through and starts pumping them; `seed` seeds the bots this
    /// session adds. Fails only when the system cannot start the pump thread.
    pub fn new(core: R, driver: LaminarDriver, title: String, seed: u64) -> std::io::Result<Self> {
        let local_addr = driver.local_addr();
        let shared = Arc::new(Mutex::new(Shared {
            core,
            driver,
            bots: Vec::new(),
            failure: None,
            notice: None,
            linger_until: None,
            leave_repeat: None,
        }));
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("physync-session".into())
            .spawn(move || pump_thread(thread_shared))?;
        let mut session = Self {
            shared,
            local_addr,
            title,
            rng: ChaCha8Rng::seed_from_u64(seed),
            bodies: Vec::new(),
            shapes: world_view::ShapeCache::default(),
            avatars: Vec::new(),
            players: Vec::new(),
            links: Vec::new(),
            rates: BTreeMap::new(),
            status: SessionStatus::Connecting,
            local: None,
            notice: None,
            carry_limit: None,
            left: false,
        };
        session.update();
        Ok(session)
    }
}

impl<R: Role> LiveSession<R> {
    /// Where this peer's socket is bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn lock(&self) -> Option<MutexGuard<'_, Shared<R>>> {
        self.shared.lock().ok()
    }

    /// Rebuilds the views from the core's world and counters.
    fn refresh(&mut self) {
        let Some(mut guard) = self.shared.lock().ok() else {
            self.status = SessionStatus::Ended(thread_stopped().to_string());
            return;
        };
        let s = &mut *guard;
        if let Some(n) = s.notice.take() {
            self.notice = Some(n);
        }
        self.status = match &s.failure {
            Some(f) => SessionStatus::Ended(f.clone()),
            None => s.core.status(),
        };
        self.local = s.core.local_player();
        let now = s.driver.now();
        let Some(world) = s.core.world() else {
            self.bodies.clear();
            self.avatars.clear();
            self.players.clear();
            self.links.clear();
            return;
        };
        if !self.shapes.fits(world.object_count()) {
            self.shapes = world_view::ShapeCache::new(world.scene());
        }
        self.bodies = world_view::bodies(world, &self.shapes);
        let ids = s.core.player_ids();
        self.avatars = world_view::avatars(world, &ids);
        let local = self.local;
        self.players = ids
            .iter()
            .map(|&id| {
                let bot = s
                    .bots
                    .iter()
                    .find(|b| b.player() == Some(id))
                    .map(BotGuest::kind);
                let name = match (id, bot) {
                    (0, _) => "host",
                    (_, Some(_)) => "bot",
                    _ => "guest",
                };
                PlayerView {
                    id,
                    name: name.into(),
                    is_local: Some(id) == local,
                    bot,
                }
            })
            .collect();
        if self.carry_limit.is_none() {
            self.carry_limit = s
                .core
                .scene()
                .map(|scene| scene.floor_half_extent() + CARRY_MARGIN);
        }
        let figures = s.core.link_figures();
        self.rates
            .retain(|peer, _| figures.iter().any(|f| f.peer == *peer));
        self.links = figures
            .iter()
            .map(|f| {
                let [conflicts, corrections] = self.rates.entry(f.peer).or_default();
                LinkStats {
                    peer: f.peer,
                    kbps_up: f.kbps_up,
                    kbps_down: f.kbps_down,
                    rtt_ms: f.rtt_ms.unwrap_or(0.0),
                    loss_percent: f.loss * 100.0,
                    playout_ms: f.playout_ms,
                    conflicts_per_s: conflicts.update(now, f.conflicts),
                    corrections_per_s: corrections.update(now, f.corrections),
                }
            })
            .collect();
    }

    /// Says goodbye (the core and every bot); the pump thread lingers a few round trips, saying the goodbyes again
    /// every half round trip so that one gets through loss, then stops.
    fn leave_all(&mut self) {
        if self.left {
            return;
        }
        self.left = true;
        if let Some(mut s) = self.lock() {
            s.core.leave();
            for bot in &mut s.bots {
                bot.leave();
            }
            let rtt = s
                .core
                .link_figures()
                .first()
                .and_then(|f| f.rtt_ms)
                .map(|ms| Duration::from_secs_f64(ms / 1000.0));
            let now = Instant::now();
            s.linger_until = Some(now + leave_linger(rtt));
            let every = leave_repeat(rtt);
            s.leave_repeat = Some((now + every, every));
        }
    }
}

/// The conditioner settings as the driver takes them: `None` when every setting is zero.
pub fn link_config(settings: ConditionerSettings) -> Option<LinkConfig> {
    if settings == ConditionerSettings::default() {
        return None;
    }
    let latency = Duration::from_millis(u64::from(settings.latency_ms));
    let jitter = Duration::from_millis(u64::from(settings.jitter_ms));
    Some(LinkConfig {
        latency,
        jitter,
        loss: f64::from(settings.loss_percent.clamp(0.0, 100.0)) / 100.0,
        duplicate: f64::from(settings.duplicate_percent.clamp(0.0, 100.0)) / 100.0,
        retransmit_timeout: (latency * 2 + jitter * 4).max(Duration::from_millis(10)),
        ..LinkConfig::ideal()
    })
}

impl<R: Role> SessionHandle for LiveSession<R> {
    fn kind(&self) -> SessionKind {
        R::KIND
    }

    fn title(&self) -> String {
        self.title.clone()
    }

    fn update(&mut self) {
        if !self.left {
            self.refresh();
        }
    }

    fn status(&self) -> SessionStatus {
        self.status.clone()
    }

    fn local_player(&self) -> PlayerId {
        self.local.unwrap_or_default()
    }

    fn bodies(&self) -> &[BodyView] {
        &self.bodies
    }

    fn level(&self) -> &[LevelView] {
        self.shapes.level()
    }

    fn avatars(&self) -> &[AvatarView] {
        &self.avatars
    }

    fn players(&self) -> &[PlayerView] {
        &self.players
    }

    fn link_stats(&self) -> Vec<LinkStats> {
        self.links.clone()
    }

    fn apply_conditioner(&mut self, settings: ConditionerSettings) -> Result<(), SessionError> {
        let mut s = self.lock().ok_or_else(thread_stopped)?;
        s.driver
            .set_conditioner(link_config(settings))
            .map_err(|e| SessionError::Network(e.to_string()))
    }

    fn grab(&mut self, body: BodyId) -> Result<(), SessionError> {
        {
            let mut s = self.lock().ok_or_else(thread_stopped)?;
            let controls = s.core.controls().ok_or(SessionError::NotJoined)?;
            let id = ObjectId::try_from(body)
                .ok()
                .filter(|&id| usize::from(id) < controls.world().object_count())
                .ok_or(SessionError::NoSuchCube(body))?;
            let me = controls.player();
            if let Some(holder) = controls.world().holder(id)
                && holder.player != me
            {
                return Err(SessionError::HeldByOther(holder.player));
            }
            controls.release(MOUSE_HAND);
            let at = controls.world().physics_pose(id).translation;
            controls.set_hand_pose(
                MOUSE_HAND,
                Isometry3::from_parts(at, UnitQuaternion::identity()),
            );
            controls.grab(MOUSE_HAND, id).map_err(|e| match e {
                InteractionError::HeldByOther { by, .. } => SessionError::HeldByOther(by),
                InteractionError::NoSuchObject(_) | InteractionError::HandFull(_) => {
                    SessionError::NoSuchCube(body)
                }
                InteractionError::NoSuchPlayer(_) => SessionError::NotJoined,
            })?;
        }
        self.refresh();
        Ok(())
    }

    fn move_held(&mut self, target: Point3<f32>) {
        let limit = self.carry_limit.unwrap_or(f32::INFINITY);
        let held = {
            let Some(mut s) = self.lock() else {
                return;
            };
            let Some(controls) = s.core.controls() else {
                return;
            };
            let me = controls.player();
            let Some(grip) = controls.world().grip(me, MOUSE_HAND) else {
                return;
            };
            let half = controls.world().half_extents(grip.object);
            let target = Point3::new(
                target.x.clamp(-limit, limit),
                target.y.max(half.y),
                target.z.clamp(-limit, limit),
            );
            let pose = world_view::hand_pose_for(controls.world(), me, MOUSE_HAND, target);
            controls.set_hand_pose(MOUSE_HAND, pose);
            world_view::held_pose(controls.world(), me, MOUSE_HAND)
        };
        // The physics body follows on the core's next step; draw it where the hand has it now.
        if let Some((id, pose)) = held
            && let Some(view) = self.bodies.get_mut(usize::from(id))
        {
            view.position = Point3::from(pose.translation.vector);
            view.rotation = pose.rotation;
        }
    }

    fn release(&mut self, velocity: Vector3<f32>) {
        {
            let Some(mut s) = self.lock() else {
                return;
            };
            let Some(controls) = s.core.controls() else {
                return;
            };
            let speed = velocity.norm();
            let velocity = if speed > MAX_THROW_SPEED {
                velocity * (MAX_THROW_SPEED / speed)
            } else {
                velocity
            };
            controls.throw(MOUSE_HAND, velocity, Vector3::zeros());
        }
        self.refresh();
    }

    fn add_bot(&mut self, kind: BotKind) -> Result<(), SessionError> {
        let seed = self.rng.random();
        let mut s = self.lock().ok_or_else(thread_stopped)?;
        let waiting = s.bots.iter().filter(|b| b.player().is_none()).count();
        if let Some(max) = s.core.max_players()
            && s.core.player_ids().len() + waiting >= usize::from(max)
        {
            return Err(SessionError::Full);
        }
        let host = s.core.bot_target(self.local_addr);
        let bot =
            BotGuest::start(kind, host, seed).map_err(|e| SessionError::Network(e.to_string()))?;
        s.bots.push(bot);
        Ok(())
    }

    fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }

    fn leave(&mut self) {
        self.leave_all();
    }
}

impl<R: Role> Drop for LiveSession<R> {
    fn drop(&mut self) {
        self.leave_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditioner_settings_map_to_the_driver_link() {
        assert_eq!(link_config(ConditionerSettings::default()), None);
        let c = link_config(ConditionerSettings {
            latency_ms: 100,
            jitter_ms: 20,
            loss_percent: 5.0,
            duplicate_percent: 150.0,
        })
        .unwrap();
        assert_eq!(c.latency, Duration::from_millis(100));
        assert_eq!(c.jitter, Duration::from_millis(20));
        assert!((c.loss - 0.05).abs() < 1e-9);
        assert_eq!(c.duplicate, 1.0);
        assert_eq!(c.retransmit_timeout, Duration::from_millis(280));
        assert!(c.validate().is_ok());
    }
}
