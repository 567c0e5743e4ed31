//! The dedicated server's sans-IO core for one match: connects with tokens, per-client input buffers, the fixed
//! tick, lag-compensated shots (inside [`ShooterWorld`]), per-client delta snapshots, the match lifecycle,
//! timeouts and reconnects, and counters of everything hostile that was dropped or clamped.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use nalgebra::Point3;
use physync_codec::header::acked_sequences;
use physync_codec::{Backend, ObjectState, PriorityAccumulator, StateConfig, seq_newer};
use physync_engine::shooter::input::{InputCommand, PlayerInput};
use physync_engine::shooter::input_buffer::InputBufferStats;
use physync_engine::shooter::lagcomp::RewindError;
use physync_engine::shooter::player::PlayerState;
use physync_engine::shooter::ring::TickRing;
use physync_engine::shooter::world::{Entity, HeldStates, TickEvents, WorldConfig};
use physync_engine::shooter::{InputBuffer, PlayerId, ShooterWorld, Tick};
use physync_engine::shooter_net::PlayerClaims;
use physync_engine::shooter_net::events::{MAX_EVENT_AGE, MAX_EVENTS};
use physync_engine::shooter_net::match_data::{chunks, data_hash};
use physync_engine::shooter_net::messages::{ConnectRequest, MatchDataChunk};
use physync_engine::shooter_net::snapshot::{
    MAX_BASELINE_AGE, MAX_SLOTS, encode_snapshot, encode_snapshot_sized, fresh_bits,
    measure_snapshot,
};
use physync_engine::shooter_net::wire::{HEADER_BYTES, read_packet};
use physync_engine::shooter_net::{
    Accept, EventKind, GameEvent, LocalPlayerSnap, MatchData, MatchPhase, MatchResults, Message,
    PacketKind, RejectReason, RemotePlayerSnap, Roster, ScoreLine, ShotSeen, Sighting, Snapshot,
    WireError,
};
use physync_engine::transport::{Delivery, Transmit};

use super::config::MatchConfig;
use super::interest::{self, SIGHT_GRACE_TICKS, Visibility};

/// Snapshots remembered per client as possible baselines.
const SENT_SNAPSHOTS: usize = MAX_BASELINE_AGE as usize + 1;
/// Ticks between two resends of the results while the match lingers.
const RESULTS_EVERY_TICKS: Tick = 10;
/// Most verified addresses remembered beyond those holding a slot.
const VERIFIED_LIMIT: usize = 4 * MAX_SLOTS;
/// Most ticks one `handle_timeout` catches up after a stalled driver; further lost time is skipped.
const MAX_CATCH_UP_TICKS: u32 = 5;
/// Ticks between two line-of-sight checks (players stay relevant for a grace period after leaving sight).
const VISIBILITY_EVERY_TICKS: Tick = 3;
/// Most unacknowledged events kept per client (the oldest give way).
const MAX_PENDING_EVENTS: usize = 96;

/// Hostile or broken input the server counted and dropped (or clamped). None of it stops the match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostileCounters {
    /// Datagrams from addresses holding no slot (other than connect requests).
    pub unknown_sender: u64,
    /// Connect requests from an address the connection layer verified no token for, or whose token's claims
    /// do not read, or whose name is already playing from another address.
    pub bad_token: u64,
    /// Tokens for another match.
    pub wrong_match: u64,
    /// Datagrams that did not decode.
    pub malformed: u64,
    /// Input packets whose sequence was not newer than the last one (replays, duplicates, reordering).
    pub replayed: u64,
    /// Commands for ticks further in the past than the input buffer reaches (an honest client's repeats are
    /// at most a few ticks late and are not counted here).
    pub far_behind_inputs: u64,
    /// Commands for ticks too far ahead.
    pub far_ahead_inputs: u64,
    /// Commands beyond the per-packet limit.
    pub over_batch: u64,
    /// Commands whose move axes, pitch or buttons broke the rules (clamped: no movement beyond max speed).
    pub clamped_inputs: u64,
    /// Shots whose view time lay outside the rewind window (or in the future): traced in the present.
    pub view_outside_window: u64,
    /// Connects refused because the match was full or over.
    pub refused: u64,
}

/// Counters of the match's traffic and events, for benchmarks and the viewer.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ServerStats {
    /// Ticks simulated.
    pub ticks: u64,
    /// Snapshots sent with no baseline, and their total bytes.
    pub full_snapshots: u64,
    /// Bytes of the snapshots sent with no baseline.
    pub full_snapshot_bytes: u64,
    /// Largest snapshot sent with no baseline, bytes.
    pub full_snapshot_max: usize,
    /// Snapshots sent against a baseline.
    pub delta_snapshots: u64,
    /// Bytes of the snapshots sent against a baseline.
    pub delta_snapshot_bytes: u64,
    /// Shots that struck a player (rewound or not).
    pub hits: u64,
    /// Shots traced against rewound hitboxes.
    pub rewound_shots: u64,
    /// Clients disconnected by the timeout.
    pub timeouts: u64,
    /// Reconnects into a kept slot.
    pub reconnects: u64,
    /// Snapshots that could not be encoded (and were not sent); logged as warnings. Zero in a healthy match.
    pub snapshot_errors: u64,
    /// Snapshots the range coder made smaller than bit-packing (sent range-coded).
    pub range_coded_snapshots: u64,
    /// Players and cubes held back from a snapshot by its byte budget.
    pub held_entities: u64,
    /// Shots and kills resolved (each goes to every client it concerns).
    pub events: u64,
    /// Events sent again because no snapshot carrying them was acknowledged in time.
    pub event_resends: u64,
}

