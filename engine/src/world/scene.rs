//! Scenes: the world content a session starts with, as data. A scene lists its dynamic objects (each with a
//! [`Shape`], a [`Pose`], a [`Material`] and a [`Tag`]), its static level geometry, where players stand, and the
//! quantization its states travel with. Scenes load from RON files ([`SceneSpec::from_ron`]), are written in
//! code with [`SceneBuilder`], and travel to guests at join (see [`crate::session::scene_transfer`]).
//!
//! Object ids are the index into [`SceneSpec::objects`] and never change during a session, so every peer
//! names the same object with the same `u16`. [`SceneKind`] names the three demo scenes, which are built in
//! code here and also ship as files under `examples/scenes/` (a test keeps the two equal).

use std::fmt;
use std::str::FromStr;

use nalgebra::{Isometry3, UnitQuaternion, Vector3};
use physync_codec::{QuantConfig, RotationQuantizer, Vec3Quantizer};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::avatar::MAX_PLAYERS;
pub use super::shape::{LevelShape, Material, Part, Pose, Shape, ShapeError, Tag};
use super::shape::{validate_material, validate_pose};

/// An object's id in its scene.
pub type ObjectId = u16;

/// Most dynamic objects a scene may hold.
pub const MAX_OBJECTS: usize = 8192;
/// Most pieces of level geometry a scene may hold.
pub const MAX_LEVEL_PIECES: usize = 1024;
/// Longest scene name, in bytes.
pub const MAX_NAME_BYTES: usize = 64;

/// The named demo scenes.
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

    /// The name the scene is selected by (and its file's stem under `examples/scenes/`).
    pub fn name(self) -> &'static str {
        match self {
            SceneKind::Table => "table",
            SceneKind::Katamari => "katamari",
            SceneKind::Tower => "tower",
        }
    }

    /// The scene's content.
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

/// One networked dynamic object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectSpec {
    /// Its collider.
    pub shape: Shape,
    /// Starting pose.
    pub pose: Pose,
    /// Density, friction, restitution.
    #[serde(default, skip_serializing_if = "is_default")]
    pub material: Material,
    /// What the game makes of it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub tag: Tag,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl ObjectSpec {
    /// An object of `shape` at `position`, unrotated, default material, no tag.
    pub fn new(shape: Shape, position: [f32; 3]) -> Self {
        Self {
            shape,
            pose: Pose::at(position),
            material: Material::default(),
            tag: Tag::default(),
        }
    }

    /// An axis-aligned cube of half extent `half` at `position`, density 1000.
    pub fn cube(half: f32, position: Vector3<f32>) -> Self {
        Self::new(Shape::cuboid(half, half, half), position.into())
    }

    /// The same object with another material.
    pub fn with_material(mut self, material: Material) -> Self {
        self.material = material;
        self
    }

    /// The same object with another tag.
    pub fn with_tag(mut self, tag: Tag) -> Self {
        self.tag = tag;
        self
    }

    /// The same object rotated to `rotation` (quaternion `[x, y, z, w]`).
    pub fn with_rotation(mut self, rotation: [f32; 4]) -> Self {
        self.pose.rotation = rotation;
        self
    }
}

/// One piece of static level geometry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelSpec {
    /// Its shape.
    pub shape: LevelShape,
    /// Where it stands.
    #[serde(default, skip_serializing_if = "is_default")]
    pub pose: Pose,
    /// Friction coefficient.
    #[serde(default = "level_friction")]
    pub friction: f32,
    /// Bounciness, 0 to 1.
    #[serde(default, skip_serializing_if = "is_default")]
    pub restitution: f32,
    /// What the game makes of it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub tag: Tag,
}

fn level_friction() -> f32 {
    0.8
}

impl LevelSpec {
    /// A piece of `shape` at `pose`, friction 0.8, no bounce, no tag.
    pub fn new(shape: LevelShape, pose: Pose) -> Self {
        Self {
            shape,
            pose,
            friction: level_friction(),
            restitution: 0.0,
            tag: Tag::default(),
        }
    }

    /// A square floor slab 1 m thick of half extent `half`, its top at y = 0.
    pub fn floor(half: f32) -> Self {
        Self::new(
            LevelShape::Cuboid {
                half_extents: [half, 0.5, half],
            },
            Pose::at([0.0, -0.5, 0.0]),
        )
    }
}

