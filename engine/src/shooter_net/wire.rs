//! Framing shared by every shooter datagram: the codec's 12-byte header (protocol id, version, back end, packet
//! type, sequence, ack, ack bits) followed by the body, and the serialize helpers the bodies share. Control and
//! input messages are bit-packed; snapshots take whichever back end (bit-packing or the range coder) makes them
//! smaller, and the header says which.

use physync_codec::arith::{ArithReadStream, ArithWriteStream};
use physync_codec::bitpack::{BitReadStream, BitWriteStream};
use physync_codec::header::serialize_header;
use physync_codec::stream::Ctx;
use physync_codec::{Backend, CodecError, PacketHeader, Stream};
use thiserror::Error;

use crate::transport::MAX_DATAGRAM_PAYLOAD;

/// Protocol id of the dedicated-server shooter ("SH"); datagrams of other protocols are rejected at the header.
pub const PROTOCOL_ID: u16 = 0x5348;
/// Bytes of the header before every body.
pub const HEADER_BYTES: usize = physync_codec::header::HEADER_BYTES;

/// What a datagram holds (the header's packet type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketKind {
    /// Client → server: a connect token and which static-data chunks the client already holds.
    ConnectRequest = 1,
    /// Server → client: the slot granted and how the static match data is chunked.
    Accept = 2,
    /// Server → client: why a connect was refused.
    Reject = 3,
    /// Server → client: one chunk of the static match data.
    MatchDataChunk = 4,
    /// Client → server: the newest inputs with redundancy; the header's ack fields acknowledge snapshots.
    Input = 5,
    /// Server → client: the delta-coded world as this client needs it.
    Snapshot = 6,
    /// Client → server: the client's roster is out of date.
    RosterRequest = 7,
    /// Server → client: slot-to-name table.
    Roster = 8,
    /// Server → client: final scores of a finished match.
    Results = 9,
    /// Either way: the sender leaves.
    Disconnect = 10,
}

impl PacketKind {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::ConnectRequest,
            2 => Self::Accept,
            3 => Self::Reject,
            4 => Self::MatchDataChunk,
            5 => Self::Input,
            6 => Self::Snapshot,
            7 => Self::RosterRequest,
            8 => Self::Roster,
            9 => Self::Results,
            10 => Self::Disconnect,
            _ => return None,
        })
    }
}

/// Why a shooter datagram could not be decoded (or encoded).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The codec rejected the bits.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The header names a packet type this protocol does not have.
    #[error("unknown packet type {0}")]
    UnknownKind(u8),
    /// The packet type is valid but not the one expected here.
    #[error("unexpected packet {0:?}")]
    Unexpected(PacketKind),
    /// The datagram exceeds the MTU budget.
    #[error("datagram of {0} bytes exceeds the budget")]
    TooLarge(usize),
    /// Bytes were left over after the body: a malformed or padded datagram.
    #[error("{0} trailing bits after the body")]
    Trailing(u64),
    /// A snapshot is coded against a snapshot the receiver does not hold.
    #[error("snapshot baseline {0} is not held")]
    MissingBaseline(u32),
    /// A string field is not UTF-8.
    #[error("string is not UTF-8")]
    NotUtf8,
}

/// A decoded header and the stream positioned at the body.
pub struct Incoming<'a> {
    /// The packet type.
    pub kind: PacketKind,
    /// Sequence, ack and ack bits.
    pub header: PacketHeader,
    /// The body.
    pub body: BitReadStream<'a>,
}

impl Incoming<'_> {
    /// Checks that no more than padding (under a byte) follows the body.
    pub fn finish(self) -> Result<(), WireError> {
        let left = self.body.bits_left();
        if left >= 8 {
            return Err(WireError::Trailing(left));
        }
        Ok(())
    }
}

/// Reads the header of a shooter datagram.
pub fn read_packet(bytes: &[u8]) -> Result<Incoming<'_>, WireError> {
    if bytes.len() > MAX_DATAGRAM_PAYLOAD {
        return Err(WireError::TooLarge(bytes.len()));
    }
    let mut body = BitReadStream::new(bytes);
    let mut header = PacketHeader::default();
    let mut backend = Backend::Bitpack;
    serialize_header(&mut body, PROTOCOL_ID, &mut header, &mut backend)?;
    if backend != Backend::Bitpack {
        return Err(CodecError::Invalid { field: "back end" }.into());
    }
    let kind = PacketKind::from_u8(header.packet_type)
        .ok_or(WireError::UnknownKind(header.packet_type))?;
    Ok(Incoming { kind, header, body })
}

/// The body of a datagram in whichever back end its header names.
pub enum Body<'a> {
    /// Bit-packed.
    Bits(BitReadStream<'a>),
    /// Range-coded.
    Arith(Box<ArithReadStream<'a>>),
}

/// A decoded header and the body in its back end.
pub struct AnyIncoming<'a> {
    /// The packet type.
    pub kind: PacketKind,
    /// Sequence, ack and ack bits.
    pub header: PacketHeader,
    /// The body.
    pub body: Body<'a>,
}

