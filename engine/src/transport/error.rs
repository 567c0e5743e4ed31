//! Errors raised by the transports.

use std::net::SocketAddr;

use super::datagram::{MAX_DATAGRAM_PAYLOAD, MAX_WIRE_PAYLOAD};

/// Why a transport refused an operation.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The payload is larger than [`MAX_DATAGRAM_PAYLOAD`] (a core's) or [`MAX_WIRE_PAYLOAD`] (sealed).
    #[error(
        "payload of {len} bytes exceeds the datagram limit ({MAX_DATAGRAM_PAYLOAD} bytes from a core, {MAX_WIRE_PAYLOAD} sealed)"
    )]
    PayloadTooLarge {
        /// Size of the refused payload.
        len: usize,
    },
    /// The in-memory network has no endpoint at this address.
    #[error("no endpoint is registered at {0}")]
    UnknownEndpoint(SocketAddr),
    /// The in-memory network already has an endpoint at this address.
    #[error("an endpoint is already registered at {0}")]
    AddressInUse(SocketAddr),
    /// A link conditioner setting is out of range.
    #[error("invalid link configuration: {0}")]
    InvalidLinkConfig(&'static str),
    /// laminar's event channel is gone (cannot happen while the driver lives; kept typed, not unwrapped).
    #[error("the socket's event channel is closed")]
    Closed,
    /// laminar could not bind or query its UDP socket.
    #[error("laminar socket error: {0}")]
    Socket(#[from] laminar::ErrorKind),
}
