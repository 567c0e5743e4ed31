//! Control messages of a peer-hosted session: join, accept, reject, keep-alive, leave and the roster.
//!
//! They travel on the reliable-ordered channel ([`crate::transport::Delivery::ReliableOrdered`]), each in its own
//! datagram, described once by [`serialize_control`] over the codec's [`Stream`] so that the writer and the reader
//! cannot drift. Every message starts with the protocol id; a join request then names the protocol version, so a
//! host can answer a guest built from another version with a reject instead of silence.

use physync_codec::bitpack::{BitReadStream, BitWriteStream};
use physync_codec::{CodecError, Ctx, Stream};

use super::scene_transfer::SceneOffer;
use crate::world::avatar::MAX_PLAYERS;

/// Identifies physync peer sessions; a datagram with another id is not ours.
pub const PEER_PROTOCOL_ID: u16 = 0x5053;

/// The session protocol version; a join request with another one is rejected with [`RejectReason::WrongVersion`].
pub const PEER_PROTOCOL_VERSION: u16 = 1;

/// The largest control message in bytes; anything longer is refused before decoding.
pub const MAX_CONTROL_BYTES: usize = 32;

const PROTOCOL: Ctx = Ctx::user(0, "control protocol id");
const KIND: Ctx = Ctx::user(1, "control message kind");
const VERSION: Ctx = Ctx::user(2, "protocol version");
const NONCE: Ctx = Ctx::user(3, "client nonce");
const PLAYER: Ctx = Ctx::user(4, "player slot");
const RATE: Ctx = Ctx::user(6, "rate");
const REASON: Ctx = Ctx::user(7, "reject reason");
const ROSTER: Ctx = Ctx::user(8, "roster");

/// What a guest needs to build the host's world: the scene it will download and the rates the session runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SceneSetup {
    /// The scene both sides build (object ids are indices into it): its length and content hash; the guest
    /// fetches the bytes with [`super::scene_transfer`].
    pub scene: SceneOffer,
    /// Players the session admits, host included.
    pub max_players: u8,
    /// Fixed simulation steps per second.
    pub step_hz: u16,
    /// State packets per second on each link.
    pub send_hz: u16,
}

/// Why a host refused a join request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// Every player slot is taken.
    Full,
    /// The guest speaks another protocol version; the host's is given.
    WrongVersion {
        /// The version the host speaks.
        host_version: u16,
    },
    /// The host refuses this address.
    Banned,
}

/// One control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlMessage {
    /// Guest to host: let me in. Re-sent until answered (a lost reliable message can stay lost for a long time).
    JoinRequest {
        /// The protocol version the guest speaks.
        version: u16,
        /// Random per join attempt; the answer echoes it so a stale answer is recognised.
        nonce: u64,
    },
    /// Host to guest: you are in.
    Accept {
        /// The nonce of the request this answers.
        nonce: u64,
        /// The guest's player index (1.. ; 0 is the host).
        player: u8,
        /// The world to build.
        setup: SceneSetup,
    },
    /// Host to guest: you are not let in.
    Reject {
        /// The nonce of the request this answers.
        nonce: u64,
        /// Why.
        reason: RejectReason,
    },
    /// Either way: still here. Also keeps laminar's reliable channel acknowledged in both directions.
    KeepAlive,
    /// Either way: the sender ends the session (a host leaving ends it for every guest).
    Leave,
    /// Host to guests: the players now in the session, bit `i` for player `i`.
    Roster {
        /// Bit mask of present players.
        players: u16,
    },
}

/// Why a control datagram could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The datagram is longer than any control message.
    #[error("control datagram of {len} bytes exceeds {MAX_CONTROL_BYTES}")]
    Oversized {
        /// Its length.
        len: usize,
    },
    /// The datagram carries another protocol id.
    #[error("protocol id {found:#06x} is not physync's")]
    WrongProtocol {
        /// The id found.
        found: u16,
    },
    /// Bytes remain after the message.
    #[error("{bytes} trailing bytes after the control message")]
    TrailingBytes {
        /// Whole bytes left unread.
        bytes: usize,
    },
    /// The message itself is truncated or holds values it may not.
    #[error(transparent)]
    Codec(#[from] CodecError),
}

impl ControlError {
    /// True when the datagram was not a physync control message at all (wrong protocol), as opposed to a
    /// malformed one.
    pub fn is_wrong_protocol(&self) -> bool {
        matches!(self, ControlError::WrongProtocol { .. })
    }
}