/// Reads the header of a shooter datagram whose body may be in either back end (snapshots).
pub fn read_any_packet(bytes: &[u8]) -> Result<AnyIncoming<'_>, WireError> {
    if bytes.len() > MAX_DATAGRAM_PAYLOAD {
        return Err(WireError::TooLarge(bytes.len()));
    }
    let head = bytes.get(..HEADER_BYTES).ok_or(CodecError::Truncated)?;
    let mut header = PacketHeader::default();
    let mut backend = Backend::Bitpack;
    serialize_header(
        &mut BitReadStream::new(head),
        PROTOCOL_ID,
        &mut header,
        &mut backend,
    )?;
    let kind = PacketKind::from_u8(header.packet_type)
        .ok_or(WireError::UnknownKind(header.packet_type))?;
    let payload = &bytes[HEADER_BYTES..];
    let body = match backend {
        Backend::Bitpack => Body::Bits(BitReadStream::new(payload)),
        Backend::Arith => Body::Arith(Box::new(ArithReadStream::new(payload)?)),
    };
    Ok(AnyIncoming { kind, header, body })
}

/// Writes a range-coded datagram: the (always bit-packed) header, then `body` through the range coder; fails if
/// the result exceeds the MTU budget.
pub fn write_arith_packet(
    kind: PacketKind,
    sequence: u16,
    ack: (u16, u32),
    body: impl FnOnce(&mut ArithWriteStream) -> Result<(), WireError>,
) -> Result<Vec<u8>, WireError> {
    let mut head = BitWriteStream::with_capacity(HEADER_BYTES);
    let mut header = PacketHeader {
        packet_type: kind as u8,
        sequence,
        ack: ack.0,
        ack_bits: ack.1,
    };
    serialize_header(&mut head, PROTOCOL_ID, &mut header, &mut Backend::Arith)?;
    let mut stream = ArithWriteStream::new();
    body(&mut stream)?;
    let mut bytes = head.finish();
    bytes.extend_from_slice(&stream.finish());
    if bytes.len() > MAX_DATAGRAM_PAYLOAD {
        return Err(WireError::TooLarge(bytes.len()));
    }
    Ok(bytes)
}

/// Writes a datagram: header, then `body`; fails if the result exceeds the MTU budget.
pub fn write_packet(
    kind: PacketKind,
    sequence: u16,
    ack: (u16, u32),
    body: impl FnOnce(&mut BitWriteStream) -> Result<(), WireError>,
) -> Result<Vec<u8>, WireError> {
    let mut s = BitWriteStream::with_capacity(MAX_DATAGRAM_PAYLOAD);
    let mut header = PacketHeader {
        packet_type: kind as u8,
        sequence,
        ack: ack.0,
        ack_bits: ack.1,
    };
    serialize_header(&mut s, PROTOCOL_ID, &mut header, &mut Backend::Bitpack)?;
    body(&mut s)?;
    let bytes = s.finish();
    if bytes.len() > MAX_DATAGRAM_PAYLOAD {
        return Err(WireError::TooLarge(bytes.len()));
    }
    Ok(bytes)
}

const STRING_LEN: Ctx = Ctx::user(3, "string length");
const STRING_BYTE: Ctx = Ctx::user(4, "string byte");
const FLOAT: Ctx = Ctx::user(5, "float");

/// Serializes a UTF-8 string of at most `max` bytes (a longer one is refused when writing and reading).
pub fn string<S: Stream>(s: &mut S, value: &mut String, max: usize) -> Result<(), CodecError> {
    let mut len = value.len() as u32;
    s.count(STRING_LEN, &mut len, max as u32)?;
    let mut bytes = if S::READING {
        vec![0u8; len as usize]
    } else {
        value.as_bytes().to_vec()
    };
    for b in bytes.iter_mut() {
        s.u8(STRING_BYTE, b)?;
    }
    if S::READING {
        *value = String::from_utf8(bytes).map_err(|_| CodecError::Invalid {
            field: STRING_BYTE.name,
        })?;
    }
    Ok(())
}

/// Serializes a finite `f32` bit-exactly; a non-finite value read from the wire is refused.
pub fn float<S: Stream>(s: &mut S, value: &mut f32) -> Result<(), CodecError> {
    let mut bits = value.to_bits();
    s.bits(FLOAT, &mut bits, 32)?;
    let v = f32::from_bits(bits);
    if !v.is_finite() {
        return Err(CodecError::Invalid { field: FLOAT.name });
    }
    *value = v;
    Ok(())
}

/// Serializes a `u32` in full.
pub fn u32_full<S: Stream>(s: &mut S, ctx: Ctx, value: &mut u32) -> Result<(), CodecError> {
    s.bits(ctx, value, 32)
}

/// Serializes a `u64` in full.
pub fn u64_full<S: Stream>(s: &mut S, ctx: Ctx, value: &mut u64) -> Result<(), CodecError> {
    let mut hi = (*value >> 32) as u32;
    let mut lo = *value as u32;
    s.bits(ctx, &mut hi, 32)?;
    s.bits(ctx, &mut lo, 32)?;
    *value = (u64::from(hi) << 32) | u64::from(lo);
    Ok(())
}
