//! What a scene's objects are made of: collider shapes, poses, materials and the game's tags, as plain data
//! (serde) that a scene file, the builder and the wire all share.
//!
//! Every value here may come from a file or from the network, so [`Shape::validate`] and
//! [`LevelShape::validate`] check it before rapier ever sees it: sizes finite and positive, counts bounded, mesh
//! indices in range. A shape that passed validation builds a collider without panicking.

use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion, Vector3};
use rapier3d::prelude::{ColliderBuilder, SharedShape};
use serde::{Deserialize, Serialize};

use super::convert::{pose_to_rapier, vec_to_rapier};

/// Most points a convex hull may list.
pub const MAX_HULL_POINTS: usize = 256;
/// Most parts a compound may have.
pub const MAX_COMPOUND_PARTS: usize = 64;
/// Most vertices (and most triangles) a triangle mesh may have.
pub const MAX_MESH_VERTICES: usize = 65_536;
/// Most samples a heightfield may have.
pub const MAX_HEIGHTFIELD_SAMPLES: usize = 262_144;
/// Largest size (m) of any dimension of a shape, and largest coordinate of a point or pose.
pub const MAX_EXTENT: f32 = 10_000.0;

/// A position and an orientation, as a scene file writes them: `position: (x, y, z)` in metres and
/// `rotation: (x, y, z, w)`, a quaternion that may be left out for no rotation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pose {
    /// Where (m).
    pub position: [f32; 3],
    /// Orientation quaternion `[x, y, z, w]`; normalized when used.
    #[serde(default = "identity", skip_serializing_if = "is_identity")]
    pub rotation: [f32; 4],
}

fn identity() -> [f32; 4] {
    [0.0, 0.0, 0.0, 1.0]
}

fn is_identity(r: &[f32; 4]) -> bool {
    *r == identity()
}

impl Default for Pose {
    fn default() -> Self {
        Self::at([0.0; 3])
    }
}

impl Pose {
    /// At `position`, unrotated.
    pub fn at(position: [f32; 3]) -> Self {
        Self {
            position,
            rotation: identity(),
        }
    }

    /// From a nalgebra isometry.
    pub fn from_isometry(pose: &Isometry3<f32>) -> Self {
        let t = pose.translation.vector;
        let q = pose.rotation;
        Self {
            position: [t.x, t.y, t.z],
            rotation: [q.i, q.j, q.k, q.w],
        }
    }

    /// As a nalgebra isometry (the rotation normalized).
    pub fn isometry(&self) -> Isometry3<f32> {
        let [x, y, z, w] = self.rotation;
        Isometry3::from_parts(
            Translation3::new(self.position[0], self.position[1], self.position[2]),
            UnitQuaternion::from_quaternion(Quaternion::new(w, x, y, z)),
        )
    }

    fn validate(&self) -> Result<(), ShapeError> {
        finite_within(&self.position, "pose position")?;
        let norm = self.rotation.iter().map(|c| c * c).sum::<f32>().sqrt();
        if !norm.is_finite() || norm < 1e-3 {
            return Err(ShapeError::Invalid("pose rotation is not a quaternion"));
        }
        Ok(())
    }
}

/// The collider of a dynamic object. Capsules, cylinders and cones stand along their local y axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Shape {
    /// A box.
    Cuboid {
        /// Half extents along x, y, z (m).
        half_extents: [f32; 3],
    },
    /// A sphere.
    Ball {
        /// Radius (m).
        radius: f32,
    },
    /// A cylinder with hemispherical caps.
    Capsule {
        /// Half the length of the straight part (m).
        half_height: f32,
        /// Radius (m).
        radius: f32,
    },
    /// A cylinder.
    Cylinder {
        /// Half its height (m).
        half_height: f32,
        /// Radius (m).
        radius: f32,
    },
    /// A cone, apex up.
    Cone {
        /// Half its height (m).
        half_height: f32,
        /// Radius of the base (m).
        radius: f32,
    },
    /// The convex hull of a point cloud (at least four points not in one plane).
    ConvexHull {
        /// The points (m, in the object's frame).
        points: Vec<[f32; 3]>,
    },
    /// Several of the shapes above (not compounds) rigidly joined.
    Compound {
        /// The parts, each placed in the object's frame.
        parts: Vec<Part>,
    },
}