/// How states of this scene are quantized on the wire and on both sides: the world box positions must stay in,
/// the resolutions, and the speed ranges. The defaults are the published reference: a 128 × 64 × 128 m box at
/// 512 values per metre, 9-bit smallest-three rotations, ±32 m/s at 1/256 m/s and ±32 rad/s at 1/128 rad/s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Quantization {
    /// Smallest position on each axis (m).
    pub min: [f32; 3],
    /// Largest position on each axis (m).
    pub max: [f32; 3],
    /// Position values per metre.
    pub position_steps_per_metre: u32,
    /// Bits per smallest-three rotation component (4..=20).
    pub rotation_bits: u32,
    /// Largest linear speed per axis (m/s).
    pub max_linear_speed: f32,
    /// Linear velocity values per m/s.
    pub linear_steps: u32,
    /// Largest angular speed per axis (rad/s).
    pub max_angular_speed: f32,
    /// Angular velocity values per rad/s.
    pub angular_steps: u32,
}

impl Default for Quantization {
    fn default() -> Self {
        Self {
            min: [-64.0, -8.0, -64.0],
            max: [64.0, 56.0, 64.0],
            position_steps_per_metre: 512,
            rotation_bits: 9,
            max_linear_speed: 32.0,
            linear_steps: 256,
            max_angular_speed: 32.0,
            angular_steps: 128,
        }
    }
}

/// Most bits one quantized component may take on the wire.
const MAX_COMPONENT_BITS: u32 = 26;

impl Quantization {
    /// Checks the ranges and resolutions: bounds ordered and finite, at most 2^26 values per axis.
    pub fn validate(&self) -> Result<(), SceneError> {
        let bad = |why| Err(SceneError::Quantization(why));
        let finite = self.min.iter().chain(&self.max).all(|v| v.is_finite())
            && self.max_linear_speed.is_finite()
            && self.max_angular_speed.is_finite();
        if !finite || (0..3).any(|i| self.min[i] >= self.max[i]) {
            return bad("bounds must be finite with min < max on every axis");
        }
        if !(4..=20).contains(&self.rotation_bits) {
            return bad("rotation_bits must be 4..=20");
        }
        if self.max_linear_speed <= 0.0 || self.max_angular_speed <= 0.0 {
            return bad("speed ranges must be positive");
        }
        let axis = |span: f64, steps: u32| {
            steps > 0 && span * f64::from(steps) < f64::from(1u32 << MAX_COMPONENT_BITS)
        };
        let spans_ok = (0..3).all(|i| {
            axis(
                f64::from(self.max[i]) - f64::from(self.min[i]),
                self.position_steps_per_metre,
            )
        }) && axis(2.0 * f64::from(self.max_linear_speed), self.linear_steps)
            && axis(2.0 * f64::from(self.max_angular_speed), self.angular_steps);
        if !spans_ok {
            return bad("every axis needs 1..2^26 values");
        }
        Ok(())
    }

    /// The codec's quantizers; call on a validated value.
    pub fn config(&self) -> QuantConfig {
        QuantConfig {
            position: Vec3Quantizer::bounded(self.min, self.max, self.position_steps_per_metre),
            rotation: RotationQuantizer::new(self.rotation_bits.clamp(4, 20)),
            linear_velocity: Vec3Quantizer::symmetric(self.max_linear_speed, self.linear_steps),
            angular_velocity: Vec3Quantizer::symmetric(self.max_angular_speed, self.angular_steps),
        }
    }
}

