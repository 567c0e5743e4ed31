//! What a peer guest counts.

use serde::Serialize;

/// Datagrams the guest dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GuestDrops {
    /// Undecodable datagrams, and control messages that make no sense from a host.
    pub malformed: u64,
    /// Longer than any message of their channel.
    pub oversized: u64,
    /// Another protocol id or version.
    pub wrong_protocol: u64,
    /// From an address other than the host's.
    pub unknown_sender: u64,
    /// State packets that arrived before the host's accept (unreliable traffic can overtake reliable).
    pub before_join: u64,
}

/// What the host's updates did to this guest's world.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GuestCounters {
    /// Host updates applied.
    pub accepted: u64,
    /// Host updates ignored by the rules.
    pub rejected: u64,
    /// Host echoes that confirmed this guest's authority.
    pub confirmed: u64,
    /// Host updates that took an object away from this guest's authority (it lost a conflict, or was corrected).
    pub corrections: u64,
}

/// One line's worth of a guest's link.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GuestLinkReport {
    /// Guest to host, last full second.
    pub kbps_up: f64,
    /// Host to guest, last full second.
    pub kbps_down: f64,
    /// Guest to host, average since joining.
    pub avg_kbps_up: f64,
    /// Host to guest, average since joining.
    pub avg_kbps_down: f64,
    /// Smoothed round trip of state packets (ms), once measured.
    pub rtt_ms: Option<f64>,
    /// Smoothed fraction of state packets lost.
    pub loss: f64,
    /// How far behind the fastest arrival the host's frames play now (ms): the jitter buffer's delay.
    pub playout_ms: f64,
}