/// Something that happened in the match, for the driver's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// A player took (or took back) a slot.
    Joined {
        /// The slot.
        slot: PlayerId,
        /// The token's name.
        name: String,
        /// True when it reclaimed a kept slot.
        reconnect: bool,
    },
    /// A player stopped sending (or said goodbye); its slot is kept for the grace period.
    Disconnected(PlayerId),
    /// A kept slot's grace ran out; the player left the match.
    Left(PlayerId),
    /// The lifecycle moved on.
    Phase(MatchPhase),
}

struct Client {
    name: String,
    addr: Option<SocketAddr>,
    last_heard: Duration,
    disconnected_at: Option<Duration>,
    input: InputBuffer,
    input_stats_counted: InputBufferStats,
    last_input_seq: Option<u16>,
    last_input_tick: Tick,
    sent: TickRing<Snapshot>,
    acked: Option<Tick>,
    /// The ack fields of the input packet that carried each tick's input first: which snapshots the client had
    /// received when it gave that input.
    acks_at_input: TickRing<(u16, u32)>,
    /// Sent snapshots whose acknowledgement has already settled their events: every input packet repeats the
    /// last 33 acks, and each snapshot's events need taking off `pending` once.
    events_settled: TickRing<()>,
    /// Round trip in ticks, smoothed: when an unacknowledged event is due again.
    rtt_ticks: f32,
    priority: PriorityAccumulator,
    /// When this client last had each other player in sight.
    last_seen: [Option<Tick>; MAX_SLOTS],
    /// Events for this client not yet acknowledged, oldest first, with the tick each was last sent at.
    pending: VecDeque<(GameEvent, Option<Tick>)>,
    score: ScoreLine,
    hits: u16,
}

/// One match's authoritative server, sans IO: feed it datagrams with [`DedicatedServer::handle_datagram`] and
/// time with [`DedicatedServer::handle_timeout`]; send what [`DedicatedServer::poll_transmit`] returns; call again
/// at [`DedicatedServer::poll_timeout`].
pub struct DedicatedServer {
    config: MatchConfig,
    world: ShooterWorld,
    data_accept: Accept,
    data_chunks: Vec<MatchDataChunk>,
    clients: BTreeMap<PlayerId, Client>,
    by_addr: HashMap<SocketAddr, PlayerId>,
    verified: HashMap<SocketAddr, PlayerClaims>,
    roster_version: u8,
    phase: MatchPhase,
    phase_started: Tick,
    results: Option<MatchResults>,
    finished: bool,
    next_tick_at: Duration,
    tick_duration: Duration,
    outgoing: VecDeque<Transmit>,
    events: VecDeque<ServerEvent>,
    hostile: HostileCounters,
    stats: ServerStats,
    control_seq: u16,
    next_event_id: u16,
    /// Who saw whom at the last sight check.
    visibility: Option<Visibility>,
}

impl std::fmt::Debug for DedicatedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DedicatedServer")
            .field("match_id", &self.config.match_id)
            .field("tick", &self.world.tick())
            .field("phase", &self.phase)
            .field("clients", &self.clients.len())
            .finish()
    }
}

/// Why a server could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// More players than the wire can name, or none.
    #[error("max_players must be 1..={MAX_SLOTS}")]
    MaxPlayers,
    /// The static match data does not serialize within its bounds.
    #[error(transparent)]
    Wire(#[from] WireError),
}

impl DedicatedServer {
    /// A match in the waiting phase at session time `now`.
    pub fn new(config: MatchConfig, now: Duration) -> Result<Self, ServerError> {
        if config.max_players == 0 || usize::from(config.max_players) > MAX_SLOTS {
            return Err(ServerError::MaxPlayers);
        }
        let data = MatchData {
            match_id: config.match_id,
            rules: config.rules.clone(),
            map: config.map.clone(),
            max_players: config.max_players,
            min_players: config.min_players,
            countdown_s: config.countdown.as_secs().min(u64::from(u16::MAX)) as u16,
            time_limit_s: config.time_limit.as_secs().min(u64::from(u16::MAX)) as u16,
            score_limit: config.score_limit,
            weapons: vec!["rifle".to_owned()],
        };
        let bytes = data.to_bytes()?;
        let data_chunks = chunks(&bytes);
        let data_accept = Accept {
            slot: 0,
            server_tick: 0,
            chunk_count: data_chunks.len() as u8,
            data_len: bytes.len() as u32,
            data_hash: data_hash(&bytes),
        };
        let world = ShooterWorld::new(
            config.rules.clone(),
            WorldConfig {
                max_players: usize::from(config.max_players),
                max_rewind: config.max_rewind,
                cube_quant: config.cubes.quant,
            },
            config.map.clone(),
        );
        let tick_duration = config.rules.tick_duration();
        Ok(Self {
            config,
            world,
            data_accept,
            data_chunks,
            clients: BTreeMap::new(),
            by_addr: HashMap::new(),
            verified: HashMap::new(),
            roster_version: 0,
            phase: MatchPhase::Waiting,
            phase_started: 0,
            results: None,
            finished: false,
            next_tick_at: now + tick_duration,
            tick_duration,
            outgoing: VecDeque::new(),
            events: VecDeque::new(),
            hostile: HostileCounters::default(),
            stats: ServerStats::default(),
            control_seq: 0,
            next_event_id: 0,
            visibility: None,
        })
    }