/// Why a scene cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SceneError {
    /// An object's shape, pose or material is invalid.
    #[error("object {id}: {error}")]
    Object {
        /// The object's id.
        id: usize,
        /// What is wrong.
        error: ShapeError,
    },
    /// A piece of level geometry is invalid.
    #[error("level piece {index}: {error}")]
    Level {
        /// Its index in the level list.
        index: usize,
        /// What is wrong.
        error: ShapeError,
    },
    /// A list is longer than the engine allows.
    #[error("{what}: {len} given, at most {max} allowed")]
    TooMany {
        /// Which list.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The quantization cannot be built.
    #[error("quantization: {0}")]
    Quantization(&'static str),
    /// The player object names no object.
    #[error("player_object {0} is not an object of the scene")]
    PlayerObject(ObjectId),
    /// The name is too long.
    #[error("scene name longer than {MAX_NAME_BYTES} bytes")]
    Name,
    /// The text is not a scene (RON syntax or a field of the wrong type); the parser's message and position.
    #[error("not a scene file: {0}")]
    Parse(String),
}

/// Everything a world is built from: the objects, the level, where players stand, the quantization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SceneSpec {
    /// A name for menus and logs.
    #[serde(default)]
    pub name: String,
    /// How states are quantized.
    #[serde(default, skip_serializing_if = "is_default")]
    pub quantization: Quantization,
    /// Static level geometry (the floor included, if the scene has one).
    #[serde(default)]
    pub level: Vec<LevelSpec>,
    /// The dynamic objects; an object's id is its index.
    pub objects: Vec<ObjectSpec>,
    /// Head poses where players 0, 1, 2… start; players past the list stand on a ring around the centre.
    #[serde(default)]
    pub spawns: Vec<Pose>,
    /// The object scripted input drives (the katamari's player cube), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

/// Yaw (degrees) of ring slot `slot`: the four compass points first, then the diagonals, then the sixteenths,
/// so that any number of players up to 16 spreads evenly.
fn ring_yaw(slot: usize) -> f32 {
    const ORDER: [f32; 16] = [
        0.0, 180.0, 90.0, 270.0, 45.0, 225.0, 135.0, 315.0, 22.5, 202.5, 112.5, 292.5, 67.5, 247.5,
        157.5, 337.5,
    ];
    ORDER[slot % ORDER.len()]
}

/// A head pose on a ring of `radius` around the centre, 1.7 m up, looking at the centre.
pub fn ring_spawn(slot: usize, radius: f32) -> Pose {
    let yaw = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), ring_yaw(slot).to_radians());
    // Stand on the -z side of the centre rotated by the yaw, looking at the centre (+z is "forward").
    let position = yaw * Vector3::new(0.0, 1.7, -radius);
    Pose::from_isometry(&Isometry3::from_parts(position.into(), yaw))
}

fn ring(radius: f32, count: usize) -> Vec<Pose> {
    (0..count).map(|slot| ring_spawn(slot, radius)).collect()
}

impl SceneSpec {
    /// Checks every object, level piece, count and the quantization. A valid scene builds a world without
    /// panicking; scenes from files and from the network are checked before use.
    pub fn validate(&self) -> Result<(), SceneError> {
        if self.name.len() > MAX_NAME_BYTES {
            return Err(SceneError::Name);
        }
        let too_many = |what, len, max| {
            if len > max {
                Err(SceneError::TooMany { what, len, max })
            } else {
                Ok(())
            }
        };
        too_many("objects", self.objects.len(), MAX_OBJECTS)?;
        too_many("level pieces", self.level.len(), MAX_LEVEL_PIECES)?;
        too_many("spawns", self.spawns.len(), MAX_PLAYERS)?;
        self.quantization.validate()?;
        for (id, o) in self.objects.iter().enumerate() {
            let error = |error| SceneError::Object { id, error };
            o.shape.validate().map_err(error)?;
            validate_pose(&o.pose).map_err(error)?;
            validate_material(&o.material).map_err(error)?;
        }
        for (index, l) in self.level.iter().enumerate() {
            let error = |error| SceneError::Level { index, error };
            l.shape.validate().map_err(error)?;
            validate_pose(&l.pose).map_err(error)?;
            validate_material(&Material {
                friction: l.friction,
                restitution: l.restitution,
                ..Material::default()
            })
            .map_err(error)?;
        }
        for (index, s) in self.spawns.iter().enumerate() {
            validate_pose(s).map_err(|error| SceneError::Level { index, error })?;
        }
        if let Some(p) = self.player_object
            && usize::from(p) >= self.objects.len()
        {
            return Err(SceneError::PlayerObject(p));
        }
        Ok(())
    }

    /// The codec's quantizers for this scene.
    pub fn quant(&self) -> QuantConfig {
        self.quantization.config()
    }

    /// Where player `player` starts: the scene's spawn, or a ring around the centre as far out as spawn 0.
    pub fn spawn(&self, player: usize) -> Isometry3<f32> {
        if let Some(s) = self.spawns.get(player) {
            return s.isometry();
        }
        let radius = self
            .spawns
            .first()
            .map(|s| Vector3::new(s.position[0], 0.0, s.position[2]).norm())
            .filter(|r| *r > 0.5)
            .unwrap_or(5.0);
        ring_spawn(player, radius).isometry()
    }

