//! How bots choose cubes: free ones near the hand, ones other players reach for, tower tops to throw at.

use nalgebra::Point3;
use physync_engine::world::World;
use physync_engine::world::authority::PlayerIndex;
use physync_engine::world::avatar::MAX_PLAYERS;
use physync_engine::world::scene::ObjectId;
use rand::Rng;

/// Cubes a bot chooses among, nearest first.
const CANDIDATES: usize = 3;

fn position(world: &World, id: ObjectId) -> Point3<f32> {
    Point3::from(world.physics_pose(id).translation.vector)
}

/// Horizontal distance from a cube to a point.
pub(crate) fn horizontal_distance(world: &World, id: ObjectId, p: Point3<f32>) -> f32 {
    let c = position(world, id);
    ((c.x - p.x).powi(2) + (c.z - p.z).powi(2)).sqrt()
}

fn free(world: &World, id: ObjectId) -> bool {
    world.holder(id).is_none() && position(world, id).y < 0.9
}

/// One of the few free cubes nearest to `from` that pass `keep`, chosen at random.
pub(crate) fn nearest_free(
    world: &World,
    rng: &mut impl Rng,
    from: Point3<f32>,
    keep: impl Fn(ObjectId) -> bool,
) -> Option<ObjectId> {
    let mut cubes: Vec<(f32, ObjectId)> = (0..world.object_count() as ObjectId)
        .filter(|&id| free(world, id) && keep(id))
        .map(|id| ((position(world, id) - from).norm(), id))
        .collect();
    cubes.sort_by(|a, b| a.0.total_cmp(&b.0));
    cubes.truncate(CANDIDATES);
    (!cubes.is_empty()).then(|| cubes[rng.random_range(0..cubes.len())].1)
}

/// Any free cube passing `keep`, at random.
pub(crate) fn random_free(
    world: &World,
    rng: &mut impl Rng,
    keep: impl Fn(ObjectId) -> bool,
) -> Option<ObjectId> {
    let cubes: Vec<ObjectId> = (0..world.object_count() as ObjectId)
        .filter(|&id| free(world, id) && keep(id))
        .collect();
    (!cubes.is_empty()).then(|| cubes[rng.random_range(0..cubes.len())])
}

/// The free cube closest to another player's hand, if one is within `radius`: what the grabber contests.
pub(crate) fn contested(world: &World, me: PlayerIndex, radius: f32) -> Option<ObjectId> {
    let hands: Vec<Point3<f32>> = (0..MAX_PLAYERS as PlayerIndex)
        .filter(|&p| p != me)
        .flat_map(|p| world.avatar_pose(p).hands)
        .map(|h| Point3::from(h.translation.vector))
        .collect();
    (0..world.object_count() as ObjectId)
        .filter(|&id| free(world, id))
        .filter_map(|id| {
            let c = position(world, id);
            hands
                .iter()
                .map(|h| (h - c).norm())
                .min_by(f32::total_cmp)
                .filter(|&d| d < radius)
                .map(|d| (d, id))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, id)| id)
}

/// The top of the highest stack: a free cube resting on another (its centre above one cube's height).
pub(crate) fn tower_top(world: &World) -> Option<Point3<f32>> {
    (0..world.object_count() as ObjectId)
        .filter(|&id| world.holder(id).is_none())
        .map(|id| position(world, id))
        .filter(|p| p.y > 0.6 && p.y < 6.0)
        .max_by(|a, b| a.y.total_cmp(&b.y))
}