    /// The match settings.
    pub fn config(&self) -> &MatchConfig {
        &self.config
    }

    /// The authoritative world.
    pub fn world(&self) -> &ShooterWorld {
        &self.world
    }

    /// The lifecycle phase.
    pub fn phase(&self) -> MatchPhase {
        self.phase
    }

    /// True once the results have been resent for the linger time: the driver may drop the match.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The final results, once the match has ended.
    pub fn results(&self) -> Option<&MatchResults> {
        self.results.as_ref()
    }

    /// Hostile input counted so far (input-buffer drops included).
    pub fn hostile(&self) -> HostileCounters {
        self.hostile
    }

    /// Traffic and event counters.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Connected players (not counting kept slots).
    pub fn connected(&self) -> usize {
        self.clients.values().filter(|c| c.addr.is_some()).count()
    }

    /// The score of a slot this match.
    pub fn score(&self, slot: PlayerId) -> Option<ScoreLine> {
        self.clients.get(&slot).map(|c| c.score)
    }

    /// The slot bound to `addr`, if any.
    pub fn slot_of(&self, addr: SocketAddr) -> Option<PlayerId> {
        self.by_addr.get(&addr).copied()
    }

    /// The input-buffer fill of a slot (the figure each snapshot reports to its client).
    pub fn input_fill(&self, slot: PlayerId) -> Option<u32> {
        self.clients.get(&slot).map(|c| c.input.fill())
    }

    /// Bytes of the snapshot `slot` would get now with no baseline (what a fresh client receives): the full
    /// state as the benchmark reports it.
    pub fn full_snapshot_bytes(&self, slot: PlayerId) -> Option<usize> {
        let c = self.clients.get(&slot)?;
        let mut snapshot = c.sent.get(self.world.tick())?.clone();
        for r in snapshot.remotes.iter_mut() {
            if let Some(v) = r.known().copied() {
                *r = Sighting::Fresh(v);
            }
        }
        for cube in snapshot.cubes.iter_mut() {
            if let Some(v) = cube.known().copied() {
                *cube = Sighting::Fresh(v);
            }
        }
        encode_snapshot(
            snapshot.tick as u16,
            &self.config.cubes,
            &snapshot,
            None,
            self.config.range_coder,
        )
        .ok()
        .map(|e| e.bytes.len())
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outgoing.pop_front()
    }

    /// The next event for the driver's log.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// When [`DedicatedServer::handle_timeout`] should next run (the next tick).
    pub fn poll_timeout(&self) -> Duration {
        self.next_tick_at
    }

    fn send(&mut self, to: SocketAddr, message: &Message) {
        self.control_seq = self.control_seq.wrapping_add(1);
        if let Ok(payload) = message.encode(self.control_seq, (0, 0)) {
            self.outgoing.push_back(Transmit {
                to,
                delivery: Delivery::Unreliable,
                payload,
            });
        }
    }

    /// Takes one datagram. Anything malformed, unauthenticated or replayed is counted and dropped.
    pub fn handle_datagram(&mut self, now: Duration, from: SocketAddr, bytes: &[u8]) {
        let incoming = match read_packet(bytes) {
            Ok(i) => i,
            Err(_) => {
                self.hostile.malformed += 1;
                return;
            }
        };
        let kind = incoming.kind;
        let header = incoming.header;
        if kind == PacketKind::Snapshot {
            self.hostile.malformed += 1;
            return;
        }
        let message = match Message::decode(incoming) {
            Ok(m) => m,
            Err(_) => {
                self.hostile.malformed += 1;
                return;
            }
        };
        if let Message::ConnectRequest(request) = message {
            self.handle_connect(now, from, request);
            return;
        }
        let Some(&slot) = self.by_addr.get(&from) else {
            self.hostile.unknown_sender += 1;
            return;
        };
        match message {
            Message::Input(commands) => self.handle_input(
                now,
                slot,
                header.sequence,
                header.ack,
                header.ack_bits,
                &commands,
            ),
            Message::RosterRequest => {
                if let Some(c) = self.clients.get_mut(&slot) {
                    c.last_heard = now;
                }
                let roster = self.roster();
                self.send(from, &Message::Roster(roster));
            }
            Message::Disconnect => self.disconnect(now, slot),
            _ => self.hostile.malformed += 1,
        }
    }

    fn roster(&self) -> Roster {
        Roster {
            version: self.roster_version,
            names: self
                .clients
                .iter()
                .map(|(slot, c)| (slot.0, c.name.clone()))
                .collect(),
        }
    }

