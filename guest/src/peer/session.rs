//! A joined guest's session: its world, its link to the host, the jitter buffer that plays the host's frames
//! (remote avatars and object updates together) on this guest's clock.

use std::time::Duration;

use physync_codec::{CodecError, ObjectState, StateRevisions};
use physync_engine::link::{LinkError, Outgoing, StateLink, TimedAvatar};
use physync_engine::session::{FrameJitterBuffer, PlayerControls, RateMeter, SceneSetup, Upcoming};
use physync_engine::world::World;
use physync_engine::world::authority::{Direction, PlayerIndex, Verdict};
use physync_engine::world::avatar::{Hand, MAX_PLAYERS};
use physync_engine::world::scene::SceneSpec;

use super::config::GuestConfig;
use super::stats::{GuestCounters, GuestLinkReport};

/// Steps run at most per call; a guest further behind skips the rest rather than spiral.
const MAX_CATCH_UP_STEPS: u32 = 10;

/// The joined part of a guest. Local input goes through [`PlayerControls`].
pub struct GuestSession {
    player: PlayerIndex,
    setup: SceneSetup,
    world: World,
    link: StateLink,
    jitter: FrameJitterBuffer,
    roster: u16,
    /// Per-frame buffers, reused: object updates due and coming, wire states, priorities, remote avatars.
    due: Vec<(u16, ObjectState)>,
    upcoming: Vec<Upcoming>,
    states: Vec<ObjectState>,
    priorities: Vec<f32>,
    remote: Vec<TimedAvatar>,
    /// Which wire states changed, noted once a frame for the link.
    revisions: StateRevisions<ObjectState>,
    step: Duration,
    next_step: Duration,
    up: RateMeter,
    down: RateMeter,
    counters: GuestCounters,
}

impl GuestSession {
    /// Builds the host's scene as player `player`, stepping from `now`.
    pub(crate) fn new(
        config: &GuestConfig,
        player: PlayerIndex,
        setup: SceneSetup,
        scene: SceneSpec,
        now: Duration,
    ) -> Result<Self, LinkError> {
        let world_config = physync_engine::world::WorldConfig {
            step_hz: u32::from(setup.step_hz),
            local_player: player,
            ..config.world
        };
        let world = World::new(world_config, &scene);
        let world_config = *world.config();
        let mut link = config.link;
        link.codec.max_objects = world.object_count() as u16;
        link.state.quant = world_config.quant;
        link.send_hz = u32::from(setup.send_hz);
        Ok(Self {
            player,
            setup,
            link: StateLink::new(link)?,
            jitter: FrameJitterBuffer::configured(
                config.jitter_delay,
                config.adaptive_jitter_delay,
                u32::from(setup.step_hz),
                world_config.quant,
            ),
            world,
            roster: 1 | (1 << player),
            due: Vec::new(),
            upcoming: Vec::new(),
            states: Vec::new(),
            priorities: Vec::new(),
            remote: Vec::new(),
            revisions: StateRevisions::new(),
            step: Duration::from_secs(1) / u32::from(setup.step_hz),
            next_step: now,
            up: RateMeter::new(),
            down: RateMeter::new(),
            counters: GuestCounters::default(),
        })
    }

    /// The local world, for rendering and inspection (also [`PlayerControls::world`]).
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The player slot the host gave this guest (also [`PlayerControls::player`]).
    pub fn player(&self) -> PlayerIndex {
        self.player
    }

    /// The scene and rates the host set.
    pub fn setup(&self) -> SceneSetup {
        self.setup
    }

    /// Players in the session, bit `i` for player `i` (the host's latest roster).
    pub fn roster(&self) -> u16 {
        self.roster
    }

    /// Players in the session, by index.
    pub fn players(&self) -> Vec<PlayerIndex> {
        (0..MAX_PLAYERS as u8)
            .filter(|p| self.roster & (1 << p) != 0)
            .collect()
    }

    /// What the host's updates did here.
    pub fn counters(&self) -> &GuestCounters {
        &self.counters
    }

    /// The link to the host: traffic both ways, round trip, loss.
    pub fn link_report(&self, now: Duration) -> GuestLinkReport {
        let stats = self.link.stats();
        GuestLinkReport {
            kbps_up: self.up.kbps(),
            kbps_down: self.down.kbps(),
            avg_kbps_up: self.up.average_kbps(now),
            avg_kbps_down: self.down.average_kbps(now),
            rtt_ms: stats.rtt.map(|d| d.as_secs_f64() * 1000.0),
            loss: stats.loss,
            playout_ms: self.jitter.delay().as_secs_f64() * 1000.0,
        }
    }

    /// Advances the packet sequence of the link to the host by `n` (see [`StateLink::skip_sequences`]): long-session
    /// tests reach the sequence-space edges of a 30-minute session in seconds.
    pub fn skip_link_sequences(&mut self, n: u16) {
        self.link.skip_sequences(n);
    }

    /// The stale objects the link to the host forgot (see [`physync_engine::link::LinkStats::stale_forgotten`]).
    pub fn stale_forgotten(&self) -> u64 {
        self.link.stats().stale_forgotten
    }