/// One part of a [`Shape::Compound`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Where the part sits in the object's frame.
    pub pose: Pose,
    /// The part's shape (not itself a compound).
    pub shape: Shape,
}

/// The shape of a piece of static level geometry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LevelShape {
    /// A box (a floor, a wall, a table top).
    Cuboid {
        /// Half extents along x, y, z (m).
        half_extents: [f32; 3],
    },
    /// A triangle mesh (ramps, terrain pieces, anything modelled).
    TriMesh {
        /// Vertices (m, in the piece's frame).
        vertices: Vec<[f32; 3]>,
        /// Triangles as indices into `vertices`.
        triangles: Vec<[u32; 3]>,
    },
    /// A grid of heights: terrain.
    HeightField {
        /// Samples along z (at least 2).
        rows: u32,
        /// Samples along x (at least 2).
        columns: u32,
        /// `rows * columns` heights, row after row (row `r` runs along x at the `r`-th z), scaled by `size.y`.
        heights: Vec<f32>,
        /// Extent along x and z (m), and the factor heights are multiplied by.
        size: [f32; 3],
    },
}

/// How an object responds to contacts and forces.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Material {
    /// Density (kg/m³); the mass follows from it and the shape.
    pub density: f32,
    /// Coulomb friction coefficient.
    pub friction: f32,
    /// Bounciness, 0 (none) to 1.
    pub restitution: f32,
    /// Angular damping (1/s): slows spinning and rolling bodies in proportion to their spin.
    pub angular_damping: f32,
    /// Rolling-resistance coefficient, 0 to 1: while the body touches something, its speed loses this many
    /// g of deceleration, and at least one velocity quantization step a frame (see [`super::rolling`]). What
    /// brings a rolling ball, cylinder, capsule or cone to rest: rapier has no rolling resistance, and angular
    /// damping alone leaves a slow roll that quantization freezes for ever. 0.05 stops a ball rolling at 2 m/s in
    /// about 4 s.
    pub rolling_resistance: f32,
}

impl Default for Material {
    /// Water-dense, grippy, dead, undamped: the demo scenes' cubes.
    fn default() -> Self {
        Self {
            density: 1000.0,
            friction: 0.8,
            restitution: 0.0,
            angular_damping: 0.0,
            rolling_resistance: 0.0,
        }
    }
}

impl Material {
    /// A material of `density` (kg/m³), `friction` and `restitution`, undamped.
    pub fn new(density: f32, friction: f32, restitution: f32) -> Self {
        Self {
            density,
            friction,
            restitution,
            angular_damping: 0.0,
            rolling_resistance: 0.0,
        }
    }

    /// The same material with `angular_damping` (1/s).
    pub fn with_angular_damping(mut self, angular_damping: f32) -> Self {
        self.angular_damping = angular_damping;
        self
    }

    /// The same material with a `rolling_resistance` coefficient (0 to 1).
    pub fn with_rolling_resistance(mut self, rolling_resistance: f32) -> Self {
        self.rolling_resistance = rolling_resistance;
        self
    }

    fn validate(&self) -> Result<(), ShapeError> {
        let ok = self.density.is_finite()
            && self.density > 0.0
            && self.friction.is_finite()
            && self.friction >= 0.0
            && (0.0..=1.0).contains(&self.restitution)
            && self.angular_damping.is_finite()
            && (0.0..=100.0).contains(&self.angular_damping)
            && (0.0..=super::rolling::MAX_ROLLING_RESISTANCE).contains(&self.rolling_resistance);
        if ok {
            Ok(())
        } else {
            Err(ShapeError::Invalid(
                "material needs density > 0, friction >= 0, restitution in 0..=1, angular damping in 0..=100, \
                 rolling resistance in 0..=1",
            ))
        }
    }
}

