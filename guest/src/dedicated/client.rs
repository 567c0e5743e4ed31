//! The shooter client's sans-IO core: connects with a token, loads the static match data, runs ahead of the
//! server by half the RTT plus the input buffer, sends each tick's input with the last five, predicts the local
//! player with the shared simulation and reconciles it against the server, interpolates remote players, steers
//! both jitter buffers by adding or skipping a tick, and predicts shots locally under client-local ids.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use nalgebra::{Point3, Vector3};
use physync_codec::{ReceivedPackets, StateConfig};
use physync_engine::connection::ConnectToken;
use physync_engine::shooter::hitbox::{PlayerHit, ShotRay, TargetPose};
use physync_engine::shooter::interpolation::InterpolatedPose;
use physync_engine::shooter::jitter::BufferMeterConfig;
use physync_engine::shooter::player::PlayerState;
use physync_engine::shooter::prediction::PredictionStats;
use physync_engine::shooter::ring::TickRing;
use physync_engine::shooter::{
    BufferKind, BufferMeter, ClientIdAllocator, ClientPredictor, CubePose, CubeTrack, EntityId,
    InputCommand, InterpolationConfig, PlayerId, PlayerInput, PredictionConfig, ReconcileOutcome,
    RemoteInterpolator, RemoteSample, Tick, TickAdjust, ViewTime, WorldGeometry, predict_hit,
};
use physync_engine::shooter_net::messages::ConnectRequest;
use physync_engine::shooter_net::snapshot::{MAX_BASELINE_AGE, MAX_SLOTS, decode_snapshot};
use physync_engine::shooter_net::wire::{read_any_packet, read_packet};
use physync_engine::shooter_net::{
    Accept, EventKind, MatchData, MatchDataAssembler, MatchPhase, MatchResults, Message,
    PacketKind, RejectReason, Roster, ScoreLine, ShotSeen, Snapshot, WireError,
};
use physync_engine::transport::{Delivery, Transmit};

/// Snapshots kept as baselines (the server names baselines at most this old).
const HELD_SNAPSHOTS: usize = MAX_BASELINE_AGE as usize + 1;
/// Most ticks one `handle_timeout` catches up.
const MAX_CATCH_UP_TICKS: u32 = 5;
/// Most extra interpolation delay the state-buffer meter may add, ticks.
const MAX_EXTRA_DELAY_TICKS: u32 = 6;
/// How often a stale roster is asked for.
const ROSTER_RETRY: Duration = Duration::from_millis(250);
/// The latest server tick a snapshot may name (over two years at 30 Hz): the client's own tick arithmetic stays
/// far from overflow whatever a hostile datagram says.
const MAX_SERVER_TICK: Tick = Tick::MAX / 2;

/// Settings of a shooter client.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The server's address.
    pub server: SocketAddr,
    /// The ticket: the connection layer presents it (the core only reads the server address from the config).
    pub token: ConnectToken,
    /// Interval between connect requests until accepted and loaded.
    pub connect_retry: Duration,
    /// No datagram from the server for this long ends the session; a client that had been accepted then starts
    /// a fresh one (see `reconnect_for`).
    pub timeout: Duration,
    /// How long after the server fell silent an accepted client keeps reconnecting with fresh state before it
    /// gives up (the server keeps a silent player's slot for its grace period, 15 s by default).
    pub reconnect_for: Duration,
    /// Prediction history and tolerances.
    pub prediction: PredictionConfig,
    /// Remote-player interpolation (100 ms by default).
    pub interpolation: InterpolationConfig,
    /// Steering of the server's input buffer for this client.
    pub input_meter: BufferMeterConfig,
    /// Steering of this client's snapshot buffer (its extra interpolation delay).
    pub state_meter: BufferMeterConfig,
    /// Ticks of input buffer the client aims to keep at the server, beyond half the RTT.
    pub input_buffer_ticks: u32,
    /// Previous inputs repeated in each input packet (5 in seed 000).
    pub redundancy: usize,
    /// Cube quantization (must match the server's).
    pub cubes: StateConfig,
}

impl ClientConfig {
    /// Defaults for `server` and `token`.
    pub fn new(server: SocketAddr, token: ConnectToken) -> Self {
        Self {
            server,
            token,
            connect_retry: Duration::from_millis(100),
            timeout: Duration::from_secs(3),
            reconnect_for: Duration::from_secs(12),
            prediction: PredictionConfig::default(),
            interpolation: InterpolationConfig::default(),
            input_meter: BufferMeterConfig::default(),
            state_meter: BufferMeterConfig {
                window: 60,
                low: 1.0,
                high: 4.0,
                max_variance: 3.0,
            },
            input_buffer_ticks: 2,
            redundancy: 5,
            cubes: StateConfig::default(),
        }
    }
}

/// Where the client's session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPhase {
    /// Sending connect requests.
    Connecting,
    /// Accepted; gathering static match data and the first snapshot.
    Loading,
    /// Predicting and sending inputs.
    Playing,
    /// The server refused the token.
    Rejected(RejectReason),
    /// The server went silent.
    TimedOut,
}

/// A shot the local player fired, predicted at once for effects; the server decides damage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictedShot {
    /// Client-local id of the effect.
    pub id: EntityId,
    /// The client tick it was fired at.
    pub tick: Tick,
    /// The ray.
    pub ray: ShotRay,
    /// Whom it appears to hit against the interpolated remote players (cosmetic).
    pub predicted_hit: Option<PlayerHit>,
}