    /// Records what the connection layer verified about `from`: the claims of the connect token it presented.
    /// Only an address with verified claims can take a slot; later claims for the same address replace earlier
    /// ones (a reconnect with a new token).
    pub fn authenticate(&mut self, from: SocketAddr, claims: PlayerClaims) {
        if self.verified.len() >= VERIFIED_LIMIT && !self.verified.contains_key(&from) {
            let held: std::collections::HashSet<SocketAddr> =
                self.clients.values().filter_map(|c| c.addr).collect();
            self.verified.retain(|addr, _| held.contains(addr));
        }
        self.verified.insert(from, claims);
        // A new session from an address that holds a slot is a restarted client: the old one is gone, so nothing
        // more is coded against its baselines; its connect request reclaims the slot with fresh state.
        self.release_address(from);
    }

    /// Forgets the verified claims of `from` (its connection-layer session ended).
    pub fn forget(&mut self, from: SocketAddr) {
        self.verified.remove(&from);
        self.release_address(from);
    }

    /// Detaches the client at `from`, if any, from its address; its slot waits out the reconnect grace period
    /// from the last time it was heard.
    fn release_address(&mut self, from: SocketAddr) {
        if let Some(&slot) = self.by_addr.get(&from) {
            let heard = self.clients.get(&slot).map(|c| c.last_heard);
            if let Some(heard) = heard {
                self.disconnect(heard, slot);
            }
        }
    }

    fn handle_connect(&mut self, now: Duration, from: SocketAddr, request: ConnectRequest) {
        let Some(token) = self.verified.get(&from).cloned() else {
            self.hostile.bad_token += 1;
            return;
        };
        if token.match_id != self.config.match_id {
            self.hostile.wrong_match += 1;
            self.send(from, &Message::Reject(RejectReason::WrongMatch));
            return;
        }
        let slot = if let Some(&slot) = self.by_addr.get(&from) {
            if self.clients[&slot].name != token.name {
                self.hostile.bad_token += 1;
                return;
            }
            if self.clients[&slot].last_input_seq.is_some() {
                // A client that already played asks again from the same address: it restarted (or started over
                // after losing the server), so its sequence numbers and baselines start afresh too.
                self.reclaim(now, from, slot);
            }
            slot
        } else if let Some((&slot, _)) = self
            .clients
            .iter()
            .find(|(_, c)| c.name == token.name && c.addr.is_none())
        {
            self.reclaim(now, from, slot);
            slot
        } else if self.clients.values().any(|c| c.name == token.name) {
            // The name is playing from another live address: a copied token cannot take the slot over.
            self.hostile.bad_token += 1;
            return;
        } else {
            match self.admit(now, from, &token.name) {
                Ok(slot) => slot,
                Err(reason) => {
                    self.hostile.refused += 1;
                    self.send(from, &Message::Reject(reason));
                    return;
                }
            }
        };
        if let Some(c) = self.clients.get_mut(&slot) {
            c.last_heard = now;
        }
        let accept = Accept {
            slot: slot.0,
            server_tick: self.world.tick(),
            ..self.data_accept
        };
        self.send(from, &Message::Accept(accept));
        let missing: Vec<MatchDataChunk> = self
            .data_chunks
            .iter()
            .filter(|c| request.chunks_held & (1 << c.index) == 0)
            .cloned()
            .collect();
        for chunk in missing {
            self.send(from, &Message::MatchDataChunk(chunk));
        }
    }

    fn new_client(&self, name: &str, addr: SocketAddr, now: Duration) -> Client {
        Client {
            name: name.to_owned(),
            addr: Some(addr),
            last_heard: now,
            disconnected_at: None,
            input: InputBuffer::new(self.config.input.clone(), self.world.tick() + 1),
            input_stats_counted: InputBufferStats::default(),
            last_input_seq: None,
            last_input_tick: 0,
            sent: TickRing::new(SENT_SNAPSHOTS),
            acked: None,
            acks_at_input: TickRing::new(SENT_SNAPSHOTS),
            events_settled: TickRing::new(SENT_SNAPSHOTS),
            rtt_ticks: 6.0,
            priority: interest::accumulator(),
            last_seen: [None; MAX_SLOTS],
            pending: VecDeque::new(),
            score: ScoreLine::default(),
            hits: 0,
        }
    }

    fn admit(
        &mut self,
        now: Duration,
        from: SocketAddr,
        name: &str,
    ) -> Result<PlayerId, RejectReason> {
        if self.phase == MatchPhase::Ended {
            return Err(RejectReason::MatchOver);
        }
        if self.clients.len() >= usize::from(self.config.max_players) {
            return Err(RejectReason::Full);
        }
        let slot = (0..self.config.max_players)
            .map(PlayerId)
            .find(|s| !self.clients.contains_key(s))
            .ok_or(RejectReason::Full)?;
        self.world
            .add_player(slot)
            .map_err(|_| RejectReason::Full)?;
        let client = self.new_client(name, from, now);
        self.clients.insert(slot, client);
        self.by_addr.insert(from, slot);
        self.roster_version = self.roster_version.wrapping_add(1);
        self.events.push_back(ServerEvent::Joined {
            slot,
            name: name.to_owned(),
            reconnect: false,
        });
        Ok(slot)
    }

    fn reclaim(&mut self, now: Duration, from: SocketAddr, slot: PlayerId) {
        let Some(old) = self.clients.get(&slot) else {
            return;
        };
        let mut fresh = self.new_client(&old.name.clone(), from, now);
        fresh.score = old.score;
        fresh.hits = old.hits;
        self.clients.insert(slot, fresh);
        self.by_addr.insert(from, slot);
        self.stats.reconnects += 1;
        self.events.push_back(ServerEvent::Joined {
            slot,
            name: self.clients[&slot].name.clone(),
            reconnect: true,
        });
    }

