//! Scenes: the objects a world starts with, selectable by name, with stable object ids.
//!
//! Object ids are the index into [`SceneSpec::objects`] and never change during a session, so every peer
//! names the same cube with the same `u16`.

use std::fmt;
use std::str::FromStr;

use nalgebra::{Isometry3, UnitQuaternion, Vector3};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// An object's id in its scene.
pub type ObjectId = u16;

/// The named scenes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SceneKind {
    /// The VR sample: 64 cubes on a floor, room for 4 players.
    Table,
    /// The "Snapshot Compression" scene: 900 small cubes in a 30×30 grid and one large player cube.
    Katamari,
    /// Stacks of 10 to 20 cubes.
    Tower,
}

impl SceneKind {
    /// Every scene, for menus.
    pub const ALL: [SceneKind; 3] = [SceneKind::Table, SceneKind::Katamari, SceneKind::Tower];

    /// The name the scene is selected by.
    pub fn name(self) -> &'static str {
        match self {
            SceneKind::Table => "table",
            SceneKind::Katamari => "katamari",
            SceneKind::Tower => "tower",
        }
    }

    /// The scene's objects.
    pub fn spec(self) -> SceneSpec {
        match self {
            SceneKind::Table => SceneSpec::table(),
            SceneKind::Katamari => SceneSpec::katamari(),
            SceneKind::Tower => SceneSpec::towers(&[10, 14, 17, 20]),
        }
    }
}

impl fmt::Display for SceneKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scene name that matches no scene.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scene {0:?} (expected table, katamari or tower)")]
pub struct UnknownScene(pub String);

impl FromStr for SceneKind {
    type Err = UnknownScene;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SceneKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownScene(s.to_owned()))
    }
}

/// One networked box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectSpec {
    /// Half extents along the box's local axes (m).
    pub half_extents: Vector3<f32>,
    /// Starting pose.
    pub pose: Isometry3<f32>,
    /// Density (kg/m³).
    pub density: f32,
}

impl ObjectSpec {
    /// An axis-aligned cube of half extent `half` at `position`, density 1000.
    pub fn cube(half: f32, position: Vector3<f32>) -> Self {
        Self {
            half_extents: Vector3::repeat(half),
            pose: Isometry3::translation(position.x, position.y, position.z),
            density: 1000.0,
        }
    }
}

/// Everything a world is built from: a floor, the objects, where players stand.
#[derive(Debug, Clone, PartialEq)]
pub struct SceneSpec {
    /// Half extent of the square floor (its top is at y = 0).
    pub floor_half_extent: f32,
    /// The objects; an object's id is its index.
    pub objects: Vec<ObjectSpec>,
    /// Head poses where players 0, 1, 2, 3 start.
    pub spawns: [Isometry3<f32>; 4],
    /// The object scripted input drives (the katamari's player cube), if any.
    pub player_object: Option<ObjectId>,
}

/// Half extent of the table scene's cubes.
pub const TABLE_CUBE_HALF: f32 = 0.25;
/// Half extent of the katamari scene's small cubes.
pub const KATAMARI_CUBE_HALF: f32 = 0.2;
/// Half extent of the katamari scene's player cube.
pub const KATAMARI_PLAYER_HALF: f32 = 1.0;
/// Distance between katamari grid cells (m).
pub const KATAMARI_SPACING: f32 = 1.0;
/// Half extent of tower cubes.
pub const TOWER_CUBE_HALF: f32 = 0.25;

fn spawns(radius: f32) -> [Isometry3<f32>; 4] {
    [0.0f32, 180.0, 90.0, 270.0].map(|deg| {
        let yaw = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), deg.to_radians());
        // Stand on the -z side of the centre rotated by the yaw, looking at the centre (+z is "forward").
        let position = yaw * Vector3::new(0.0, 1.7, -radius);
        Isometry3::from_parts(position.into(), yaw)
    })
}

impl SceneSpec {
    /// 64 cubes in an 8×8 block in the middle of a floor, four players around it.
    pub fn table() -> Self {
        let mut objects = Vec::with_capacity(64);
        for i in 0..8 {
            for j in 0..8 {
                let x = (i as f32 - 3.5) * 0.8;
                let z = (j as f32 - 3.5) * 0.8;
                objects.push(ObjectSpec::cube(
                    TABLE_CUBE_HALF,
                    Vector3::new(x, TABLE_CUBE_HALF, z),
                ));
            }
        }
        Self {
            floor_half_extent: 20.0,
            objects,
            spawns: spawns(5.0),
            player_object: None,
        }
    }