fn serialize_u64<S: Stream>(s: &mut S, ctx: Ctx, value: &mut u64) -> Result<(), CodecError> {
    let mut high = (*value >> 32) as u32;
    let mut low = *value as u32;
    s.bits(ctx, &mut high, 32)?;
    s.bits(ctx, &mut low, 32)?;
    *value = (u64::from(high) << 32) | u64::from(low);
    Ok(())
}

fn serialize_u16<S: Stream>(s: &mut S, ctx: Ctx, value: &mut u16) -> Result<(), CodecError> {
    s.u16(ctx, value)
}

fn serialize_setup<S: Stream>(s: &mut S, setup: &mut SceneSetup) -> Result<(), CodecError> {
    setup.scene.serialize(s)?;
    let mut players = i32::from(setup.max_players);
    s.int(PLAYER, &mut players, 1, MAX_PLAYERS as i32)?;
    setup.max_players = players as u8;
    let mut step = i32::from(setup.step_hz);
    s.int(RATE, &mut step, 1, 1000)?;
    setup.step_hz = step as u16;
    let mut send = i32::from(setup.send_hz);
    s.int(RATE, &mut send, 1, 1000)?;
    setup.send_hz = send as u16;
    Ok(())
}

fn serialize_reason<S: Stream>(s: &mut S, reason: &mut RejectReason) -> Result<(), CodecError> {
    let mut tag = match reason {
        RejectReason::Full => 0,
        RejectReason::WrongVersion { .. } => 1,
        RejectReason::Banned => 2,
    };
    s.int(REASON, &mut tag, 0, 2)?;
    *reason = match tag {
        0 => RejectReason::Full,
        1 => {
            let mut host_version = match reason {
                RejectReason::WrongVersion { host_version } => *host_version,
                _ => 0,
            };
            serialize_u16(s, VERSION, &mut host_version)?;
            RejectReason::WrongVersion { host_version }
        }
        _ => RejectReason::Banned,
    };
    Ok(())
}

/// The one description of every control message: `protocol_id`, a kind tag, then the kind's fields. Reading
/// streams replace `message` with what they decode.
pub fn serialize_control<S: Stream>(
    s: &mut S,
    protocol_id: u16,
    message: &mut ControlMessage,
) -> Result<(), ControlError> {
    let mut id = protocol_id;
    s.u16(PROTOCOL, &mut id)?;
    if id != protocol_id {
        return Err(ControlError::WrongProtocol { found: id });
    }
    let mut kind = match message {
        ControlMessage::JoinRequest { .. } => 0,
        ControlMessage::Accept { .. } => 1,
        ControlMessage::Reject { .. } => 2,
        ControlMessage::KeepAlive => 3,
        ControlMessage::Leave => 4,
        ControlMessage::Roster { .. } => 5,
    };
    s.int(KIND, &mut kind, 0, 5)?;
    if S::READING {
        *message = match kind {
            0 => ControlMessage::JoinRequest {
                version: 0,
                nonce: 0,
            },
            1 => ControlMessage::Accept {
                nonce: 0,
                player: 1,
                setup: SceneSetup {
                    scene: SceneOffer { len: 0, hash: 0 },
                    max_players: 1,
                    step_hz: 1,
                    send_hz: 1,
                },
            },
            2 => ControlMessage::Reject {
                nonce: 0,
                reason: RejectReason::Full,
            },
            3 => ControlMessage::KeepAlive,
            4 => ControlMessage::Leave,
            _ => ControlMessage::Roster { players: 0 },
        };
    }
    match message {
        ControlMessage::JoinRequest { version, nonce } => {
            serialize_u16(s, VERSION, version)?;
            serialize_u64(s, NONCE, nonce)?;
        }
        ControlMessage::Accept {
            nonce,
            player,
            setup,
        } => {
            serialize_u64(s, NONCE, nonce)?;
            let mut p = i32::from(*player);
            s.int(PLAYER, &mut p, 1, MAX_PLAYERS as i32 - 1)?;
            *player = p as u8;
            serialize_setup(s, setup)?;
        }
        ControlMessage::Reject { nonce, reason } => {
            serialize_u64(s, NONCE, nonce)?;
            serialize_reason(s, reason)?;
        }
        ControlMessage::KeepAlive | ControlMessage::Leave => {}
        ControlMessage::Roster { players } => {
            let mut mask = u32::from(*players);
            s.bits(ROSTER, &mut mask, MAX_PLAYERS as u32)?;
            *players = mask as u16;
        }
    }
    Ok(())
}

