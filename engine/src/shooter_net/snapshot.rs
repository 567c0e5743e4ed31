//! Per-client snapshots: the world as one client needs it, delta-coded against the last snapshot that client
//! acknowledged (seed 004), through the codec's [`DeltaState`] paths.
//!
//! Context trimming: the client's own player travels in full ([`LocalPlayerSnap`]: what reconciliation
//! compares, plus its score and hit counter); every other player carries only what is rendered and scored
//! ([`RemotePlayerSnap`]: position, view, alive, kills, deaths); cubes are the codec's rigid-body states with its
//! ballistic predictor. A snapshot names its baseline once, as a tick offset, and each entity is coded against
//! the same entity in that snapshot (absolute when it was absent there).
//!
//! Interest management: each entity is a [`Sighting`]: hidden (a player the client cannot see is not sent at
//! all), fresh (its state this tick) or held (relevant, but the byte budget left it out this time; the client
//! keeps what it has). Shots, hits and kills ride along as [`GameEvent`]s.

use physync_codec::delta::{DeltaPath, plan, serialize_entry};
use physync_codec::stream::Ctx;
use physync_codec::{CodecError, DeltaState, ObjectState, StateConfig, Stream};

use super::events::{GameEvent, serialize_events};
use super::wire::{self, PacketKind, WireError};
use crate::shooter::player::{MotionState, PlayerState, Vitals, WeaponState};
use crate::shooter::{PlayerId, Tick, units};

/// Most player slots the wire can name (a match holds at most this many).
pub const MAX_SLOTS: usize = 16;
/// Most cubes a snapshot carries: with every slot filled, every cube moving and the most events, a full snapshot
/// still fits the 1200-byte datagram (checked by a test).
pub const MAX_CUBES: usize = 24;
/// Oldest baseline a snapshot may name, in ticks (the receiver keeps this many snapshots).
pub const MAX_BASELINE_AGE: u32 = 63;

const POS_AXIS: Ctx = Ctx::user(11, "position residual");
const POS_X: Ctx = Ctx::user(12, "position x");
const POS_Y: Ctx = Ctx::user(13, "position y");
const CHANGED: Ctx = Ctx::user(14, "field changed");
const YAW: Ctx = Ctx::user(15, "yaw");
const PITCH: Ctx = Ctx::user(16, "pitch");
const VVEL: Ctx = Ctx::user(17, "vertical velocity");
const FLAG: Ctx = Ctx::user(18, "flag");
const COUNTER: Ctx = Ctx::user(19, "counter");
const TICK: Ctx = Ctx::user(20, "tick");
const OFFSET: Ctx = Ctx::user(21, "baseline offset");
const PHASE: Ctx = Ctx::user(22, "phase");
const SLOT: Ctx = Ctx::user(23, "slot");
const FILL: Ctx = Ctx::user(24, "input fill");
const COUNT: Ctx = Ctx::user(25, "cube count");
const SEEN: Ctx = Ctx::user(54, "sighting");
const FRESH: Ctx = Ctx::user(61, "sent fresh");
const HEADER_FOLLOWS: Ctx = Ctx::user(62, "header follows the baseline");
const CUBES_KEPT: Ctx = Ctx::user(63, "every cube as in the baseline");
const PATH: Ctx = Ctx::user(0, "entry path");
const VERTICAL: Ctx = Ctx::user(1, "vertical move");
const HORIZONTAL: Ctx = Ctx::user(10, "horizontal move");
const POS_Y_CHANGE: Ctx = Ctx::user(2, "vertical residual");
const PITCH_CHANGED: Ctx = Ctx::user(6, "pitch changed");
const YAW_CHANGE: Ctx = Ctx::user(48, "yaw change");
const PITCH_CHANGE: Ctx = Ctx::user(49, "pitch change");

/// Largest per-axis position residual, in position steps (16 m); a longer move goes whole.
const POSITION_RESIDUAL_MAX: i32 = 8191;
/// Horizontal and vertical position bounds on the wire (±64 m; −8 m..56 m): the box the world keeps players in.
const XZ_RANGE: (i32, i32) = (units::POSITION_MIN[0], units::POSITION_MAX[0]);
const Y_RANGE: (i32, i32) = (units::POSITION_MIN[1], units::POSITION_MAX[1]);
/// Vertical velocity bound (±32 m/s in 1/256 m/s steps).
const VVEL_RANGE: i32 = 8_191;

fn position_absolute<S: Stream>(s: &mut S, p: &mut [i32; 3]) -> Result<(), CodecError> {
    s.int(POS_X, &mut p[0], XZ_RANGE.0, XZ_RANGE.1)?;
    s.int(POS_Y, &mut p[1], Y_RANGE.0, Y_RANGE.1)?;
    s.int(POS_X, &mut p[2], XZ_RANGE.0, XZ_RANGE.1)
}