    fn disconnect(&mut self, now: Duration, slot: PlayerId) {
        let Some(c) = self.clients.get_mut(&slot) else {
            return;
        };
        if let Some(addr) = c.addr.take() {
            self.by_addr.remove(&addr);
            c.disconnected_at = Some(now);
            self.events.push_back(ServerEvent::Disconnected(slot));
        }
    }

    fn handle_input(
        &mut self,
        now: Duration,
        slot: PlayerId,
        sequence: u16,
        ack: u16,
        ack_bits: u32,
        commands: &[InputCommand],
    ) {
        let tick = self.world.tick();
        let Some(c) = self.clients.get_mut(&slot) else {
            return;
        };
        if c.last_input_seq
            .is_some_and(|last| !seq_newer(sequence, last))
        {
            self.hostile.replayed += 1;
            return;
        }
        c.last_input_seq = Some(sequence);
        c.last_heard = now;
        let next = c.input.next_tick();
        let reach = self.config.input.max_ahead;
        self.hostile.far_behind_inputs += commands
            .iter()
            .filter(|k| k.tick.saturating_add(reach) < next)
            .count() as u64;
        c.input.receive(commands);
        if let Some(newest) = commands.first() {
            c.last_input_tick = c.last_input_tick.max(newest.tick);
            if !c.acks_at_input.contains(newest.tick) {
                c.acks_at_input.insert(newest.tick, (ack, ack_bits));
            }
        }
        for seq in acked_sequences(ack, ack_bits) {
            let back = (tick as u16).wrapping_sub(seq);
            let Some(acked_tick) = tick.checked_sub(u32::from(back)) else {
                continue;
            };
            let Some(snapshot) = c.sent.get(acked_tick) else {
                continue;
            };
            if !snapshot.events.is_empty() && !c.events_settled.contains(acked_tick) {
                c.pending
                    .retain(|(e, _)| !snapshot.events.iter().any(|s| s.id == e.id));
                c.events_settled.insert(acked_tick, ());
            }
            if c.acked.is_none_or(|a| acked_tick > a) {
                c.acked = Some(acked_tick);
                let rtt = (tick - acked_tick) as f32;
                c.rtt_ticks += (rtt - c.rtt_ticks) * 0.2;
            }
        }
        let stats = c.input.stats();
        let before = c.input_stats_counted;
        self.hostile.far_ahead_inputs += stats.too_far_ahead - before.too_far_ahead;
        self.hostile.over_batch += stats.over_batch - before.over_batch;
        self.hostile.clamped_inputs += stats.clamped - before.clamped;
        c.input_stats_counted = stats;
    }

    /// Runs every tick due at `now` (at most a few: a stalled driver skips time rather than spiralling).
    pub fn handle_timeout(&mut self, now: Duration) {
        let mut ran = 0;
        while now >= self.next_tick_at {
            if ran == MAX_CATCH_UP_TICKS {
                self.next_tick_at = now + self.tick_duration;
                break;
            }
            self.tick(now);
            self.next_tick_at += self.tick_duration;
            ran += 1;
        }
    }

    fn expire_clients(&mut self, now: Duration) {
        let timeout = self.config.client_timeout;
        let silent: Vec<PlayerId> = self
            .clients
            .iter()
            .filter(|(_, c)| c.addr.is_some() && now.saturating_sub(c.last_heard) > timeout)
            .map(|(s, _)| *s)
            .collect();
        for slot in silent {
            self.stats.timeouts += 1;
            self.disconnect(now, slot);
        }
        let grace = self.config.reconnect_grace;
        let gone: Vec<PlayerId> = self
            .clients
            .iter()
            .filter(|(_, c)| {
                c.disconnected_at
                    .is_some_and(|t| now.saturating_sub(t) > grace)
            })
            .map(|(s, _)| *s)
            .collect();
        for slot in gone {
            if self.phase == MatchPhase::Ended {
                continue;
            }
            self.clients.remove(&slot);
            self.world.remove_player(slot);
            self.roster_version = self.roster_version.wrapping_add(1);
            self.events.push_back(ServerEvent::Left(slot));
        }
    }

    fn commands(&mut self) -> Vec<(PlayerId, InputCommand)> {
        let next = self.world.tick() + 1;
        let mut commands = Vec::with_capacity(self.clients.len());
        for (slot, c) in self.clients.iter_mut() {
            if c.addr.is_none() {
                // A disconnected player stands still, looking where it looked.
                if let Some(state) = self.world.player(*slot) {
                    commands.push((
                        *slot,
                        InputCommand {
                            tick: next,
                            view: physync_engine::shooter::ViewTime::at(next - 1),
                            input: PlayerInput {
                                yaw: state.motion.yaw,
                                pitch: state.motion.pitch,
                                ..PlayerInput::default()
                            },
                        },
                    ));
                }
                continue;
            }
            if let Some(taken) = c.input.take(next) {
                commands.push((*slot, taken.command));
            }
        }
        commands
    }

