//! The static match data a client receives at connect: rules, map, lifecycle limits and the string-to-int table
//! of weapon names, serialized once and cut into chunks under the MTU; and the client's reassembly of them.

use std::hash::Hasher;

use nalgebra::{Point3, Vector3};
use physync_codec::bitpack::{BitReadStream, BitWriteStream};
use physync_codec::stream::Ctx;
use physync_codec::{CodecError, Stream};
use siphasher::sip::SipHasher24;

use super::messages::{Accept, CHUNK_BYTES, MAX_CHUNKS, MatchDataChunk};
use super::snapshot::{MAX_CUBES, MAX_SLOTS};
use super::wire::{self, WireError};
use crate::shooter::map::{ArenaMap, BoxSpec, CubeSpec, SpawnPoint};
use crate::shooter::rules::GameRules;

const MAX_BOXES: u32 = 256;
const MAX_SPAWNS: u32 = 64;
const MAX_WEAPONS: u32 = 16;
const MAX_MAP_NAME: usize = 32;

const ID: Ctx = Ctx::user(50, "match id");
const SMALL: Ctx = Ctx::user(51, "small count");
const LIMIT: Ctx = Ctx::user(52, "limit");
const YAW: Ctx = Ctx::user(53, "spawn yaw");

/// Everything about a match that does not change while it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchData {
    /// The match.
    pub match_id: u32,
    /// Game rules (tick rate, movement, weapon, vitals, body).
    pub rules: GameRules,
    /// The arena.
    pub map: ArenaMap,
    /// Most players.
    pub max_players: u8,
    /// Players needed before the countdown starts.
    pub min_players: u8,
    /// Countdown length, seconds.
    pub countdown_s: u16,
    /// Match length, seconds.
    pub time_limit_s: u16,
    /// Kills that end the match.
    pub score_limit: u16,
    /// Weapon names; a weapon's id on the wire is its index.
    pub weapons: Vec<String>,
}

fn count<S: Stream>(s: &mut S, v: &mut usize, max: u32) -> Result<(), CodecError> {
    let mut c = *v as u32;
    s.count(SMALL, &mut c, max)?;
    *v = c as usize;
    Ok(())
}

fn point<S: Stream>(s: &mut S, p: &mut Point3<f32>) -> Result<(), CodecError> {
    for c in p.coords.iter_mut() {
        wire::float(s, c)?;
    }
    Ok(())
}

fn vector<S: Stream>(s: &mut S, v: &mut Vector3<f32>) -> Result<(), CodecError> {
    for c in v.iter_mut() {
        wire::float(s, c)?;
    }
    Ok(())
}

fn rules<S: Stream>(s: &mut S, r: &mut GameRules) -> Result<(), CodecError> {
    let mut hz = r.tick_rate_hz;
    s.count(LIMIT, &mut hz, 240)?;
    if hz == 0 {
        return Err(CodecError::Invalid { field: "tick rate" });
    }
    r.tick_rate_hz = hz;
    let m = &mut r.movement;
    for f in [
        &mut m.max_speed,
        &mut m.jump_speed,
        &mut m.gravity,
        &mut m.max_fall_speed,
    ] {
        wire::float(s, f)?;
    }
    let w = &mut r.weapon;
    for v in [
        &mut w.fire_interval_ticks,
        &mut w.magazine,
        &mut w.reload_ticks,
        &mut w.body_damage,
        &mut w.head_damage,
    ] {
        s.u16(LIMIT, v)?;
    }
    wire::float(s, &mut w.range)?;
    wire::float(s, &mut w.cube_impulse)?;
    s.u16(LIMIT, &mut r.vitals.max_health)?;
    s.u16(LIMIT, &mut r.vitals.respawn_ticks)?;
    let b = &mut r.body;
    for f in [
        &mut b.capsule_radius,
        &mut b.capsule_half_segment,
        &mut b.eye_height,
        &mut b.body_hit_radius,
        &mut b.body_hit_top,
        &mut b.head_radius,
        &mut b.head_height,
    ] {
        wire::float(s, f)?;
    }
    Ok(())
}