/// What the application hears about.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// The server granted a slot.
    Accepted(PlayerId),
    /// Static data and the first snapshot arrived; prediction runs.
    Started,
    /// The match's phase changed.
    Phase(MatchPhase),
    /// A shot was predicted.
    Shot(PredictedShot),
    /// The server confirmed hits by the local player (draw a hit marker).
    HitConfirmed(u16),
    /// Another player fired (draw its tracer or muzzle flash); sent by the server, once per shot.
    RemoteShot {
        /// The server tick it was fired at.
        tick: Tick,
        /// The shot.
        shot: ShotSeen,
    },
    /// A player died (the kill feed).
    Kill(KillLine),
    /// The match ended with these results.
    Results(MatchResults),
    /// The server refused the connect.
    Rejected(RejectReason),
    /// The server went silent: the session starts over with fresh state and connects again.
    Reconnecting,
    /// The server went silent.
    TimedOut,
}

/// One line of the kill feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillLine {
    /// The server tick of the kill.
    pub tick: Tick,
    /// The killer, if a shot killed.
    pub killer: Option<PlayerId>,
    /// Who died.
    pub victim: PlayerId,
}

/// Lines the kill feed keeps.
const KILL_FEED_LINES: usize = 6;
/// Event ids remembered to drop the server's repeats.
const SEEN_EVENT_IDS: usize = 1024;
/// Most events queued for an application that does not poll them; beyond it the oldest go, counted in
/// [`ClientStats::dropped_events`], so memory stays bounded.
pub const MAX_QUEUED_EVENTS: usize = 1024;
/// Ticks a predicted shot waits for the server's word before it counts as never confirmed.
const SHOT_JUDGEMENT_TICKS: Tick = 90;

/// Counters of a client session.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ClientStats {
    /// Snapshots decoded.
    pub snapshots: u64,
    /// Snapshots naming a baseline no longer held.
    pub missing_baseline: u64,
    /// Datagrams that did not decode or were unexpected.
    pub malformed: u64,
    /// Input packets sent.
    pub inputs_sent: u64,
    /// Extra ticks run to push the input buffer up or drain the state buffer.
    pub added_ticks: u64,
    /// Ticks skipped.
    pub skipped_ticks: u64,
    /// Re-alignments of the client's clock to the server (start, falling behind, resynchronisation).
    pub realignments: u64,
    /// Shots predicted.
    pub shots_predicted: u64,
    /// Hits the server confirmed.
    pub hits_confirmed: u64,
    /// Other players' shots the server reported (each once, however often it was resent).
    pub remote_shots_seen: u64,
    /// Kills the server reported (each once).
    pub kills_seen: u64,
    /// Shot and kill events that arrived again and were dropped.
    pub repeated_events: u64,
    /// Own shots the client predicted as hits, once judged by the server (or given up on).
    pub predicted_hits: u64,
    /// Own shots predicted as hits that the server never resolved (their input came too late or the weapon
    /// state had diverged); counted in `predicted_hits` too.
    pub unjudged_hits: u64,
    /// Own shots predicted as hits after the server had already killed the local player (it learns of its
    /// death a round trip late): the server's word overrules them, and they are not counted in
    /// `predicted_hits`.
    pub overruled_hits: u64,
    /// Own shots the server judged hits.
    pub server_hits: u64,
    /// Own shots predicted as hits that the server judged hits on the same player.
    pub agreed_hits: u64,
    /// Sessions started over after the server fell silent.
    pub reconnects: u64,
    /// Snapshots refused because their tick lies beyond any match's length (a hostile or broken server).
    pub impossible_ticks: u64,
    /// Events dropped, oldest first, because the application let more than [`MAX_QUEUED_EVENTS`] pile up.
    pub dropped_events: u64,
    /// Smoothed round-trip time, seconds.
    pub rtt_s: f64,
    /// The predictor's counters (mispredictions, largest correction).
    pub prediction: PredictionStats,
}

/// Events waiting for the application, at most [`MAX_QUEUED_EVENTS`].
#[derive(Default)]
struct EventQueue {
    queue: VecDeque<ClientEvent>,
    dropped: u64,
}

impl EventQueue {
    fn push(&mut self, event: ClientEvent) {
        if self.queue.len() == MAX_QUEUED_EVENTS {
            self.queue.pop_front();
            self.dropped += 1;
        }
        self.queue.push_back(event);
    }
}

/// The shooter client, sans IO.
pub struct ShooterClient {
    config: ClientConfig,
    phase: ClientPhase,
    last_request_at: Option<Duration>,
    first_request_at: Option<Duration>,
    assembler: Option<MatchDataAssembler>,
    accept: Option<Accept>,
    data: Option<MatchData>,
    geometry: Option<WorldGeometry>,
    cubes: Vec<CubeTrack>,
    tick_duration: Duration,
    snapshots: VecDeque<Snapshot>,
    received: ReceivedPackets,
    latest: Option<(Tick, Duration)>,
    predictor: Option<ClientPredictor>,
    views: TickRing<ViewTime>,
    sent_at: TickRing<Duration>,
    input: PlayerInput,
    next_tick_at: Duration,
    rtt: Option<Duration>,
    remotes: Vec<Option<RemoteInterpolator>>,
    input_meter: BufferMeter,
    state_meter: BufferMeter,
    extra_delay_ticks: u32,
    input_fill: u8,
    ids: ClientIdAllocator,
    events: EventQueue,
    outgoing: VecDeque<Transmit>,
    sequence: u16,
    last_heard: Duration,
    roster: Roster,
    roster_requested_at: Option<Duration>,
    results: Option<MatchResults>,
    hits: Option<u16>,
    seen_events: VecDeque<u16>,
    /// The newest snapshot tick that showed the local player alive, and the spans `(last alive, tick when the
    /// client learned]` of its deaths.
    last_alive: Option<Tick>,
    deaths: VecDeque<(Tick, Tick)>,
    own_shots: BTreeMap<Tick, Option<PlayerId>>,
    kill_feed: VecDeque<KillLine>,
    match_phase: MatchPhase,
    phase_ticks_left: u16,
    stats: ClientStats,
}

