//! Reads what the session screen draws out of an engine [`World`]: every body's render pose, authority and
//! holder, and the avatars of the players in the session.

use nalgebra::{Isometry3, Point3, Translation3};
use physync_engine::world::World;
use physync_engine::world::authority::DEFAULT_AUTHORITY;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::ObjectId;

use crate::session::{AvatarView, BodyView, PlayerId};

/// Every object of `world` as drawn this frame: its render pose (physics pose plus the correction being
/// blended out), with default authority (the host's index) shown as `None`.
pub fn bodies(world: &World) -> Vec<BodyView> {
    (0..world.object_count())
        .map(|i| {
            let id = i as ObjectId;
            let pose = world.render_pose(id);
            let authority = world.authority(id).view.authority;
            BodyView {
                id: u32::from(id),
                position: Point3::from(pose.translation.vector),
                rotation: pose.rotation,
                half_extents: world.half_extents(id),
                authority: (authority != DEFAULT_AUTHORITY).then_some(authority),
                owner: world.holder(id).map(|h| h.player),
            }
        })
        .collect()
}

/// The avatars of `players` as `world` has them.
pub fn avatars(world: &World, players: &[PlayerId]) -> Vec<AvatarView> {
    players
        .iter()
        .map(|&player| {
            let pose = world.avatar_pose(player);
            AvatarView {
                player,
                head: pose.head,
                hands: pose.hands,
            }
        })
        .collect()
}

/// The hand pose that puts a held object's centre at `target` without turning it: the hand keeps the
/// grip's offset, so the object lands exactly on `target`.
pub fn hand_pose_for(
    world: &World,
    player: PlayerId,
    hand: Hand,
    target: Point3<f32>,
) -> Isometry3<f32> {
    let offset = world
        .grip(player, hand)
        .map_or(nalgebra::Vector3::zeros(), |g| {
            g.relative.translation.vector
        });
    Isometry3::from_parts(
        Translation3::from(target.coords - offset),
        Default::default(),
    )
}

/// Where the object in `player`'s `hand` is drawn now that the hand moved: the hand pose times the grip. The
/// physics body follows on the next step; drawing it here shows the player's move on the frame it happens.
pub fn held_pose(
    world: &World,
    player: PlayerId,
    hand: Hand,
) -> Option<(ObjectId, Isometry3<f32>)> {
    let grip = world.grip(player, hand)?;
    let hand_pose = world.avatar_pose(player).hands[hand.index()];
    Some((grip.object, hand_pose * grip.relative))
}
