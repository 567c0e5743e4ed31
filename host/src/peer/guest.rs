//! What the host keeps for each joined guest.

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::link::StateLink;
use physync_engine::session::{FrameJitterBuffer, RateMeter};
use physync_engine::world::authority::PlayerIndex;

use super::stats::{BadUpdates, GuestReport, ms};

/// One joined guest: its state link, liveness, traffic and counters.
#[derive(Debug)]
pub(crate) struct GuestLink {
    pub(crate) player: PlayerIndex,
    pub(crate) addr: SocketAddr,
    pub(crate) nonce: u64,
    pub(crate) link: StateLink,
    pub(crate) last_heard: Duration,
    pub(crate) next_keepalive: Duration,
    pub(crate) up: RateMeter,
    pub(crate) down: RateMeter,
    /// The guest's frames (its avatar and the object updates sent beside it), played on the host's clock.
    pub(crate) frames: FrameJitterBuffer,
    /// A state packet from the guest has arrived: it holds the scene and runs a world. Until then it is still
    /// downloading the scene and would drop any world state, so none is sent to it.
    pub(crate) playing: bool,
    /// The guest's avatar has been played into the host's world (from then on it is relayed).
    pub(crate) avatar_seen: bool,
    /// Per object: the host frame at which it last accepted the object's state from this guest.
    pub(crate) accepted_at: Vec<u64>,
    /// Per object: frames left at correction priority on this link.
    pub(crate) boosts: Vec<u32>,
    pub(crate) conflicts: u64,
    pub(crate) corrections: u64,
    /// Authority changes in the host's world to or from this guest's player.
    pub(crate) authority_transfers: u64,
    pub(crate) bad: BadUpdates,
}

impl GuestLink {
    /// Starts a correction of `id` on this link (a new episode unless one is running); returns whether it is new.
    pub(crate) fn correct(&mut self, id: u16, frames: u32) -> bool {
        let Some(b) = self.boosts.get_mut(usize::from(id)) else {
            return false;
        };
        let new = *b == 0;
        *b = frames;
        if new {
            self.corrections += 1;
        }
        new
    }

    pub(crate) fn report(&self, now: Duration) -> GuestReport {
        let stats = self.link.stats();
        GuestReport {
            player: self.player,
            addr: self.addr,
            kbps_up: self.up.kbps(),
            kbps_down: self.down.kbps(),
            avg_kbps_up: self.up.average_kbps(now),
            avg_kbps_down: self.down.average_kbps(now),
            rtt_ms: ms(stats.rtt),
            loss: stats.loss,
            playout_ms: self.frames.delay().as_secs_f64() * 1000.0,
            conflicts: self.conflicts,
            corrections: self.corrections,
            authority_transfers: self.authority_transfers,
            bad_updates: self.bad,
            packets_received: stats.packets_received,
            stale_forgotten: stats.stale_forgotten,
        }
    }
}
