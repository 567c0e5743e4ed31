//! Gunfire every player sees: the shots, hits and kills the server resolved, as events inside snapshots. Each
//! event has a server-wide id; the server repeats an event in later snapshots until the client acknowledges a
//! snapshot that carried it, and the client drops ids it has already seen, so every event arrives exactly once
//! however many snapshots are lost. A shot is cosmetic detail (where to draw the tracer), quantized coarsely;
//! damage and the score stay in the players' states.

use nalgebra::{Point3, Vector3};
use physync_codec::stream::Ctx;
use physync_codec::{CodecError, Stream};

use super::snapshot::MAX_SLOTS;
use crate::shooter::hitbox::{HitZone, ShotRay};
use crate::shooter::{PlayerId, Tick, units};

/// Most events one snapshot carries (the rest wait for the next one).
pub const MAX_EVENTS: usize = 12;
/// Oldest event a snapshot may carry, in ticks before the snapshot's own tick; an event the client has not
/// acknowledged by then is given up.
pub const MAX_EVENT_AGE: u32 = 63;
/// Shot origins travel in steps of 1/32 m (a tracer needs no more).
const ORIGIN_STEPS_PER_METRE: f32 = 32.0;
/// Shot lengths travel in quarter metres.
const LENGTH_STEPS_PER_METRE: f32 = 4.0;
const ORIGIN_XZ: (i32, i32) = (-2_048, 2_047);
const ORIGIN_Y: (i32, i32) = (-256, 1_791);
const MAX_LENGTH: i32 = 1_023;
const PITCH_STEP: i16 = 16;

const COUNT: Ctx = Ctx::user(26, "event count");
const ID: Ctx = Ctx::user(27, "event id");
const GAP: Ctx = Ctx::user(28, "event id gap");
const AGE: Ctx = Ctx::user(29, "event age");
const KIND: Ctx = Ctx::user(55, "event kind");
const SLOT: Ctx = Ctx::user(56, "event slot");
const ORIGIN: Ctx = Ctx::user(57, "shot origin");
const ANGLE: Ctx = Ctx::user(58, "shot angle");
const LENGTH: Ctx = Ctx::user(59, "shot length");
const FLAG: Ctx = Ctx::user(60, "event flag");

/// A shot as every client that can see the shooter learns of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ShotSeen {
    /// Who fired.
    pub shooter: PlayerId,
    /// Where the shot started (the shooter's eye), in 1/32 m.
    pub origin: [i32; 3],
    /// Direction yaw, in 16-step units of [`units`] yaw.
    pub yaw: u16,
    /// Direction pitch, in 16-step units of [`units`] pitch.
    pub pitch: i16,
    /// Where the shot ended (a player, a surface or its range), in quarter metres from the origin.
    pub length: u16,
    /// The player struck and whether in the head.
    pub hit: Option<(PlayerId, bool)>,
}

impl ShotSeen {
    /// The shot of `shooter` along `ray`, ending `length` metres out and striking `hit`.
    pub fn new(
        shooter: PlayerId,
        ray: &ShotRay,
        length: f32,
        hit: Option<(PlayerId, HitZone)>,
    ) -> Self {
        let q = |v: f32, (lo, hi): (i32, i32)| {
            let x = (v * ORIGIN_STEPS_PER_METRE).round();
            if x.is_nan() {
                0
            } else {
                (x as i32).clamp(lo, hi)
            }
        };
        let (yaw, pitch) = units::aim_at(&ray.origin, &(ray.origin + ray.direction));
        let length = (length * LENGTH_STEPS_PER_METRE).round();
        Self {
            shooter,
            origin: [
                q(ray.origin.x, ORIGIN_XZ),
                q(ray.origin.y, ORIGIN_Y),
                q(ray.origin.z, ORIGIN_XZ),
            ],
            yaw: yaw >> 4,
            pitch: pitch / PITCH_STEP,
            length: if length.is_nan() {
                0
            } else {
                length.clamp(0.0, MAX_LENGTH as f32) as u16
            },
            hit: hit.map(|(p, zone)| (p, zone == HitZone::Head)),
        }
    }

    /// The origin, metres.
    pub fn origin(&self) -> Point3<f32> {
        Point3::new(
            self.origin[0] as f32 / ORIGIN_STEPS_PER_METRE,
            self.origin[1] as f32 / ORIGIN_STEPS_PER_METRE,
            self.origin[2] as f32 / ORIGIN_STEPS_PER_METRE,
        )
    }

    /// The unit direction.
    pub fn direction(&self) -> Vector3<f32> {
        units::view_direction(self.yaw << 4, self.pitch * PITCH_STEP)
    }

    /// Where the tracer ends, metres.
    pub fn end(&self) -> Point3<f32> {
        self.origin() + self.direction() * (f32::from(self.length) / LENGTH_STEPS_PER_METRE)
    }
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A shot (with the hit it made, if any).
    Shot(ShotSeen),
    /// A player died: `killer` shot it, or nobody did (it fell off the map).
    Kill {
        /// The killer, if a shot killed.
        killer: Option<PlayerId>,
        /// Who died.
        victim: PlayerId,
    },
}

/// One event with its server-wide id and the tick it happened at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GameEvent {
    /// Id, wrapping: the client keeps the recent ones to drop repeats.
    pub id: u16,
    /// The server tick it happened at.
    pub tick: Tick,
    /// What happened.
    pub kind: EventKind,
}

fn slot<S: Stream>(s: &mut S, p: &mut PlayerId) -> Result<(), CodecError> {
    let mut v = i32::from(p.0);
    s.int(SLOT, &mut v, 0, MAX_SLOTS as i32 - 1)?;
    *p = PlayerId(v as u8);
    Ok(())
}