    /// 900 cubes in a 30×30 grid and one large player cube (id 900) at a corner.
    pub fn katamari() -> Self {
        let mut objects = Vec::with_capacity(901);
        let offset = 14.5 * KATAMARI_SPACING;
        for i in 0..30 {
            for j in 0..30 {
                let x = i as f32 * KATAMARI_SPACING - offset;
                let z = j as f32 * KATAMARI_SPACING - offset;
                objects.push(ObjectSpec::cube(
                    KATAMARI_CUBE_HALF,
                    Vector3::new(x, KATAMARI_CUBE_HALF, z),
                ));
            }
        }
        let mut player = ObjectSpec::cube(
            KATAMARI_PLAYER_HALF,
            Vector3::new(-offset - 3.0, KATAMARI_PLAYER_HALF, -offset - 3.0),
        );
        player.density = 3000.0;
        objects.push(player);
        Self {
            floor_half_extent: 60.0,
            objects,
            spawns: spawns(25.0),
            player_object: Some(900),
        }
    }

    /// Towers of the given heights in a row, stacked with a 1 mm gap so they settle onto each other.
    pub fn towers(heights: &[usize]) -> Self {
        let mut objects = Vec::new();
        let spacing = 2.0;
        let first = -(heights.len().saturating_sub(1) as f32) * spacing / 2.0;
        for (t, &height) in heights.iter().enumerate() {
            let x = first + t as f32 * spacing;
            for level in 0..height {
                let y = TOWER_CUBE_HALF + level as f32 * (2.0 * TOWER_CUBE_HALF + 0.001);
                objects.push(ObjectSpec::cube(TOWER_CUBE_HALF, Vector3::new(x, y, 0.0)));
            }
        }
        Self {
            floor_half_extent: 20.0,
            objects,
            spawns: spawns(5.0),
            player_object: None,
        }
    }

    /// `count` cubes dropped from a lattice in random orientations, seeded: a settling pile for benchmarks.
    pub fn pile(count: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let side = (count as f32).cbrt().ceil() as usize;
        let half = 0.25;
        let pitch = 0.7;
        let offset = (side as f32 - 1.0) * pitch / 2.0;
        let objects = (0..count)
            .map(|n| {
                let (i, j, k) = (n % side, (n / side) % side, n / (side * side));
                let position = Vector3::new(
                    i as f32 * pitch - offset,
                    half + 0.05 + k as f32 * pitch,
                    j as f32 * pitch - offset,
                );
                let axis = Vector3::new(rng.random(), rng.random(), rng.random()) * 0.6;
                let mut spec = ObjectSpec::cube(half, position);
                spec.pose = Isometry3::new(position, axis);
                spec
            })
            .collect();
        Self {
            floor_half_extent: 40.0,
            objects,
            spawns: spawns(8.0),
            player_object: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenes_by_name_have_their_published_sizes() {
        assert_eq!(
            "table".parse::<SceneKind>().unwrap().spec().objects.len(),
            64
        );
        let katamari = "katamari".parse::<SceneKind>().unwrap().spec();
        assert_eq!(katamari.objects.len(), 901);
        assert_eq!(katamari.player_object, Some(900));
        let tower = SceneKind::Tower.spec();
        assert_eq!(tower.objects.len(), 10 + 14 + 17 + 20);
        assert!("castle".parse::<SceneKind>().is_err());
        for kind in SceneKind::ALL {
            assert_eq!(kind.name().parse::<SceneKind>().unwrap(), kind);
        }
    }

    #[test]
    fn spawns_face_the_centre() {
        for spawn in SceneSpec::table().spawns {
            let forward = spawn.rotation * Vector3::z();
            let to_centre = -spawn.translation.vector.xz_like();
            assert!(forward.dot(&to_centre) > 0.99 * to_centre.norm());
        }
    }

    trait XzLike {
        fn xz_like(&self) -> Vector3<f32>;
    }

    impl XzLike for Vector3<f32> {
        fn xz_like(&self) -> Vector3<f32> {
            Vector3::new(self.x, 0.0, self.z)
        }
    }

    #[test]
    fn pile_is_seeded() {
        assert_eq!(SceneSpec::pile(27, 7), SceneSpec::pile(27, 7));
        assert_ne!(SceneSpec::pile(27, 7), SceneSpec::pile(27, 8));
        assert_eq!(SceneSpec::pile(1000, 1).objects.len(), 1000);
    }
}