/// A position against a reference: one flag each for a horizontal and a vertical move (players walk on level
/// floors, so mostly the first alone), then the residual of each axis that moved.
fn position_residual<S: Stream>(
    s: &mut S,
    p: &mut [i32; 3],
    reference: &[i32; 3],
) -> Result<(), CodecError> {
    let mut diff = [0i32; 3];
    if !S::READING {
        for i in 0..3 {
            let d = i64::from(p[i]) - i64::from(reference[i]);
            if d.abs() > i64::from(POSITION_RESIDUAL_MAX) {
                return Err(CodecError::Invalid {
                    field: POS_AXIS.name,
                });
            }
            diff[i] = d as i32;
        }
    }
    let bound = POSITION_RESIDUAL_MAX;
    let mut horizontal = diff[0] != 0 || diff[2] != 0;
    s.bool(HORIZONTAL, &mut horizontal)?;
    if horizontal {
        s.int(POS_AXIS, &mut diff[0], -bound, bound)?;
        s.int(POS_AXIS, &mut diff[2], -bound, bound)?;
    }
    let mut vertical = diff[1] != 0;
    s.bool(VERTICAL, &mut vertical)?;
    if vertical {
        s.int(POS_Y_CHANGE, &mut diff[1], -bound, bound)?;
    }
    if S::READING {
        for i in 0..3 {
            p[i] = reference[i] + diff[i];
        }
        let (x, y, z) = (p[0], p[1], p[2]);
        let ok = (XZ_RANGE.0..=XZ_RANGE.1).contains(&x)
            && (Y_RANGE.0..=Y_RANGE.1).contains(&y)
            && (XZ_RANGE.0..=XZ_RANGE.1).contains(&z);
        if !ok {
            return Err(CodecError::Invalid {
                field: POS_AXIS.name,
            });
        }
    }
    Ok(())
}

fn view<S: Stream>(s: &mut S, yaw: &mut u16, pitch: &mut i16) -> Result<(), CodecError> {
    s.u16(YAW, yaw)?;
    let mut p = u32::from(*pitch as u16);
    s.bits(PITCH, &mut p, 16)?;
    *pitch = p as u16 as i16;
    Ok(())
}

/// The view against a reference view: one bit when unchanged, else the yaw's wrapping change (a turn of a few
/// degrees costs a few bits, not the angle's sixteen) and, when the pitch changed too, its wrapping change.
fn view_residual<S: Stream>(
    s: &mut S,
    yaw: &mut u16,
    pitch: &mut i16,
    reference: (u16, i16),
) -> Result<(), CodecError> {
    let mut angles = (*yaw, *pitch);
    changed_group(s, &mut angles, &reference, |s, a| {
        let mut dy = i32::from(a.0.wrapping_sub(reference.0) as i16);
        s.int(
            YAW_CHANGE,
            &mut dy,
            i32::from(i16::MIN),
            i32::from(i16::MAX),
        )?;
        a.0 = reference.0.wrapping_add(dy as i16 as u16);
        let mut pitch_changed = a.1 != reference.1;
        s.bool(PITCH_CHANGED, &mut pitch_changed)?;
        let mut dp = 0;
        if pitch_changed {
            dp = i32::from(a.1.wrapping_sub(reference.1));
            s.int(
                PITCH_CHANGE,
                &mut dp,
                i32::from(i16::MIN),
                i32::from(i16::MAX),
            )?;
        }
        a.1 = reference.1.wrapping_add(dp as i16);
        Ok(())
    })?;
    (*yaw, *pitch) = angles;
    Ok(())
}

/// A group of fields sent whole when any of them changed, else as one bit.
fn changed_group<S: Stream, T: PartialEq + Copy>(
    s: &mut S,
    value: &mut T,
    reference: &T,
    body: impl FnOnce(&mut S, &mut T) -> Result<(), CodecError>,
) -> Result<(), CodecError> {
    let mut changed = value != reference;
    s.bool(CHANGED, &mut changed)?;
    if changed {
        body(s, value)
    } else {
        *value = *reference;
        Ok(())
    }
}

fn u16_field<S: Stream>(s: &mut S, v: &mut u16) -> Result<(), CodecError> {
    s.u16(COUNTER, v)
}

fn motion_rest<S: Stream>(s: &mut S, m: &mut MotionState) -> Result<(), CodecError> {
    s.int(VVEL, &mut m.vertical_velocity, -VVEL_RANGE, VVEL_RANGE)?;
    s.bool(FLAG, &mut m.grounded)
}

fn weapon<S: Stream>(s: &mut S, w: &mut WeaponState) -> Result<(), CodecError> {
    u16_field(s, &mut w.ammo)?;
    u16_field(s, &mut w.cooldown)?;
    u16_field(s, &mut w.reload_remaining)
}

fn vitals<S: Stream>(s: &mut S, v: &mut Vitals) -> Result<(), CodecError> {
    u16_field(s, &mut v.health)?;
    u16_field(s, &mut v.respawn_in)
}

/// Kills, deaths and confirmed hits of a player (the scoreboard and the hit marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ScoreLine {
    /// Kills this match.
    pub kills: u16,
    /// Deaths this match.
    pub deaths: u16,
}

fn score<S: Stream>(s: &mut S, v: &mut ScoreLine) -> Result<(), CodecError> {
    u16_field(s, &mut v.kills)?;
    u16_field(s, &mut v.deaths)
}

/// The receiving client's own player, in full: reconciliation compares every field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LocalPlayerSnap {
    /// The authoritative state at the snapshot's tick.
    pub state: PlayerState,
    /// The player's score.
    pub score: ScoreLine,
    /// Shots of this player that struck someone, wrapping: an increase is the server confirming a hit.
    pub hits: u16,
}