    /// The play-out delay of the host's frames.
    pub fn jitter_delay(&self) -> Duration {
        self.jitter.delay()
    }

    pub(crate) fn next_step(&self) -> Duration {
        self.next_step
    }

    pub(crate) fn record_up(&mut self, now: Duration, bytes: usize) {
        self.up.record(now, bytes);
    }

    /// Takes the host's roster: players gone drop what they held (the host's updates follow with the objects'
    /// new authority) and leave the jitter buffer.
    pub(crate) fn set_roster(&mut self, players: u16) {
        let gone = self.roster & !players;
        for p in 0..MAX_PLAYERS as u8 {
            if gone & (1 << p) != 0 && p != self.player {
                self.jitter.remove(p);
                for hand in Hand::BOTH {
                    self.world.release(p, hand);
                }
            }
        }
        self.roster = players | (1 << self.player);
    }

    /// Decodes a state packet from the host into the jitter buffer: its object updates and the avatars beside
    /// them are played together, a jitter delay later, on this guest's clock.
    pub(crate) fn receive(&mut self, now: Duration, bytes: &[u8]) -> Result<(), LinkError> {
        self.down.record(now, bytes.len());
        let update = self.link.receive(now, bytes)?;
        let count = self.world.object_count();
        if update
            .objects
            .iter()
            .chain(&update.overtaken.objects)
            .any(|&(id, _)| usize::from(id) >= count)
        {
            return Err(LinkError::Codec(CodecError::Invalid { field: "object id" }));
        }
        let me = self.player;
        self.remote.clear();
        let roster = self.roster;
        let remote = |a: &&TimedAvatar| a.state.player != me && roster & (1 << a.state.player) != 0;
        self.remote.extend(update.avatars.iter().filter(remote));
        self.jitter
            .push(now, update.frame, &self.remote, &update.objects);
        self.remote.clear();
        self.remote
            .extend(update.overtaken.avatars.iter().filter(remote));
        self.jitter
            .push_overtaken(now, update.frame, &self.remote, &update.overtaken.objects);
        Ok(())
    }

    /// Plays the host's frames due at `now`: remote avatars first (hands open or close), then the object updates
    /// of the same frames, each judged per the rules (host to guest); then the next update the buffer holds for
    /// each remote object leads it along its sender's path.
    fn play_remote_frames(&mut self, now: Duration) {
        let me = self.player;
        for p in 0..MAX_PLAYERS as u8 {
            if p == me {
                continue;
            }
            if let Some(avatar) = self.jitter.sample(now, p) {
                self.world.apply_avatar_state(&avatar);
            }
        }
        self.due.clear();
        self.jitter.pop_objects(now, &mut self.due);
        for (id, state) in &self.due {
            let ours = self.world.authority(*id).view.authority == me;
            match self
                .world
                .receive_object_state(*id, Direction::HostToGuest { guest: me }, state)
            {
                Ok(Verdict::Accept) => {
                    self.counters.accepted += 1;
                    if ours && state.authority != me {
                        self.counters.corrections += 1;
                    }
                }
                Ok(Verdict::Confirm) => self.counters.confirmed += 1,
                Ok(Verdict::Reject) | Err(_) => self.counters.rejected += 1,
            }
        }
        self.jitter
            .upcoming_objects(now + self.step, self.step, &mut self.upcoming);
        for u in &self.upcoming {
            self.world.lead_into(u.id, &u.state, u.steps);
        }
    }

    /// Runs the fixed steps due by `now` (remote avatars played from the jitter buffer before each) and returns
    /// the state packets built.
    pub(crate) fn run_until(&mut self, now: Duration) -> Vec<Vec<u8>> {
        let mut packets = Vec::new();
        let mut steps = 0;
        while self.next_step <= now {
            if steps == MAX_CATCH_UP_STEPS {
                self.next_step = now + self.step;
                break;
            }
            let at = self.next_step;
            if let Some(p) = self.step_once(at) {
                packets.push(p);
            }
            self.next_step += self.step;
            steps += 1;
        }
        self.up.tick(now);
        self.down.tick(now);
        packets
    }

    fn step_once(&mut self, now: Duration) -> Option<Vec<u8>> {
        let me = self.player;
        self.play_remote_frames(now);
        self.world.step();
        self.world.object_states_into(&mut self.states);
        self.world.priorities_into(&mut self.priorities);
        let avatars = [TimedAvatar::new(
            self.world.avatar_state(me),
            Duration::ZERO,
        )];
        let out = Outgoing {
            frame: self.world.frame(),
            objects: &self.states,
            revisions: Some(self.revisions.note(&self.states)),
            priorities: &self.priorities,
            avatars: &avatars,
        };
        match self.link.build_packet(now, &out) {
            Ok(Some(packet)) => {
                self.up.record(now, packet.bytes.len());
                Some(packet.bytes)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(%e, "state packet not built");
                None
            }
        }
    }
}

impl PlayerControls for GuestSession {
    fn world(&self) -> &World {
        GuestSession::world(self)
    }

    fn player(&self) -> PlayerIndex {
        GuestSession::player(self)
    }

    fn input_world(&mut self) -> &mut World {
        &mut self.world
    }
}
