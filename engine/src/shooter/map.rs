//! The arena: a floor, walls and cover boxes, spawn points and the physics cubes that stand in it, plus
//! [`WorldGeometry`], the static collision world that player movement and shot occlusion are computed against on
//! both the server and the predicting client.

use nalgebra::{Point3, Vector3};
use rapier3d::math::Pose;
use rapier3d::parry::bounding_volume::Aabb;
use rapier3d::parry::partitioning::{Bvh, BvhBuildStrategy};
use rapier3d::parry::query::DefaultQueryDispatcher;
use rapier3d::prelude::{
    ColliderBuilder, ColliderHandle, ColliderSet, IntegrationParameters, PhysicsWorld, QueryFilter,
    QueryPipeline, Ray, RigidBodyBuilder, RigidBodySet, SharedShape,
};

use super::convert::{point_to_glam, rotation_to_glam, vector_to_glam};
use super::cubes::CubePose;
use rapier3d::math::Vector as GVec3;

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

/// A dynamic cube: simulated by the server, seen by every client through snapshots.
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

/// The arena as player movement and shots meet it: the static boxes and the physics cubes, each cube placed
/// where the player saw it ([`WorldGeometry::place_cubes`]). Player movement (rapier's kinematic character
/// controller) and shot occlusion are computed against this on the server and in client prediction alike, so the
/// two give identical results for identical inputs and cube poses.
///
/// The floor (the lowest box, whose top face spans every other box) is a half-space at its top
/// face, kept in the trees under the box's bounds: within its footprint it is the same solid to everything that
/// comes from above, and a capsule meets a plane in closed form where it meets a box through GJK iterations. Every
/// move of every player rests on the floor, so that is most of what movement costs.
pub struct WorldGeometry {
    bodies: RigidBodySet,
    colliders: ColliderSet,
    dispatcher: DefaultQueryDispatcher,
    cubes: Vec<ColliderHandle>,
    initial: Vec<CubePose>,
    placed: Vec<CubePose>,
    /// The tree leaves of the static boxes: their index and bounds (the floor's box bounds its half-space).
    static_leaves: Vec<(usize, Aabb)>,
    bvh: Bvh,
    /// The static boxes as they are (the floor's box included), for line of sight: a handful of slab tests
    /// cost less than a tree walk and a shape dispatch per ray.
    static_boxes: Vec<Aabb>,
}

/// The margin rapier's broad phase gives a collider's bounds (queries such as the character controller's rely
/// on it).
fn leaf_margin() -> f32 {
    IntegrationParameters::default().prediction_distance() / 2.0
}

/// The index in `boxes` of the floor: the lowest box whose top face lies at or below the bottom of every other
/// box and spans each of them horizontally. `None` when no box is such a floor.
fn ground_box(boxes: &[BoxSpec]) -> Option<usize> {
    let (index, floor) = boxes.iter().enumerate().min_by(|a, b| {
        let top = |b: &BoxSpec| b.center.y + b.half_extents.y;
        top(a.1).total_cmp(&top(b.1))
    })?;
    let lo = floor.center - floor.half_extents;
    let hi = floor.center + floor.half_extents;
    let spans = boxes.iter().enumerate().all(|(i, b)| {
        let (blo, bhi) = (b.center - b.half_extents, b.center + b.half_extents);
        i == index
            || (blo.y >= hi.y && blo.x >= lo.x && bhi.x <= hi.x && blo.z >= lo.z && bhi.z <= hi.z)
    });
    spans.then_some(index)
}

/// A line-of-sight segment, ready for slab tests against boxes.
struct Segment {
    origin: GVec3,
    inverse: GVec3,
    length: f32,
    bounds: Aabb,
}

impl Segment {
    /// The segment from `origin` along the unit `direction` for `length`.
    fn new(origin: GVec3, direction: GVec3, length: f32) -> Self {
        let end = origin + direction * length;
        Self {
            origin,
            inverse: direction.recip(),
            length,
            bounds: Aabb::new(origin.min(end), origin.max(end)),
        }
    }

