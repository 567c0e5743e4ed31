//! How far two peers' worlds are apart: what session tests assert and benchmarks report after a session settles.

use crate::world::World;
use crate::world::authority::PlayerIndex;
use crate::world::scene::ObjectId;

/// The differences between a replica's world and the reference (the host's).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Divergence {
    /// Largest distance between an object's position on the two sides (m).
    pub max_position_m: f32,
    /// Largest angle between an object's orientations on the two sides (rad).
    pub max_rotation_rad: f32,
    /// Objects whose authority view (player and both sequences) differs.
    pub authority_mismatches: usize,
    /// Objects held by different players (or held on one side only).
    pub holder_mismatches: usize,
}

/// Compares every object of `replica` with the same object in `reference` (the worlds must share a scene).
pub fn divergence(reference: &World, replica: &World) -> Divergence {
    let mut d = Divergence::default();
    let count = reference.object_count().min(replica.object_count());
    for id in 0..count as ObjectId {
        let (a, b) = (reference.physics_pose(id), replica.physics_pose(id));
        d.max_position_m = d
            .max_position_m
            .max((a.translation.vector - b.translation.vector).norm());
        d.max_rotation_rad = d.max_rotation_rad.max(a.rotation.angle_to(&b.rotation));
        if reference.authority(id).view != replica.authority(id).view {
            d.authority_mismatches += 1;
        }
        let holder = |w: &World| w.holder(id).map(|h| h.player);
        if holder(reference) != holder(replica) {
            d.holder_mismatches += 1;
        }
    }
    d
}

/// Objects a world still has under `player`'s authority or in `player`'s hands.
pub fn objects_of(world: &World, player: PlayerIndex) -> Vec<ObjectId> {
    (0..world.object_count() as ObjectId)
        .filter(|&id| {
            world.authority(id).view.authority == player
                || world.holder(id).is_some_and(|h| h.player == player)
        })
        .collect()
}
