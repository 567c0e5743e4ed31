//! Interest management: which other players each client is sent (line of sight through the arena's walls and
//! cover, within the weapon's reach) and the order in which players and cubes go into its snapshot under the byte
//! budget, through the codec's priority accumulator: near and moving things first, the rest held until their
//! accumulated priority wins them a place.

use nalgebra::{Point3, Vector3};
use physync_codec::PriorityAccumulator;
use physync_engine::shooter::{PlayerId, ShooterWorld, Tick};
use physync_engine::shooter_net::snapshot::{MAX_CUBES, MAX_SLOTS};

/// A player out of sight stays relevant this many ticks (no flicker at a corner, no re-send in full).
pub const SIGHT_GRACE_TICKS: Tick = 15;

/// Which player can see which at one tick (symmetric).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visibility {
    seen: [[bool; MAX_SLOTS]; MAX_SLOTS],
}

impl Visibility {
    /// True when `a` can see `b`.
    pub fn sees(&self, a: PlayerId, b: PlayerId) -> bool {
        let (a, b) = (usize::from(a.0), usize::from(b.0));
        a < MAX_SLOTS && b < MAX_SLOTS && self.seen[a][b]
    }
}

/// Points of a player standing at `feet` that an eye may see: head, chest, and the chest's edges as seen from
/// `eye` (so a player half behind cover still counts as seen).
fn sight_points(world: &ShooterWorld, feet: &Point3<f32>, eye: &Point3<f32>) -> [Point3<f32>; 4] {
    let body = &world.rules().body;
    let head = feet + Vector3::new(0.0, body.head_height, 0.0);
    let chest = feet + Vector3::new(0.0, body.body_hit_top * 0.6, 0.0);
    let across = chest - eye;
    let side = Vector3::new(-across.z, 0.0, across.x)
        .try_normalize(1e-6)
        .unwrap_or_else(Vector3::x)
        * (body.body_hit_radius + 0.2);
    [head, chest, chest + side, chest - side]
}

/// Who sees whom now: a pair sees each other when, within reach, either one's eye has a clear line to any of the
/// other's `sight_points` through the static arena.
pub fn visibility(world: &ShooterWorld) -> Visibility {
    let mut seen = [[false; MAX_SLOTS]; MAX_SLOTS];
    let rules = world.rules();
    let reach = rules.weapon.range * 1.25;
    let players: Vec<(usize, Point3<f32>, Point3<f32>)> = world
        .players()
        .filter(|(id, _)| usize::from(id.0) < MAX_SLOTS)
        .map(|(id, p)| (usize::from(id.0), p.position(), p.eye(rules)))
        .collect();
    let geometry = world.geometry();
    for (n, (a, feet_a, eye_a)) in players.iter().enumerate() {
        seen[*a][*a] = true;
        for (b, feet_b, eye_b) in &players[n + 1..] {
            if (feet_a - feet_b).norm() > reach {
                continue;
            }
            let clear = sight_points(world, feet_b, eye_a)
                .iter()
                .any(|p| !geometry.sight_blocked(eye_a, p))
                || sight_points(world, feet_a, eye_b)
                    .iter()
                    .any(|p| !geometry.sight_blocked(eye_b, p));
            seen[*a][*b] = clear;
            seen[*b][*a] = clear;
        }
    }
    Visibility { seen }
}

/// The accumulator id of a player slot.
pub fn player_entity(slot: usize) -> u16 {
    slot as u16
}

/// The accumulator id of a cube.
pub fn cube_entity(index: usize) -> u16 {
    (MAX_SLOTS + index) as u16
}

/// A fresh accumulator for one client's players and cubes.
pub fn accumulator() -> PriorityAccumulator {
    PriorityAccumulator::new(MAX_SLOTS + MAX_CUBES)
}

/// This tick's priority of a player `distance` metres away (only players the client may see get one).
pub fn player_priority(distance: f32) -> f32 {
    1.0 + 8.0 / (1.0 + distance / 4.0)
}

/// This tick's priority of a cube `distance` metres away: moving cubes and cubes in sight or within reach of
/// the player's movement matter most; a resting cube far away can wait.
pub fn cube_priority(distance: f32, moving: bool, in_sight: bool) -> f32 {
    let near = if in_sight || distance < 8.0 { 2.0 } else { 0.5 };
    let motion = if moving { 4.0 } else { 1.0 };
    near * motion / (1.0 + distance / 8.0)
}
