//! The one error type every decoder in the codec returns.

use thiserror::Error;

/// Why a decode (or, rarely, an encode) failed. Network input is hostile: every decoder returns one of these
/// instead of panicking, so a session can count the datagram as dropped and carry on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// The stream ended before the value being read was complete.
    #[error("truncated input: needed more bits than the datagram holds")]
    Truncated,
    /// A value was read that the format does not allow (an out-of-range field, an unknown tag).
    #[error("invalid value for {field}")]
    Invalid {
        /// Which field held the value.
        field: &'static str,
    },
    /// A count or length read from the wire exceeds the bound the format allows.
    #[error("{field} of {value} exceeds the limit of {limit}")]
    TooLarge {
        /// Which field held the count.
        field: &'static str,
        /// The count read.
        value: u64,
        /// The largest count allowed.
        limit: u64,
    },
    /// An entry names a baseline the receiver no longer holds (or never received).
    #[error(
        "object {object} names baseline packet {sequence}, which is not in the receive history"
    )]
    MissingBaseline {
        /// The object id.
        object: u16,
        /// The packet sequence of the named baseline.
        sequence: u16,
    },
    /// The writer ran out of room in its byte budget.
    #[error("output buffer full")]
    Overflow,
}