    fn tick(&mut self, now: Duration) {
        self.expire_clients(now);
        let commands = self.commands();
        let held = ClientsHeld {
            clients: &self.clients,
        };
        let events = self.world.step_held(&commands, &held);
        let tick = self.world.tick();
        self.stats.ticks += 1;
        for shot in &events.shots {
            match shot.rewind {
                Ok(()) => self.stats.rewound_shots += 1,
                Err(RewindError::OutsideWindow { .. } | RewindError::InFuture { .. }) => {
                    self.hostile.view_outside_window += 1
                }
                Err(RewindError::NotRecorded(_)) => {}
            }
            if shot.hit.is_some() {
                self.stats.hits += 1;
                if let Some(c) = self.clients.get_mut(&shot.shooter) {
                    c.hits = c.hits.wrapping_add(1);
                }
            }
        }
        if self.phase == MatchPhase::Live {
            for kill in &events.kills {
                if let Some(c) = kill.killer.and_then(|k| self.clients.get_mut(&k)) {
                    c.score.kills = c.score.kills.saturating_add(1);
                }
                if let Some(c) = self.clients.get_mut(&kill.victim) {
                    c.score.deaths = c.score.deaths.saturating_add(1);
                }
            }
        }
        self.advance_lifecycle(tick);
        let news = self.game_events(&events);
        self.send_snapshots(tick, &news);
        if self.phase == MatchPhase::Ended {
            let since = tick - self.phase_started;
            if since.is_multiple_of(RESULTS_EVERY_TICKS)
                && let Some(results) = self.results.clone()
            {
                let addrs: Vec<SocketAddr> = self.clients.values().filter_map(|c| c.addr).collect();
                for addr in addrs {
                    self.send(addr, &Message::Results(results.clone()));
                }
            }
            if since >= self.config.rules.ticks_in(self.config.results_linger) {
                self.finished = true;
            }
        }
    }

    fn set_phase(&mut self, phase: MatchPhase, tick: Tick) {
        self.phase = phase;
        self.phase_started = tick;
        self.events.push_back(ServerEvent::Phase(phase));
    }

    fn phase_ticks_left(&self, tick: Tick) -> u16 {
        let length = match self.phase {
            MatchPhase::Countdown => self.config.countdown,
            MatchPhase::Live => self.config.time_limit,
            MatchPhase::Waiting | MatchPhase::Ended => return 0,
        };
        let total = self.config.rules.ticks_in(length);
        total
            .saturating_sub(tick - self.phase_started)
            .min(u32::from(u16::MAX)) as u16
    }

    fn advance_lifecycle(&mut self, tick: Tick) {
        match self.phase {
            MatchPhase::Waiting => {
                if self.connected() >= usize::from(self.config.min_players.max(1)) {
                    self.set_phase(MatchPhase::Countdown, tick);
                }
            }
            MatchPhase::Countdown => {
                if self.connected() < usize::from(self.config.min_players.max(1)) {
                    self.set_phase(MatchPhase::Waiting, tick);
                } else if self.phase_ticks_left(tick) == 0 {
                    for c in self.clients.values_mut() {
                        c.score = ScoreLine::default();
                    }
                    self.set_phase(MatchPhase::Live, tick);
                }
            }
            MatchPhase::Live => {
                let limit = self.config.score_limit;
                let by_score = limit > 0 && self.clients.values().any(|c| c.score.kills >= limit);
                if by_score || self.phase_ticks_left(tick) == 0 {
                    self.results = Some(self.final_results());
                    self.set_phase(MatchPhase::Ended, tick);
                }
            }
            MatchPhase::Ended => {}
        }
    }

    fn final_results(&self) -> MatchResults {
        let scores: Vec<(u8, ScoreLine)> =
            self.clients.iter().map(|(s, c)| (s.0, c.score)).collect();
        let winner = scores
            .iter()
            .max_by(|a, b| {
                a.1.kills
                    .cmp(&b.1.kills)
                    .then(b.1.deaths.cmp(&a.1.deaths))
                    .then(b.0.cmp(&a.0))
            })
            .map(|(s, _)| *s);
        MatchResults { scores, winner }
    }

    /// The tick's shots and kills as wire events, each with a fresh id, and who is involved (shooter, victim).
    fn game_events(&mut self, events: &TickEvents) -> Vec<Involved> {
        let mut out = Vec::with_capacity(events.shots.len() + events.kills.len());
        for shot in &events.shots {
            let length = shot
                .hit
                .map(|h| h.distance)
                .or(shot.blocked_at)
                .unwrap_or(shot.ray.range)
                .min(shot.ray.range);
            let seen = ShotSeen::new(
                shot.shooter,
                &shot.ray,
                length,
                shot.hit.map(|h| (h.player, h.zone)),
            );
            self.next_event_id = self.next_event_id.wrapping_add(1);
            out.push(Involved {
                event: GameEvent {
                    id: self.next_event_id,
                    tick: events.tick,
                    kind: EventKind::Shot(seen),
                },
                actor: Some(shot.shooter),
                victim: shot.hit.map(|h| h.player),
            });
        }
        for kill in &events.kills {
            self.next_event_id = self.next_event_id.wrapping_add(1);
            out.push(Involved {
                event: GameEvent {
                    id: self.next_event_id,
                    tick: events.tick,
                    kind: EventKind::Kill {
                        killer: kill.killer,
                        victim: kill.victim,
                    },
                },
                actor: None,
                victim: Some(kill.victim),
            });
        }
        self.stats.events += out.len() as u64;
        out
    }

