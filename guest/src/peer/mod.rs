//! The peer guest: a sans-IO core that joins a host, builds the scene it is told, plays with zero local latency
//! and takes the host's word per the arbitration rules, with remote avatars played through a jitter buffer.
//!
//! Drive it like the host: [`PeerGuest::handle_datagram`], [`PeerGuest::handle_timeout`] when
//! [`PeerGuest::poll_timeout`] comes due, and send what [`PeerGuest::poll_transmit`] hands out. Once joined,
//! [`PeerGuest::session_mut`] gives the [`GuestSession`], which takes local input through [`PlayerControls`](physync_engine::session::PlayerControls).

mod config;
mod session;
mod stats;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use physync_codec::CodecError;
use physync_engine::digest::{DigestExchange, is_digest, world_digest};
use physync_engine::link::LinkError;
use physync_engine::session::scene_transfer::{
    MAX_REQUESTED_CHUNKS, TransferMessage, decode_transfer, encode_transfer, is_transfer,
};
use physync_engine::session::{
    ControlError, ControlMessage, RejectReason, SceneDownload, SceneSetup, SceneTransferError,
    SessionCore, decode_control, encode_control,
};
use physync_engine::transport::{Datagram, Delivery, MAX_DATAGRAM_PAYLOAD, Transmit};
use physync_engine::world::World;
use physync_engine::world::authority::PlayerIndex;

pub use config::GuestConfig;
pub use session::GuestSession;
pub use stats::{GuestCounters, GuestDrops, GuestLinkReport};

/// Why a guest's session ended (what a viewer tells its user).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The host was not heard from for the timeout (or never answered the join).
    Timeout,
    /// The host refused the join.
    Rejected(RejectReason),
    /// The host ended the session.
    HostLeft,
    /// This guest left.
    Left,
    /// The host's scene was refused: oversized, a chunk that does not fit, a content hash that does not match,
    /// or not a valid scene.
    BadScene(SceneTransferError),
}

/// An accepted join whose scene is still arriving.
struct PendingJoin {
    player: PlayerIndex,
    setup: SceneSetup,
    download: SceneDownload,
    next_request: Duration,
    outstanding: usize,
    /// The host's latest roster, sent while the scene downloads; the session starts from it.
    roster: Option<u16>,
}

/// Where a guest is in its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestPhase {
    /// Sending join requests, then (once accepted) downloading the host's scene.
    Joining,
    /// In the session.
    Joined,
    /// Over, and why.
    Ended(EndReason),
}

/// The peer guest. See the module documentation.
pub struct PeerGuest {
    config: GuestConfig,
    phase: GuestPhase,
    outbox: VecDeque<Transmit>,
    now: Duration,
    started: Option<Duration>,
    next_join: Duration,
    last_heard: Duration,
    next_keepalive: Duration,
    session: Option<GuestSession>,
    pending: Option<PendingJoin>,
    drops: GuestDrops,
    /// The desync detector: digest pages to the host, and the host's compared with this world.
    digest: DigestExchange,
}

