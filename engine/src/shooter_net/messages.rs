//! The control and input messages of the shooter protocol, each described once by a serialize function.

use physync_codec::Stream;
use physync_codec::bitpack::BitWriteStream;
use physync_codec::stream::Ctx;

use super::snapshot::{MAX_SLOTS, ScoreLine};
use super::token::MAX_NAME_BYTES;
use super::wire::{self, Incoming, PacketKind, WireError};
use crate::shooter::input::{InputCommand, PlayerInput, ViewTime};

/// Most commands one input packet may carry on the wire (the protocol sends the newest plus five repeats; a
/// larger batch still decodes so the server can count it as hostile).
pub const MAX_WIRE_COMMANDS: usize = 8;
/// Bytes of static match data per chunk: with the header it stays well under the 1200-byte MTU budget.
pub const CHUNK_BYTES: usize = 1000;
/// Most chunks the static match data may take.
pub const MAX_CHUNKS: usize = 32;
/// Furthest back, in ticks, an input's view time can be named relative to the input's own tick.
pub const MAX_VIEW_LAG: u32 = 255;

const CHUNK_MASK: Ctx = Ctx::user(30, "chunks held");
const SLOT: Ctx = Ctx::user(31, "slot");
const TICK: Ctx = Ctx::user(32, "tick");
const CHUNK_COUNT: Ctx = Ctx::user(33, "chunk count");
const LEN: Ctx = Ctx::user(34, "length");
const HASH: Ctx = Ctx::user(35, "hash");
const REASON: Ctx = Ctx::user(36, "reject reason");
const BYTE: Ctx = Ctx::user(37, "byte");
const COMMANDS: Ctx = Ctx::user(38, "command count");
const VIEW_LAG: Ctx = Ctx::user(39, "view lag");
const FRACTION: Ctx = Ctx::user(40, "view fraction");
const AXIS: Ctx = Ctx::user(41, "move axis");
const ANGLE: Ctx = Ctx::user(42, "view angle");
const BUTTONS: Ctx = Ctx::user(43, "buttons");
const VERSION: Ctx = Ctx::user(44, "roster version");
const ENTRIES: Ctx = Ctx::user(45, "entries");
const SCORE: Ctx = Ctx::user(46, "score");
const WINNER: Ctx = Ctx::user(47, "winner");

/// Client → server: asks for a slot; repeated until accepted and all static data is held. Who asks is what the
/// connect token the connection layer verified says (the request itself carries no identity).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectRequest {
    /// Bit `i` set: chunk `i` of the static match data is already held (the server resends the others).
    pub chunks_held: u32,
}

/// Why a connect was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Every slot is taken.
    Full = 0,
    /// The token's MAC does not verify.
    BadToken = 1,
    /// The token has expired.
    Expired = 2,
    /// The token is for another match.
    WrongMatch = 3,
    /// The match is over.
    MatchOver = 4,
}

/// Server → client: the connect was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Accept {
    /// The slot granted.
    pub slot: u8,
    /// The server's tick when it answered.
    pub server_tick: u32,
    /// Chunks of the static match data.
    pub chunk_count: u8,
    /// Total bytes of the static match data.
    pub data_len: u32,
    /// SipHash (zero key) of the static match data: a checksum of the reassembly.
    pub data_hash: u64,
}

/// A chunk of the static match data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MatchDataChunk {
    /// Its index.
    pub index: u8,
    /// The bytes (at most [`CHUNK_BYTES`]).
    pub bytes: Vec<u8>,
}

/// Slot-to-name table of the players in the match.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Roster {
    /// Version; snapshots name the current one.
    pub version: u8,
    /// `(slot, name)` of every connected player.
    pub names: Vec<(u8, String)>,
}

/// Final scores of a match, sent to every client when it ends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MatchResults {
    /// `(slot, score)` of every player who took part.
    pub scores: Vec<(u8, ScoreLine)>,
    /// The winner's slot (most kills, then fewest deaths, then lowest slot), if anyone played.
    pub winner: Option<u8>,
}