    fn send_snapshots(&mut self, tick: Tick, news: &[Involved]) {
        let cube_config = self.config.cubes;
        let cubes: Vec<ObjectState> = self
            .world
            .cube_states(&cube_config.quant)
            .into_iter()
            .map(|body| ObjectState {
                body,
                ..ObjectState::default()
            })
            .collect();
        let cube_centers: Vec<Point3<f32>> = cubes
            .iter()
            .map(|c| {
                let p = c.body.position_f32(&cube_config.quant);
                Point3::new(p[0], p[1], p[2])
            })
            .collect();
        // Shared by every client's snapshot this tick: each other player's trimmed state and score, computed once.
        let players: Vec<(PlayerId, PlayerState, RemotePlayerSnap)> = self
            .world
            .players()
            .map(|(id, p)| {
                let score = self.clients.get(&id).map(|c| c.score).unwrap_or_default();
                (id, *p, RemotePlayerSnap::of(p, score))
            })
            .collect();
        let fresh_cubes: Vec<Sighting<ObjectState>> =
            cubes.iter().copied().map(Sighting::Fresh).collect();
        if tick.is_multiple_of(VISIBILITY_EVERY_TICKS) || self.visibility.is_none() {
            self.visibility = Some(interest::visibility(&self.world));
        }
        let Some(visibility) = self.visibility.clone() else {
            return;
        };
        let phase_ticks_left = self.phase_ticks_left(tick);
        let budget_bits = self
            .config
            .snapshot_budget_bytes
            .saturating_sub(HEADER_BYTES) as u64
            * 8;
        let slots: Vec<PlayerId> = self.clients.keys().copied().collect();
        for slot in slots {
            let Some(me) = self.world.player(slot).copied() else {
                continue;
            };
            let Some(c) = self.clients.get_mut(&slot) else {
                continue;
            };
            let Some(addr) = c.addr else { continue };
            let baseline = c
                .acked
                .filter(|a| tick - a <= MAX_BASELINE_AGE)
                .and_then(|a| c.sent.get(a));

            let mut remotes = [Sighting::Hidden; MAX_SLOTS];
            for (other, state, remote) in &players {
                let i = usize::from(other.0);
                if *other == slot || i >= MAX_SLOTS {
                    continue;
                }
                if visibility.sees(slot, *other) {
                    c.last_seen[i] = Some(tick);
                }
                let relevant = c.last_seen[i].is_some_and(|t| tick - t <= SIGHT_GRACE_TICKS);
                if relevant {
                    let distance = (state.position() - me.position()).norm();
                    c.priority.add(
                        interest::player_entity(i),
                        interest::player_priority(distance),
                    );
                    remotes[i] = Sighting::Fresh(*remote);
                } else {
                    c.priority.add(interest::player_entity(i), -1.0);
                }
            }
            for (k, (cube, center)) in cubes.iter().zip(&cube_centers).enumerate() {
                let distance = (center - me.position()).norm();
                let moving = !cube.body.at_rest;
                c.priority.add(
                    interest::cube_entity(k),
                    interest::cube_priority(distance, moving, distance < 16.0),
                );
            }

            for involved in news {
                let relevant = matches!(involved.event.kind, EventKind::Kill { .. })
                    || involved.actor == Some(slot)
                    || involved.victim == Some(slot)
                    || involved.actor.is_some_and(|a| {
                        remotes.get(usize::from(a.0)).is_some_and(Sighting::is_seen)
                    });
                if relevant {
                    c.pending.push_back((involved.event, None));
                }
            }
            while c.pending.len() > MAX_PENDING_EVENTS {
                c.pending.pop_front();
            }
            c.pending
                .retain(|(e, _)| tick.saturating_sub(e.tick) < MAX_EVENT_AGE);
            let resend_after = (c.rtt_ticks.ceil() as Tick + 2).max(3);
            let mut events = Vec::new();
            for (event, last_sent) in c.pending.iter_mut() {
                if events.len() == MAX_EVENTS {
                    break;
                }
                let due = last_sent.is_none_or(|t| tick - t >= resend_after);
                if due {
                    if last_sent.is_some() {
                        self.stats.event_resends += 1;
                    }
                    *last_sent = Some(tick);
                    events.push(*event);
                }
            }
            events.sort_by_key(|e| e.id);
            events.dedup_by_key(|e| e.id);

            let mut snapshot = Snapshot {
                tick,
                phase: self.phase,
                phase_ticks_left,
                input_fill: c.input.fill().min(255) as u8,
                last_input_tick: c.last_input_tick,
                roster_version: self.roster_version,
                local_slot: slot,
                local: LocalPlayerSnap {
                    state: me,
                    score: c.score,
                    hits: c.hits,
                },
                remotes,
                cubes: fresh_cubes.clone(),
                events,
            };
            let (trimmed, measured) = fit_budget(
                &mut snapshot,
                baseline,
                &cube_config,
                &c.priority,
                budget_bits,
            );
            self.stats.held_entities += trimmed;
            let sent_ids: Vec<u16> = snapshot
                .remotes
                .iter()
                .enumerate()
                .filter(|(_, r)| r.fresh().is_some())
                .map(|(i, _)| interest::player_entity(i))
                .chain(
                    snapshot
                        .cubes
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| r.fresh().is_some())
                        .map(|(k, _)| interest::cube_entity(k)),
                )
                .collect();
            c.priority.mark_sent(&sent_ids);
            let has_baseline = baseline.is_some();
            let range_coder = self.config.range_coder;
            let bits = match measured {
                Some(bits) => Ok(bits),
                None => measure_snapshot(&cube_config, &mut snapshot, baseline),
            };
            let encoded = match bits.and_then(|bits| {
                encode_snapshot_sized(
                    tick as u16,
                    &cube_config,
                    snapshot,
                    baseline,
                    range_coder,
                    bits,
                )
            }) {
                Ok(encoded) => encoded,
                Err(error) => {
                    self.stats.snapshot_errors += 1;
                    tracing::warn!(?slot, %error, "snapshot not encodable; not sent");
                    continue;
                }
            };
            let payload = encoded.bytes;
            if has_baseline {
                self.stats.delta_snapshots += 1;
                self.stats.delta_snapshot_bytes += payload.len() as u64;
            } else {
                self.stats.full_snapshots += 1;
                self.stats.full_snapshot_bytes += payload.len() as u64;
                self.stats.full_snapshot_max = self.stats.full_snapshot_max.max(payload.len());
            }
            if encoded.backend == Backend::Arith {
                self.stats.range_coded_snapshots += 1;
            }
            c.sent.insert(tick, encoded.as_read);
            self.outgoing.push_back(Transmit {
                to: addr,
                delivery: Delivery::Unreliable,
                payload,
            });
        }
    }
}