impl DeltaState for LocalPlayerSnap {
    type Config = ();

    fn predict(_: &(), _: &Self, _: u16) -> Option<Self> {
        None
    }

    fn serialize_residual<S: Stream>(
        s: &mut S,
        _: &(),
        value: &mut Self,
        reference: &Self,
    ) -> Result<(), CodecError> {
        let r = &reference.state;
        let v = &mut value.state;
        position_residual(s, &mut v.motion.position, &r.motion.position)?;
        view_residual(
            s,
            &mut v.motion.yaw,
            &mut v.motion.pitch,
            (r.motion.yaw, r.motion.pitch),
        )?;
        changed_group(s, &mut v.motion, &r.motion, motion_rest)?;
        changed_group(s, &mut v.weapon, &r.weapon, weapon)?;
        changed_group(s, &mut v.vitals, &r.vitals, vitals)?;
        changed_group(s, &mut value.score, &reference.score, score)?;
        changed_group(s, &mut value.hits, &reference.hits, u16_field)
    }

    fn serialize_absolute<S: Stream>(
        s: &mut S,
        _: &(),
        value: &mut Self,
    ) -> Result<(), CodecError> {
        let v = &mut value.state;
        position_absolute(s, &mut v.motion.position)?;
        view(s, &mut v.motion.yaw, &mut v.motion.pitch)?;
        motion_rest(s, &mut v.motion)?;
        weapon(s, &mut v.weapon)?;
        vitals(s, &mut v.vitals)?;
        score(s, &mut value.score)?;
        u16_field(s, &mut value.hits)
    }
}

/// Another player as the receiving client needs it: where to draw it, where it looks, whether it is alive, and
/// its score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RemotePlayerSnap {
    /// Feet position in position steps.
    pub position: [i32; 3],
    /// View yaw.
    pub yaw: u16,
    /// View pitch.
    pub pitch: i16,
    /// Alive at the snapshot's tick.
    pub alive: bool,
    /// Score.
    pub score: ScoreLine,
}

impl RemotePlayerSnap {
    /// The trimmed view of a full state.
    pub fn of(state: &PlayerState, score: ScoreLine) -> Self {
        Self {
            position: state.motion.position,
            yaw: state.motion.yaw,
            pitch: state.motion.pitch,
            alive: state.alive(),
            score,
        }
    }
}

impl DeltaState for RemotePlayerSnap {
    type Config = ();

    fn predict(_: &(), _: &Self, _: u16) -> Option<Self> {
        None
    }

    fn serialize_residual<S: Stream>(
        s: &mut S,
        _: &(),
        value: &mut Self,
        reference: &Self,
    ) -> Result<(), CodecError> {
        position_residual(s, &mut value.position, &reference.position)?;
        view_residual(
            s,
            &mut value.yaw,
            &mut value.pitch,
            (reference.yaw, reference.pitch),
        )?;
        s.bool(FLAG, &mut value.alive)?;
        changed_group(s, &mut value.score, &reference.score, score)
    }

    fn serialize_absolute<S: Stream>(
        s: &mut S,
        _: &(),
        value: &mut Self,
    ) -> Result<(), CodecError> {
        position_absolute(s, &mut value.position)?;
        view(s, &mut value.yaw, &mut value.pitch)?;
        s.bool(FLAG, &mut value.alive)?;
        score(s, &mut value.score)
    }
}

/// Where a match is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MatchPhase {
    /// Waiting for enough players.
    #[default]
    Waiting = 0,
    /// Counting down to the start.
    Countdown = 1,
    /// Playing; score counts.
    Live = 2,
    /// Over; results are final.
    Ended = 3,
}

impl MatchPhase {
    fn from_i32(v: i32) -> Self {
        match v {
            1 => Self::Countdown,
            2 => Self::Live,
            3 => Self::Ended,
            _ => Self::Waiting,
        }
    }
}

/// What a snapshot says about one player or cube.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sighting<T> {
    /// Not relevant to this client (a player behind a wall): not sent, not drawn.
    #[default]
    Hidden,
    /// Its state at the snapshot's tick.
    Fresh(T),
    /// Relevant, but left out of this snapshot by the byte budget: the client keeps what it has. The state is
    /// the one both sides know from the baseline (the reference of the next delta), if any.
    Held(Option<T>),
}

impl<T> Sighting<T> {
    /// The newest state both sides know: fresh, or held from the baseline.
    pub fn known(&self) -> Option<&T> {
        match self {
            Sighting::Fresh(v) | Sighting::Held(Some(v)) => Some(v),
            Sighting::Hidden | Sighting::Held(None) => None,
        }
    }

    /// The state at this tick, if it was sent.
    pub fn fresh(&self) -> Option<&T> {
        match self {
            Sighting::Fresh(v) => Some(v),
            _ => None,
        }
    }

    /// True unless hidden.
    pub fn is_seen(&self) -> bool {
        !matches!(self, Sighting::Hidden)
    }
}