/// A decoded message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// See [`ConnectRequest`].
    ConnectRequest(ConnectRequest),
    /// See [`Accept`].
    Accept(Accept),
    /// See [`RejectReason`].
    Reject(RejectReason),
    /// See [`MatchDataChunk`].
    MatchDataChunk(MatchDataChunk),
    /// Input commands, newest first; the datagram header's ack fields acknowledge snapshots.
    Input(Vec<InputCommand>),
    /// The client's roster is stale.
    RosterRequest,
    /// See [`Roster`].
    Roster(Roster),
    /// See [`MatchResults`].
    Results(MatchResults),
    /// The sender leaves.
    Disconnect,
}

fn connect<S: Stream>(s: &mut S, m: &mut ConnectRequest) -> Result<(), WireError> {
    s.bits(CHUNK_MASK, &mut m.chunks_held, 32)?;
    Ok(())
}

fn accept<S: Stream>(s: &mut S, m: &mut Accept) -> Result<(), WireError> {
    let mut slot = i32::from(m.slot);
    s.int(SLOT, &mut slot, 0, MAX_SLOTS as i32 - 1)?;
    m.slot = slot as u8;
    wire::u32_full(s, TICK, &mut m.server_tick)?;
    let mut count = u32::from(m.chunk_count);
    s.count(CHUNK_COUNT, &mut count, MAX_CHUNKS as u32)?;
    m.chunk_count = count as u8;
    s.count(LEN, &mut m.data_len, (MAX_CHUNKS * CHUNK_BYTES) as u32)?;
    wire::u64_full(s, HASH, &mut m.data_hash)?;
    Ok(())
}

fn reject<S: Stream>(s: &mut S, m: &mut RejectReason) -> Result<(), WireError> {
    let mut r = *m as i32;
    s.int(REASON, &mut r, 0, 4)?;
    *m = match r {
        0 => RejectReason::Full,
        1 => RejectReason::BadToken,
        2 => RejectReason::Expired,
        3 => RejectReason::WrongMatch,
        _ => RejectReason::MatchOver,
    };
    Ok(())
}

fn chunk<S: Stream>(s: &mut S, m: &mut MatchDataChunk) -> Result<(), WireError> {
    let mut index = i32::from(m.index);
    s.int(SLOT, &mut index, 0, MAX_CHUNKS as i32 - 1)?;
    m.index = index as u8;
    let mut len = m.bytes.len() as u32;
    s.count(LEN, &mut len, CHUNK_BYTES as u32)?;
    if S::READING {
        m.bytes = vec![0; len as usize];
    }
    for b in m.bytes.iter_mut() {
        s.u8(BYTE, b)?;
    }
    Ok(())
}

fn input_command<S: Stream>(s: &mut S, c: &mut InputCommand) -> Result<(), WireError> {
    let mut lag = c.tick.saturating_sub(c.view.tick).min(MAX_VIEW_LAG) as i32;
    s.int(VIEW_LAG, &mut lag, 0, MAX_VIEW_LAG as i32)?;
    c.view.tick = c.tick.saturating_sub(lag as u32);
    s.u8(FRACTION, &mut c.view.fraction)?;
    let mut x = i32::from(c.input.move_x.clamp(-8, 7));
    let mut z = i32::from(c.input.move_z.clamp(-8, 7));
    s.int(AXIS, &mut x, -8, 7)?;
    s.int(AXIS, &mut z, -8, 7)?;
    c.input.move_x = x as i8;
    c.input.move_z = z as i8;
    s.u16(ANGLE, &mut c.input.yaw)?;
    let mut pitch = c.input.pitch as u16;
    s.u16(ANGLE, &mut pitch)?;
    c.input.pitch = pitch as i16;
    s.u8(BUTTONS, &mut c.input.buttons)?;
    Ok(())
}