/// A small label the engine carries and never interprets: what the object is to the game, and its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Tag {
    /// What the object is, in the game's own numbering (0: nothing in particular).
    pub kind: u16,
    /// Display colour, RGB; `None` lets the viewer pick.
    pub colour: Option<[u8; 3]>,
}

impl Tag {
    /// A tag of `kind` drawn in `colour` (RGB).
    pub fn new(kind: u16, colour: [u8; 3]) -> Self {
        Self {
            kind,
            colour: Some(colour),
        }
    }
}

/// A shape or pose that cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// A size, point or count is out of range; the text says which rule.
    #[error("{0}")]
    Invalid(&'static str),
    /// A list is longer than its limit.
    #[error("{what} has {len} entries, at most {max} allowed")]
    TooMany {
        /// Which list.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

fn positive(v: f32, what: &'static str) -> Result<(), ShapeError> {
    if v.is_finite() && v > 0.0 && v <= MAX_EXTENT {
        Ok(())
    } else {
        Err(ShapeError::Invalid(what))
    }
}

fn finite_within(p: &[f32; 3], what: &'static str) -> Result<(), ShapeError> {
    if p.iter().all(|c| c.is_finite() && c.abs() <= MAX_EXTENT) {
        Ok(())
    } else {
        Err(ShapeError::Invalid(what))
    }
}

fn at_most(what: &'static str, len: usize, max: usize) -> Result<(), ShapeError> {
    if len > max {
        Err(ShapeError::TooMany { what, len, max })
    } else {
        Ok(())
    }
}

fn v3(p: &[f32; 3]) -> rapier3d::math::Vector {
    vec_to_rapier(&Vector3::new(p[0], p[1], p[2]))
}

impl Shape {
    /// A box of half extents `x, y, z`.
    pub fn cuboid(x: f32, y: f32, z: f32) -> Self {
        Shape::Cuboid {
            half_extents: [x, y, z],
        }
    }

    /// A sphere of `radius`.
    pub fn ball(radius: f32) -> Self {
        Shape::Ball { radius }
    }

    /// A capsule along y.
    pub fn capsule(half_height: f32, radius: f32) -> Self {
        Shape::Capsule {
            half_height,
            radius,
        }
    }

    /// Which kind of shape this is, for reports and menus.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Shape::Cuboid { .. } => "cuboid",
            Shape::Ball { .. } => "ball",
            Shape::Capsule { .. } => "capsule",
            Shape::Cylinder { .. } => "cylinder",
            Shape::Cone { .. } => "cone",
            Shape::ConvexHull { .. } => "convex hull",
            Shape::Compound { .. } => "compound",
        }
    }

    /// Checks sizes, counts and points; a valid shape builds without panicking.
    pub fn validate(&self) -> Result<(), ShapeError> {
        match self {
            Shape::Cuboid { half_extents } => half_extents
                .iter()
                .try_for_each(|&h| positive(h, "cuboid half extents must be positive")),
            Shape::Ball { radius } => positive(*radius, "ball radius must be positive"),
            Shape::Capsule {
                half_height,
                radius,
            }
            | Shape::Cylinder {
                half_height,
                radius,
            }
            | Shape::Cone {
                half_height,
                radius,
            } => {
                positive(*half_height, "half height must be positive")?;
                positive(*radius, "radius must be positive")
            }
            Shape::ConvexHull { points } => {
                at_most("convex hull", points.len(), MAX_HULL_POINTS)?;
                points
                    .iter()
                    .try_for_each(|p| finite_within(p, "convex hull point out of range"))?;
                let hull = SharedShape::convex_hull(&points.iter().map(v3).collect::<Vec<_>>());
                let volume = hull.map_or(0.0, |h| h.mass_properties(1.0).mass());
                if !(volume.is_finite() && volume > 1e-9) {
                    return Err(ShapeError::Invalid(
                        "convex hull needs four points that are not in one plane",
                    ));
                }
                Ok(())
            }
            Shape::Compound { parts } => {
                if parts.is_empty() {
                    return Err(ShapeError::Invalid("compound needs at least one part"));
                }
                at_most("compound", parts.len(), MAX_COMPOUND_PARTS)?;
                for part in parts {
                    if matches!(part.shape, Shape::Compound { .. }) {
                        return Err(ShapeError::Invalid("compound parts may not be compounds"));
                    }
                    part.pose.validate()?;
                    part.shape.validate()?;
                }
                Ok(())
            }
        }
    }

    /// Half extents of the box around the shape in its own frame (the viewer's picking box, the drive's radius).
    pub fn local_half_extents(&self) -> Vector3<f32> {
        match self {
            Shape::Cuboid { half_extents } => Vector3::from(*half_extents),
            Shape::Ball { radius } => Vector3::repeat(*radius),
            Shape::Capsule {
                half_height,
                radius,
            } => Vector3::new(*radius, half_height + radius, *radius),
            Shape::Cylinder {
                half_height,
                radius,
            }
            | Shape::Cone {
                half_height,
                radius,
            } => Vector3::new(*radius, *half_height, *radius),
            Shape::ConvexHull { points } => points
                .iter()
                .fold(Vector3::zeros(), |m, p| m.sup(&Vector3::from(*p).abs())),
            Shape::Compound { parts } => parts.iter().fold(Vector3::zeros(), |m, part| {
                let pose = part.pose.isometry();
                let h = part.shape.local_half_extents();
                let rotated = pose.rotation.to_rotation_matrix().matrix().abs() * h;
                m.sup(&(pose.translation.vector.abs() + rotated))
            }),
        }
    }

    /// rapier's shape; call on a validated shape.
    pub(crate) fn shared_shape(&self) -> SharedShape {
        match self {
            Shape::Cuboid { half_extents: h } => SharedShape::cuboid(h[0], h[1], h[2]),
            Shape::Ball { radius } => SharedShape::ball(*radius),
            Shape::Capsule {
                half_height,
                radius,
            } => SharedShape::capsule_y(*half_height, *radius),
            Shape::Cylinder {
                half_height,
                radius,
            } => SharedShape::cylinder(*half_height, *radius),
            Shape::Cone {
                half_height,
                radius,
            } => SharedShape::cone(*half_height, *radius),
            Shape::ConvexHull { points } => {
                SharedShape::convex_hull(&points.iter().map(v3).collect::<Vec<_>>())
                    .unwrap_or_else(|| SharedShape::ball(0.01))
            }
            Shape::Compound { parts } => SharedShape::compound(
                parts
                    .iter()
                    .map(|p| (pose_to_rapier(&p.pose.isometry()), p.shape.shared_shape()))
                    .collect(),
            ),
        }
    }
}