/// One client's view of the world at one server tick.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The server tick it describes.
    pub tick: Tick,
    /// Match phase.
    pub phase: MatchPhase,
    /// Ticks left in the phase (countdown or match time), saturating at 65535.
    pub phase_ticks_left: u16,
    /// Commands the server holds in this client's input buffer (the client steers it).
    pub input_fill: u8,
    /// Newest input tick the server has received from this client (the client's RTT measurement).
    pub last_input_tick: Tick,
    /// Version of the slot-to-name roster (a client holding another one asks for it).
    pub roster_version: u8,
    /// The receiving client's slot.
    pub local_slot: PlayerId,
    /// The receiving client's own player.
    pub local: LocalPlayerSnap,
    /// Every other player, by slot.
    pub remotes: [Sighting<RemotePlayerSnap>; MAX_SLOTS],
    /// The cubes, in map order.
    pub cubes: Vec<Sighting<ObjectState>>,
    /// Shots, hits and kills not yet acknowledged by the client, oldest first.
    pub events: Vec<GameEvent>,
}

/// One entry through the codec's delta paths (cubes: unchanged, predicted, residual or whole).
fn entry<S: Stream, T: DeltaState>(
    s: &mut S,
    config: &T::Config,
    value: &mut T,
    baseline: Option<&T>,
) -> Result<(), CodecError> {
    let mut path = if S::READING {
        DeltaPath::Absolute
    } else {
        plan(config, value, baseline, None)?.path
    };
    serialize_entry(s, config, value, &mut path, baseline, None)
}

/// One player entry (players have no prediction): against a baseline, one flag when unchanged, else a flag
/// choosing the residual or the whole state, whichever the encoder's plan finds smaller; without one, whole.
/// Flags rather than the codec's path tag: two cheap decisions where a tag costs a coded integer.
fn player_entry<S: Stream, T: DeltaState<Config = ()>>(
    s: &mut S,
    value: &mut T,
    baseline: Option<&T>,
) -> Result<(), CodecError> {
    let Some(base) = baseline else {
        return T::serialize_absolute(s, &(), value);
    };
    let path = if S::READING {
        DeltaPath::Absolute
    } else {
        plan(&(), value, baseline, None)?.path
    };
    let mut unchanged = path == DeltaPath::Unchanged;
    s.bool(CHANGED, &mut unchanged)?;
    if unchanged {
        *value = *base;
        return Ok(());
    }
    let mut whole = path == DeltaPath::Absolute;
    s.bool(PATH, &mut whole)?;
    if whole {
        T::serialize_absolute(s, &(), value)
    } else {
        T::serialize_residual(s, &(), value, base)
    }
}

/// Writes `snapshot` as the body of a snapshot datagram, coded against `baseline` (a snapshot the client
/// acknowledged, at most [`MAX_BASELINE_AGE`] ticks older). Returns the snapshot as the client will read it
/// (held entities carry the baseline's state): what the sender keeps as a future baseline.
pub fn write_snapshot<S: Stream>(
    s: &mut S,
    cube_config: &StateConfig,
    snapshot: &Snapshot,
    baseline: Option<&Snapshot>,
) -> Result<Snapshot, WireError> {
    let mut v = snapshot.clone();
    let baseline = usable_baseline(&v, baseline);
    serialize_body(s, cube_config, &mut v, baseline)?;
    Ok(v)
}

fn usable_baseline<'a>(v: &Snapshot, baseline: Option<&'a Snapshot>) -> Option<&'a Snapshot> {
    baseline.filter(|b| {
        b.tick < v.tick && v.tick - b.tick <= MAX_BASELINE_AGE && b.local_slot == v.local_slot
    })
}

/// A snapshot datagram ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedSnapshot {
    /// The datagram.
    pub bytes: Vec<u8>,
    /// The snapshot as the client will read it (what the sender keeps as a future baseline).
    pub as_read: Snapshot,
    /// The back end that made it smaller.
    pub backend: physync_codec::Backend,
}

/// A whole snapshot datagram (header and body) with sequence `sequence`. With `try_range_coder`, through
/// whichever back end makes it smaller: the bit-packed size is measured, the range-coded one written, and
/// bit-packing is written only when it wins; without, bit-packed (about a third of the encoding time).
pub fn encode_snapshot(
    sequence: u16,
    cube_config: &StateConfig,
    snapshot: &Snapshot,
    baseline: Option<&Snapshot>,
    try_range_coder: bool,
) -> Result<EncodedSnapshot, WireError> {
    let bits = snapshot_bits(cube_config, snapshot, baseline)?;
    encode_snapshot_sized(
        sequence,
        cube_config,
        snapshot.clone(),
        baseline,
        try_range_coder,
        bits,
    )
}

/// [`encode_snapshot`] for a caller that has already measured the snapshot's bit-packed body
/// ([`snapshot_bits`] against the same baseline): `bitpack_bits`. A server fitting each snapshot to its byte
/// budget measures it anyway, so the snapshot is not measured twice; it hands the snapshot over, and the snapshot
/// is written in place into what the client will read (no copy per client per tick).
pub fn encode_snapshot_sized(
    sequence: u16,
    cube_config: &StateConfig,
    mut snapshot: Snapshot,
    baseline: Option<&Snapshot>,
    try_range_coder: bool,
    bitpack_bits: u64,
) -> Result<EncodedSnapshot, WireError> {
    let baseline = usable_baseline(&snapshot, baseline);
    let bitpack_len = wire::HEADER_BYTES + bitpack_bits.div_ceil(8) as usize;
    let arith = if try_range_coder {
        wire::write_arith_packet(PacketKind::Snapshot, sequence, (0, 0), |s| {
            serialize_body(s, cube_config, &mut snapshot, baseline)
        })
    } else {
        Err(WireError::TooLarge(0))
    };
    // Writing a snapshot only settles it into the form the client reads (held entities take the baseline's
    // state), so writing it again, bit-packed, gives the bytes the original would have.
    let (bytes, backend) = match arith {
        Ok(bytes) if bytes.len() <= bitpack_len => (bytes, physync_codec::Backend::Arith),
        _ => (
            wire::write_packet(PacketKind::Snapshot, sequence, (0, 0), |s| {
                serialize_body(s, cube_config, &mut snapshot, baseline)
            })?,
            physync_codec::Backend::Bitpack,
        ),
    };
    Ok(EncodedSnapshot {
        bytes,
        as_read: snapshot,
        backend,
    })
}