fn inputs<S: Stream>(s: &mut S, commands: &mut Vec<InputCommand>) -> Result<(), WireError> {
    let mut newest = commands.first().map_or(0, |c| c.tick);
    wire::u32_full(s, TICK, &mut newest)?;
    let mut count = commands.len() as u32;
    s.count(COMMANDS, &mut count, MAX_WIRE_COMMANDS as u32)?;
    if count == 0 {
        return Err(physync_codec::CodecError::Invalid {
            field: COMMANDS.name,
        }
        .into());
    }
    if S::READING {
        *commands = (0..count)
            .map(|i| InputCommand {
                tick: newest.saturating_sub(i),
                view: ViewTime::default(),
                input: PlayerInput::default(),
            })
            .collect();
    } else if commands
        .iter()
        .enumerate()
        .any(|(i, c)| Some(c.tick) != newest.checked_sub(i as u32))
    {
        return Err(physync_codec::CodecError::Invalid { field: TICK.name }.into());
    }
    for c in commands.iter_mut() {
        input_command(s, c)?;
    }
    Ok(())
}

fn roster<S: Stream>(s: &mut S, m: &mut Roster) -> Result<(), WireError> {
    s.u8(VERSION, &mut m.version)?;
    let mut count = m.names.len() as u32;
    s.count(ENTRIES, &mut count, MAX_SLOTS as u32)?;
    if S::READING {
        m.names = vec![(0, String::new()); count as usize];
    }
    for (slot, name) in m.names.iter_mut() {
        let mut v = i32::from(*slot);
        s.int(SLOT, &mut v, 0, MAX_SLOTS as i32 - 1)?;
        *slot = v as u8;
        wire::string(s, name, MAX_NAME_BYTES)?;
    }
    Ok(())
}

fn results<S: Stream>(s: &mut S, m: &mut MatchResults) -> Result<(), WireError> {
    let mut count = m.scores.len() as u32;
    s.count(ENTRIES, &mut count, MAX_SLOTS as u32)?;
    if S::READING {
        m.scores = vec![(0, ScoreLine::default()); count as usize];
    }
    for (slot, score) in m.scores.iter_mut() {
        let mut v = i32::from(*slot);
        s.int(SLOT, &mut v, 0, MAX_SLOTS as i32 - 1)?;
        *slot = v as u8;
        s.u16(SCORE, &mut score.kills)?;
        s.u16(SCORE, &mut score.deaths)?;
    }
    let mut winner = m.winner.map_or(-1, i32::from);
    s.int(WINNER, &mut winner, -1, MAX_SLOTS as i32 - 1)?;
    m.winner = u8::try_from(winner).ok();
    Ok(())
}

impl Message {
    /// The packet type that carries this message.
    pub fn kind(&self) -> PacketKind {
        match self {
            Message::ConnectRequest(_) => PacketKind::ConnectRequest,
            Message::Accept(_) => PacketKind::Accept,
            Message::Reject(_) => PacketKind::Reject,
            Message::MatchDataChunk(_) => PacketKind::MatchDataChunk,
            Message::Input(_) => PacketKind::Input,
            Message::RosterRequest => PacketKind::RosterRequest,
            Message::Roster(_) => PacketKind::Roster,
            Message::Results(_) => PacketKind::Results,
            Message::Disconnect => PacketKind::Disconnect,
        }
    }

    fn serialize<S: Stream>(&mut self, s: &mut S) -> Result<(), WireError> {
        match self {
            Message::ConnectRequest(m) => connect(s, m),
            Message::Accept(m) => accept(s, m),
            Message::Reject(m) => reject(s, m),
            Message::MatchDataChunk(m) => chunk(s, m),
            Message::Input(m) => inputs(s, m),
            Message::Roster(m) => roster(s, m),
            Message::Results(m) => results(s, m),
            Message::RosterRequest | Message::Disconnect => Ok(()),
        }
    }

    /// Encodes the message as a datagram with `sequence` and the ack fields `ack`.
    pub fn encode(&self, sequence: u16, ack: (u16, u32)) -> Result<Vec<u8>, WireError> {
        let mut m = self.clone();
        wire::write_packet(self.kind(), sequence, ack, |s: &mut BitWriteStream| {
            m.serialize(s)
        })
    }