/// What each client had received when it gave an input, from the snapshots the server sent it and the acks its
/// input packets carried.
struct ClientsHeld<'a> {
    clients: &'a BTreeMap<PlayerId, Client>,
}

impl HeldStates for ClientsHeld<'_> {
    fn held(&self, viewer: PlayerId, input_tick: Tick, entity: Entity, tick: Tick) -> bool {
        let Some(c) = self.clients.get(&viewer) else {
            return true;
        };
        let Some(snapshot) = c.sent.get(tick) else {
            return false;
        };
        let sent = match entity {
            Entity::Player(p) => snapshot
                .remotes
                .get(usize::from(p.0))
                .is_some_and(|r| r.fresh().is_some()),
            Entity::Cube(k) => snapshot.cubes.get(k).is_some_and(|r| r.fresh().is_some()),
        };
        if !sent {
            return false;
        }
        // The input's own packet may have been lost (the command came as a repeat): the next packet's acks are
        // the closest word on what the client held.
        let Some(&(ack, bits)) =
            (input_tick..input_tick.saturating_add(6)).find_map(|t| c.acks_at_input.get(t))
        else {
            return true;
        };
        let seq = tick as u16;
        let back = ack.wrapping_sub(seq);
        seq == ack || ((1..=32).contains(&back) && bits & (1 << (back - 1)) != 0)
    }
}

/// An event and the players it concerns (who acted, who was struck or died).
struct Involved {
    event: GameEvent,
    actor: Option<PlayerId>,
    victim: Option<PlayerId>,
}

/// Holds back the lowest-priority players and cubes until the snapshot fits `budget_bits` (the local player,
/// the events and the most urgent entity always go). Returns how many entities were held, and the snapshot's
/// bit-packed size when it fitted untouched (what the encoder would otherwise measure again).
fn fit_budget(
    snapshot: &mut Snapshot,
    baseline: Option<&Snapshot>,
    cube_config: &StateConfig,
    priority: &PriorityAccumulator,
    budget_bits: u64,
) -> (u64, Option<u64>) {
    if let Ok(bits) = measure_snapshot(cube_config, snapshot, baseline)
        && bits <= budget_bits
    {
        return (0, Some(bits));
    }
    let mut skeleton = snapshot.clone();
    for r in skeleton.remotes.iter_mut().filter(|r| r.fresh().is_some()) {
        *r = Sighting::Held(None);
    }
    for c in skeleton.cubes.iter_mut() {
        *c = Sighting::Held(None);
    }
    let Ok(mut total) = measure_snapshot(cube_config, &mut skeleton, baseline) else {
        return (0, None);
    };
    let mut held = 0;
    let mut sent_one = false;
    for id in priority.order() {
        let id = usize::from(id);
        let cost = if id < MAX_SLOTS {
            let Some(value) = snapshot.remotes[id].fresh() else {
                continue;
            };
            fresh_bits(&(), value, baseline.and_then(|b| b.remotes[id].known()))
        } else {
            let k = id - MAX_SLOTS;
            let Some(value) = snapshot.cubes.get(k).and_then(Sighting::fresh) else {
                continue;
            };
            let base = baseline
                .and_then(|b| b.cubes.get(k))
                .and_then(Sighting::known);
            fresh_bits(cube_config, value, base)
        };
        // The most urgent entity always goes, so nothing starves behind a budget the events already fill.
        if total + cost <= budget_bits || !sent_one {
            total += cost;
            sent_one = true;
        } else if id < MAX_SLOTS {
            snapshot.remotes[id] = Sighting::Held(None);
            held += 1;
        } else {
            snapshot.cubes[id - MAX_SLOTS] = Sighting::Held(None);
            held += 1;
        }
    }
    (held, None)
}