impl PeerGuest {
    /// A guest that starts sending join requests on its first [`PeerGuest::handle_timeout`].
    pub fn new(config: GuestConfig) -> Self {
        Self {
            config,
            phase: GuestPhase::Joining,
            outbox: VecDeque::new(),
            now: Duration::ZERO,
            started: None,
            next_join: Duration::ZERO,
            last_heard: Duration::ZERO,
            next_keepalive: Duration::ZERO,
            session: None,
            pending: None,
            drops: GuestDrops::default(),
            digest: DigestExchange::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &GuestConfig {
        &self.config
    }

    /// Joining, joined, or ended and why.
    pub fn phase(&self) -> GuestPhase {
        self.phase
    }

    /// Why the session ended, once it has.
    pub fn end_reason(&self) -> Option<EndReason> {
        match self.phase {
            GuestPhase::Ended(r) => Some(r),
            _ => None,
        }
    }

    /// Scene chunks held and chunks in all, while the accepted guest downloads the host's scene.
    pub fn scene_progress(&self) -> Option<(usize, usize)> {
        self.pending.as_ref().map(|p| p.download.progress())
    }

    /// The player index the host gave this guest, from its accept on (while the scene still downloads too).
    pub fn player(&self) -> Option<PlayerIndex> {
        match (&self.pending, &self.session) {
            (Some(p), _) => Some(p.player),
            (None, Some(s)) => Some(s.player()),
            (None, None) => None,
        }
    }

    /// The session, once joined (kept after the end for a last look).
    pub fn session(&self) -> Option<&GuestSession> {
        self.session.as_ref()
    }

    /// The session for local input, once joined and until the end.
    pub fn session_mut(&mut self) -> Option<&mut GuestSession> {
        if self.phase == GuestPhase::Joined {
            self.session.as_mut()
        } else {
            None
        }
    }

    /// The local world, once joined.
    pub fn world(&self) -> Option<&World> {
        self.session.as_ref().map(|s| s.world())
    }

    /// The desync detector's counters and, once joined, this world's digest (see [`physync_engine::digest`]).
    pub fn digest(&self) -> (&DigestExchange, Option<u64>) {
        (&self.digest, self.world().map(world_digest))
    }

    /// Dropped datagrams by kind.
    pub fn drops(&self) -> &GuestDrops {
        &self.drops
    }

    /// The latest session time the guest has been given.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Leaves the session: the host is told, and the guest stops.
    pub fn leave(&mut self) {
        if matches!(self.phase, GuestPhase::Ended(_)) {
            return;
        }
        self.send_control(&ControlMessage::Leave);
        self.phase = GuestPhase::Ended(EndReason::Left);
    }

    /// Says the leave again, after [`PeerGuest::leave`], as an unreliable datagram: a driver that lingers repeats
    /// it so that the leave reaches the host through loss. The reliable channel cannot be trusted with that: it is
    /// ordered, so one lost keep-alive holds every later message back until laminar resends it, which it does only
    /// once 32 newer messages are acknowledged, and a leaving guest sends none. The host takes the first copy and
    /// drops the rest. Does nothing unless this guest left.
    pub fn repeat_leave(&mut self) {
        if self.phase != GuestPhase::Ended(EndReason::Left) {
            return;
        }
        match encode_control(self.config.protocol_id, &ControlMessage::Leave) {
            Ok(payload) => self.outbox.push_back(Transmit {
                to: self.config.host,
                delivery: Delivery::Unreliable,
                payload,
            }),
            Err(e) => tracing::error!(%e, "leave not encoded"),
        }
    }

    /// Feeds one datagram that arrived at `now`. Anything not from the host, undecodable or out of place is
    /// counted and dropped.
    pub fn handle_datagram(
        &mut self,
        now: Duration,
        from: SocketAddr,
        delivery: Delivery,
        bytes: &[u8],
    ) {
        self.now = self.now.max(now);
        if matches!(self.phase, GuestPhase::Ended(_)) {
            return;
        }
        if from != self.config.host {
            self.drops.unknown_sender += 1;
            return;
        }
        match delivery {
            Delivery::ReliableOrdered => match decode_control(self.config.protocol_id, bytes) {
                Ok(message) => self.handle_control(now, message),
                Err(ControlError::Oversized { .. }) => self.drops.oversized += 1,
                Err(ControlError::WrongProtocol { .. }) => self.drops.wrong_protocol += 1,
                Err(_) => self.drops.malformed += 1,
            },
            Delivery::Unreliable => self.handle_state(now, bytes),
        }
    }

    fn handle_control(&mut self, now: Duration, message: ControlMessage) {
        self.last_heard = now;
        match message {
            ControlMessage::Accept {
                nonce,
                player,
                setup,
            } => {
                if nonce != self.config.nonce {
                    self.drops.malformed += 1;
                } else if self.phase == GuestPhase::Joining && self.pending.is_none() {
                    match SceneDownload::new(setup.scene) {
                        Ok(download) => {
                            tracing::info!(
                                player,
                                bytes = setup.scene.len,
                                "accepted; fetching the scene"
                            );
                            self.pending = Some(PendingJoin {
                                player,
                                setup,
                                download,
                                next_request: now,
                                outstanding: 0,
                                roster: None,
                            });
                        }
                        Err(e) => self.refuse_scene(e),
                    }
                }
            }
            ControlMessage::Reject { nonce, reason } => {
                if nonce != self.config.nonce {
                    self.drops.malformed += 1;
                } else if self.phase == GuestPhase::Joining {
                    tracing::info!(?reason, "join refused");
                    self.phase = GuestPhase::Ended(EndReason::Rejected(reason));
                }
            }
            ControlMessage::KeepAlive => {}
            ControlMessage::Leave => {
                tracing::info!("host left");
                self.phase = GuestPhase::Ended(EndReason::HostLeft);
            }
            ControlMessage::Roster { players } => {
                if let Some(s) = &mut self.session {
                    s.set_roster(players);
                } else if let Some(p) = &mut self.pending {
                    p.roster = Some(players);
                }
            }
            ControlMessage::JoinRequest { .. } => self.drops.malformed += 1,
        }
    }

    fn refuse_scene(&mut self, e: SceneTransferError) {
        tracing::warn!(%e, "host's scene refused");
        self.pending = None;
        self.phase = GuestPhase::Ended(EndReason::BadScene(e));
    }

    /// A scene chunk: stored; the last one builds the world and joins the session. Chunks after the join (late
    /// duplicates) are ignored.
    fn handle_transfer(&mut self, now: Duration, bytes: &[u8]) {
        let Some(pending) = &mut self.pending else {
            return;
        };
        let (index, chunk) = match decode_transfer(bytes) {
            Ok(TransferMessage::Chunk { index, bytes }) => (index, bytes),
            Ok(TransferMessage::Request { .. }) => {
                self.drops.malformed += 1;
                return;
            }
            Err(_) => return self.refuse_scene(SceneTransferError::Malformed),
        };
        self.last_heard = now;
        if let Err(e) = pending.download.insert(index, chunk) {
            return self.refuse_scene(e);
        }
        pending.outstanding = pending.outstanding.saturating_sub(1);
        if pending.outstanding == 0 {
            pending.next_request = now;
        }
        match pending.download.finish() {
            None => {}
            Some(Err(e)) => self.refuse_scene(e),
            Some(Ok(scene)) => {
                let Some(PendingJoin {
                    player,
                    setup,
                    roster,
                    ..
                }) = self.pending.take()
                else {
                    return;
                };
                match GuestSession::new(&self.config, player, setup, scene, now) {
                    Ok(mut session) => {
                        if let Some(players) = roster {
                            session.set_roster(players);
                        }
                        tracing::info!(player, scene = %session.world().scene().name, "joined");
                        self.session = Some(session);
                        self.phase = GuestPhase::Joined;
                        self.next_keepalive = now;
                    }
                    Err(e) => {
                        tracing::warn!(%e, "host's setup refused");
                        self.drops.malformed += 1;
                    }
                }
            }
        }
    }

    fn handle_state(&mut self, now: Duration, bytes: &[u8]) {
        if bytes.len() > MAX_DATAGRAM_PAYLOAD {
            self.drops.oversized += 1;
            return;
        }
        if is_digest(bytes) {
            // Disagreeing resting objects are logged and counted by the exchange.
            if let Some(s) = &self.session {
                let _ = self.digest.receive(s.world(), bytes);
            }
            return;
        }
        if is_transfer(bytes) {
            self.handle_transfer(now, bytes);
            return;
        }
        let Some(session) = self
            .session
            .as_mut()
            .filter(|_| self.phase == GuestPhase::Joined)
        else {
            self.drops.before_join += 1;
            return;
        };
        match session.receive(now, bytes) {
            Ok(()) => self.last_heard = now,
            Err(
                LinkError::WrongPacketType(_)
                | LinkError::Codec(CodecError::Invalid {
                    field: "protocol id" | "protocol version",
                }),
            ) => self.drops.wrong_protocol += 1,
            Err(e) => {
                tracing::debug!(%e, "state packet dropped");
                self.drops.malformed += 1;
            }
        }
    }

    /// When [`PeerGuest::handle_timeout`] must run next: the next join retry while joining, the next fixed step
    /// once joined, never once ended.
    pub fn poll_timeout(&self) -> Option<Duration> {
        match self.phase {
            GuestPhase::Joining => Some(match (&self.pending, self.started) {
                (Some(p), _) => p.next_request,
                (None, None) => self.now,
                (None, Some(_)) => self.next_join,
            }),
            GuestPhase::Joined => self.session.as_ref().map(|s| s.next_step()),
            GuestPhase::Ended(_) => None,
        }
    }

    /// Runs what is due by `now`: join retries and the join timeout, or the fixed steps with their state
    /// packets, keep-alives and the host timeout.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.now = self.now.max(now);
        let started = *self.started.get_or_insert(now);
        match self.phase {
            GuestPhase::Joining => {
                if let Some(p) = &mut self.pending {
                    if now.saturating_sub(self.last_heard) > self.config.timeout {
                        tracing::info!("host timed out during the scene download");
                        self.phase = GuestPhase::Ended(EndReason::Timeout);
                        return;
                    }
                    if now >= p.next_request {
                        let chunks = p.download.missing(MAX_REQUESTED_CHUNKS);
                        p.outstanding = chunks.len();
                        p.next_request = now + self.config.scene_retry;
                        match encode_transfer(&TransferMessage::Request { chunks }) {
                            Ok(payload) => self.outbox.push_back(Transmit {
                                to: self.config.host,
                                delivery: Delivery::Unreliable,
                                payload,
                            }),
                            Err(e) => tracing::error!(%e, "scene request not encoded"),
                        }
                    }
                    return;
                }
                if now.saturating_sub(started) > self.config.timeout {
                    self.phase = GuestPhase::Ended(EndReason::Timeout);
                    return;
                }
                if now >= self.next_join {
                    let join = ControlMessage::JoinRequest {
                        version: self.config.version,
                        nonce: self.config.nonce,
                    };
                    self.send_control(&join);
                    self.next_join = now + self.config.join_retry;
                }
            }
            GuestPhase::Joined => {
                if now.saturating_sub(self.last_heard) > self.config.timeout {
                    tracing::info!("host timed out");
                    self.phase = GuestPhase::Ended(EndReason::Timeout);
                    return;
                }
                if now >= self.next_keepalive {
                    self.send_control(&ControlMessage::KeepAlive);
                    self.next_keepalive = now + self.config.keepalive_interval;
                }
                let host = self.config.host;
                if let Some(s) = &mut self.session {
                    for payload in s.run_until(now) {
                        self.outbox.push_back(Transmit {
                            to: host,
                            delivery: Delivery::Unreliable,
                            payload,
                        });
                    }
                    if let Some(payload) = self.digest.poll(now, s.world()) {
                        self.outbox.push_back(Transmit {
                            to: host,
                            delivery: Delivery::Unreliable,
                            payload,
                        });
                    }
                }
            }
            GuestPhase::Ended(_) => {}
        }
    }

    fn send_control(&mut self, message: &ControlMessage) {
        match encode_control(self.config.protocol_id, message) {
            Ok(payload) => {
                if let Some(s) = &mut self.session {
                    s.record_up(self.now, payload.len());
                }
                self.outbox.push_back(Transmit {
                    to: self.config.host,
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

impl SessionCore for PeerGuest {
    fn handle_datagram(&mut self, now: Duration, datagram: Datagram) {
        PeerGuest::handle_datagram(
            self,
            now,
            datagram.from,
            datagram.delivery,
            &datagram.payload,
        );
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        PeerGuest::poll_transmit(self)
    }

    fn poll_timeout(&self) -> Option<Duration> {
        PeerGuest::poll_timeout(self)
    }

    fn handle_timeout(&mut self, now: Duration) {
        PeerGuest::handle_timeout(self, now);
    }
}