    /// Decodes the body of a datagram whose header was read into `incoming` (snapshots are read with
    /// [`super::snapshot::read_snapshot`] instead).
    pub fn decode(mut incoming: Incoming<'_>) -> Result<Message, WireError> {
        let mut m = match incoming.kind {
            PacketKind::ConnectRequest => Message::ConnectRequest(ConnectRequest::default()),
            PacketKind::Accept => Message::Accept(Accept::default()),
            PacketKind::Reject => Message::Reject(RejectReason::Full),
            PacketKind::MatchDataChunk => Message::MatchDataChunk(MatchDataChunk::default()),
            PacketKind::Input => Message::Input(Vec::new()),
            PacketKind::RosterRequest => Message::RosterRequest,
            PacketKind::Roster => Message::Roster(Roster::default()),
            PacketKind::Results => Message::Results(MatchResults::default()),
            PacketKind::Disconnect => Message::Disconnect,
            PacketKind::Snapshot => return Err(WireError::Unexpected(PacketKind::Snapshot)),
        };
        m.serialize(&mut incoming.body)?;
        incoming.finish()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shooter::input::buttons;
    use crate::shooter_net::wire::read_packet;

    fn messages() -> Vec<Message> {
        let commands = (0..6)
            .map(|i| InputCommand {
                tick: 500 - i,
                view: ViewTime {
                    tick: 490 - i,
                    fraction: 77,
                },
                input: PlayerInput {
                    move_x: -7,
                    move_z: 3,
                    yaw: 40_000,
                    pitch: -1200,
                    buttons: buttons::FIRE,
                },
            })
            .collect();
        vec![
            Message::ConnectRequest(ConnectRequest { chunks_held: 0b101 }),
            Message::Accept(Accept {
                slot: 4,
                server_tick: 1234,
                chunk_count: 2,
                data_len: 1500,
                data_hash: 0xdead_beef_1234,
            }),
            Message::Reject(RejectReason::Expired),
            Message::MatchDataChunk(MatchDataChunk {
                index: 1,
                bytes: (0..=255).collect(),
            }),
            Message::Input(commands),
            Message::RosterRequest,
            Message::Roster(Roster {
                version: 3,
                names: vec![(0, "ann".into()), (7, "zoë".into())],
            }),
            Message::Results(MatchResults {
                scores: vec![(
                    0,
                    ScoreLine {
                        kills: 5,
                        deaths: 1,
                    },
                )],
                winner: Some(0),
            }),
            Message::Disconnect,
        ]
    }

    #[test]
    fn every_message_round_trips_and_truncation_is_an_error() {
        for m in messages() {
            let bytes = m.encode(17, (3, 0xff)).unwrap();
            assert!(bytes.len() <= 1200);
            let incoming = read_packet(&bytes).unwrap();
            assert_eq!(incoming.header.sequence, 17);
            assert_eq!(Message::decode(incoming).unwrap(), m);
            for cut in 12..bytes.len() {
                let Ok(incoming) = read_packet(&bytes[..cut]) else {
                    continue;
                };
                assert!(Message::decode(incoming).is_err(), "{m:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn hostile_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let valid: Vec<Vec<u8>> = messages()
            .iter()
            .map(|m| m.encode(1, (0, 0)).unwrap())
            .collect();
        for i in 0..20_000 {
            let mut bytes = valid[i % valid.len()].clone();
            let flips = rng.random_range(1..6);
            for _ in 0..flips {
                let at = rng.random_range(0..bytes.len());
                bytes[at] ^= 1 << rng.random_range(0..8);
            }
            if let Ok(incoming) = read_packet(&bytes) {
                let _ = Message::decode(incoming);
            }
        }
        let garbage: Vec<u8> = (0..2000).map(|_| rng.random()).collect();
        assert!(read_packet(&garbage).is_err());
    }
}