impl std::fmt::Debug for ShooterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShooterClient")
            .field("phase", &self.phase)
            .field("tick", &self.tick())
            .field("stats", &self.stats)
            .finish()
    }
}

impl ShooterClient {
    /// A client that starts connecting at `now`.
    pub fn new(config: ClientConfig, now: Duration) -> Self {
        Self {
            input_meter: BufferMeter::new(BufferKind::ServerInputs, config.input_meter.clone()),
            state_meter: BufferMeter::new(BufferKind::ClientStates, config.state_meter.clone()),
            views: TickRing::new(64),
            sent_at: TickRing::new(64),
            config,
            phase: ClientPhase::Connecting,
            last_request_at: None,
            first_request_at: None,
            assembler: None,
            accept: None,
            data: None,
            geometry: None,
            cubes: Vec::new(),
            tick_duration: Duration::from_millis(33),
            snapshots: VecDeque::with_capacity(HELD_SNAPSHOTS),
            received: ReceivedPackets::new(),
            latest: None,
            predictor: None,
            input: PlayerInput::default(),
            next_tick_at: now,
            rtt: None,
            remotes: vec![None; MAX_SLOTS],
            extra_delay_ticks: 0,
            input_fill: 0,
            ids: ClientIdAllocator::default(),
            events: EventQueue::default(),
            outgoing: VecDeque::new(),
            sequence: 0,
            last_heard: now,
            roster: Roster::default(),
            roster_requested_at: None,
            results: None,
            hits: None,
            seen_events: VecDeque::with_capacity(SEEN_EVENT_IDS),
            last_alive: None,
            deaths: VecDeque::new(),
            own_shots: BTreeMap::new(),
            kill_feed: VecDeque::with_capacity(KILL_FEED_LINES),
            match_phase: MatchPhase::Waiting,
            phase_ticks_left: 0,
            stats: ClientStats::default(),
        }
    }

    /// Session phase.
    pub fn phase(&self) -> ClientPhase {
        self.phase
    }

    /// The match's lifecycle phase as last reported, and the ticks left in it.
    pub fn match_phase(&self) -> (MatchPhase, u16) {
        (self.match_phase, self.phase_ticks_left)
    }

    /// The static match data, once loaded.
    pub fn match_data(&self) -> Option<&MatchData> {
        self.data.as_ref()
    }

    /// The static geometry built from the map (for rendering and aiming).
    pub fn geometry(&self) -> Option<&WorldGeometry> {
        self.geometry.as_ref()
    }

    /// The local player's slot.
    pub fn slot(&self) -> Option<PlayerId> {
        self.accept.map(|a| PlayerId(a.slot))
    }

    /// The client's predicted tick (ahead of the server).
    pub fn tick(&self) -> Option<Tick> {
        self.predictor.as_ref().map(ClientPredictor::tick)
    }

    /// The newest server tick received.
    pub fn server_tick(&self) -> Option<Tick> {
        self.latest.map(|(t, _)| t)
    }

    /// The local player as predicted (what a first-person view renders).
    pub fn local_state(&self) -> Option<&PlayerState> {
        self.predictor.as_ref().map(ClientPredictor::state)
    }

    /// The slot-to-name roster.
    pub fn roster(&self) -> &Roster {
        &self.roster
    }

    /// Final results, once the match ended.
    pub fn results(&self) -> Option<&MatchResults> {
        self.results.as_ref()
    }

    /// Cubes the client knows of (every cube of the map once the match data is loaded).
    pub fn cube_count(&self) -> usize {
        self.cubes.iter().filter(|t| t.latest().is_some()).count()
    }

    /// Every cube's interpolated pose at `now` (the same render time as remote players), in map order.
    pub fn cube_poses(&self, now: Duration) -> Vec<CubePose> {
        match (self.render_ticks(now), self.geometry.as_ref()) {
            (Some(render), Some(geometry)) => self.cube_poses_at(render, geometry.initial_cubes()),
            _ => Vec::new(),
        }
    }

    fn cube_poses_at(&self, ticks: f64, initial: &[CubePose]) -> Vec<CubePose> {
        self.cubes
            .iter()
            .zip(initial)
            .map(|(t, i)| t.pose_at(ticks).unwrap_or(*i))
            .collect()
    }

    /// The latest kills, oldest first.
    pub fn kill_feed(&self) -> impl Iterator<Item = &KillLine> {
        self.kill_feed.iter()
    }

