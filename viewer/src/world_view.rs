//! Reads what the session screen draws out of an engine [`World`]: every body's render pose, authority and
//! holder, and the avatars of the players in the session.

use std::sync::Arc;

use egui::Color32;
use nalgebra::{Isometry3, Point3, Translation3};
use physync_engine::world::World;
use physync_engine::world::authority::DEFAULT_AUTHORITY;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::ObjectId;
use physync_engine::world::scene::{LevelShape, SceneSpec, Shape, Tag};

use crate::session::{AvatarView, BodyView, LevelView, PlayerId};

/// Colour of level geometry that has no tag colour.
const LEVEL_COLOR: Color32 = Color32::from_rgb(150, 152, 160);

/// The scene's shapes as triangles, computed once per session: every body that is not a plain box, and
/// every piece of level geometry except floors (the checkerboard draws those).
#[derive(Debug, Clone, Default)]
pub struct ShapeCache {
    bodies: Vec<(Option<Arc<crate::session::Tessellation>>, Option<Color32>)>,
    level: Vec<LevelView>,
}

fn tag_color(tag: &Tag) -> Option<Color32> {
    tag.colour.map(|[r, g, b]| Color32::from_rgb(r, g, b))
}

impl ShapeCache {
    /// The shapes of `scene`.
    pub fn new(scene: &SceneSpec) -> Self {
        let bodies = scene
            .objects
            .iter()
            .map(|o| {
                let mesh = (!matches!(o.shape, Shape::Cuboid { .. }))
                    .then(|| Arc::new(o.shape.tessellate()));
                (mesh, tag_color(&o.tag))
            })
            .collect();
        let level = scene
            .level
            .iter()
            .filter(|piece| {
                let floor = matches!(piece.shape, LevelShape::Cuboid { .. })
                    && piece.pose.position[1] + piece.shape.local_bounds().0.y <= 0.01;
                !floor
            })
            .map(|piece| LevelView {
                pose: piece.pose.isometry(),
                mesh: Arc::new(piece.shape.tessellate()),
                color: tag_color(&piece.tag).unwrap_or(LEVEL_COLOR),
            })
            .collect();
        Self { bodies, level }
    }

    /// Whether the cache was built for a scene of `objects` objects.
    pub fn fits(&self, objects: usize) -> bool {
        self.bodies.len() == objects
    }

    /// The level geometry to draw.
    pub fn level(&self) -> &[LevelView] {
        &self.level
    }
}

/// Every object of `world` as drawn this frame: its render pose (physics pose plus the correction being
/// blended out), with default authority (the host's index) shown as `None`, and its shape and tag colour from
/// `shapes`.
pub fn bodies(world: &World, shapes: &ShapeCache) -> Vec<BodyView> {
    (0..world.object_count())
        .map(|i| {
            let id = i as ObjectId;
            let (mesh, tag_color) = shapes.bodies.get(i).cloned().unwrap_or_default();
            let pose = world.render_pose(id);
            let authority = world.authority(id).view.authority;
            BodyView {
                id: u32::from(id),
                position: Point3::from(pose.translation.vector),
                rotation: pose.rotation,
                half_extents: world.half_extents(id),
                mesh,
                tag_color,
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
/// grip's aimed offset, so the object lands exactly on `target` unless something it presses stops it.
pub fn hand_pose_for(
    world: &World,
    player: PlayerId,
    hand: Hand,
    target: Point3<f32>,
) -> Isometry3<f32> {
    let offset = world
        .grip(player, hand)
        .map_or(nalgebra::Vector3::zeros(), |g| g.aim.translation.vector);
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
