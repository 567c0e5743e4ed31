//! Private conversions between the public nalgebra types and rapier's glam types.

use nalgebra::{Point3, UnitQuaternion, Vector3};
use rapier3d::math::{Rotation, Vector as GVec3};

pub(crate) fn point_to_glam(p: &Point3<f32>) -> GVec3 {
    GVec3::new(p.x, p.y, p.z)
}

pub(crate) fn vector_to_glam(v: &Vector3<f32>) -> GVec3 {
    GVec3::new(v.x, v.y, v.z)
}

pub(crate) fn glam_to_point(v: GVec3) -> Point3<f32> {
    Point3::new(v.x, v.y, v.z)
}

pub(crate) fn rotation_to_glam(q: &UnitQuaternion<f32>) -> Rotation {
    Rotation::from_xyzw(q.i, q.j, q.k, q.w)
}