    /// True when the segment touches the solid box `b` (starting inside it counts): its bounds first, then the
    /// slab test axis by axis.
    fn meets(&self, b: &Aabb) -> bool {
        let s = &self.bounds;
        if s.mins.cmpgt(b.maxs).any() || s.maxs.cmplt(b.mins).any() {
            return false;
        }
        let (mut enter, mut leave) = (0.0f32, self.length);
        for axis in 0..3 {
            let (o, inv) = (self.origin[axis], self.inverse[axis]);
            let (lo, hi) = (b.mins[axis], b.maxs[axis]);
            if !inv.is_finite() {
                // Parallel to this slab: the bounds test above found the origin within it.
                continue;
            }
            let (t1, t2) = ((lo - o) * inv, (hi - o) * inv);
            enter = enter.max(t1.min(t2));
            leave = leave.min(t1.max(t2));
        }
        enter <= leave
    }
}

impl WorldGeometry {
    /// Builds the arena of `map`, its cubes where the map puts them.
    pub fn new(map: &ArenaMap) -> Self {
        let mut colliders = ColliderSet::new();
        let ground = ground_box(&map.boxes);
        let static_leaves: Vec<(usize, Aabb)> = map
            .boxes
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let h = b.half_extents;
                let bounds = ColliderBuilder::cuboid(h.x, h.y, h.z)
                    .translation(point_to_glam(&b.center))
                    .build()
                    .compute_collision_aabb(leaf_margin());
                let collider = if ground == Some(i) {
                    let top = b.center + Vector3::new(0.0, h.y, 0.0);
                    ColliderBuilder::new(SharedShape::halfspace(GVec3::Y))
                        .translation(point_to_glam(&top))
                } else {
                    ColliderBuilder::cuboid(h.x, h.y, h.z).translation(point_to_glam(&b.center))
                };
                (
                    colliders.insert(collider).into_raw_parts().0 as usize,
                    bounds,
                )
            })
            .collect();
        let static_boxes = map
            .boxes
            .iter()
            .map(|b| {
                Aabb::new(
                    point_to_glam(&(b.center - b.half_extents)),
                    point_to_glam(&(b.center + b.half_extents)),
                )
            })
            .collect();
        let initial: Vec<CubePose> = map.cubes.iter().map(|c| CubePose::at(c.center)).collect();
        let cubes = map
            .cubes
            .iter()
            .map(|c| {
                let h = c.half_extent;
                colliders
                    .insert(ColliderBuilder::cuboid(h, h, h).translation(point_to_glam(&c.center)))
            })
            .collect();
        let mut geometry = Self {
            bodies: RigidBodySet::new(),
            colliders,
            dispatcher: DefaultQueryDispatcher,
            cubes,
            placed: initial.clone(),
            initial,
            static_leaves,
            bvh: Bvh::new(),
            static_boxes,
        };
        geometry.rebuild();
        geometry
    }

    /// Rebuilds the bounding-volume tree over the static boxes and the placed cubes.
    fn rebuild(&mut self) {
        let margin = leaf_margin();
        let cubes = self.cubes.iter().filter_map(|handle| {
            let collider = self.colliders.get(*handle)?;
            Some((
                handle.into_raw_parts().0 as usize,
                collider.compute_collision_aabb(margin),
            ))
        });
        let leaves = self.static_leaves.iter().copied().chain(cubes);
        self.bvh = Bvh::from_iter(BvhBuildStrategy::Binned, leaves);
    }

    /// The cubes' poses in the map (before anything moved them).
    pub fn initial_cubes(&self) -> &[CubePose] {
        &self.initial
    }

    /// The cubes' poses as last placed.
    pub fn cubes(&self) -> &[CubePose] {
        &self.placed
    }

    /// Puts the cubes at `poses` (in map order; extra poses are ignored, missing ones leave a cube where it is).
    pub fn place_cubes(&mut self, poses: &[CubePose]) {
        let n = poses.len().min(self.cubes.len());
        if self.placed[..n] == poses[..n] {
            return;
        }
        for (i, pose) in poses.iter().take(n).enumerate() {
            if let Some(collider) = self.colliders.get_mut(self.cubes[i]) {
                collider.set_position(Pose::from_parts(
                    point_to_glam(&pose.center),
                    rotation_to_glam(&pose.rotation),
                ));
            }
            self.placed[i] = *pose;
        }
        self.rebuild();
    }

    /// The query pipeline over the boxes and the placed cubes.
    pub(crate) fn queries(&self) -> QueryPipeline<'_> {
        QueryPipeline {
            dispatcher: &self.dispatcher,
            bvh: &self.bvh,
            bodies: &self.bodies,
            colliders: &self.colliders,
            filter: QueryFilter::default(),
        }
    }

    /// Distance along the unit `direction` from `origin` to the first surface (box or placed cube), within
    /// `max_distance`.
    pub fn cast_ray(
        &self,
        origin: &Point3<f32>,
        direction: &Vector3<f32>,
        max_distance: f32,
    ) -> Option<f32> {
        self.cast_ray_at(origin, direction, max_distance)
            .map(|(toi, _)| toi)
    }

    /// True when the arena's walls or cover stand between `from` and `to` (cubes are small and move; they never
    /// hide a player): what decides whether a server sends one player to another.
    pub fn sight_blocked(&self, from: &Point3<f32>, to: &Point3<f32>) -> bool {
        let d = to - from;
        let distance = d.norm();
        if distance < 1e-4 {
            return false;
        }
        let segment = Segment::new(
            point_to_glam(from),
            vector_to_glam(&(d / distance)),
            distance,
        );
        self.static_boxes.iter().any(|b| segment.meets(b))
    }

    /// Like [`WorldGeometry::cast_ray`], also naming the cube struck (its index in map order), if a cube
    /// stopped the ray.
    pub fn cast_ray_at(
        &self,
        origin: &Point3<f32>,
        direction: &Vector3<f32>,
        max_distance: f32,
    ) -> Option<(f32, Option<usize>)> {
        let ray = Ray::new(point_to_glam(origin), vector_to_glam(direction));
        self.queries()
            .cast_ray(&ray, max_distance, true)
            .map(|(handle, toi)| (toi, self.cubes.iter().position(|c| *c == handle)))
    }
}

