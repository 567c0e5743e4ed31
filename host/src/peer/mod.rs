//! The arbitrating peer host: a sans-IO core that owns the authoritative world, admits guests, judges their
//! updates, relays what it accepts, corrects what it refuses, and plays as player 0.
//!
//! Drive it with [`PeerHost::handle_datagram`] for every datagram, [`PeerHost::handle_timeout`] whenever
//! [`PeerHost::poll_timeout`] comes due, and send everything [`PeerHost::poll_transmit`] hands out. Local input
//! goes through [`PlayerControls`]. [`physync_engine::session::SessionSim`] and
//! [`physync_engine::session::udp::pump_udp`] do the driving.

mod config;
mod guest;
mod stats;
#[cfg(test)]
mod tests;
mod validate;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use nalgebra::Vector3;
use physync_codec::{BodyState, CodecError, ObjectState, StateRevisions, seq_newer};
use physync_engine::digest::{DigestExchange, is_digest, world_digest};
use physync_engine::link::{LinkError, LinkSettings, Outgoing, StateLink, TimedAvatar};
use physync_engine::session::scene_transfer::{TransferMessage, decode_transfer, is_transfer};
use physync_engine::session::{
    ControlError, ControlMessage, FrameJitterBuffer, PlayerControls, RateMeter, RejectReason,
    SceneSetup, SceneTransferError, SceneUpload, SessionCore, Upcoming, decode_control,
    encode_control,
};
use physync_engine::transport::{Datagram, Delivery, MAX_DATAGRAM_PAYLOAD, Transmit};
use physync_engine::world::World;
use physync_engine::world::authority::{DEFAULT_AUTHORITY, Direction, PlayerIndex, Verdict};
use physync_engine::world::avatar::{Hand, MAX_PLAYERS};
use physync_engine::world::scene::{ObjectId, SceneError};

pub use config::{DEFAULT_PLAYERS, HostConfig, Plausibility, WorldBounds};
pub use stats::{BadUpdates, DropCounters, GuestReport, HostCounters};
pub use validate::{MAX_AUTHORITY_LEAD, MAX_OWNERSHIP_LEAD};

use guest::GuestLink;
use validate::{Bad, ObjectCheck};

/// Priority of an object being corrected on a link: above everything but nothing special to the codec.
pub const CORRECTION_PRIORITY: f32 = 1_000_000.0;

/// Height (m) above its starting place from which an object that left the world bounds is dropped back in.
pub const RESPAWN_DROP: f32 = 1.0;

/// Steps run at most per [`PeerHost::handle_timeout`]; a host further behind skips the rest of the backlog
/// rather than spiral.
pub const MAX_CATCH_UP_STEPS: u32 = 10;

/// Why a guest left the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// It said goodbye.
    Left,
    /// It went silent for the timeout.
    TimedOut,
    /// It joined again from the same address with a new nonce (a restarted guest).
    Rejoined,
}

/// A player in the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlayerInfo {
    /// Player index (0 is the host).
    pub player: PlayerIndex,
    /// The guest's address; `None` for the host itself.
    pub addr: Option<SocketAddr>,
}

/// The peer host. See the module documentation.
pub struct PeerHost {
    config: HostConfig,
    setup: SceneSetup,
    upload: SceneUpload,
    bounds: WorldBounds,
    link_settings: LinkSettings,
    world: World,
    guests: BTreeMap<SocketAddr, GuestLink>,
    outbox: VecDeque<Transmit>,
    next_step: Duration,
    now: Duration,
    authorities: Vec<PlayerIndex>,
    spawns: Vec<BodyState>,
    counters: HostCounters,
    up: RateMeter,
    ended: bool,
    /// Per-frame buffers, reused: guest object updates due and coming, wire states, base and per-link
    /// priorities.
    due: Vec<(u16, ObjectState)>,
    upcoming: Vec<Upcoming>,
    states: Vec<ObjectState>,
    base_priorities: Vec<f32>,
    link_priorities: Vec<f32>,
    /// Which wire states changed, noted once a frame for every guest's link.
    revisions: StateRevisions<ObjectState>,
    /// The desync detector: digest pages to the guests, and theirs compared with this world.
    digest: DigestExchange,
}