impl LevelShape {
    /// Which kind of shape this is.
    pub fn kind_name(&self) -> &'static str {
        match self {
            LevelShape::Cuboid { .. } => "cuboid",
            LevelShape::TriMesh { .. } => "triangle mesh",
            LevelShape::HeightField { .. } => "heightfield",
        }
    }

    /// Checks sizes, counts and indices; a valid shape builds without panicking.
    pub fn validate(&self) -> Result<(), ShapeError> {
        match self {
            LevelShape::Cuboid { half_extents } => half_extents
                .iter()
                .try_for_each(|&h| positive(h, "cuboid half extents must be positive")),
            LevelShape::TriMesh {
                vertices,
                triangles,
            } => {
                at_most("triangle mesh vertices", vertices.len(), MAX_MESH_VERTICES)?;
                at_most(
                    "triangle mesh triangles",
                    triangles.len(),
                    MAX_MESH_VERTICES,
                )?;
                if triangles.is_empty() {
                    return Err(ShapeError::Invalid("triangle mesh needs a triangle"));
                }
                vertices
                    .iter()
                    .try_for_each(|p| finite_within(p, "mesh vertex out of range"))?;
                let n = vertices.len() as u64;
                if triangles.iter().flatten().any(|&i| u64::from(i) >= n) {
                    return Err(ShapeError::Invalid("triangle index past the vertices"));
                }
                let degenerate = triangles.iter().all(|t| {
                    let [a, b, c] = t.map(|i| Vector3::from(vertices[i as usize]));
                    (b - a).cross(&(c - a)).norm() <= 1e-9
                });
                if degenerate {
                    return Err(ShapeError::Invalid("triangle mesh has no area"));
                }
                Ok(())
            }
            LevelShape::HeightField {
                rows,
                columns,
                heights,
                size,
            } => {
                if *rows < 2 || *columns < 2 {
                    return Err(ShapeError::Invalid(
                        "heightfield needs at least 2 rows and 2 columns",
                    ));
                }
                let samples = u64::from(*rows) * u64::from(*columns);
                if samples > MAX_HEIGHTFIELD_SAMPLES as u64 {
                    return Err(ShapeError::TooMany {
                        what: "heightfield",
                        len: samples as usize,
                        max: MAX_HEIGHTFIELD_SAMPLES,
                    });
                }
                if heights.len() as u64 != samples {
                    return Err(ShapeError::Invalid(
                        "heightfield needs rows * columns heights",
                    ));
                }
                if !heights
                    .iter()
                    .all(|h| h.is_finite() && h.abs() <= MAX_EXTENT)
                {
                    return Err(ShapeError::Invalid("heightfield height out of range"));
                }
                size.iter()
                    .try_for_each(|&s| positive(s, "heightfield size must be positive"))
            }
        }
    }

    /// Half extents and centre of the box around the shape in its own frame.
    pub fn local_bounds(&self) -> (Vector3<f32>, Vector3<f32>) {
        let (min, max) = match self {
            LevelShape::Cuboid { half_extents } => {
                let h = Vector3::from(*half_extents);
                (-h, h)
            }
            LevelShape::TriMesh { vertices, .. } => vertices.iter().fold(
                (Vector3::repeat(f32::MAX), Vector3::repeat(f32::MIN)),
                |(lo, hi), v| (lo.inf(&Vector3::from(*v)), hi.sup(&Vector3::from(*v))),
            ),
            LevelShape::HeightField { heights, size, .. } => {
                let lo = heights.iter().copied().fold(f32::MAX, f32::min) * size[1];
                let hi = heights.iter().copied().fold(f32::MIN, f32::max) * size[1];
                (
                    Vector3::new(-size[0] / 2.0, lo.min(hi), -size[2] / 2.0),
                    Vector3::new(size[0] / 2.0, hi.max(lo), size[2] / 2.0),
                )
            }
        };
        ((max - min) / 2.0, (max + min) / 2.0)
    }

    /// rapier's collider builder; call on a validated shape.
    pub(crate) fn collider(&self) -> ColliderBuilder {
        match self {
            LevelShape::Cuboid { half_extents: h } => ColliderBuilder::cuboid(h[0], h[1], h[2]),
            LevelShape::TriMesh {
                vertices,
                triangles,
            } => ColliderBuilder::trimesh(vertices.iter().map(v3).collect(), triangles.clone())
                .unwrap_or_else(|_| ColliderBuilder::ball(0.01).sensor(true)),
            LevelShape::HeightField {
                rows,
                columns,
                heights,
                size,
            } => {
                let (rows, columns) = (*rows as usize, *columns as usize);
                let grid = rapier3d::parry::utils::Array2::from_fn(rows, columns, |r, c| {
                    heights[r * columns + c]
                });
                ColliderBuilder::heightfield(grid, v3(size))
            }
        }
    }
}