    /// The box around the level geometry in world coordinates (`min`, `max`), or a 20 m square around the origin
    /// when the scene has no level.
    pub fn level_bounds(&self) -> (Vector3<f32>, Vector3<f32>) {
        if self.level.is_empty() {
            return (
                Vector3::new(-20.0, -1.0, -20.0),
                Vector3::new(20.0, 0.0, 20.0),
            );
        }
        self.level.iter().fold(
            (Vector3::repeat(f32::MAX), Vector3::repeat(f32::MIN)),
            |(lo, hi), piece| {
                let (half, centre) = piece.shape.local_bounds();
                let pose = piece.pose.isometry();
                let extent = pose.rotation.to_rotation_matrix().matrix().abs() * half;
                let c = pose * nalgebra::Point3::from(centre);
                (lo.inf(&(c.coords - extent)), hi.sup(&(c.coords + extent)))
            },
        )
    }

    /// Half extent of the square on the ground that holds the level (what a viewer draws as the floor).
    pub fn floor_half_extent(&self) -> f32 {
        let (lo, hi) = self.level_bounds();
        [lo.x, lo.z, hi.x, hi.z]
            .iter()
            .fold(0.0f32, |m, v| m.max(v.abs()))
    }

    /// Parses a scene from RON text and validates it.
    pub fn from_ron(text: &str) -> Result<Self, SceneError> {
        let scene: SceneSpec = ron::from_str(text).map_err(|e| SceneError::Parse(e.to_string()))?;
        scene.validate()?;
        Ok(scene)
    }

    /// The scene as human-readable RON (what the files under `examples/scenes/` hold).
    pub fn to_ron_pretty(&self) -> String {
        let config = ron::ser::PrettyConfig::new()
            .depth_limit(4)
            .struct_names(false)
            .separate_tuple_members(false);
        ron::ser::to_string_pretty(self, config).unwrap_or_default()
    }

    /// The scene as compact RON, its canonical form on the wire (hashed and sent to guests at join).
    pub fn to_ron_compact(&self) -> String {
        ron::ser::to_string(self).unwrap_or_default()
    }

    /// 64 cubes in an 8×8 block in the middle of a floor, four players around it.
    pub fn table() -> Self {
        let mut b = SceneBuilder::new("table").floor(20.0).spawns(ring(5.0, 4));
        for i in 0..8 {
            for j in 0..8 {
                let x = (i as f32 - 3.5) * 0.8;
                let z = (j as f32 - 3.5) * 0.8;
                b = b.object(ObjectSpec::cube(
                    TABLE_CUBE_HALF,
                    Vector3::new(x, TABLE_CUBE_HALF, z),
                ));
            }
        }
        b.build_unchecked()
    }

    /// 900 cubes in a 30×30 grid and one large player cube (id 900) at a corner.
    pub fn katamari() -> Self {
        let mut b = SceneBuilder::new("katamari")
            .floor(60.0)
            .spawns(ring(25.0, 4));
        let offset = 14.5 * KATAMARI_SPACING;
        for i in 0..30 {
            for j in 0..30 {
                let x = i as f32 * KATAMARI_SPACING - offset;
                let z = j as f32 * KATAMARI_SPACING - offset;
                b = b.object(ObjectSpec::cube(
                    KATAMARI_CUBE_HALF,
                    Vector3::new(x, KATAMARI_CUBE_HALF, z),
                ));
            }
        }
        let player = ObjectSpec::cube(
            KATAMARI_PLAYER_HALF,
            Vector3::new(-offset - 3.0, KATAMARI_PLAYER_HALF, -offset - 3.0),
        )
        .with_material(Material::new(3000.0, 0.8, 0.0))
        .with_tag(Tag {
            kind: 1,
            colour: Some([230, 80, 60]),
        });
        b.object(player).player_object(900).build_unchecked()
    }

    /// Towers of the given heights in a row, stacked with a 1 mm gap so they settle onto each other.
    pub fn towers(heights: &[usize]) -> Self {
        let mut b = SceneBuilder::new("tower").floor(20.0).spawns(ring(5.0, 4));
        let spacing = 2.0;
        let first = -(heights.len().saturating_sub(1) as f32) * spacing / 2.0;
        for (t, &height) in heights.iter().enumerate() {
            let x = first + t as f32 * spacing;
            for level in 0..height {
                let y = TOWER_CUBE_HALF + level as f32 * (2.0 * TOWER_CUBE_HALF + 0.001);
                b = b.object(ObjectSpec::cube(TOWER_CUBE_HALF, Vector3::new(x, y, 0.0)));
            }
        }
        b.build_unchecked()
    }