/// Writes a control message as one datagram payload.
pub fn encode_control(protocol_id: u16, message: &ControlMessage) -> Result<Vec<u8>, ControlError> {
    let mut s = BitWriteStream::with_capacity(MAX_CONTROL_BYTES);
    let mut m = *message;
    serialize_control(&mut s, protocol_id, &mut m)?;
    Ok(s.finish())
}

/// Reads a control datagram: refuses oversized input before reading, and trailing bytes after the message.
pub fn decode_control(protocol_id: u16, bytes: &[u8]) -> Result<ControlMessage, ControlError> {
    if bytes.len() > MAX_CONTROL_BYTES {
        return Err(ControlError::Oversized { len: bytes.len() });
    }
    let mut s = BitReadStream::new(bytes);
    let mut message = ControlMessage::KeepAlive;
    serialize_control(&mut s, protocol_id, &mut message)?;
    let left = s.bits_left();
    if left >= 8 {
        return Err(ControlError::TrailingBytes {
            bytes: (left / 8) as usize,
        });
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_messages() -> Vec<ControlMessage> {
        vec![
            ControlMessage::JoinRequest {
                version: PEER_PROTOCOL_VERSION,
                nonce: 0xDEAD_BEEF_0123_4567,
            },
            ControlMessage::Accept {
                nonce: u64::MAX,
                player: 15,
                setup: SceneSetup {
                    scene: SceneOffer {
                        len: 123_456,
                        hash: 0xFEDC_BA98_7654_3210,
                    },
                    max_players: 16,
                    step_hz: 60,
                    send_hz: 30,
                },
            },
            ControlMessage::Reject {
                nonce: 7,
                reason: RejectReason::Full,
            },
            ControlMessage::Reject {
                nonce: 8,
                reason: RejectReason::WrongVersion { host_version: 9 },
            },
            ControlMessage::Reject {
                nonce: 9,
                reason: RejectReason::Banned,
            },
            ControlMessage::KeepAlive,
            ControlMessage::Leave,
            ControlMessage::Roster {
                players: 0b1000_0000_0000_1011,
            },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in all_messages() {
            let bytes = encode_control(PEER_PROTOCOL_ID, &m).unwrap();
            assert!(bytes.len() <= MAX_CONTROL_BYTES, "{m:?}");
            assert_eq!(decode_control(PEER_PROTOCOL_ID, &bytes), Ok(m));
        }
    }

    #[test]
    fn hostile_input_gives_typed_errors() {
        let bytes = encode_control(
            PEER_PROTOCOL_ID,
            &ControlMessage::JoinRequest {
                version: 1,
                nonce: 5,
            },
        )
        .unwrap();
        for cut in 0..bytes.len() {
            assert_eq!(
                decode_control(PEER_PROTOCOL_ID, &bytes[..cut]),
                Err(ControlError::Codec(CodecError::Truncated)),
                "cut at {cut}"
            );
        }
        assert!(
            decode_control(0x1234, &bytes)
                .unwrap_err()
                .is_wrong_protocol()
        );
        let mut long = bytes.clone();
        long.extend([0; 4]);
        assert_eq!(
            decode_control(PEER_PROTOCOL_ID, &long),
            Err(ControlError::TrailingBytes { bytes: 4 })
        );
        assert_eq!(
            decode_control(PEER_PROTOCOL_ID, &[0u8; 100]),
            Err(ControlError::Oversized { len: 100 })
        );
        // Kind 7 does not exist.
        let mut bad = BitWriteStream::new();
        bad.u16(PROTOCOL, &mut PEER_PROTOCOL_ID.clone()).unwrap();
        bad.bits(KIND, &mut 7, 3).unwrap();
        assert_eq!(
            decode_control(PEER_PROTOCOL_ID, &bad.finish()),
            Err(ControlError::Codec(CodecError::Invalid {
                field: KIND.name
            }))
        );
    }

    #[test]
    fn accept_refuses_the_host_slot_and_impossible_setups() {
        let bad_slot = ControlMessage::Accept {
            nonce: 1,
            player: 0,
            setup: SceneSetup {
                scene: SceneOffer { len: 10, hash: 1 },
                max_players: 4,
                step_hz: 60,
                send_hz: 60,
            },
        };
        assert!(encode_control(PEER_PROTOCOL_ID, &bad_slot).is_err());
        let too_many = ControlMessage::Accept {
            nonce: 1,
            player: 1,
            setup: SceneSetup {
                scene: SceneOffer { len: 10, hash: 1 },
                max_players: 17,
                step_hz: 60,
                send_hz: 60,
            },
        };
        assert!(encode_control(PEER_PROTOCOL_ID, &too_many).is_err());
    }
}