    /// Every player's score as last reported (the local one included).
    pub fn scores(&self) -> Vec<(PlayerId, ScoreLine)> {
        let Some(s) = self.snapshots.back() else {
            return Vec::new();
        };
        let mut out: Vec<(PlayerId, ScoreLine)> = s
            .remotes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.known().map(|r| (PlayerId(i as u8), r.score)))
            .collect();
        out.push((s.local_slot, s.local.score));
        out.sort_by_key(|(p, _)| *p);
        out
    }

    /// Counters.
    pub fn stats(&self) -> ClientStats {
        let mut s = self.stats;
        s.rtt_s = self.rtt.map_or(0.0, |r| r.as_secs_f64());
        s.dropped_events = self.events.dropped;
        if let Some(p) = &self.predictor {
            s.prediction.absorb(&p.stats());
        }
        s
    }

    /// The input to apply from the next tick on (held until changed).
    pub fn set_input(&mut self, input: PlayerInput) {
        self.input = input;
    }

    /// The server time the client renders remote players at, in fractional ticks.
    pub fn render_ticks(&self, now: Duration) -> Option<f64> {
        let (tick, at) = self.latest?;
        let elapsed =
            (now.saturating_sub(at).as_secs_f64() / self.tick_duration.as_secs_f64()).min(2.0);
        let delay = self.config.interpolation.delay.as_secs_f64()
            / self.tick_duration.as_secs_f64()
            + f64::from(self.extra_delay_ticks);
        Some((f64::from(tick) + elapsed - delay).max(0.0))
    }

    /// A remote player's interpolated pose at `now`.
    pub fn remote_pose(&self, slot: PlayerId, now: Duration) -> Option<InterpolatedPose> {
        let render = self.render_ticks(now)?;
        self.remotes
            .get(usize::from(slot.0))?
            .as_ref()?
            .sample_at(render)
    }

    /// Every remote player's interpolated pose at `now`.
    pub fn remote_poses(&self, now: Duration) -> Vec<(PlayerId, InterpolatedPose)> {
        match self.render_ticks(now) {
            Some(render) => self.remote_poses_at(render),
            None => Vec::new(),
        }
    }

    /// The living remote player nearest the local one whose chest (where a bot aims) is in line of sight from the
    /// local eye at `now`, with that chest point: what a bot shoots at and the viewer's screenshot turns to.
    pub fn nearest_opponent_in_sight(&self, now: Duration) -> Option<(PlayerId, Point3<f32>)> {
        let (me, data) = (self.local_state()?, self.match_data()?);
        let eye = me.eye(&data.rules);
        let chest = Vector3::new(0.0, data.rules.body.body_hit_top * 0.6, 0.0);
        self.remote_poses(now)
            .into_iter()
            .filter(|(slot, pose)| pose.alive && Some(*slot) != self.slot())
            .filter(|(_, pose)| {
                let to = pose.position + chest - eye;
                let distance = to.norm();
                distance > 0.1
                    && self
                        .geometry()
                        .and_then(|g| g.cast_ray(&eye, &(to / distance), distance))
                        .is_none()
            })
            .min_by(|a, b| {
                let da = (a.1.position - me.position()).norm_squared();
                let db = (b.1.position - me.position()).norm_squared();
                da.total_cmp(&db)
            })
            .map(|(slot, pose)| (slot, pose.position + chest))
    }

    /// Every remote player the latest snapshot shows, at `render` (fractional server ticks).
    fn remote_poses_at(&self, render: f64) -> Vec<(PlayerId, InterpolatedPose)> {
        let Some(latest) = self.snapshots.back() else {
            return Vec::new();
        };
        self.remotes
            .iter()
            .enumerate()
            .filter(|(i, _)| latest.remotes[*i].is_seen())
            .filter_map(|(i, r)| Some((PlayerId(i as u8), r.as_ref()?.sample_at(render)?)))
            .collect()
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outgoing.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.queue.pop_front()
    }

    /// When [`ShooterClient::handle_timeout`] should next run.
    pub fn poll_timeout(&self) -> Option<Duration> {
        match self.phase {
            ClientPhase::Connecting | ClientPhase::Loading => Some(
                self.last_request_at
                    .map_or(self.next_tick_at, |t| t + self.config.connect_retry),
            ),
            ClientPhase::Playing => Some(self.next_tick_at),
            ClientPhase::Rejected(_) | ClientPhase::TimedOut => None,
        }
    }

    fn send(&mut self, message: &Message, ack: (u16, u32)) -> Option<usize> {
        self.sequence = self.sequence.wrapping_add(1);
        let payload = message.encode(self.sequence, ack).ok()?;
        let len = payload.len();
        self.outgoing.push_back(Transmit {
            to: self.config.server,
            delivery: Delivery::Unreliable,
            payload,
        });
        Some(len)
    }

    /// Says goodbye to the server.
    pub fn disconnect(&mut self) {
        self.send(&Message::Disconnect, (0, 0));
    }

    /// Takes one datagram; anything not from the server or not decoding is counted and dropped.
    pub fn handle_datagram(&mut self, now: Duration, from: SocketAddr, bytes: &[u8]) {
        if from != self.config.server {
            self.stats.malformed += 1;
            return;
        }
        if matches!(self.phase, ClientPhase::Rejected(_) | ClientPhase::TimedOut) {
            return;
        }
        let Ok(any) = read_any_packet(bytes) else {
            self.stats.malformed += 1;
            return;
        };
        self.last_heard = now;
        if any.kind == PacketKind::Snapshot {
            let cubes = self.config.cubes;
            let held = &self.snapshots;
            match decode_snapshot(bytes, &cubes, |t| held.iter().find(|s| s.tick == t)) {
                Ok((_, s)) if s.tick > MAX_SERVER_TICK => self.stats.impossible_ticks += 1,
                Ok((sequence, s)) => {
                    self.received.record(sequence);
                    self.handle_snapshot(now, s);
                }
                Err(WireError::MissingBaseline(_)) => self.stats.missing_baseline += 1,
                Err(_) => self.stats.malformed += 1,
            }
            return;
        }
        let Ok(incoming) = read_packet(bytes) else {
            self.stats.malformed += 1;
            return;
        };
        match Message::decode(incoming) {
            Ok(Message::Accept(a)) => self.handle_accept(now, a),
            Ok(Message::MatchDataChunk(c)) => {
                if let Some(asm) = &mut self.assembler {
                    if asm.insert(c).is_err() {
                        self.stats.malformed += 1;
                    }
                    self.try_load();
                }
            }
            Ok(Message::Reject(r)) if self.phase == ClientPhase::Connecting => {
                self.phase = ClientPhase::Rejected(r);
                self.events.push(ClientEvent::Rejected(r));
            }
            Ok(Message::Roster(r)) => self.roster = r,
            Ok(Message::Results(r)) => {
                if self.results.as_ref() != Some(&r) {
                    self.results = Some(r.clone());
                    self.events.push(ClientEvent::Results(r));
                }
            }
            Ok(_) | Err(_) => self.stats.malformed += 1,
        }
    }

    fn handle_accept(&mut self, now: Duration, accept: Accept) {
        if self.accept.is_some_and(|a| {
            a == Accept {
                server_tick: a.server_tick,
                ..accept
            }
        }) {
            return;
        }
        if let Some(sent) = self.first_request_at.or(self.last_request_at) {
            self.rtt.get_or_insert(now.saturating_sub(sent));
        }
        self.accept = Some(accept);
        self.assembler = Some(MatchDataAssembler::new(accept));
        self.phase = ClientPhase::Loading;
        self.events
            .push(ClientEvent::Accepted(PlayerId(accept.slot)));
    }

    fn try_load(&mut self) {
        if self.data.is_some() {
            return;
        }
        let Some(result) = self
            .assembler
            .as_ref()
            .and_then(MatchDataAssembler::complete)
        else {
            return;
        };
        match result {
            Ok(data) => {
                self.tick_duration = data.rules.tick_duration();
                self.geometry = Some(WorldGeometry::new(&data.map));
                self.cubes = data
                    .map
                    .cubes
                    .iter()
                    .map(|_| CubeTrack::new(HELD_SNAPSHOTS))
                    .collect();
                let hz = data.rules.tick_rate_hz;
                for r in self.remotes.iter_mut() {
                    *r = Some(RemoteInterpolator::new(
                        self.config.interpolation.clone(),
                        hz,
                    ));
                }
                self.data = Some(data);
            }
            Err(_) => {
                self.stats.malformed += 1;
                if let Some(a) = self.accept {
                    self.assembler = Some(MatchDataAssembler::new(a));
                }
            }
        }
    }

    fn handle_snapshot(&mut self, now: Duration, snapshot: Snapshot) {
        self.stats.snapshots += 1;
        let tick = snapshot.tick;
        if Some(snapshot.local_slot) != self.slot() {
            self.stats.malformed += 1;
            return;
        }
        self.take_events(&snapshot);
        for (track, cube) in self.cubes.iter_mut().zip(&snapshot.cubes) {
            if let Some(cube) = cube.fresh() {
                track.push(tick, cube.body, &self.config.cubes.quant);
            }
        }
        for (i, remote) in snapshot.remotes.iter().enumerate() {
            if let (Some(r), Some(interp)) = (remote.fresh(), self.remotes[i].as_mut()) {
                interp.push(
                    tick,
                    RemoteSample {
                        position: r.position,
                        yaw: r.yaw,
                        pitch: r.pitch,
                        alive: r.alive,
                    },
                );
            }
        }
        let newest = self.latest.is_none_or(|(t, _)| tick > t);
        let pos = self.snapshots.partition_point(|s| s.tick < tick);
        if self.snapshots.get(pos).is_some_and(|s| s.tick == tick) {
            return;
        }
        self.snapshots.insert(pos, snapshot.clone());
        while self.snapshots.len() > HELD_SNAPSHOTS {
            self.snapshots.pop_front();
        }
        if !newest {
            return;
        }
        self.latest = Some((tick, now));
        self.input_fill = snapshot.input_fill;
        if snapshot.phase != self.match_phase {
            self.match_phase = snapshot.phase;
            self.events.push(ClientEvent::Phase(snapshot.phase));
        }
        self.phase_ticks_left = snapshot.phase_ticks_left;
        if snapshot.roster_version != self.roster.version
            && self
                .roster_requested_at
                .is_none_or(|t| now.saturating_sub(t) >= ROSTER_RETRY)
        {
            self.roster_requested_at = Some(now);
            self.send(&Message::RosterRequest, (0, 0));
        }
        if let Some(previous) = self.hits
            && snapshot.local.hits != previous
        {
            let n = snapshot.local.hits.wrapping_sub(previous);
            self.stats.hits_confirmed += u64::from(n);
            self.events.push(ClientEvent::HitConfirmed(n));
        }
        self.hits = Some(snapshot.local.hits);
        if let Some(sent) = self.sent_at.get(snapshot.last_input_tick) {
            let sample = now.saturating_sub(*sent);
            self.rtt = Some(match self.rtt {
                Some(r) => r.mul_f64(0.9) + sample.mul_f64(0.1),
                None => sample,
            });
        }
        if self.data.is_none() {
            return;
        }
        let Some(geometry) = self.geometry.as_mut() else {
            return;
        };
        let Some(rules) = self.data.as_ref().map(|d| d.rules.clone()) else {
            return;
        };
        match self.predictor.as_mut() {
            None => {
                self.predictor = Some(ClientPredictor::new(
                    self.config.prediction.clone(),
                    tick,
                    snapshot.local.state,
                ));
                self.phase = ClientPhase::Playing;
                self.events.push(ClientEvent::Started);
                self.lead_up(now, tick);
            }
            Some(p) => {
                let behind = p.tick() <= tick;
                let outcome = p.reconcile(tick, &snapshot.local.state, geometry, &rules);
                if behind || outcome == ReconcileOutcome::Resynchronised {
                    if outcome != ReconcileOutcome::Resynchronised {
                        p.restart(tick, snapshot.local.state);
                    }
                    self.lead_up(now, tick);
                }
            }
        }
    }

    /// Takes the shot and kill events of a snapshot (any snapshot, however late: events are reliable), each
    /// once: other players' shots and kills become application events; the client's own shots are matched to
    /// its predictions by tick (how often a predicted hit was the server's hit too).
    fn take_events(&mut self, snapshot: &Snapshot) {
        let me = snapshot.local_slot;
        if snapshot.local.state.alive() {
            self.last_alive = self.last_alive.max(Some(snapshot.tick));
        } else if let Some(alive) = self.last_alive
            && alive < snapshot.tick
            && self.deaths.back().is_none_or(|(a, _)| *a != alive)
        {
            if self.deaths.len() == 8 {
                self.deaths.pop_front();
            }
            // Shots predicted up to the client's own tick now were predicted before it knew.
            let learned = self.tick().unwrap_or(snapshot.tick).max(snapshot.tick);
            self.deaths.push_back((alive, learned));
        }
        for event in &snapshot.events {
            if self.seen_events.contains(&event.id) {
                self.stats.repeated_events += 1;
                continue;
            }
            if self.seen_events.len() == SEEN_EVENT_IDS {
                self.seen_events.pop_front();
            }
            self.seen_events.push_back(event.id);
            match event.kind {
                EventKind::Shot(shot) if shot.shooter == me => {
                    let server_hit = shot.hit.map(|(victim, _)| victim);
                    let predicted = self.own_shots.remove(&event.tick).flatten();
                    self.stats.predicted_hits += u64::from(predicted.is_some());
                    self.stats.server_hits += u64::from(server_hit.is_some());
                    self.stats.agreed_hits +=
                        u64::from(predicted.is_some() && predicted == server_hit);
                }
                EventKind::Shot(shot) => {
                    self.stats.remote_shots_seen += 1;
                    self.events.push(ClientEvent::RemoteShot {
                        tick: event.tick,
                        shot,
                    });
                }
                EventKind::Kill { killer, victim } => {
                    let line = KillLine {
                        tick: event.tick,
                        killer,
                        victim,
                    };
                    self.stats.kills_seen += 1;
                    if self.kill_feed.len() == KILL_FEED_LINES {
                        self.kill_feed.pop_front();
                    }
                    self.kill_feed.push_back(line);
                    self.events.push(ClientEvent::Kill(line));
                }
            }
        }
        // Predicted shots the server never judged (their input was lost): a predicted hit nobody confirmed.
        let horizon = snapshot.tick.saturating_sub(SHOT_JUDGEMENT_TICKS);
        while let Some(entry) = self.own_shots.first_entry() {
            if *entry.key() >= horizon {
                break;
            }
            let (tick, predicted) = entry.remove_entry();
            if predicted.is_none() {
                continue;
            }
            let dead = self
                .deaths
                .iter()
                .any(|(a, d)| (*a + 1..=*d).contains(&tick));
            if dead {
                self.stats.overruled_hits += 1;
            } else {
                self.stats.predicted_hits += 1;
                self.stats.unjudged_hits += 1;
            }
        }
    }

    /// Places the client `RTT + input buffer` ticks ahead of the snapshot tick `server_tick`; the snapshot is half
    /// an RTT old, so the client runs half the RTT plus the input buffer ahead of the server's present. The ticks
    /// in between are predicted with a neutral input (what the server repeats for a player it has no input from).
    fn lead_up(&mut self, now: Duration, server_tick: Tick) {
        self.stats.realignments += 1;
        let rtt = self.rtt.unwrap_or(Duration::from_millis(100));
        let rtt_ticks = (rtt.as_secs_f64() / self.tick_duration.as_secs_f64()).ceil() as u32;
        let target = server_tick
            .saturating_add(rtt_ticks)
            .saturating_add(self.config.input_buffer_ticks);
        let cubes = match self.geometry.as_ref() {
            Some(g) => self.cube_poses_at(f64::from(server_tick), g.initial_cubes()),
            None => Vec::new(),
        };
        let (Some(p), Some(geometry), Some(data)) = (
            self.predictor.as_mut(),
            self.geometry.as_mut(),
            self.data.as_ref(),
        ) else {
            return;
        };
        while p.tick() < target {
            let s = p.state();
            let neutral = PlayerInput {
                yaw: s.motion.yaw,
                pitch: s.motion.pitch,
                ..PlayerInput::default()
            };
            p.predict(neutral, cubes.clone(), geometry, &data.rules);
            self.views.insert(p.tick(), ViewTime::at(server_tick));
        }
        self.next_tick_at = now + self.tick_duration;
        self.input_meter =
            BufferMeter::new(BufferKind::ServerInputs, self.config.input_meter.clone());
    }

    /// Sends connect requests while connecting and runs every client tick due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        match self.phase {
            ClientPhase::Rejected(_) | ClientPhase::TimedOut => return,
            ClientPhase::Connecting | ClientPhase::Loading => {
                let due = self
                    .last_request_at
                    .is_none_or(|t| now >= t + self.config.connect_retry);
                if due {
                    self.last_request_at = Some(now);
                }
                if due && self.data.is_none() {
                    self.first_request_at.get_or_insert(now);
                    let held = self
                        .assembler
                        .as_ref()
                        .map_or(0, MatchDataAssembler::held_mask);
                    let request = ConnectRequest { chunks_held: held };
                    self.send(&Message::ConnectRequest(request), (0, 0));
                }
            }
            ClientPhase::Playing => {}
        }
        let silence = now.saturating_sub(self.last_heard);
        if silence > self.config.timeout {
            let accepted = self.accept.is_some();
            if accepted && silence <= self.config.timeout + self.config.reconnect_for {
                self.start_over(now);
            } else if !accepted && self.stats.reconnects == 0
                || silence > self.config.timeout + self.config.reconnect_for
            {
                self.phase = ClientPhase::TimedOut;
                self.events.push(ClientEvent::TimedOut);
                return;
            }
        }
        if self.phase != ClientPhase::Playing {
            self.next_tick_at = self.next_tick_at.max(now);
            return;
        }
        let mut ran = 0;
        while now >= self.next_tick_at {
            if ran == MAX_CATCH_UP_TICKS {
                self.next_tick_at = now + self.tick_duration;
                break;
            }
            self.next_tick_at += self.tick_duration;
            ran += 1;
            match self.input_meter.record(u32::from(self.input_fill)) {
                TickAdjust::SkipTick => {
                    self.stats.skipped_ticks += 1;
                    continue;
                }
                TickAdjust::AddTick => {
                    self.stats.added_ticks += 1;
                    self.client_tick(now);
                }
                TickAdjust::Hold => {}
            }
            self.steer_state_buffer(now);
            self.client_tick(now);
        }
    }

    /// Starts a fresh session after the server fell silent: every per-session state (slot, static data,
    /// snapshots, acks, prediction, sequence numbers) is dropped and the client connects again from `now`, as a
    /// restarted client would; the counters and the time the server was last heard from carry over.
    fn start_over(&mut self, now: Duration) {
        let mut fresh = ShooterClient::new(self.config.clone(), now);
        fresh.stats = self.stats();
        fresh.stats.reconnects += 1;
        fresh.last_heard = self.last_heard;
        fresh.events = std::mem::take(&mut self.events);
        fresh.events.push(ClientEvent::Reconnecting);
        *self = fresh;
    }

    fn steer_state_buffer(&mut self, now: Duration) {
        let Some(render) = self.render_ticks(now) else {
            return;
        };
        let fill = self
            .snapshots
            .iter()
            .filter(|s| f64::from(s.tick) > render)
            .count() as u32;
        match self.state_meter.record(fill) {
            // Too many snapshots waiting ahead of the render time: show them sooner.
            TickAdjust::AddTick => {
                self.extra_delay_ticks = self.extra_delay_ticks.saturating_sub(1)
            }
            // Running dry: show the world a tick later.
            TickAdjust::SkipTick => {
                self.extra_delay_ticks = (self.extra_delay_ticks + 1).min(MAX_EXTRA_DELAY_TICKS)
            }
            TickAdjust::Hold => {}
        }
    }

    fn client_tick(&mut self, now: Duration) {
        let view = ViewTime::from_ticks(self.render_ticks(now).unwrap_or(0.0));
        // Other players and the cubes exactly as at the view time the input names: the server meets the input
        // with the same poses.
        let cubes = match self.geometry.as_ref() {
            Some(g) => self.cube_poses_at(view.as_ticks(), g.initial_cubes()),
            None => Vec::new(),
        };
        let targets: Vec<TargetPose> = self
            .remote_poses_at(view.as_ticks())
            .into_iter()
            .map(|(player, pose)| TargetPose {
                player,
                feet: pose.position,
                alive: pose.alive,
            })
            .collect();
        let slot = self.slot().unwrap_or_default();
        let (Some(p), Some(geometry), Some(data)) = (
            self.predictor.as_mut(),
            self.geometry.as_mut(),
            self.data.as_ref(),
        ) else {
            return;
        };
        let shot = p.predict(self.input, cubes, geometry, &data.rules);
        let tick = p.tick();
        self.views.insert(tick, view);
        if let Some(ray) = shot {
            let predicted_hit = predict_hit(&ray, slot, &targets, geometry, &data.rules.body);
            let shot = PredictedShot {
                id: self.ids.allocate(),
                tick,
                ray,
                predicted_hit,
            };
            self.stats.shots_predicted += 1;
            self.own_shots.insert(tick, predicted_hit.map(|h| h.player));
            self.events.push(ClientEvent::Shot(shot));
        }
        let commands: Vec<InputCommand> = (0..=self.config.redundancy as u32)
            .map_while(|back| {
                let t = tick.checked_sub(back)?;
                let input = *p.input_at(t)?;
                let view = *self.views.get(t)?;
                Some(InputCommand {
                    tick: t,
                    view,
                    input,
                })
            })
            .collect();
        let ack = self.received.ack().unwrap_or((0, 0));
        self.sequence = self.sequence.wrapping_add(1);
        let encoded = Message::Input(commands).encode(self.sequence, ack);
        if let Ok(payload) = encoded {
            self.sent_at.insert(tick, now);
            self.stats.inputs_sent += 1;
            self.outgoing.push_back(Transmit {
                to: self.config.server,
                delivery: Delivery::Unreliable,
                payload,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::Point3;
    use physync_engine::shooter::{ArenaMap, GameRules};
    use physync_engine::shooter_net::GameEvent;
    use physync_engine::shooter_net::LocalPlayerSnap;
    use physync_engine::shooter_net::events::MAX_EVENTS;
    use physync_engine::shooter_net::match_data::{chunks, data_hash};
    use physync_engine::shooter_net::snapshot::write_snapshot;
    use physync_engine::shooter_net::wire::{read_packet, write_packet};

    fn client() -> ShooterClient {
        use physync_engine::connection::{SIM_UNIX_EPOCH, TokenIssuer};
        use physync_engine::shooter_net::{PlayerClaims, mint_token};
        use rand::SeedableRng;
        let server = "10.0.0.1:40000".parse().unwrap();
        let token = mint_token(
            &TokenIssuer::new([3; 32]),
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(1),
            SIM_UNIX_EPOCH,
            &PlayerClaims::new(1, "me"),
            &[server],
            Duration::from_secs(1000),
        )
        .unwrap();
        ShooterClient::new(ClientConfig::new(server, token), Duration::ZERO)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A client accepted into slot 0 with the standard match data loaded, as a server would leave it.
    fn loaded_client() -> ShooterClient {
        let mut c = client();
        c.handle_timeout(Duration::ZERO);
        while c.poll_transmit().is_some() {}
        let data = MatchData {
            match_id: 1,
            rules: GameRules::default(),
            map: ArenaMap::standard(),
            max_players: 4,
            min_players: 1,
            countdown_s: 1,
            time_limit_s: 60,
            score_limit: 0,
            weapons: vec!["rifle".into()],
        };
        let bytes = data.to_bytes().unwrap();
        let parts = chunks(&bytes);
        let accept = Accept {
            slot: 0,
            server_tick: 100,
            chunk_count: parts.len() as u8,
            data_len: bytes.len() as u32,
            data_hash: data_hash(&bytes),
        };
        let server = c.config.server;
        c.handle_datagram(
            ms(50),
            server,
            &Message::Accept(accept).encode(1, (0, 0)).unwrap(),
        );
        for part in parts {
            let datagram = Message::MatchDataChunk(part).encode(2, (0, 0)).unwrap();
            c.handle_datagram(ms(50), server, &datagram);
        }
        assert!(c.match_data().is_some());
        c
    }

    fn snapshot_datagram(tick: Tick, state: PlayerState) -> Vec<u8> {
        snapshot_with_events(tick, state, Vec::new())
    }

    fn snapshot_with_events(tick: Tick, state: PlayerState, events: Vec<GameEvent>) -> Vec<u8> {
        let snapshot = Snapshot {
            tick,
            phase: MatchPhase::Live,
            local_slot: PlayerId(0),
            local: LocalPlayerSnap {
                state,
                ..LocalPlayerSnap::default()
            },
            events,
            ..Snapshot::default()
        };
        write_packet(PacketKind::Snapshot, tick as u16, (0, 0), |s| {
            write_snapshot(s, &StateConfig::default(), &snapshot, None).map(drop)
        })
        .unwrap()
    }

    fn spawn() -> PlayerState {
        PlayerState::spawned(&GameRules::default(), &Point3::new(0.0, 0.0, -8.0), 0)
    }

    #[test]
    fn a_snapshot_from_the_end_of_time_is_refused_not_a_panic() {
        let mut c = loaded_client();
        let server = c.config.server;
        for tick in [Tick::MAX, Tick::MAX - 1, MAX_SERVER_TICK + 1] {
            c.handle_datagram(ms(60), server, &snapshot_datagram(tick, spawn()));
            c.handle_timeout(ms(60));
        }
        assert_eq!(c.stats().impossible_ticks, 3);
        assert_eq!(c.phase(), ClientPhase::Loading);
        c.handle_datagram(ms(70), server, &snapshot_datagram(100, spawn()));
        assert_eq!(c.phase(), ClientPhase::Playing);
    }

    #[test]
    fn an_application_that_never_polls_events_keeps_memory_bounded() {
        let mut c = loaded_client();
        let server = c.config.server;
        let mut id = 0u16;
        let snapshots = MAX_QUEUED_EVENTS / MAX_EVENTS + 10;
        for k in 0..snapshots as Tick {
            let events = (0..MAX_EVENTS)
                .map(|_| {
                    id = id.wrapping_add(1);
                    GameEvent {
                        id,
                        tick: 100 + k,
                        kind: EventKind::Kill {
                            killer: None,
                            victim: PlayerId(1),
                        },
                    }
                })
                .collect();
            c.handle_datagram(
                ms(60),
                server,
                &snapshot_with_events(100 + k, spawn(), events),
            );
        }
        assert_eq!(c.stats().kills_seen, (snapshots * MAX_EVENTS) as u64);
        let queued: Vec<ClientEvent> = std::iter::from_fn(|| c.poll_event()).collect();
        assert_eq!(queued.len(), MAX_QUEUED_EVENTS);
        assert!(c.stats().dropped_events > 0);
        // The oldest went first: the newest kill is still there.
        let newest_tick = 100 + snapshots as Tick - 1;
        assert!(matches!(queued.last(), Some(ClientEvent::Kill(line)) if line.tick == newest_tick));
    }

    #[test]
    fn prediction_counters_survive_a_realignment() {
        let mut c = loaded_client();
        let server = c.config.server;
        c.handle_datagram(ms(60), server, &snapshot_datagram(100, spawn()));
        assert_eq!(c.phase(), ClientPhase::Playing);
        assert!(c.tick().unwrap() > 101);
        // The server has the player a metre away at tick 101: a misprediction.
        let mut moved = spawn();
        moved.motion.position[0] += 512;
        c.handle_datagram(ms(70), server, &snapshot_datagram(101, moved));
        assert_eq!(c.stats().prediction.mispredictions, 1);
        // A snapshot of the client's own tick: the client has fallen behind and re-aligns its clock.
        let own = c.tick().unwrap();
        let state = *c.local_state().unwrap();
        c.handle_datagram(ms(80), server, &snapshot_datagram(own, state));
        assert_eq!(c.stats().realignments, 2);
        assert_eq!(c.stats().prediction.mispredictions, 1);
    }

    #[test]
    fn connect_requests_repeat_until_an_answer_and_strangers_are_ignored() {
        let mut c = client();
        let mut sent = 0;
        let mut now = Duration::ZERO;
        while now < Duration::from_millis(1000) {
            c.handle_timeout(now);
            while let Some(t) = c.poll_transmit() {
                let incoming = read_packet(&t.payload).unwrap();
                assert!(matches!(
                    Message::decode(incoming).unwrap(),
                    Message::ConnectRequest(_)
                ));
                sent += 1;
            }
            now = c.poll_timeout().unwrap();
        }
        assert_eq!(sent, 10);
        let stranger: SocketAddr = "10.6.6.6:1".parse().unwrap();
        let accept = Message::Accept(Accept::default())
            .encode(1, (0, 0))
            .unwrap();
        c.handle_datagram(now, stranger, &accept);
        assert_eq!(c.phase(), ClientPhase::Connecting);
        c.handle_datagram(now, c.config.server, &[0xff; 40]);
        assert_eq!(c.stats().malformed, 2);
        let reject = Message::Reject(RejectReason::Full)
            .encode(2, (0, 0))
            .unwrap();
        c.handle_datagram(now, c.config.server, &reject);
        assert_eq!(c.phase(), ClientPhase::Rejected(RejectReason::Full));
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Rejected(RejectReason::Full))
        );
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn a_silent_server_times_the_client_out() {
        let mut c = client();
        c.handle_timeout(Duration::ZERO);
        c.handle_timeout(Duration::from_secs(4));
        assert_eq!(c.phase(), ClientPhase::TimedOut);
        assert!(c.events.queue.contains(&ClientEvent::TimedOut));
    }
}
