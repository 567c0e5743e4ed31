//! What a peer host counts, for status lines, summaries and the viewer's graphs.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

/// Datagrams dropped before they reached the session rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DropCounters {
    /// Undecodable: truncated, invalid fields, trailing bytes, baselines the receiver never had.
    pub malformed: u64,
    /// Longer than any message of their channel.
    pub oversized: u64,
    /// Another protocol id (or version, for state packets).
    pub wrong_protocol: u64,
    /// From an address that is not a joined guest (other than join requests).
    pub unknown_sender: u64,
}

impl DropCounters {
    /// Every dropped datagram.
    pub fn total(&self) -> u64 {
        self.malformed + self.oversized + self.wrong_protocol + self.unknown_sender
    }
}

/// Guest updates the host refused as impossible for an honest guest, by kind. Each is corrected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BadUpdates {
    /// Updates naming another player's authority, or an avatar of another player, or snatching a held object.
    pub no_authority: u64,
    /// Sequences further ahead of the host's than any honest guest can get.
    pub forged_sequence: u64,
    /// Positions outside the world bounds.
    pub out_of_bounds: u64,
    /// Motion no honest simulation makes: a jump further than the object's speed allows since the host last
    /// accepted its state, or a speed or spin over the caps.
    pub implausible: u64,
}

impl BadUpdates {
    /// Every bad update.
    pub fn total(&self) -> u64 {
        self.no_authority + self.forged_sequence + self.out_of_bounds + self.implausible
    }
}

/// One guest link as the host sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuestReport {
    /// The guest's player index.
    pub player: u8,
    /// Its address.
    pub addr: SocketAddr,
    /// Host to guest, last full second (all datagrams).
    pub kbps_up: f64,
    /// Guest to host, last full second.
    pub kbps_down: f64,
    /// Host to guest, average since the guest joined.
    pub avg_kbps_up: f64,
    /// Guest to host, average since the guest joined.
    pub avg_kbps_down: f64,
    /// Smoothed round trip of state packets (ms), once measured.
    pub rtt_ms: Option<f64>,
    /// Smoothed fraction of state packets lost.
    pub loss: f64,
    /// How far behind the fastest arrival this guest's frames play now (ms): the jitter buffer's delay.
    pub playout_ms: f64,
    /// This guest's updates that lost arbitration.
    pub conflicts: u64,
    /// Correction episodes started for this guest.
    pub corrections: u64,
    /// Authority changes in the host's world to or from this guest.
    pub authority_transfers: u64,
    /// This guest's bad updates.
    pub bad_updates: BadUpdates,
    /// State packets received from it.
    pub packets_received: u64,
    /// Objects this guest's link forgot after long silence both ways (idle or held for minutes).
    pub stale_forgotten: u64,
}

/// Session-wide counters of the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HostCounters {
    /// Guest updates rejected by the arbitration rules (lost conflicts).
    pub conflicts: u64,
    /// Correction episodes: an object pushed at top priority to a guest whose update lost or was bad.
    pub corrections: u64,
    /// Times an object's authority changed hands in the host's world.
    pub authority_transfers: u64,
    /// Bad updates by kind.
    pub bad_updates: BadUpdates,
    /// Objects that left the world bounds and were dropped back in.
    pub respawns: u64,
    /// Dropped datagrams by kind.
    pub drops: DropCounters,
    /// Guests admitted.
    pub joins: u64,
    /// Guests that left cleanly.
    pub leaves: u64,
    /// Guests dropped for silence.
    pub timeouts: u64,
    /// Join requests refused.
    pub rejected: u64,
}

/// Converts an optional round trip for reports.
pub(crate) fn ms(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64() * 1000.0)
}