    /// `count` cubes dropped from a lattice in random orientations, seeded: a settling pile for benchmarks.
    pub fn pile(count: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let side = (count as f32).cbrt().ceil() as usize;
        let half = 0.25;
        let pitch = 0.7;
        let offset = (side as f32 - 1.0) * pitch / 2.0;
        let mut b = SceneBuilder::new("pile").floor(40.0).spawns(ring(8.0, 4));
        for n in 0..count {
            let (i, j, k) = (n % side, (n / side) % side, n / (side * side));
            let position = Vector3::new(
                i as f32 * pitch - offset,
                half + 0.05 + k as f32 * pitch,
                j as f32 * pitch - offset,
            );
            let axis = Vector3::new(rng.random(), rng.random(), rng.random()) * 0.6;
            let mut spec = ObjectSpec::cube(half, position);
            spec.pose = Pose::from_isometry(&Isometry3::new(position, axis));
            b = b.object(spec);
        }
        b.build_unchecked()
    }

    /// Every dynamic shape kind (cuboid, ball, capsule, cylinder, cone, convex hull, compound) in coloured
    /// rows, a static triangle-mesh ramp and a small heightfield hill on a floor: the playground.
    pub fn playground() -> Self {
        let hull = Shape::ConvexHull {
            points: vec![
                [0.3, 0.0, 0.0],
                [-0.15, 0.0, 0.26],
                [-0.15, 0.0, -0.26],
                [0.0, 0.4, 0.0],
                [0.0, -0.2, 0.0],
            ],
        };
        let dumbbell = Shape::Compound {
            parts: vec![
                Part {
                    pose: Pose::at([0.0, 0.0, 0.0]),
                    shape: Shape::cuboid(0.35, 0.06, 0.06),
                },
                Part {
                    pose: Pose::at([-0.35, 0.0, 0.0]),
                    shape: Shape::ball(0.16),
                },
                Part {
                    pose: Pose::at([0.35, 0.0, 0.0]),
                    shape: Shape::ball(0.16),
                },
            ],
        };
        // Round bodies roll: angular damping slows the spin, rolling resistance brings them to rest.
        let rolling = Material::default()
            .with_angular_damping(2.0)
            .with_rolling_resistance(0.05);
        let kinds: [(Shape, f32, Material, [u8; 3]); 7] = [
            (
                Shape::cuboid(0.25, 0.25, 0.25),
                0.25,
                Material::default(),
                [220, 180, 60],
            ),
            (
                Shape::ball(0.25),
                0.25,
                Material::new(600.0, 0.6, 0.3)
                    .with_angular_damping(2.0)
                    .with_rolling_resistance(0.05),
                [220, 70, 60],
            ),
            (Shape::capsule(0.2, 0.15), 0.15, rolling, [70, 160, 220]),
            (
                Shape::Cylinder {
                    half_height: 0.2,
                    radius: 0.2,
                },
                0.2,
                rolling,
                [90, 200, 110],
            ),
            (
                Shape::Cone {
                    half_height: 0.2,
                    radius: 0.25,
                },
                0.2,
                rolling,
                [200, 110, 220],
            ),
            (hull, 0.2, Material::default(), [240, 140, 40]),
            (
                dumbbell,
                0.16,
                Material::new(2000.0, 0.8, 0.0)
                    .with_angular_damping(2.0)
                    .with_rolling_resistance(0.05),
                [150, 150, 160],
            ),
        ];
        let mut b = SceneBuilder::new("playground")
            .floor(20.0)
            .spawns(ring(6.0, 4));
        for (row, (shape, rest_height, material, colour)) in kinds.into_iter().enumerate() {
            for n in 0..4 {
                let x = (n as f32 - 1.5) * 1.0;
                let z = (row as f32 - 3.0) * 1.0;
                // Capsules lie along x; everything else stands as built.
                let lying = matches!(shape, Shape::Capsule { .. });
                let rotation = if lying {
                    [
                        0.0,
                        0.0,
                        std::f32::consts::FRAC_1_SQRT_2,
                        std::f32::consts::FRAC_1_SQRT_2,
                    ]
                } else {
                    [0.0, 0.0, 0.0, 1.0]
                };
                let object = ObjectSpec::new(shape.clone(), [x, rest_height, z])
                    .with_rotation(rotation)
                    .with_material(material)
                    .with_tag(Tag {
                        kind: row as u16 + 1,
                        colour: Some(colour),
                    });
                b = b.object(object);
            }
        }
        let ramp = LevelSpec {
            tag: Tag {
                kind: 100,
                colour: Some([120, 120, 130]),
            },
            ..LevelSpec::new(
                LevelShape::TriMesh {
                    vertices: vec![
                        [-1.5, 0.0, 0.0],
                        [1.5, 0.0, 0.0],
                        [-1.5, 1.0, 4.0],
                        [1.5, 1.0, 4.0],
                        [-1.5, 0.0, 4.0],
                        [1.5, 0.0, 4.0],
                    ],
                    triangles: vec![
                        [0, 2, 1],
                        [1, 2, 3],
                        [0, 4, 2],
                        [1, 3, 5],
                        [2, 4, 3],
                        [3, 4, 5],
                    ],
                },
                Pose::at([5.0, 0.0, -2.0]),
            )
        };
        let hill = LevelSpec {
            tag: Tag {
                kind: 101,
                colour: Some([90, 130, 80]),
            },
            ..LevelSpec::new(
                LevelShape::HeightField {
                    rows: 5,
                    columns: 5,
                    heights: (0..25)
                        .map(|i| {
                            let (r, c) = ((i / 5) as f32 - 2.0, (i % 5) as f32 - 2.0);
                            (1.0 - (r * r + c * c) / 8.0).max(0.0)
                        })
                        .collect(),
                    size: [4.0, 0.6, 4.0],
                },
                Pose::at([-6.0, 0.0, 0.0]),
            )
        };
        b.level(ramp).level(hill).build_unchecked()
    }
}

