//! The vocabulary shared by protocol cores and transports: what to send, how, and what arrived.

use std::net::SocketAddr;

/// Largest payload a transport accepts in one datagram, in bytes.
///
/// Staying at or under 1200 bytes keeps every datagram (payload plus laminar's and the IP/UDP headers) below
/// common path MTUs, so nothing is ever fragmented at the IP layer.
pub const MAX_DATAGRAM_PAYLOAD: usize = 1200;

/// Largest datagram on the wire: a core's payload of at most [`MAX_DATAGRAM_PAYLOAD`] sealed by the connection
/// layer (which adds [`crate::connection::DATA_OVERHEAD`] bytes). Still far below the 1472-byte UDP payload of a
/// 1500-byte Ethernet MTU.
pub const MAX_WIRE_PAYLOAD: usize = MAX_DATAGRAM_PAYLOAD + crate::connection::DATA_OVERHEAD;

/// How a datagram travels: the two channels every session uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// May be lost, duplicated or reordered; used for state, which the next packet supersedes anyway.
    Unreliable,
    /// Arrives exactly once and in send order per (sender, receiver) pair; used for control messages
    /// (join, accept, reject, leave, scene setup).
    ReliableOrdered,
}

/// A datagram a core wants sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Destination address.
    pub to: SocketAddr,
    /// Channel to send it on.
    pub delivery: Delivery,
    /// The bytes, at most [`MAX_DATAGRAM_PAYLOAD`].
    pub payload: Vec<u8>,
}

/// A datagram that arrived, as handed to a core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// Sender address.
    pub from: SocketAddr,
    /// Channel it arrived on.
    pub delivery: Delivery,
    /// The bytes; hostile until decoded.
    pub payload: Vec<u8>,
}