/// Reads a whole snapshot datagram in either back end; `held(tick)` returns the snapshot of that tick if the
/// client still holds it. Returns the header's sequence and the snapshot.
pub fn decode_snapshot<'a>(
    bytes: &[u8],
    cube_config: &StateConfig,
    held: impl FnOnce(Tick) -> Option<&'a Snapshot>,
) -> Result<(u16, Snapshot), WireError> {
    let incoming = wire::read_any_packet(bytes)?;
    if incoming.kind != PacketKind::Snapshot {
        return Err(WireError::Unexpected(incoming.kind));
    }
    let sequence = incoming.header.sequence;
    let snapshot = match incoming.body {
        wire::Body::Bits(mut body) => {
            let s = read_snapshot(&mut body, cube_config, held)?;
            if body.bits_left() >= 8 {
                return Err(WireError::Trailing(body.bits_left()));
            }
            s
        }
        wire::Body::Arith(mut body) => read_snapshot(body.as_mut(), cube_config, held)?,
    };
    Ok((sequence, snapshot))
}

/// Reads a snapshot body; `held(tick)` returns the snapshot of that tick if the client still holds it.
pub fn read_snapshot<'a, S: Stream>(
    s: &mut S,
    cube_config: &StateConfig,
    held: impl FnOnce(Tick) -> Option<&'a Snapshot>,
) -> Result<Snapshot, WireError> {
    let mut tick = 0u32;
    wire::u32_full(s, TICK, &mut tick)?;
    let mut offset = 0i32;
    s.int(OFFSET, &mut offset, 0, MAX_BASELINE_AGE as i32)?;
    let baseline = if offset > 0 {
        let base_tick = tick
            .checked_sub(offset as u32)
            .ok_or(CodecError::Invalid { field: OFFSET.name })?;
        Some(held(base_tick).ok_or(WireError::MissingBaseline(base_tick))?)
    } else {
        None
    };
    let mut v = Snapshot {
        tick,
        ..Snapshot::default()
    };
    serialize_rest(s, cube_config, &mut v, baseline)?;
    Ok(v)
}

fn serialize_body<S: Stream>(
    s: &mut S,
    cube_config: &StateConfig,
    v: &mut Snapshot,
    baseline: Option<&Snapshot>,
) -> Result<(), WireError> {
    wire::u32_full(s, TICK, &mut v.tick)?;
    let mut offset = baseline.map_or(0, |b| (v.tick - b.tick) as i32);
    s.int(OFFSET, &mut offset, 0, MAX_BASELINE_AGE as i32)?;
    serialize_rest(s, cube_config, v, baseline)
}

/// True when `v`'s header fields are what they were in `base`, `offset` ticks earlier: same phase counting down,
/// same roster.
fn header_follows(v: &Snapshot, base: &Snapshot, offset: u32) -> bool {
    v.phase == base.phase
        && u32::from(v.phase_ticks_left) == u32::from(base.phase_ticks_left).saturating_sub(offset)
        && v.roster_version == base.roster_version
}

/// True when every cube of `v` is sent fresh and unchanged from what `base` holds of it.
fn cubes_kept(v: &Snapshot, base: &Snapshot) -> bool {
    v.cubes.len() == base.cubes.len()
        && v.cubes
            .iter()
            .zip(&base.cubes)
            .all(|(c, b)| matches!((c, b.known()), (Sighting::Fresh(c), Some(b)) if c == b))
}

