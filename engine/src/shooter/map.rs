//! The arena: a floor, walls and cover boxes, spawn points and the physics cubes that stand in it, plus
//! [`WorldGeometry`], the static collision world that player movement and shot occlusion are computed against on
//! both the server and the predicting client.

use nalgebra::{Point3, Vector3};
use rapier3d::prelude::{ColliderBuilder, PhysicsWorld, QueryPipeline, Ray, RigidBodyBuilder};

use super::convert::{point_to_glam, vector_to_glam};

/// A static axis-aligned box (floor, wall or cover).
#[derive(Debug, Clone, PartialEq)]
pub struct BoxSpec {
    /// Centre, metres.
    pub center: Point3<f32>,
    /// Half extents, metres.
    pub half_extents: Vector3<f32>,
}

/// A place a player (re)spawns, looking along `yaw` (see [`crate::shooter::units`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnPoint {
    /// Feet position.
    pub position: Point3<f32>,
    /// View yaw in steps.
    pub yaw: u16,
}

/// A dynamic cube, simulated by the server only.
#[derive(Debug, Clone, PartialEq)]
pub struct CubeSpec {
    /// Initial centre.
    pub center: Point3<f32>,
    /// Half the edge length.
    pub half_extent: f32,
}

/// The static description of an arena: the part of the match data that both sides build their worlds from.
#[derive(Debug, Clone, PartialEq)]
pub struct ArenaMap {
    /// Name shown to players.
    pub name: String,
    /// Static boxes: floor, walls and cover.
    pub boxes: Vec<BoxSpec>,
    /// Spawn points (at least one).
    pub spawn_points: Vec<SpawnPoint>,
    /// Physics cubes.
    pub cubes: Vec<CubeSpec>,
}

impl ArenaMap {
    /// The default arena: a 40 m square floor, 4 m walls, eight cover boxes, ten spawn points around the edge
    /// looking inwards, and six cubes.
    pub fn standard() -> Self {
        let half = 20.0;
        let wall_height = 4.0;
        let thick = 0.5;
        let mut boxes = vec![BoxSpec {
            center: Point3::new(0.0, -0.5, 0.0),
            half_extents: Vector3::new(half + thick, 0.5, half + thick),
        }];
        for (cx, cz, hx, hz) in [
            (0.0, half + thick / 2.0, half + thick, thick / 2.0),
            (0.0, -half - thick / 2.0, half + thick, thick / 2.0),
            (half + thick / 2.0, 0.0, thick / 2.0, half + thick),
            (-half - thick / 2.0, 0.0, thick / 2.0, half + thick),
        ] {
            boxes.push(BoxSpec {
                center: Point3::new(cx, wall_height / 2.0, cz),
                half_extents: Vector3::new(hx, wall_height / 2.0, hz),
            });
        }
        for (cx, cz, hx, hy, hz) in [
            (6.0, 6.0, 1.5, 0.6, 0.5),
            (-6.0, 6.0, 0.5, 1.2, 1.5),
            (6.0, -6.0, 0.5, 1.2, 1.5),
            (-6.0, -6.0, 1.5, 0.6, 0.5),
            (0.0, 11.0, 2.0, 1.0, 0.5),
            (0.0, -11.0, 2.0, 1.0, 0.5),
            (11.0, 0.0, 0.5, 1.0, 2.0),
            (-11.0, 0.0, 0.5, 1.0, 2.0),
        ] {
            boxes.push(BoxSpec {
                center: Point3::new(cx, hy, cz),
                half_extents: Vector3::new(hx, hy, hz),
            });
        }
        let spawn_points = (0..10)
            .map(|i| {
                let angle = i as f32 * std::f32::consts::TAU / 10.0;
                let position = Point3::new(16.0 * angle.sin(), 0.0, 16.0 * angle.cos());
                let (yaw, _) = super::units::aim_at(&position, &Point3::new(0.0, 0.0, 0.0));
                SpawnPoint { position, yaw }
            })
            .collect();
        let cubes = [
            (3.0, 0.0),
            (-3.0, 0.0),
            (0.0, 3.0),
            (0.0, -3.0),
            (8.0, 2.0),
            (-8.0, -2.0),
        ]
        .into_iter()
        .map(|(x, z)| CubeSpec {
            center: Point3::new(x, 0.5, z),
            half_extent: 0.5,
        })
        .collect();
        Self {
            name: "standard".to_owned(),
            boxes,
            spawn_points,
            cubes,
        }
    }

    pub(crate) fn insert_static(&self, world: &mut PhysicsWorld) {
        for b in &self.boxes {
            let h = b.half_extents;
            world.insert(
                RigidBodyBuilder::fixed().translation(point_to_glam(&b.center)),
                ColliderBuilder::cuboid(h.x, h.y, h.z),
            );
        }
    }
}

/// The arena's static colliders in their own rapier world. Player movement (rapier's kinematic character
/// controller) and shot occlusion are computed against this on the server and in client prediction alike, so
/// the two give identical results for identical inputs.
pub struct WorldGeometry {
    world: PhysicsWorld,
}

impl WorldGeometry {
    /// Builds the static world of `map`.
    pub fn new(map: &ArenaMap) -> Self {
        let mut world = PhysicsWorld::new();
        map.insert_static(&mut world);
        world.detect_collisions(&(), &());
        Self { world }
    }

    /// The query pipeline over the static colliders.
    pub(crate) fn queries(&self) -> QueryPipeline<'_> {
        self.world.query_pipeline()
    }

    /// Distance along the unit `direction` from `origin` to the first static surface, within `max_distance`.
    pub fn cast_ray(
        &self,
        origin: &Point3<f32>,
        direction: &Vector3<f32>,
        max_distance: f32,
    ) -> Option<f32> {
        let ray = Ray::new(point_to_glam(origin), vector_to_glam(direction));
        self.queries()
            .cast_ray(&ray, max_distance, true)
            .map(|(_, toi)| toi)
    }
}

impl std::fmt::Debug for WorldGeometry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldGeometry")
            .field("colliders", &self.world.colliders.len())
            .finish()
    }
}
