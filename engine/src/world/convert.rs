//! The one place where the engine's public math (nalgebra) meets rapier's (glam, through glamx) and the codec's
//! (arrays, and poses on the quantization grid).
//!
//! rapier3d 0.36 speaks glam types; every public engine API speaks nalgebra. All conversions go through the
//! functions here, so no other module names a glam type.

use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion, Vector3};
use physync_codec::{QuantConfig, QuantizedPose};
use rapier3d::math::{Pose, Rotation, Vector};

/// nalgebra vector to rapier vector.
pub fn vec_to_rapier(v: &Vector3<f32>) -> Vector {
    Vector::new(v.x, v.y, v.z)
}

/// rapier vector to nalgebra vector.
pub fn vec_from_rapier(v: Vector) -> Vector3<f32> {
    Vector3::new(v.x, v.y, v.z)
}

/// nalgebra unit quaternion to rapier rotation.
pub fn rot_to_rapier(q: &UnitQuaternion<f32>) -> Rotation {
    Rotation::from_xyzw(q.i, q.j, q.k, q.w)
}

/// rapier rotation to nalgebra unit quaternion (renormalized).
pub fn rot_from_rapier(q: Rotation) -> UnitQuaternion<f32> {
    UnitQuaternion::from_quaternion(Quaternion::new(q.w, q.x, q.y, q.z))
}

/// nalgebra isometry to rapier pose.
pub fn pose_to_rapier(p: &Isometry3<f32>) -> Pose {
    Pose::from_parts(
        vec_to_rapier(&p.translation.vector),
        rot_to_rapier(&p.rotation),
    )
}

/// rapier pose to nalgebra isometry.
pub fn pose_from_rapier(p: &Pose) -> Isometry3<f32> {
    Isometry3::from_parts(
        Translation3::from(vec_from_rapier(p.translation)),
        rot_from_rapier(p.rotation),
    )
}

/// nalgebra vector to the codec's `[x, y, z]`.
pub fn vec_to_array(v: &Vector3<f32>) -> [f32; 3] {
    [v.x, v.y, v.z]
}

/// The codec's `[x, y, z]` to a nalgebra vector.
pub fn vec_from_array(a: [f32; 3]) -> Vector3<f32> {
    Vector3::new(a[0], a[1], a[2])
}

/// nalgebra unit quaternion to the codec's `[x, y, z, w]`.
pub fn quat_to_array(q: &UnitQuaternion<f32>) -> [f32; 4] {
    [q.i, q.j, q.k, q.w]
}

/// The codec's `[x, y, z, w]` to a nalgebra unit quaternion (renormalized).
pub fn quat_from_array(a: [f32; 4]) -> UnitQuaternion<f32> {
    UnitQuaternion::from_quaternion(Quaternion::new(a[3], a[0], a[1], a[2]))
}

/// A pose on the codec's quantization grid to a nalgebra isometry.
pub fn pose_from_quantized(quant: &QuantConfig, pose: &QuantizedPose) -> Isometry3<f32> {
    Isometry3::from_parts(
        Translation3::from(vec_from_array(quant.position.dequantize(pose.position))),
        quat_from_array(quant.rotation.dequantize(pose.rotation)),
    )
}

/// A nalgebra isometry onto the codec's quantization grid.
pub fn pose_to_quantized(quant: &QuantConfig, pose: &Isometry3<f32>) -> QuantizedPose {
    QuantizedPose::quantize(
        quant,
        vec_to_array(&pose.translation.vector),
        quat_to_array(&pose.rotation),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pose_round_trips_through_rapier() {
        let p = Isometry3::new(Vector3::new(1.0, -2.0, 3.5), Vector3::new(0.3, -0.2, 0.9));
        let back = pose_from_rapier(&pose_to_rapier(&p));
        assert!((back.translation.vector - p.translation.vector).norm() < 1e-6);
        assert!(back.rotation.angle_to(&p.rotation) < 1e-5);
    }

    #[test]
    fn quaternion_component_order_matches_the_codec() {
        let q = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), 1.0);
        let a = quat_to_array(&q);
        assert!((a[1] - (0.5f32).sin()).abs() < 1e-6);
        assert!((a[3] - (0.5f32).cos()).abs() < 1e-6);
        assert!(quat_from_array(a).angle_to(&q) < 1e-6);
        let r = rot_to_rapier(&q);
        assert!((r.y - a[1]).abs() < 1e-7 && (r.w - a[3]).abs() < 1e-7);
    }
}
