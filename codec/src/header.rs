//! The packet header and the receiver's record of which packets arrived (for the ack fields it sends back).

use crate::error::CodecError;
use crate::seq::seq_newer;
use crate::stream::{Ctx, Stream};

/// Wire format version; a peer speaking another version is rejected. Raised whenever a peer of the earlier
/// version would read a packet differently: 2 predicts rotations in floating point (`predict`), which rounds
/// some predictions differently from version 1's fixed point.
pub const PROTOCOL_VERSION: u8 = 2;

/// Header size in bytes: protocol id (2), version (1), back end and packet type (1), sequence (2), ack (2),
/// ack bits (4). The header is always bit-packed so that a reader can learn the back end before the payload.
pub const HEADER_BYTES: usize = 12;

/// The largest packet type: seven bits, the eighth names the back end.
pub const MAX_PACKET_TYPE: u8 = 127;

const PROTOCOL: Ctx = Ctx::new(60, "protocol id");
const VERSION: Ctx = Ctx::new(60, "protocol version");
const BACKEND: Ctx = Ctx::new(61, "back end");
const TYPE: Ctx = Ctx::new(61, "packet type");
const SEQUENCE: Ctx = Ctx::new(62, "sequence");
const ACK: Ctx = Ctx::new(62, "ack");
const ACK_BITS: Ctx = Ctx::new(63, "ack bits");

/// How a link codes its payload. Both back ends run the same serialize functions, and a reader takes the back end
/// from each packet's header, so the two ends of a link need not agree on it.
///
/// The default is [`Backend::Arith`]: link budgets are in bytes, and on the codec benchmark's moving cubes the
/// range coder needs about 36 bits an object against about 60 for bit-packing, so a 1200-byte datagram carries
/// about 1.7 times as many objects. It costs more time (a full datagram of 270 objects takes ~0.15 ms to encode or
/// decode against ~0.03 ms for 160 bit-packed ones), which is still small next to a 16 ms frame; pick
/// [`Backend::Bitpack`] where time matters more than bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// Fixed-width bit fields: fastest.
    Bitpack,
    /// Adaptive binary range coding with a model per field: smallest.
    #[default]
    Arith,
}

/// The fields every packet starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketHeader {
    /// What the payload holds (0..=127); the engine assigns the meanings.
    pub packet_type: u8,
    /// This packet's sequence number, one more per packet sent on the link.
    pub sequence: u16,
    /// The newest sequence received from the other side.
    pub ack: u16,
    /// Bit `i` set: sequence `ack - 1 - i` was received too. Each ack is thus repeated 32 times.
    pub ack_bits: u32,
}

/// Serializes a header with the link's protocol id. Reading checks the protocol id and version.
pub fn serialize_header<S: Stream>(
    s: &mut S,
    protocol_id: u16,
    header: &mut PacketHeader,
    backend: &mut Backend,
) -> Result<(), CodecError> {
    let mut id = protocol_id;
    s.u16(PROTOCOL, &mut id)?;
    let mut version = PROTOCOL_VERSION;
    s.u8(VERSION, &mut version)?;
    if id != protocol_id {
        return Err(CodecError::Invalid {
            field: PROTOCOL.name,
        });
    }
    if version != PROTOCOL_VERSION {
        return Err(CodecError::Invalid {
            field: VERSION.name,
        });
    }
    let mut arith = *backend == Backend::Arith;
    s.bool(BACKEND, &mut arith)?;
    *backend = if arith {
        Backend::Arith
    } else {
        Backend::Bitpack
    };
    let mut t = u32::from(header.packet_type);
    s.bits(TYPE, &mut t, 7)?;
    header.packet_type = t as u8;
    s.u16(SEQUENCE, &mut header.sequence)?;
    s.u16(ACK, &mut header.ack)?;
    s.bits(ACK_BITS, &mut header.ack_bits, 32)
}

/// The receiver's side of acks: which of the other side's packets arrived, as the `ack` and `ack_bits` to put in
/// the next outgoing header.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReceivedPackets {
    latest: Option<u16>,
    bits: u32,
}

impl ReceivedPackets {
    /// Nothing received yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes that packet `sequence` arrived (in any order, duplicates allowed).
    pub fn record(&mut self, sequence: u16) {
        let Some(latest) = self.latest else {
            self.latest = Some(sequence);
            return;
        };
        if seq_newer(sequence, latest) {
            let shift = u32::from(sequence.wrapping_sub(latest));
            let shifted = if shift >= 32 { 0 } else { self.bits << shift };
            let old_bit = if shift <= 32 { 1u32 << (shift - 1) } else { 0 };
            self.bits = shifted | old_bit;
            self.latest = Some(sequence);
        } else {
            let back = u32::from(latest.wrapping_sub(sequence));
            if (1..=32).contains(&back) {
                self.bits |= 1 << (back - 1);
            }
        }
    }

    /// `(ack, ack_bits)` for the next header, or `None` before anything arrived.
    pub fn ack(&self) -> Option<(u16, u32)> {
        self.latest.map(|l| (l, self.bits))
    }
}

/// The sequences a header acknowledges: `ack` and each `ack - 1 - i` whose bit `i` is set.
pub fn acked_sequences(ack: u16, ack_bits: u32) -> impl Iterator<Item = u16> {
    std::iter::once(ack).chain(
        (0..32u16)
            .filter(move |i| ack_bits & (1 << i) != 0)
            .map(move |i| ack.wrapping_sub(i + 1)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitpack::{BitReadStream, BitWriteStream};

    #[test]
    fn header_round_trips_in_twelve_bytes() {
        let mut h = PacketHeader {
            packet_type: 127,
            sequence: 65535,
            ack: 7,
            ack_bits: 0x8000_0001,
        };
        let mut w = BitWriteStream::new();
        serialize_header(&mut w, 0xBEEF, &mut h, &mut Backend::Arith).unwrap();
        let bytes = w.finish();
        assert_eq!(bytes.len(), HEADER_BYTES);
        let mut back = PacketHeader::default();
        let mut backend = Backend::Bitpack;
        serialize_header(
            &mut BitReadStream::new(&bytes),
            0xBEEF,
            &mut back,
            &mut backend,
        )
        .unwrap();
        assert_eq!((back, backend), (h, Backend::Arith));
        let r = serialize_header(
            &mut BitReadStream::new(&bytes),
            0xBEEE,
            &mut back,
            &mut backend,
        );
        assert_eq!(
            r,
            Err(CodecError::Invalid {
                field: "protocol id"
            })
        );
    }

    #[test]
    fn ack_bits_track_arrivals_across_wrap() {
        let mut r = ReceivedPackets::new();
        assert_eq!(r.ack(), None);
        for s in [65530u16, 65531, 65533, 2, 65534, 1] {
            r.record(s);
        }
        let (ack, bits) = r.ack().unwrap();
        assert_eq!(ack, 2);
        let mut got: Vec<u16> = acked_sequences(ack, bits).collect();
        got.sort_unstable();
        assert_eq!(got, vec![1, 2, 65530, 65531, 65533, 65534]);
    }

    #[test]
    fn a_long_gap_clears_old_bits() {
        let mut r = ReceivedPackets::new();
        r.record(10);
        r.record(11);
        r.record(100);
        assert_eq!(r.ack(), Some((100, 0)));
        r.record(68);
        assert_eq!(r.ack(), Some((100, 1 << 31)));
    }
}