impl std::fmt::Debug for WorldGeometry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldGeometry")
            .field("colliders", &self.colliders.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_floor_is_the_lowest_box_spanning_the_others() {
        let mut map = ArenaMap::standard();
        assert_eq!(ground_box(&map.boxes), Some(0));
        // A box beside the floor: no box spans the arena, so every box stays a box.
        map.boxes.push(BoxSpec {
            center: Point3::new(30.0, 0.5, 0.0),
            half_extents: Vector3::new(1.0, 0.5, 1.0),
        });
        assert_eq!(ground_box(&map.boxes), None);
    }

    /// Line of sight (slab tests against the static boxes) and a shot's ray (rapier's query over the floor's
    /// half-space and the boxes) agree on which segments inside the arena the walls and cover block.
    #[test]
    fn sight_and_rays_agree_on_what_blocks() {
        let mut map = ArenaMap::standard();
        map.cubes.clear();
        let geometry = WorldGeometry::new(&map);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let point = |rng: &mut ChaCha8Rng| {
            Point3::new(
                rng.random_range(-19.5..19.5),
                rng.random_range(0.05..3.0),
                rng.random_range(-19.5..19.5),
            )
        };
        let (mut blocked, mut clear) = (0, 0);
        for _ in 0..2_000 {
            let (a, b) = (point(&mut rng), point(&mut rng));
            let d = b - a;
            let distance = d.norm();
            let by_ray = geometry.cast_ray(&a, &(d / distance), distance).is_some();
            assert_eq!(geometry.sight_blocked(&a, &b), by_ray, "{a:?} -> {b:?}");
            if by_ray {
                blocked += 1;
            } else {
                clear += 1;
            }
        }
        assert!(
            blocked > 100 && clear > 100,
            "{blocked} blocked, {clear} clear"
        );
    }
}