fn map<S: Stream>(s: &mut S, m: &mut ArenaMap) -> Result<(), CodecError> {
    wire::string(s, &mut m.name, MAX_MAP_NAME)?;
    let mut n = m.boxes.len();
    count(s, &mut n, MAX_BOXES)?;
    if S::READING {
        m.boxes = vec![
            BoxSpec {
                center: Point3::origin(),
                half_extents: Vector3::zeros(),
            };
            n
        ];
    }
    for b in m.boxes.iter_mut() {
        point(s, &mut b.center)?;
        vector(s, &mut b.half_extents)?;
    }
    let mut n = m.spawn_points.len();
    count(s, &mut n, MAX_SPAWNS)?;
    if S::READING {
        m.spawn_points = vec![
            SpawnPoint {
                position: Point3::origin(),
                yaw: 0,
            };
            n
        ];
    }
    for p in m.spawn_points.iter_mut() {
        point(s, &mut p.position)?;
        s.u16(YAW, &mut p.yaw)?;
    }
    let mut n = m.cubes.len();
    count(s, &mut n, MAX_CUBES as u32)?;
    if S::READING {
        m.cubes = vec![
            CubeSpec {
                center: Point3::origin(),
                half_extent: 0.0,
            };
            n
        ];
    }
    for c in m.cubes.iter_mut() {
        point(s, &mut c.center)?;
        wire::float(s, &mut c.half_extent)?;
    }
    Ok(())
}

impl MatchData {
    fn serialize<S: Stream>(&mut self, s: &mut S) -> Result<(), CodecError> {
        s.bits(ID, &mut self.match_id, 32)?;
        rules(s, &mut self.rules)?;
        map(s, &mut self.map)?;
        for v in [&mut self.max_players, &mut self.min_players] {
            let mut c = u32::from(*v);
            s.count(SMALL, &mut c, MAX_SLOTS as u32)?;
            *v = c as u8;
        }
        s.u16(LIMIT, &mut self.countdown_s)?;
        s.u16(LIMIT, &mut self.time_limit_s)?;
        s.u16(LIMIT, &mut self.score_limit)?;
        let mut n = self.weapons.len();
        count(s, &mut n, MAX_WEAPONS)?;
        if S::READING {
            self.weapons = vec![String::new(); n];
        }
        for w in self.weapons.iter_mut() {
            wire::string(s, w, MAX_MAP_NAME)?;
        }
        Ok(())
    }

    /// The data as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut s = BitWriteStream::new();
        self.clone().serialize(&mut s)?;
        let bytes = s.finish();
        if bytes.len() > MAX_CHUNKS * CHUNK_BYTES {
            return Err(WireError::TooLarge(bytes.len()));
        }
        Ok(bytes)
    }

    /// Parses bytes produced by [`MatchData::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        let mut data = MatchData {
            match_id: 0,
            rules: GameRules::default(),
            map: ArenaMap {
                name: String::new(),
                boxes: Vec::new(),
                spawn_points: Vec::new(),
                cubes: Vec::new(),
            },
            max_players: 0,
            min_players: 0,
            countdown_s: 0,
            time_limit_s: 0,
            score_limit: 0,
            weapons: Vec::new(),
        };
        let mut s = BitReadStream::new(bytes);
        data.serialize(&mut s)?;
        if s.bits_left() >= 8 {
            return Err(WireError::Trailing(s.bits_left()));
        }
        if data.map.spawn_points.is_empty() || data.max_players == 0 {
            return Err(CodecError::Invalid {
                field: "match data",
            }
            .into());
        }
        Ok(data)
    }
}

/// The checksum an [`Accept`] carries for the static data.
pub fn data_hash(bytes: &[u8]) -> u64 {
    let mut h = SipHasher24::new_with_keys(0, 0);
    h.write(bytes);
    h.finish()
}

/// Cuts serialized match data into chunks of at most [`CHUNK_BYTES`].
pub fn chunks(bytes: &[u8]) -> Vec<MatchDataChunk> {
    bytes
        .chunks(CHUNK_BYTES)
        .enumerate()
        .map(|(i, c)| MatchDataChunk {
            index: i as u8,
            bytes: c.to_vec(),
        })
        .collect()
}

/// The client's reassembly of the static match data from chunks arriving in any order, any number of times.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchDataAssembler {
    accept: Accept,
    chunks: Vec<Option<Vec<u8>>>,
}