fn shot<S: Stream>(s: &mut S, v: &mut ShotSeen) -> Result<(), CodecError> {
    slot(s, &mut v.shooter)?;
    s.int(ORIGIN, &mut v.origin[0], ORIGIN_XZ.0, ORIGIN_XZ.1)?;
    s.int(ORIGIN, &mut v.origin[1], ORIGIN_Y.0, ORIGIN_Y.1)?;
    s.int(ORIGIN, &mut v.origin[2], ORIGIN_XZ.0, ORIGIN_XZ.1)?;
    let mut yaw = u32::from(v.yaw);
    s.bits(ANGLE, &mut yaw, 12)?;
    v.yaw = yaw as u16;
    let limit = i32::from(units::PITCH_LIMIT / PITCH_STEP);
    let mut pitch = i32::from(v.pitch);
    s.int(ANGLE, &mut pitch, -limit, limit)?;
    v.pitch = pitch as i16;
    let mut length = i32::from(v.length);
    s.int(LENGTH, &mut length, 0, MAX_LENGTH)?;
    v.length = length as u16;
    let mut hit = v.hit.is_some();
    s.bool(FLAG, &mut hit)?;
    if hit {
        let (mut victim, mut head) = v.hit.unwrap_or_default();
        slot(s, &mut victim)?;
        s.bool(FLAG, &mut head)?;
        v.hit = Some((victim, head));
    } else {
        v.hit = None;
    }
    Ok(())
}

fn event_kind<S: Stream>(s: &mut S, kind: &mut EventKind) -> Result<(), CodecError> {
    let mut is_shot = matches!(kind, EventKind::Shot(_));
    s.bool(KIND, &mut is_shot)?;
    if is_shot {
        let mut v = match kind {
            EventKind::Shot(v) => *v,
            EventKind::Kill { .. } => ShotSeen::default(),
        };
        shot(s, &mut v)?;
        *kind = EventKind::Shot(v);
    } else {
        let (mut killer, mut victim) = match kind {
            EventKind::Kill { killer, victim } => (*killer, *victim),
            EventKind::Shot(_) => (None, PlayerId(0)),
        };
        let mut by_shot = killer.is_some();
        s.bool(FLAG, &mut by_shot)?;
        if by_shot {
            let mut k = killer.unwrap_or_default();
            slot(s, &mut k)?;
            killer = Some(k);
        } else {
            killer = None;
        }
        slot(s, &mut victim)?;
        *kind = EventKind::Kill { killer, victim };
    }
    Ok(())
}

/// Serializes the events of a snapshot of tick `tick`: each names its tick as an age (at most
/// [`MAX_EVENT_AGE`]) and its id as a gap from the previous one. Writing refuses events the format cannot carry.
pub fn serialize_events<S: Stream>(
    s: &mut S,
    tick: Tick,
    events: &mut Vec<GameEvent>,
) -> Result<(), CodecError> {
    let mut count = events.len() as u32;
    s.count(COUNT, &mut count, MAX_EVENTS as u32)?;
    if S::READING {
        *events = vec![
            GameEvent {
                id: 0,
                tick: 0,
                kind: EventKind::Kill {
                    killer: None,
                    victim: PlayerId(0),
                },
            };
            count as usize
        ];
    }
    let mut previous: Option<u16> = None;
    for e in events.iter_mut() {
        match previous {
            None => s.u16(ID, &mut e.id)?,
            Some(p) => {
                let mut gap = i32::from(e.id.wrapping_sub(p));
                s.int(GAP, &mut gap, 1, i32::from(u16::MAX))?;
                e.id = p.wrapping_add(gap as u16);
            }
        }
        previous = Some(e.id);
        let mut age = tick
            .checked_sub(e.tick)
            .map_or(-1, |a| a.min(u32::MAX >> 1) as i32);
        s.int(AGE, &mut age, 0, MAX_EVENT_AGE as i32)?;
        e.tick = tick
            .checked_sub(age as u32)
            .ok_or(CodecError::Invalid { field: AGE.name })?;
        event_kind(s, &mut e.kind)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use physync_codec::bitpack::{BitReadStream, BitWriteStream};

    #[test]
    fn a_shot_keeps_its_tracer_within_a_few_centimetres() {
        let ray = ShotRay {
            origin: Point3::new(3.21, 1.6, -7.5),
            direction: Vector3::new(0.6, 0.1, -0.79).normalize(),
            range: 80.0,
        };
        let shot = ShotSeen::new(PlayerId(3), &ray, 12.3, Some((PlayerId(5), HitZone::Head)));
        assert!((shot.origin() - ray.origin).norm() < 0.03);
        assert!(
            (shot.end() - ray.point_at(12.3)).norm() < 0.15,
            "{:?}",
            shot.end()
        );
        let mut events = vec![
            GameEvent {
                id: 65_534,
                tick: 95,
                kind: EventKind::Shot(shot),
            },
            GameEvent {
                id: 3,
                tick: 100,
                kind: EventKind::Kill {
                    killer: None,
                    victim: PlayerId(2),
                },
            },
        ];
        let mut w = BitWriteStream::new();
        serialize_events(&mut w, 100, &mut events.clone()).unwrap();
        let bytes = w.finish();
        let mut read = Vec::new();
        serialize_events(&mut BitReadStream::new(&bytes), 100, &mut read).unwrap();
        assert_eq!(read, events);
        events[0].tick = 10;
        assert!(serialize_events(&mut BitWriteStream::new(), 100, &mut events).is_err());
    }
}