fn serialize_rest<S: Stream>(
    s: &mut S,
    cube_config: &StateConfig,
    v: &mut Snapshot,
    baseline: Option<&Snapshot>,
) -> Result<(), WireError> {
    let offset = baseline.map_or(0, |b| v.tick.wrapping_sub(b.tick));
    let mut follows = baseline.is_some_and(|b| header_follows(v, b, offset));
    if baseline.is_some() {
        s.bool(HEADER_FOLLOWS, &mut follows)?;
    }
    match baseline {
        Some(b) if follows => {
            v.phase = b.phase;
            v.phase_ticks_left = b.phase_ticks_left.saturating_sub(offset.min(65_535) as u16);
            v.roster_version = b.roster_version;
        }
        _ => {
            let mut phase = v.phase as i32;
            s.int(PHASE, &mut phase, 0, 3)?;
            v.phase = MatchPhase::from_i32(phase);
            s.u16(COUNTER, &mut v.phase_ticks_left)?;
            s.u8(COUNTER, &mut v.roster_version)?;
        }
    }
    let mut fill = i32::from(v.input_fill.min(63));
    s.int(FILL, &mut fill, 0, 63)?;
    v.input_fill = fill as u8;
    // The client's newest input runs a steady lead ahead of the snapshot's tick: one flag while it holds.
    let lead = |snap: &Snapshot| snap.last_input_tick.wrapping_sub(snap.tick);
    let mut same_lead = baseline.is_some_and(|b| lead(b) == lead(v));
    if baseline.is_some() {
        s.bool(CHANGED, &mut same_lead)?;
    }
    match baseline {
        Some(b) if same_lead => v.last_input_tick = v.tick.wrapping_add(lead(b)),
        _ => wire::u32_full(s, TICK, &mut v.last_input_tick)?,
    }
    match baseline {
        // A baseline is only ever a snapshot of the same client.
        Some(b) => v.local_slot = b.local_slot,
        None => {
            let mut slot = i32::from(v.local_slot.0);
            s.int(SLOT, &mut slot, 0, MAX_SLOTS as i32 - 1)?;
            v.local_slot = PlayerId(slot as u8);
        }
    }
    player_entry(s, &mut v.local, baseline.map(|b| &b.local))?;
    for (i, remote) in v.remotes.iter_mut().enumerate() {
        let base = baseline.and_then(|b| b.remotes[i].known());
        sighting(s, remote, base, |s, value, base| {
            player_entry(s, value, base)
        })?;
    }
    let mut kept = baseline.is_some_and(|b| cubes_kept(v, b));
    if baseline.is_some() {
        s.bool(CUBES_KEPT, &mut kept)?;
    }
    match baseline {
        Some(b) if kept => {
            v.cubes = b
                .cubes
                .iter()
                .map(|c| c.known().map_or(Sighting::Hidden, |c| Sighting::Fresh(*c)))
                .collect();
        }
        _ => {
            let mut count = v.cubes.len() as u32;
            s.count(COUNT, &mut count, MAX_CUBES as u32)?;
            if S::READING {
                v.cubes = vec![Sighting::Hidden; count as usize];
            }
            for (i, cube) in v.cubes.iter_mut().enumerate() {
                let base = baseline
                    .and_then(|b| b.cubes.get(i))
                    .and_then(Sighting::known);
                sighting(s, cube, base, |s, value, base| {
                    entry(s, cube_config, value, base)
                })?;
            }
        }
    }
    serialize_events(s, v.tick, &mut v.events)?;
    Ok(())
}

/// Bits (bit-packed) one entity costs sent fresh against `baseline`, beyond what holding it costs: what a
/// snapshot's byte budget is spent on.
pub fn fresh_bits<T: DeltaState + Copy + Default>(
    config: &T::Config,
    value: &T,
    baseline: Option<&T>,
) -> u64 {
    let mut fresh = physync_codec::MeasureStream::new();
    let mut held = physync_codec::MeasureStream::new();
    let mut body =
        |s: &mut physync_codec::MeasureStream, v: &mut T, b: Option<&T>| entry(s, config, v, b);
    let sent = sighting(
        &mut fresh,
        &mut Sighting::Fresh(*value),
        baseline,
        &mut body,
    );
    let kept = sighting(&mut held, &mut Sighting::Held(None), baseline, &mut body);
    match (sent, kept) {
        (Ok(()), Ok(())) => fresh.bits_counted().saturating_sub(held.bits_counted()),
        _ => u64::MAX / 4,
    }
}

/// Bits (bit-packed) of `snapshot` coded against `baseline` as it stands.
pub fn snapshot_bits(
    cube_config: &StateConfig,
    snapshot: &Snapshot,
    baseline: Option<&Snapshot>,
) -> Result<u64, WireError> {
    measure_snapshot(cube_config, &mut snapshot.clone(), baseline)
}

/// [`snapshot_bits`] without a copy: measuring settles `snapshot` into the form the client reads (held entities
/// take the baseline's state), which codes to the same bits.
pub fn measure_snapshot(
    cube_config: &StateConfig,
    snapshot: &mut Snapshot,
    baseline: Option<&Snapshot>,
) -> Result<u64, WireError> {
    let mut measure = physync_codec::MeasureStream::new();
    let baseline = usable_baseline(snapshot, baseline);
    serialize_body(&mut measure, cube_config, snapshot, baseline)?;
    Ok(measure.bits_counted())
}