/// Checks a pose for use in a scene.
pub(crate) fn validate_pose(pose: &Pose) -> Result<(), ShapeError> {
    pose.validate()
}

/// Checks a material for use in a scene.
pub(crate) fn validate_material(material: &Material) -> Result<(), ShapeError> {
    material.validate()
}

/// Triangles that draw a shape (what a renderer needs; physics never uses it): vertices in the shape's frame
/// and index triples, counter-clockwise seen from outside where the source shape says so.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tessellation {
    /// Vertices (m).
    pub vertices: Vec<Vector3<f32>>,
    /// Triangles as indices into `vertices`.
    pub triangles: Vec<[u32; 3]>,
}

impl Tessellation {
    fn append(
        &mut self,
        pose: &Isometry3<f32>,
        vertices: Vec<rapier3d::math::Vector>,
        triangles: Vec<[u32; 3]>,
    ) {
        let base = self.vertices.len() as u32;
        self.vertices.extend(
            vertices
                .into_iter()
                .map(|v| pose * nalgebra::Point3::from(super::convert::vec_from_rapier(v)))
                .map(|p| p.coords),
        );
        self.triangles
            .extend(triangles.into_iter().map(|t| t.map(|i| i + base)));
    }
}

/// Sides of round shapes when tessellated.
const ROUND_SUBDIVISIONS: u32 = 16;

