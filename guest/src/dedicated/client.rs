//! The shooter client's sans-IO core: connects with a token, loads the static match data, runs ahead of the
//! server by half the RTT plus the input buffer, sends each tick's input with the last five, predicts the local
//! player with the shared simulation and reconciles it against the server, interpolates remote players, steers
//! both jitter buffers by adding or skipping a tick, and predicts shots locally under client-local ids.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use physync_codec::{ReceivedPackets, StateConfig};
use physync_engine::connection::ConnectToken;
use physync_engine::shooter::hitbox::{PlayerHit, ShotRay, TargetPose};
use physync_engine::shooter::interpolation::InterpolatedPose;
use physync_engine::shooter::jitter::BufferMeterConfig;
use physync_engine::shooter::player::PlayerState;
use physync_engine::shooter::prediction::PredictionStats;
use physync_engine::shooter::ring::TickRing;
use physync_engine::shooter::{
    BufferKind, BufferMeter, ClientIdAllocator, ClientPredictor, EntityId, InputCommand,
    InterpolationConfig, PlayerId, PlayerInput, PredictionConfig, ReconcileOutcome,
    RemoteInterpolator, RemoteSample, Tick, TickAdjust, ViewTime, WorldGeometry, predict_hit,
};
use physync_engine::shooter_net::messages::ConnectRequest;
use physync_engine::shooter_net::snapshot::{MAX_BASELINE_AGE, MAX_SLOTS, read_snapshot};
use physync_engine::shooter_net::wire::read_packet;
use physync_engine::shooter_net::{
    Accept, MatchData, MatchDataAssembler, MatchPhase, MatchResults, Message, PacketKind,
    RejectReason, Roster, ScoreLine, Snapshot, WireError,
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

/// Settings of a shooter client.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The server's address.
    pub server: SocketAddr,
    /// The ticket: the connection layer presents it (the core only reads the server address from the config).
    pub token: ConnectToken,
    /// Interval between connect requests until accepted and loaded.
    pub connect_retry: Duration,
    /// No datagram from the server for this long ends the session.
    pub timeout: Duration,
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
    /// The match ended with these results.
    Results(MatchResults),
    /// The server refused the connect.
    Rejected(RejectReason),
    /// The server went silent.
    TimedOut,
}

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
    /// Smoothed round-trip time, seconds.
    pub rtt_s: f64,
    /// The predictor's counters (mispredictions, largest correction).
    pub prediction: PredictionStats,
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
    events: VecDeque<ClientEvent>,
    outgoing: VecDeque<Transmit>,
    sequence: u16,
    last_heard: Duration,
    roster: Roster,
    roster_requested_at: Option<Duration>,
    results: Option<MatchResults>,
    hits: Option<u16>,
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
            events: VecDeque::new(),
            outgoing: VecDeque::new(),
            sequence: 0,
            last_heard: now,
            roster: Roster::default(),
            roster_requested_at: None,
            results: None,
            hits: None,
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

    /// Every player's score as last reported (the local one included).
    pub fn scores(&self) -> Vec<(PlayerId, ScoreLine)> {
        let Some(s) = self.snapshots.back() else {
            return Vec::new();
        };
        let mut out: Vec<(PlayerId, ScoreLine)> = s
            .remotes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.map(|r| (PlayerId(i as u8), r.score)))
            .collect();
        out.push((s.local_slot, s.local.score));
        out.sort_by_key(|(p, _)| *p);
        out
    }

    /// Counters.
    pub fn stats(&self) -> ClientStats {
        let mut s = self.stats;
        s.rtt_s = self.rtt.map_or(0.0, |r| r.as_secs_f64());
        if let Some(p) = &self.predictor {
            s.prediction = p.stats();
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
        let Some(render) = self.render_ticks(now) else {
            return Vec::new();
        };
        let present = self
            .snapshots
            .back()
            .map(|s| s.remotes)
            .unwrap_or([None; MAX_SLOTS]);
        self.remotes
            .iter()
            .enumerate()
            .filter(|(i, _)| present[*i].is_some())
            .filter_map(|(i, r)| Some((PlayerId(i as u8), r.as_ref()?.sample_at(render)?)))
            .collect()
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outgoing.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
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
        let Ok(incoming) = read_packet(bytes) else {
            self.stats.malformed += 1;
            return;
        };
        self.last_heard = now;
        if incoming.kind == PacketKind::Snapshot {
            let sequence = incoming.header.sequence;
            let mut body = incoming.body;
            let cubes = self.config.cubes;
            let held = &self.snapshots;
            match read_snapshot(&mut body, &cubes, |t| held.iter().find(|s| s.tick == t)) {
                Ok(s) if body.bits_left() < 8 => {
                    self.received.record(sequence);
                    self.handle_snapshot(now, s);
                }
                Ok(_) => self.stats.malformed += 1,
                Err(WireError::MissingBaseline(_)) => self.stats.missing_baseline += 1,
                Err(_) => self.stats.malformed += 1,
            }
            return;
        }
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
                self.events.push_back(ClientEvent::Rejected(r));
            }
            Ok(Message::Roster(r)) => self.roster = r,
            Ok(Message::Results(r)) => {
                if self.results.as_ref() != Some(&r) {
                    self.results = Some(r.clone());
                    self.events.push_back(ClientEvent::Results(r));
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
            .push_back(ClientEvent::Accepted(PlayerId(accept.slot)));
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
        for (i, remote) in snapshot.remotes.iter().enumerate() {
            if let (Some(r), Some(interp)) = (remote, self.remotes[i].as_mut()) {
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
            self.events.push_back(ClientEvent::Phase(snapshot.phase));
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
            self.events.push_back(ClientEvent::HitConfirmed(n));
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
        let Some(geometry) = self.geometry.as_ref() else {
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
                self.events.push_back(ClientEvent::Started);
                self.lead_up(now, tick);
            }
            Some(p) => {
                let behind = p.tick() <= tick;
                let outcome = p.reconcile(tick, &snapshot.local.state, geometry, &rules);
                if behind || outcome == ReconcileOutcome::Resynchronised {
                    if outcome != ReconcileOutcome::Resynchronised {
                        *p = ClientPredictor::new(
                            self.config.prediction.clone(),
                            tick,
                            snapshot.local.state,
                        );
                    }
                    self.lead_up(now, tick);
                }
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
        let target = server_tick + rtt_ticks + self.config.input_buffer_ticks;
        let (Some(p), Some(geometry), Some(data)) = (
            self.predictor.as_mut(),
            self.geometry.as_ref(),
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
            p.predict(neutral, geometry, &data.rules);
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
        if now.saturating_sub(self.last_heard) > self.config.timeout {
            self.phase = ClientPhase::TimedOut;
            self.events.push_back(ClientEvent::TimedOut);
            return;
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
        let targets: Vec<TargetPose> = self
            .remote_poses(now)
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
            self.geometry.as_ref(),
            self.data.as_ref(),
        ) else {
            return;
        };
        let shot = p.predict(self.input, geometry, &data.rules);
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
            self.events.push_back(ClientEvent::Shot(shot));
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
    use physync_engine::shooter_net::wire::read_packet;

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
        assert!(c.events.contains(&ClientEvent::TimedOut));
    }
}