/// Whether an entity is seen (one flag: hidden ones cost nothing more), then whether it is sent fresh, then its
/// entry through `body`.
fn sighting<S: Stream, T: Copy + Default>(
    s: &mut S,
    value: &mut Sighting<T>,
    baseline: Option<&T>,
    mut body: impl FnMut(&mut S, &mut T, Option<&T>) -> Result<(), CodecError>,
) -> Result<(), CodecError> {
    let mut seen = value.is_seen();
    s.bool(SEEN, &mut seen)?;
    if !seen {
        *value = Sighting::Hidden;
        return Ok(());
    }
    let mut fresh = value.fresh().is_some();
    s.bool(FRESH, &mut fresh)?;
    *value = if fresh {
        let mut v = value.fresh().copied().unwrap_or_default();
        body(s, &mut v, baseline)?;
        Sighting::Fresh(v)
    } else {
        Sighting::Held(baseline.copied())
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shooter_net::events::{EventKind, MAX_EVENT_AGE, MAX_EVENTS, ShotSeen};
    use physync_codec::bitpack::{BitReadStream, BitWriteStream};

    fn sample(tick: Tick, dx: i32) -> Snapshot {
        let mut snap = Snapshot {
            tick,
            phase: MatchPhase::Live,
            phase_ticks_left: 900,
            input_fill: 2,
            last_input_tick: tick + 5,
            roster_version: 1,
            local_slot: PlayerId(3),
            ..Snapshot::default()
        };
        snap.local.state.motion.position = [100 + dx, 0, -200];
        snap.local.state.vitals.health = 100;
        snap.local.state.weapon.ammo = 20;
        for i in [0usize, 1, 5, 9] {
            snap.remotes[i] = Sighting::Fresh(RemotePlayerSnap {
                position: [i as i32 * 1000 + dx * 3, 0, 500 - dx],
                yaw: (i * 1000) as u16,
                pitch: -50,
                alive: true,
                score: ScoreLine::default(),
            });
        }
        snap.cubes = vec![Sighting::Fresh(ObjectState::default()); 6];
        snap
    }

    fn round_trip(snap: &Snapshot, base: Option<&Snapshot>) -> (usize, Snapshot) {
        let config = StateConfig::default();
        let mut w = BitWriteStream::new();
        write_snapshot(&mut w, &config, snap, base).unwrap();
        let bytes = w.finish();
        let mut r = BitReadStream::new(&bytes);
        let decoded = read_snapshot(&mut r, &config, |t| base.filter(|b| b.tick == t)).unwrap();
        (bytes.len(), decoded)
    }

    /// A remote player whose yaw sits just below the wrap, the reference of the residual tests.
    fn facing_across_the_yaw_wrap() -> RemotePlayerSnap {
        RemotePlayerSnap {
            position: [100, 200, 300],
            yaw: 65_500,
            pitch: -30,
            alive: true,
            score: ScoreLine::default(),
        }
    }

    /// `value` coded as a bit-packed residual against `reference` and read back.
    fn bitpacked_residual_round_trip(
        value: RemotePlayerSnap,
        reference: &RemotePlayerSnap,
    ) -> RemotePlayerSnap {
        let mut w = BitWriteStream::new();
        let mut v = value;
        RemotePlayerSnap::serialize_residual(&mut w, &(), &mut v, reference).unwrap();
        let bytes = w.finish();
        let mut r = BitReadStream::new(&bytes);
        let mut read = RemotePlayerSnap::default();
        RemotePlayerSnap::serialize_residual(&mut r, &(), &mut read, reference).unwrap();
        read
    }

    #[test]
    fn a_small_turn_costs_a_few_bits_and_turns_wrap() {
        let base = facing_across_the_yaw_wrap();
        let turned = RemotePlayerSnap {
            yaw: 40,
            pitch: -25,
            ..base
        };
        // Forty times a 76-step turn across the wrap and a 5-step nod, range-coded: well under the 32 bits a
        // residual spent sending both angles whole.
        let mut w = physync_codec::arith::ArithWriteStream::new();
        for _ in 0..40 {
            let mut v = turned;
            RemotePlayerSnap::serialize_residual(&mut w, &(), &mut v, &base).unwrap();
        }
        let bytes = w.finish().len();
        assert!(bytes * 8 <= 40 * 20, "{bytes} bytes for 40 small turns");
        for (value, reference) in [(turned, base), (base, turned)] {
            assert_eq!(bitpacked_residual_round_trip(value, &reference), value);
        }
    }

    /// Residuals against a reference whose fields differ from a reader's fresh value: each part the residual may
    /// leave out (an unmoved axis, an unturned angle) must come from the reference, in both back ends.
    #[test]
    fn residuals_that_leave_parts_out_take_them_from_the_reference() {
        let base = facing_across_the_yaw_wrap();
        for (dx, dy, dz, dyaw, dpitch) in [
            (0, 0, 0, 0, 0),
            (5, 0, -3, 0, 0),
            (0, 7, 0, 0, 0),
            (0, 0, 0, 40, 0),
            (0, 0, 0, 0, 9),
            (-600, 1, 2, 300, -4),
        ] {
            let value = RemotePlayerSnap {
                position: [100 + dx, 200 + dy, 300 + dz],
                yaw: base.yaw.wrapping_add(dyaw),
                pitch: base.pitch + dpitch,
                ..base
            };
            assert_eq!(
                bitpacked_residual_round_trip(value, &base),
                value,
                "bit-packed"
            );
            let mut w = physync_codec::arith::ArithWriteStream::new();
            let mut v = value;
            RemotePlayerSnap::serialize_residual(&mut w, &(), &mut v, &base).unwrap();
            let bytes = w.finish();
            let mut read = RemotePlayerSnap::default();
            let mut r = physync_codec::arith::ArithReadStream::new(&bytes).unwrap();
            RemotePlayerSnap::serialize_residual(&mut r, &(), &mut read, &base).unwrap();
            assert_eq!(read, value, "range-coded");
        }
    }

    #[test]
    fn snapshots_round_trip_absolute_and_delta_and_deltas_are_smaller() {
        let base = sample(100, 0);
        let next = sample(106, 300);
        let (full, decoded) = round_trip(&next, None);
        assert_eq!(decoded, next);
        let (delta, decoded) = round_trip(&next, Some(&base));
        assert_eq!(decoded, next);
        assert!(delta < full, "delta {delta} vs full {full}");
        let (same, decoded) = round_trip(&base.clone(), None);
        assert_eq!(decoded, base);
        assert!(same >= delta);
    }

    #[test]
    fn the_largest_full_snapshot_fits_one_datagram() {
        use crate::shooter_net::wire::{PacketKind, write_packet};
        use physync_codec::BodyState;
        let config = StateConfig::default();
        let mut snap = sample(1_000_000, 0);
        let extreme = PlayerState {
            motion: MotionState {
                position: [XZ_RANGE.0, Y_RANGE.1, XZ_RANGE.1],
                vertical_velocity: -VVEL_RANGE,
                yaw: u16::MAX,
                pitch: i16::MIN,
                grounded: true,
            },
            weapon: WeaponState {
                ammo: u16::MAX,
                cooldown: u16::MAX,
                reload_remaining: u16::MAX,
            },
            vitals: Vitals {
                health: u16::MAX,
                respawn_in: u16::MAX,
            },
        };
        let score = ScoreLine {
            kills: u16::MAX,
            deaths: u16::MAX,
        };
        snap.local = LocalPlayerSnap {
            state: extreme,
            score,
            hits: u16::MAX,
        };
        snap.local_slot = PlayerId(0);
        for r in snap.remotes.iter_mut().skip(1) {
            *r = Sighting::Fresh(RemotePlayerSnap::of(&extreme, score));
        }
        let q = config.quant;
        let cube = ObjectState {
            body: BodyState::quantize(
                &q,
                [63.0, 55.0, -63.0],
                [0.5, 0.5, 0.5, 0.5],
                [-31.0, 31.0, 31.0],
                [31.0, -31.0, 31.0],
                false,
            ),
            authority: 255,
            authority_seq: u16::MAX,
            ownership_seq: u16::MAX,
        };
        snap.cubes = vec![Sighting::Fresh(cube); MAX_CUBES];
        let shot = ShotSeen {
            shooter: PlayerId(15),
            origin: [-2048, 1791, 2047],
            yaw: 4095,
            pitch: -1000,
            length: 1023,
            hit: Some((PlayerId(14), true)),
        };
        snap.events = (0..MAX_EVENTS)
            .map(|i| GameEvent {
                id: (i * 7919) as u16,
                tick: snap.tick - MAX_EVENT_AGE + i as u32 % 3,
                kind: EventKind::Shot(shot),
            })
            .collect();
        let bytes = write_packet(PacketKind::Snapshot, 1, (0, 0), |s| {
            write_snapshot(s, &config, &snap, None).map(drop)
        })
        .unwrap();
        assert!(bytes.len() <= 1200, "{} bytes", bytes.len());
        let smaller = encode_snapshot(1, &config, &snap, None, true).unwrap();
        assert!(smaller.bytes.len() <= bytes.len());
    }

    #[test]
    fn hidden_and_held_entities_and_events_survive_both_back_ends() {
        let config = StateConfig::default();
        let base = sample(100, 0);
        let mut next = sample(104, 80);
        next.remotes[1] = Sighting::Held(None);
        next.remotes[5] = Sighting::Hidden;
        next.cubes[2] = Sighting::Held(None);
        next.events = vec![GameEvent {
            id: 9,
            tick: 103,
            kind: EventKind::Kill {
                killer: Some(PlayerId(1)),
                victim: PlayerId(9),
            },
        }];
        let encoded = encode_snapshot(104, &config, &next, Some(&base), true).unwrap();
        let (bytes, sent) = (encoded.bytes, encoded.as_read);
        assert_eq!(
            sent.remotes[1],
            Sighting::Held(base.remotes[1].known().copied()),
            "held: the baseline's state"
        );
        assert_eq!(
            sent.cubes[2],
            Sighting::Held(base.cubes[2].known().copied())
        );
        let (sequence, read) =
            decode_snapshot(&bytes, &config, |t| Some(&base).filter(|b| b.tick == t)).unwrap();
        assert_eq!((sequence, &read), (104, &sent));
        let mut w = BitWriteStream::new();
        write_snapshot(&mut w, &config, &next, Some(&base)).unwrap();
        let bits = w.finish();
        let again = read_snapshot(&mut BitReadStream::new(&bits), &config, |t| {
            Some(&base).filter(|b| b.tick == t)
        })
        .unwrap();
        assert_eq!(again, sent);
    }

    #[test]
    fn a_missing_baseline_and_garbage_are_errors() {
        let config = StateConfig::default();
        let base = sample(100, 0);
        let mut w = BitWriteStream::new();
        write_snapshot(&mut w, &config, &sample(110, 40), Some(&base)).unwrap();
        let bytes = w.finish();
        let err = read_snapshot(&mut BitReadStream::new(&bytes), &config, |_| None).unwrap_err();
        assert_eq!(err, WireError::MissingBaseline(100));
        for cut in 0..bytes.len() {
            let r = read_snapshot(&mut BitReadStream::new(&bytes[..cut]), &config, |t| {
                Some(&base).filter(|b| b.tick == t)
            });
            assert!(r.is_err(), "truncated at {cut} decoded");
        }
    }
}