/// Why a host could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostError {
    /// The player count is outside 2..=16.
    #[error("max_players must be 2..={MAX_PLAYERS}, got {0}")]
    Players(u8),
    /// The scene is invalid.
    #[error("scene: {0}")]
    Scene(#[from] SceneError),
    /// The scene cannot be sent to guests (too large).
    #[error("scene: {0}")]
    SceneTransfer(#[from] SceneTransferError),
    /// The link settings are invalid.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The step or send rate does not fit the control messages (1..=1000 Hz).
    #[error("rates must be 1..=1000 Hz")]
    Rate,
}

impl PeerHost {
    /// A host at session time zero, with no guests yet.
    pub fn new(mut config: HostConfig) -> Result<Self, HostError> {
        if !(2..=MAX_PLAYERS as u8).contains(&config.max_players) {
            return Err(HostError::Players(config.max_players));
        }
        if !(1..=1000).contains(&config.world.step_hz) || !(1..=1000).contains(&config.link.send_hz)
        {
            return Err(HostError::Rate);
        }
        config.world.local_player = DEFAULT_AUTHORITY;
        let spec = &config.scene;
        spec.validate()?;
        let upload = SceneUpload::new(spec)?;
        config.world.quant = spec.quant();
        let world = World::new(config.world, spec);
        let mut link_settings = config.link;
        link_settings.codec.max_objects = world.object_count() as u16;
        link_settings.state.quant = config.world.quant;
        StateLink::new(link_settings)?;
        let bounds = config
            .bounds
            .unwrap_or_else(|| WorldBounds::around_scene(spec));
        let setup = SceneSetup {
            scene: upload.offer(),
            max_players: config.max_players,
            step_hz: config.world.step_hz as u16,
            send_hz: config.link.send_hz as u16,
        };
        let authorities = vec![DEFAULT_AUTHORITY; world.object_count()];
        let quant = config.world.quant;
        let spawns = spec
            .objects
            .iter()
            .map(|o| {
                let pose = o.pose.isometry();
                let p = pose.translation.vector + Vector3::y() * RESPAWN_DROP;
                let q = pose.rotation;
                BodyState::quantize(
                    &quant,
                    [p.x, p.y, p.z],
                    [q.i, q.j, q.k, q.w],
                    [0.0; 3],
                    [0.0; 3],
                    false,
                )
            })
            .collect();
        Ok(Self {
            config,
            setup,
            upload,
            bounds,
            link_settings,
            world,
            guests: BTreeMap::new(),
            outbox: VecDeque::new(),
            next_step: Duration::ZERO,
            now: Duration::ZERO,
            authorities,
            spawns,
            counters: HostCounters::default(),
            up: RateMeter::new(),
            ended: false,
            due: Vec::new(),
            upcoming: Vec::new(),
            states: Vec::new(),
            base_priorities: Vec::new(),
            link_priorities: Vec::new(),
            revisions: StateRevisions::new(),
            digest: DigestExchange::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// What guests are told to build.
    pub fn setup(&self) -> SceneSetup {
        self.setup
    }

    /// The authoritative world, for rendering and inspection.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The latest session time the host has been given.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The host and every joined guest, by player index.
    pub fn players(&self) -> Vec<PlayerInfo> {
        let mut players = vec![PlayerInfo {
            player: DEFAULT_AUTHORITY,
            addr: None,
        }];
        players.extend(self.guests.values().map(|g| PlayerInfo {
            player: g.player,
            addr: Some(g.addr),
        }));
        players.sort_by_key(|p| p.player);
        players
    }

    /// Per-guest link figures: traffic both ways, round trip, loss, conflicts, corrections, bad updates.
    pub fn guest_reports(&self) -> Vec<GuestReport> {
        let mut reports: Vec<GuestReport> =
            self.guests.values().map(|g| g.report(self.now)).collect();
        reports.sort_by_key(|r| r.player);
        reports
    }

    /// Session-wide counters.
    pub fn counters(&self) -> &HostCounters {
        &self.counters
    }

    /// Everything the host sent (all links, both channels) over the last full second, in kbps.
    pub fn kbps_up(&self) -> f64 {
        self.up.kbps()
    }

    /// Everything the host sent, averaged from its first datagram to now, in kbps.
    pub fn avg_kbps_up(&self) -> f64 {
        self.up.average_kbps(self.now)
    }

    /// Advances the packet sequence of every guest link by `n` (see [`StateLink::skip_sequences`]): long-session
    /// tests reach the sequence-space edges of a 30-minute session in seconds.
    pub fn skip_link_sequences(&mut self, n: u16) {
        for g in self.guests.values_mut() {
            g.link.skip_sequences(n);
        }
    }

    /// True once the host has left.
    pub fn has_ended(&self) -> bool {
        self.ended
    }

    /// Ends the session: every guest is told the host left; nothing more is sent or stepped.
    pub fn leave(&mut self) {
        if self.ended {
            return;
        }
        let addrs: Vec<SocketAddr> = self.guests.keys().copied().collect();
        for addr in addrs {
            self.send_control(addr, &ControlMessage::Leave);
        }
        self.ended = true;
    }

    /// Feeds one datagram that arrived at `now` from `from`. Anything that does not decode, comes from a stranger
    /// or breaks the rules is counted and dropped; nothing panics.
    pub fn handle_datagram(
        &mut self,
        now: Duration,
        from: SocketAddr,
        delivery: Delivery,
        bytes: &[u8],
    ) {
        self.now = self.now.max(now);
        if self.ended {
            return;
        }
        match delivery {
            Delivery::ReliableOrdered => match decode_control(self.config.protocol_id, bytes) {
                Ok(message) => self.handle_control(now, from, message),
                Err(e) => self.count_control_error(&e),
            },
            Delivery::Unreliable => self.handle_state(now, from, bytes),
        }
    }

    fn count_control_error(&mut self, e: &ControlError) {
        let drops = &mut self.counters.drops;
        match e {
            ControlError::Oversized { .. } => drops.oversized += 1,
            ControlError::WrongProtocol { .. } => drops.wrong_protocol += 1,
            ControlError::TrailingBytes { .. } | ControlError::Codec(_) => drops.malformed += 1,
        }
    }

    fn handle_control(&mut self, now: Duration, from: SocketAddr, message: ControlMessage) {
        match message {
            ControlMessage::JoinRequest { version, nonce } => {
                self.handle_join(now, from, version, nonce)
            }
            ControlMessage::KeepAlive => match self.guests.get_mut(&from) {
                Some(g) => g.last_heard = now,
                None => self.counters.drops.unknown_sender += 1,
            },
            ControlMessage::Leave => {
                if self.guests.contains_key(&from) {
                    self.remove_guest(from, Departure::Left);
                } else {
                    self.counters.drops.unknown_sender += 1;
                }
            }
            ControlMessage::Accept { .. }
            | ControlMessage::Reject { .. }
            | ControlMessage::Roster { .. } => {
                if self.guests.contains_key(&from) {
                    self.counters.drops.malformed += 1;
                } else {
                    self.counters.drops.unknown_sender += 1;
                }
            }
        }
    }

    fn handle_join(&mut self, now: Duration, from: SocketAddr, version: u16, nonce: u64) {
        if let Some(g) = self.guests.get_mut(&from) {
            g.last_heard = now;
            if g.nonce == nonce {
                let accept = ControlMessage::Accept {
                    nonce,
                    player: g.player,
                    setup: self.setup,
                };
                self.send_control(from, &accept);
                return;
            }
            self.remove_guest(from, Departure::Rejoined);
        }
        let reason = if self.config.banned.contains(&from.ip()) {
            Some(RejectReason::Banned)
        } else if version != self.config.version {
            Some(RejectReason::WrongVersion {
                host_version: self.config.version,
            })
        } else {
            None
        };
        let slot =
            (1..self.config.max_players).find(|p| self.guests.values().all(|g| g.player != *p));
        let (reason, slot) = match (reason, slot) {
            (Some(r), _) => (Some(r), None),
            (None, None) => (Some(RejectReason::Full), None),
            (None, Some(p)) => (None, Some(p)),
        };
        if let Some(reason) = reason {
            tracing::info!(%from, ?reason, "join refused");
            self.counters.rejected += 1;
            self.send_control(from, &ControlMessage::Reject { nonce, reason });
            return;
        }
        let Some(player) = slot else { return };
        let link = match StateLink::new(self.link_settings) {
            Ok(link) => link,
            Err(e) => {
                tracing::error!(%e, "link settings refused after validation");
                return;
            }
        };
        tracing::info!(%from, player, "guest joined");
        self.guests.insert(
            from,
            GuestLink {
                player,
                addr: from,
                nonce,
                link,
                last_heard: now,
                next_keepalive: now + self.config.keepalive_interval,
                up: RateMeter::new(),
                down: RateMeter::new(),
                frames: FrameJitterBuffer::configured(
                    self.config.jitter_delay,
                    self.config.adaptive_jitter_delay,
                    u32::from(self.setup.step_hz),
                    self.config.world.quant,
                ),
                playing: false,
                avatar_seen: false,
                accepted_at: vec![0; self.world.object_count()],
                boosts: vec![0; self.world.object_count()],
                conflicts: 0,
                corrections: 0,
                authority_transfers: 0,
                bad: BadUpdates::default(),
            },
        );
        self.counters.joins += 1;
        self.send_control(
            from,
            &ControlMessage::Accept {
                nonce,
                player,
                setup: self.setup,
            },
        );
        self.broadcast_roster();
    }

    fn roster_mask(&self) -> u16 {
        self.guests
            .values()
            .fold(1u16 << DEFAULT_AUTHORITY, |m, g| m | (1 << g.player))
    }

    fn broadcast_roster(&mut self) {
        let roster = ControlMessage::Roster {
            players: self.roster_mask(),
        };
        let addrs: Vec<SocketAddr> = self.guests.keys().copied().collect();
        for addr in addrs {
            self.send_control(addr, &roster);
        }
    }

    /// Removes a guest: what it held is released where it is, and every object under its authority returns to
    /// default authority (authority sequence +1, so every peer takes the host's word for it).
    fn remove_guest(&mut self, addr: SocketAddr, why: Departure) {
        let Some(guest) = self.guests.remove(&addr) else {
            return;
        };
        tracing::info!(%addr, player = guest.player, ?why, "guest left");
        match why {
            Departure::Left => self.counters.leaves += 1,
            Departure::TimedOut => self.counters.timeouts += 1,
            Departure::Rejoined => {}
        }
        self.return_to_default(guest.player);
        self.broadcast_roster();
    }

    fn return_to_default(&mut self, player: PlayerIndex) {
        for hand in Hand::BOTH {
            self.world.release(player, hand);
        }
        for id in 0..self.world.object_count() as ObjectId {
            let view = self.world.authority(id).view;
            if view.authority != player {
                continue;
            }
            let state = ObjectState {
                authority: DEFAULT_AUTHORITY,
                authority_seq: view.authority_seq.wrapping_add(1),
                ..self.world.object_state(id)
            };
            let verdict = self.world.receive_object_state(
                id,
                Direction::GuestToHost { sender: player },
                &state,
            );
            if verdict != Ok(Verdict::Accept) {
                tracing::warn!(id, player, "authority of a departed player not returned");
            }
        }
    }

    fn handle_state(&mut self, now: Duration, from: SocketAddr, bytes: &[u8]) {
        if bytes.len() > MAX_DATAGRAM_PAYLOAD {
            self.counters.drops.oversized += 1;
            return;
        }
        let Some(guest) = self.guests.get_mut(&from) else {
            self.counters.drops.unknown_sender += 1;
            return;
        };
        guest.down.record(now, bytes.len());
        if decode_control(self.config.protocol_id, bytes) == Ok(ControlMessage::Leave) {
            // A leave repeated outside the reliable channel (see `PeerGuest::repeat_leave`): a state packet is
            // never as short as a control message, so nothing else decodes as one.
            self.remove_guest(from, Departure::Left);
            return;
        }
        if is_digest(bytes) {
            // Disagreeing objects are logged and counted by the exchange.
            let _ = self.digest.receive(&self.world, bytes);
            return;
        }
        if is_transfer(bytes) {
            self.handle_transfer(now, from, bytes);
            return;
        }
        let update = match guest.link.receive(now, bytes) {
            Ok(update) => update,
            Err(e) => {
                let drops = &mut self.counters.drops;
                match e {
                    LinkError::WrongPacketType(_)
                    | LinkError::Codec(CodecError::Invalid {
                        field: "protocol id" | "protocol version",
                    }) => drops.wrong_protocol += 1,
                    _ => drops.malformed += 1,
                }
                return;
            }
        };
        guest.last_heard = now;
        guest.playing = true;
        let sender = guest.player;
        let foreign = update
            .avatars
            .iter()
            .chain(&update.overtaken.avatars)
            .filter(|a| a.state.player != sender)
            .count();
        let own = |avatars: Vec<TimedAvatar>| -> Vec<TimedAvatar> {
            avatars
                .into_iter()
                .filter(|a| a.state.player == sender)
                .collect()
        };
        let overtaken = update.overtaken;
        guest
            .frames
            .push(now, update.frame, &own(update.avatars), &update.objects);
        guest.frames.push_overtaken(
            now,
            update.frame,
            &own(overtaken.avatars),
            &overtaken.objects,
        );
        for _ in 0..foreign {
            self.count_bad(from, Bad::NoAuthority, None);
        }
    }

    /// The length of one fixed step.
    fn step_length(&self) -> Duration {
        Duration::from_secs(1) / self.config.world.step_hz
    }

    /// Plays every guest's frames due at `now` into the world: its avatar first (hands open or close), then the
    /// object updates sent beside it, each checked and judged per the rules (guest to host); then the next update
    /// the guest's buffer holds for each object it has authority over leads that object along its path.
    fn play_guest_frames(&mut self, now: Duration) {
        let step = self.step_length();
        let addrs: Vec<SocketAddr> = self.guests.keys().copied().collect();
        for from in addrs {
            let Some(guest) = self.guests.get_mut(&from) else {
                continue;
            };
            let sender = guest.player;
            let avatar = guest.frames.sample(now, sender);
            self.due.clear();
            guest.frames.pop_objects(now, &mut self.due);
            if let Some(avatar) = avatar {
                match validate::check_avatar(&self.world, &self.bounds, sender, &avatar) {
                    Ok((clean, bad)) => {
                        for (kind, object) in bad {
                            self.count_bad(from, kind, Some(object));
                        }
                        self.world.apply_avatar_state(&clean);
                        if let Some(g) = self.guests.get_mut(&from) {
                            g.avatar_seen = true;
                        }
                    }
                    Err(kind) => self.count_bad(from, kind, None),
                }
            }
            let due = std::mem::take(&mut self.due);
            for &(id, state) in &due {
                self.judge_guest_object(from, sender, id, &state);
            }
            self.due = due;
            let mut upcoming = std::mem::take(&mut self.upcoming);
            upcoming.clear();
            if let Some(guest) = self.guests.get(&from) {
                guest
                    .frames
                    .upcoming_objects(now + step, step, &mut upcoming);
            }
            for u in upcoming.iter().filter(|u| u.state.authority == sender) {
                self.world.lead_into(u.id, &u.state, u.steps);
            }
            self.upcoming = upcoming;
        }
    }

    /// Checks and judges one object update from the guest at `from`, playing as `sender`.
    fn judge_guest_object(
        &mut self,
        from: SocketAddr,
        sender: PlayerIndex,
        id: ObjectId,
        state: &ObjectState,
    ) {
        let frame = self.world.frame();
        let Some(g) = self.guests.get(&from) else {
            return;
        };
        let Some(&accepted_at) = g.accepted_at.get(usize::from(id)) else {
            self.count_bad(from, Bad::NoAuthority, None);
            return;
        };
        let check = ObjectCheck {
            world: &self.world,
            bounds: &self.bounds,
            limits: &self.config.plausibility,
            since_accepted_s: frame.saturating_sub(accepted_at) as f32 * self.world.dt(),
        };
        if let Err(kind) = validate::check_object(&check, sender, id, state) {
            let quant = &self.world.config().quant;
            tracing::debug!(
                player = sender,
                object = id,
                ?kind,
                frame,
                claimed_position = ?state.body.position_f32(quant),
                claimed_velocity = ?state.body.linear_velocity_f32(quant),
                host_position = ?self.world.physics_pose(id).translation.vector.as_slice(),
                host_velocity = ?self.world.linear_velocity(id).as_slice(),
                "object update refused"
            );
            self.count_bad(from, kind, Some(id));
            match kind {
                Bad::ForgedSequence => self.rebase_forged(id, state),
                Bad::Implausible => self.reclaim(id, sender),
                Bad::NoAuthority | Bad::OutOfBounds => {}
            }
            return;
        }
        let verdict = self
            .world
            .receive_object_state(id, Direction::GuestToHost { sender }, state);
        let frames = self.config.correction_frames;
        let Some(g) = self.guests.get_mut(&from) else {
            return;
        };
        match verdict {
            Ok(Verdict::Accept) => g.accepted_at[usize::from(id)] = frame,
            Ok(Verdict::Reject) => {
                self.counters.conflicts += 1;
                g.conflicts += 1;
                if g.correct(id, frames) {
                    self.counters.corrections += 1;
                }
            }
            Ok(Verdict::Confirm) | Err(_) => {}
        }
    }

    /// Takes an object back from a guest whose claim was implausible: default authority, authority sequence +1,
    /// the host's own state, so the correction the host sends wins on the guest (a hand's object stays put).
    fn reclaim(&mut self, id: ObjectId, sender: PlayerIndex) {
        let view = self.world.authority(id).view;
        if view.authority != sender || self.world.holder(id).is_some() {
            return;
        }
        let state = ObjectState {
            authority: DEFAULT_AUTHORITY,
            authority_seq: view.authority_seq.wrapping_add(1),
            ..self.world.object_state(id)
        };
        if self
            .world
            .receive_object_state(id, Direction::GuestToHost { sender }, &state)
            != Ok(Verdict::Accept)
        {
            tracing::warn!(id, sender, "implausible object not taken back");
        }
    }

    /// A joined guest asks for scene chunks: each one asked for goes back in its own datagram.
    fn handle_transfer(&mut self, now: Duration, from: SocketAddr, bytes: &[u8]) {
        let chunks = match decode_transfer(bytes) {
            Ok(TransferMessage::Request { chunks }) => chunks,
            Ok(TransferMessage::Chunk { .. }) | Err(_) => {
                self.counters.drops.malformed += 1;
                return;
            }
        };
        let answers = self.upload.answer(&chunks);
        if let Some(g) = self.guests.get_mut(&from) {
            g.last_heard = now;
            for payload in &answers {
                g.up.record(now, payload.len());
            }
        }
        for payload in answers {
            self.up.record(now, payload.len());
            self.outbox.push_back(Transmit {
                to: from,
                delivery: Delivery::Unreliable,
                payload,
            });
        }
    }

    fn count_bad(&mut self, from: SocketAddr, kind: Bad, object: Option<ObjectId>) {
        let field = |b: &mut BadUpdates| match kind {
            Bad::NoAuthority => b.no_authority += 1,
            Bad::ForgedSequence => b.forged_sequence += 1,
            Bad::OutOfBounds => b.out_of_bounds += 1,
            Bad::Implausible => b.implausible += 1,
        };
        field(&mut self.counters.bad_updates);
        let frames = self.config.correction_frames;
        if let Some(g) = self.guests.get_mut(&from) {
            field(&mut g.bad);
            if let Some(id) = object
                && g.correct(id, frames)
            {
                self.counters.corrections += 1;
            }
        }
    }

    /// A forged claim leaves the forger believing sequences the host's state can never beat; unless a hand holds
    /// the object, the host moves the object's sequences past the claim (default authority, its own state), so
    /// the correction it sends wins on the forger and changes nothing physical anywhere. A claim exactly half the
    /// sequence space ahead cannot be passed without the honest peers reading the new sequence as older: the host
    /// then moves to the claim itself, which every honest peer takes and the forger cannot tell from its own.
    fn rebase_forged(&mut self, id: ObjectId, claim: &ObjectState) {
        if self.world.holder(id).is_some() {
            return;
        }
        let local = self.world.authority(id).view.ownership_seq;
        let past = claim.ownership_seq.wrapping_add(1);
        let ownership_seq = if seq_newer(past, local) {
            past
        } else {
            claim.ownership_seq
        };
        let state = ObjectState {
            authority: DEFAULT_AUTHORITY,
            authority_seq: 0,
            ownership_seq,
            ..self.world.object_state(id)
        };
        let host = Direction::GuestToHost {
            sender: DEFAULT_AUTHORITY,
        };
        if self.world.receive_object_state(id, host, &state) != Ok(Verdict::Accept) {
            tracing::warn!(id, "forged sequences could not be rebased");
        }
    }

    /// Objects that left the world bounds (thrown off the floor, fallen through it) drop back in above their
    /// starting place under default authority (authority sequence +1, so every peer takes it).
    fn respawn_fallen(&mut self) {
        let quant = self.config.world.quant;
        for id in 0..self.world.object_count() as ObjectId {
            if self.world.holder(id).is_some() {
                continue;
            }
            let state = self.world.object_state(id);
            if self.bounds.contains(state.body.position_f32(&quant)) {
                continue;
            }
            let respawned = ObjectState {
                body: self.spawns[usize::from(id)],
                authority: DEFAULT_AUTHORITY,
                authority_seq: state.authority_seq.wrapping_add(1),
                ownership_seq: state.ownership_seq,
            };
            let sender = state.authority;
            let verdict =
                self.world
                    .receive_object_state(id, Direction::GuestToHost { sender }, &respawned);
            if verdict == Ok(Verdict::Accept) {
                self.counters.respawns += 1;
            }
        }
    }

    /// When [`PeerHost::handle_timeout`] must run next: the next fixed step (which also sends and checks
    /// liveness). `None` once the host has left.
    pub fn poll_timeout(&self) -> Option<Duration> {
        (!self.ended).then_some(self.next_step)
    }

    /// Runs everything due by `now`: drops silent guests, sends keep-alives, and runs the fixed steps due, each
    /// followed by a state packet to every guest whose send timer and byte budget allow.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.now = self.now.max(now);
        if self.ended {
            return;
        }
        let silent: Vec<SocketAddr> = self
            .guests
            .values()
            .filter(|g| now.saturating_sub(g.last_heard) > self.config.timeout)
            .map(|g| g.addr)
            .collect();
        for addr in silent {
            self.remove_guest(addr, Departure::TimedOut);
        }
        let due: Vec<SocketAddr> = self
            .guests
            .values()
            .filter(|g| g.next_keepalive <= now)
            .map(|g| g.addr)
            .collect();
        for addr in due {
            self.send_control(addr, &ControlMessage::KeepAlive);
            if let Some(g) = self.guests.get_mut(&addr) {
                g.next_keepalive = now + self.config.keepalive_interval;
            }
        }
        let step = self.step_length();
        let mut steps = 0;
        while self.next_step <= now {
            if steps == MAX_CATCH_UP_STEPS {
                self.next_step = now + step;
                break;
            }
            let at = self.next_step;
            self.step(at);
            self.next_step += step;
            steps += 1;
        }
        if let Some(page) = self.digest.poll(now, &self.world) {
            for &to in self.guests.keys() {
                self.outbox.push_back(Transmit {
                    to,
                    delivery: Delivery::Unreliable,
                    payload: page.clone(),
                });
            }
        }
        for g in self.guests.values_mut() {
            g.up.tick(now);
            g.down.tick(now);
        }
        self.up.tick(now);
    }

    /// The desync detector's counters and this world's digest (see [`physync_engine::digest`]).
    pub fn digest(&self) -> (&DigestExchange, u64) {
        (&self.digest, world_digest(&self.world))
    }

    fn step(&mut self, now: Duration) {
        self.play_guest_frames(now);
        self.world.step();
        self.respawn_fallen();
        for (id, last) in self.authorities.iter_mut().enumerate() {
            let current = self.world.authority(id as ObjectId).view.authority;
            if current != *last {
                self.counters.authority_transfers += 1;
                for g in self.guests.values_mut() {
                    if g.player == current || g.player == *last {
                        g.authority_transfers += 1;
                    }
                }
                *last = current;
            }
        }
        self.world.object_states_into(&mut self.states);
        self.revisions.note(&self.states);
        self.world.priorities_into(&mut self.base_priorities);
        let frame = self.world.frame();
        // Relayed avatars are what the host's world shows, on the host's frame: the objects sent beside them
        // went through the same jitter buffer, so a hand and what it holds or just let go arrive together.
        let mut avatars: Vec<(PlayerIndex, TimedAvatar)> = vec![(
            DEFAULT_AUTHORITY,
            TimedAvatar::new(self.world.avatar_state(DEFAULT_AUTHORITY), Duration::ZERO),
        )];
        for g in self.guests.values().filter(|g| g.avatar_seen) {
            avatars.push((
                g.player,
                TimedAvatar::new(self.world.avatar_state(g.player), Duration::ZERO),
            ));
        }
        let mut sends = Vec::new();
        for g in self.guests.values_mut().filter(|g| g.playing) {
            let priorities = &mut self.link_priorities;
            priorities.clone_from(&self.base_priorities);
            for (p, boost) in priorities.iter_mut().zip(g.boosts.iter_mut()) {
                if *boost > 0 {
                    *boost -= 1;
                    if *p >= 0.0 {
                        *p = CORRECTION_PRIORITY;
                    }
                }
            }
            let relayed: Vec<TimedAvatar> = avatars
                .iter()
                .filter(|(p, _)| *p != g.player)
                .map(|(_, a)| *a)
                .collect();
            let out = Outgoing {
                frame,
                objects: &self.states,
                revisions: Some(self.revisions.revisions()),
                priorities,
                avatars: &relayed,
            };
            match g.link.build_packet(now, &out) {
                Ok(Some(packet)) => {
                    g.up.record(now, packet.bytes.len());
                    self.up.record(now, packet.bytes.len());
                    sends.push(Transmit {
                        to: g.addr,
                        delivery: Delivery::Unreliable,
                        payload: packet.bytes,
                    });
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(%e, player = g.player, "state packet not built"),
            }
        }
        self.outbox.extend(sends);
    }

    fn send_control(&mut self, to: SocketAddr, message: &ControlMessage) {
        match encode_control(self.config.protocol_id, message) {
            Ok(payload) => {
                if let Some(g) = self.guests.get_mut(&to) {
                    g.up.record(self.now, payload.len());
                }
                self.up.record(self.now, payload.len());
                self.outbox.push_back(Transmit {
                    to,
                    delivery: Delivery::ReliableOrdered,
                    payload,
                });
            }
            Err(e) => tracing::error!(%e, ?message, "control message not encoded"),
        }
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }
}

impl PlayerControls for PeerHost {
    fn world(&self) -> &World {
        &self.world
    }

    fn player(&self) -> PlayerIndex {
        DEFAULT_AUTHORITY
    }

    fn input_world(&mut self) -> &mut World {
        &mut self.world
    }
}

impl SessionCore for PeerHost {
    fn handle_datagram(&mut self, now: Duration, datagram: Datagram) {
        PeerHost::handle_datagram(
            self,
            now,
            datagram.from,
            datagram.delivery,
            &datagram.payload,
        );
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        PeerHost::poll_transmit(self)
    }

    fn poll_timeout(&self) -> Option<Duration> {
        PeerHost::poll_timeout(self)
    }

    fn handle_timeout(&mut self, now: Duration) {
        PeerHost::handle_timeout(self, now);
    }
}