impl MatchDataAssembler {
    /// Reassembly for the data an accept describes.
    pub fn new(accept: Accept) -> Self {
        Self {
            chunks: vec![None; usize::from(accept.chunk_count)],
            accept,
        }
    }

    /// Bit `i` set when chunk `i` is held (what the connect request reports).
    pub fn held_mask(&self) -> u32 {
        self.chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_some())
            .fold(0, |m, (i, _)| m | (1 << i))
    }

    /// Stores a chunk; one with an index beyond the count or an impossible size is refused.
    pub fn insert(&mut self, chunk: MatchDataChunk) -> Result<(), WireError> {
        let count = self.chunks.len();
        let i = usize::from(chunk.index);
        let refused = || WireError::from(CodecError::Invalid { field: "chunk" });
        if i >= count {
            return Err(refused());
        }
        let expected = if i + 1 == count {
            // The accept is the sender's word: a length that leaves the last chunk empty, negative or oversized
            // describes no data at all.
            (self.accept.data_len as usize)
                .checked_sub(i * CHUNK_BYTES)
                .filter(|len| (1..=CHUNK_BYTES).contains(len))
                .ok_or_else(refused)?
        } else {
            CHUNK_BYTES
        };
        if chunk.bytes.len() != expected {
            return Err(refused());
        }
        self.chunks[i] = Some(chunk.bytes);
        Ok(())
    }

    /// The match data once every chunk is held and the checksum matches.
    pub fn complete(&self) -> Option<Result<MatchData, WireError>> {
        if self.chunks.iter().any(Option::is_none) {
            return None;
        }
        let bytes: Vec<u8> = self.chunks.iter().flatten().flatten().copied().collect();
        if data_hash(&bytes) != self.accept.data_hash {
            return Some(Err(CodecError::Invalid {
                field: "match data hash",
            }
            .into()));
        }
        Some(MatchData::from_bytes(&bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn data() -> MatchData {
        MatchData {
            match_id: 7,
            rules: GameRules::default(),
            map: ArenaMap::standard(),
            max_players: 10,
            min_players: 2,
            countdown_s: 3,
            time_limit_s: 120,
            score_limit: 20,
            weapons: vec!["rifle".into()],
        }
    }

    #[test]
    fn match_data_survives_chunking_in_any_order() {
        let mut d = data();
        // Enough boxes to need several chunks.
        for i in 0..60 {
            d.map.boxes.push(BoxSpec {
                center: Point3::new(i as f32, 1.0, 2.0),
                half_extents: Vector3::new(0.5, 0.5, 0.5),
            });
        }
        let bytes = d.to_bytes().unwrap();
        let parts = chunks(&bytes);
        assert!(parts.len() >= 2);
        let accept = Accept {
            chunk_count: parts.len() as u8,
            data_len: bytes.len() as u32,
            data_hash: data_hash(&bytes),
            ..Accept::default()
        };
        let mut a = MatchDataAssembler::new(accept);
        for p in parts.iter().rev() {
            assert!(a.complete().is_none());
            a.insert(p.clone()).unwrap();
        }
        assert_eq!(a.held_mask(), (1 << parts.len()) - 1);
        assert_eq!(a.complete().unwrap().unwrap(), d);
        let mut bad = parts[0].clone();
        bad.bytes.pop();
        assert!(a.insert(bad).is_err());
        let mut corrupt = MatchDataAssembler::new(accept);
        for mut p in parts {
            p.bytes[0] ^= 1;
            corrupt.insert(p).unwrap();
        }
        assert!(corrupt.complete().unwrap().is_err());
    }

    #[test]
    fn an_accept_whose_length_contradicts_its_chunk_count_refuses_chunks() {
        for (chunk_count, data_len) in [(3u8, 10u32), (2, 5000), (1, 0), (2, 1000)] {
            let mut a = MatchDataAssembler::new(Accept {
                chunk_count,
                data_len,
                ..Accept::default()
            });
            let last = chunk_count - 1;
            for len in [0usize, 10, CHUNK_BYTES] {
                let chunk = MatchDataChunk {
                    index: last,
                    bytes: vec![0; len],
                };
                assert!(
                    a.insert(chunk).is_err(),
                    "{chunk_count} chunks, {data_len} bytes, last of {len}"
                );
            }
        }
    }
}