impl Shape {
    /// The shape as triangles, for drawing; call on a validated shape.
    pub fn tessellate(&self) -> Tessellation {
        let mut t = Tessellation::default();
        self.tessellate_into(&mut t, &Isometry3::identity());
        t
    }

    fn tessellate_into(&self, t: &mut Tessellation, pose: &Isometry3<f32>) {
        use rapier3d::parry::shape as p;
        let n = ROUND_SUBDIVISIONS;
        let (v, i) = match self {
            Shape::Cuboid { half_extents } => p::Cuboid::new(v3(half_extents)).to_trimesh(),
            Shape::Ball { radius } => p::Ball::new(*radius).to_trimesh(n, n / 2),
            Shape::Capsule {
                half_height,
                radius,
            } => p::Capsule::new_y(*half_height, *radius).to_trimesh(n, n / 2),
            Shape::Cylinder {
                half_height,
                radius,
            } => p::Cylinder::new(*half_height, *radius).to_trimesh(n),
            Shape::Cone {
                half_height,
                radius,
            } => p::Cone::new(*half_height, *radius).to_trimesh(n),
            Shape::ConvexHull { points } => rapier3d::parry::transformation::try_convex_hull(
                &points.iter().map(v3).collect::<Vec<_>>(),
            )
            .unwrap_or_default(),
            Shape::Compound { parts } => {
                for part in parts {
                    part.shape
                        .tessellate_into(t, &(pose * part.pose.isometry()));
                }
                return;
            }
        };
        t.append(pose, v, i);
    }
}

impl LevelShape {
    /// The shape as triangles, for drawing; call on a validated shape.
    pub fn tessellate(&self) -> Tessellation {
        let mut t = Tessellation::default();
        let (v, i) = match self {
            LevelShape::Cuboid { half_extents } => {
                rapier3d::parry::shape::Cuboid::new(v3(half_extents)).to_trimesh()
            }
            LevelShape::TriMesh {
                vertices,
                triangles,
            } => (vertices.iter().map(v3).collect(), triangles.clone()),
            LevelShape::HeightField { .. } => {
                let shape = self.collider().build();
                match shape.shape().as_heightfield() {
                    Some(h) => h.to_trimesh(),
                    None => return t,
                }
            }
        };
        t.append(&Isometry3::identity(), v, i);
        t
    }
}