/// Writes a scene in code: a floor or any level geometry, objects, spawns, the quantization; [`build`] checks it.
///
/// [`build`]: SceneBuilder::build
///
/// ```
/// use physync_engine::world::scene::{Material, ObjectSpec, SceneBuilder, Shape};
///
/// let scene = SceneBuilder::new("two balls")
///     .floor(10.0)
///     .object(ObjectSpec::new(Shape::ball(0.3), [0.0, 0.3, 0.0]))
///     .object(ObjectSpec::new(Shape::capsule(0.2, 0.1), [1.0, 0.3, 0.0]).with_material(Material {
///         restitution: 0.5,
///         ..Material::default()
///     }))
///     .build()
///     .unwrap();
/// assert_eq!(scene.objects.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SceneBuilder {
    scene: SceneSpec,
}

impl SceneBuilder {
    /// An empty scene named `name`: no level, no objects, default quantization.
    pub fn new(name: &str) -> Self {
        Self {
            scene: SceneSpec {
                name: name.to_owned(),
                quantization: Quantization::default(),
                level: Vec::new(),
                objects: Vec::new(),
                spawns: Vec::new(),
                player_object: None,
            },
        }
    }

    /// Adds a square floor slab of half extent `half`, its top at y = 0.
    pub fn floor(self, half: f32) -> Self {
        self.level(LevelSpec::floor(half))
    }

    /// Adds a piece of static level geometry.
    pub fn level(mut self, piece: LevelSpec) -> Self {
        self.scene.level.push(piece);
        self
    }

    /// Adds a dynamic object; its id is the number of objects added before it.
    pub fn object(mut self, object: ObjectSpec) -> Self {
        self.scene.objects.push(object);
        self
    }

    /// Sets where players start (player 0 first).
    pub fn spawns(mut self, spawns: Vec<Pose>) -> Self {
        self.scene.spawns = spawns;
        self
    }

    /// Sets the object scripted input drives.
    pub fn player_object(mut self, id: ObjectId) -> Self {
        self.scene.player_object = Some(id);
        self
    }

    /// Sets the quantization.
    pub fn quantization(mut self, quantization: Quantization) -> Self {
        self.scene.quantization = quantization;
        self
    }

    /// The scene, validated.
    pub fn build(self) -> Result<SceneSpec, SceneError> {
        self.scene.validate()?;
        Ok(self.scene)
    }

    /// The scene without validation, for the demo scenes whose validity the tests pin.
    fn build_unchecked(self) -> SceneSpec {
        self.scene
    }
}

#[cfg(test)]
mod tests;
