//! Mouse picking: rays against oriented boxes, the drag plane a held cube moves on, and the throw velocity
//! estimated from the last moments of a drag.

use std::collections::VecDeque;
use std::time::Duration;

use nalgebra::{Point3, UnitQuaternion, Vector3};

use crate::session::{BodyId, BodyView};

/// A half-line in world space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ray {
    /// Where the ray starts.
    pub origin: Point3<f32>,
    /// Unit direction.
    pub dir: Vector3<f32>,
}

impl Ray {
    /// A ray from `origin` along `dir` (normalised here).
    pub fn new(origin: Point3<f32>, dir: Vector3<f32>) -> Self {
        Self {
            origin,
            dir: dir.normalize(),
        }
    }

    /// The point at distance `t` along the ray.
    pub fn at(&self, t: f32) -> Point3<f32> {
        self.origin + self.dir * t
    }
}

/// Distance along `ray` to where it enters the oriented box, or `None` when it misses.
///
/// A ray starting inside the box hits at distance 0. Slab test in the box's own frame.
pub fn ray_obb(
    ray: &Ray,
    center: &Point3<f32>,
    rotation: &UnitQuaternion<f32>,
    half_extents: &Vector3<f32>,
) -> Option<f32> {
    let inv = rotation.inverse();
    let origin = inv * (ray.origin - center);
    let dir = inv * ray.dir;
    let mut t_enter = f32::NEG_INFINITY;
    let mut t_exit = f32::INFINITY;
    for axis in 0..3 {
        let (o, d, h) = (origin[axis], dir[axis], half_extents[axis]);
        if d.abs() < 1e-9 {
            if o.abs() > h {
                return None;
            }
            continue;
        }
        let (a, b) = ((-h - o) / d, (h - o) / d);
        t_enter = t_enter.max(a.min(b));
        t_exit = t_exit.min(a.max(b));
    }
    (t_exit >= t_enter.max(0.0)).then_some(t_enter.max(0.0))
}

/// The nearest body hit by the ray, with the hit distance.
pub fn pick_nearest(ray: &Ray, bodies: &[BodyView]) -> Option<(BodyId, f32)> {
    bodies
        .iter()
        .filter_map(|b| ray_obb(ray, &b.position, &b.rotation, &b.half_extents).map(|t| (b.id, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Where the ray crosses the plane through `point` with normal `normal`; `None` when parallel or behind.
pub fn ray_plane(ray: &Ray, point: &Point3<f32>, normal: &Vector3<f32>) -> Option<Point3<f32>> {
    let denom = ray.dir.dot(normal);
    if denom.abs() < 1e-6 {
        return None;
    }
    let t = (point - ray.origin).dot(normal) / denom;
    (t >= 0.0).then(|| ray.at(t))
}

/// Estimates the velocity of a dragged cube from its recent positions, so releasing it throws it.
#[derive(Debug, Clone, Default)]
pub struct ThrowTracker {
    samples: VecDeque<(Duration, Point3<f32>)>,
}

impl ThrowTracker {
    /// How far back the velocity estimate looks: long enough to smooth mouse jitter, short enough that a
    /// flick at the end of a slow drag still throws.
    pub const WINDOW: Duration = Duration::from_millis(100);

    /// Record where the held cube was placed at time `now`.
    pub fn record(&mut self, now: Duration, position: Point3<f32>) {
        self.samples.push_back((now, position));
        while let Some(&(t, _)) = self.samples.front() {
            if now.saturating_sub(t) > Self::WINDOW && self.samples.len() > 2 {
                self.samples.pop_front();
            } else {
                break;
            }
        }
    }

    /// Mean velocity over the samples in the window, metres per second (zero with fewer than two samples).
    pub fn velocity(&self) -> Vector3<f32> {
        match (self.samples.front(), self.samples.back()) {
            (Some((t0, p0)), Some((t1, p1))) if t1 > t0 => (p1 - p0) / (*t1 - *t0).as_secs_f32(),
            _ => Vector3::zeros(),
        }
    }

    /// Forget all samples (a new drag starts).
    pub fn clear(&mut self) {
        self.samples.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cube(id: BodyId, x: f32, z: f32) -> BodyView {
        BodyView {
            id,
            position: Point3::new(x, 0.5, z),
            rotation: UnitQuaternion::identity(),
            half_extents: Vector3::repeat(0.5),
            mesh: None,
            tag_color: None,
            authority: None,
            owner: None,
        }
    }

    #[test]
    fn ray_hits_an_axis_aligned_box_on_its_face() {
        let ray = Ray::new(Point3::new(-5.0, 0.5, 0.0), Vector3::x());
        let t = ray_obb(
            &ray,
            &Point3::new(0.0, 0.5, 0.0),
            &UnitQuaternion::identity(),
            &Vector3::repeat(0.5),
        );
        assert!((t.unwrap() - 4.5).abs() < 1e-5);
    }

    #[test]
    fn rotation_changes_what_is_hit() {
        // A thin slab rotated 90° about Z stands up; a horizontal ray at height 0.8 hits it only when rotated.
        let half = Vector3::new(1.0, 0.1, 1.0);
        let ray = Ray::new(Point3::new(-5.0, 0.8, 0.0), Vector3::x());
        let flat = UnitQuaternion::identity();
        let upright =
            UnitQuaternion::from_axis_angle(&Vector3::z_axis(), std::f32::consts::FRAC_PI_2);
        assert_eq!(ray_obb(&ray, &Point3::origin(), &flat, &half), None);
        let t = ray_obb(&ray, &Point3::origin(), &upright, &half).unwrap();
        assert!((t - 4.9).abs() < 1e-4, "{t}");
    }

    #[test]
    fn rays_pointing_away_or_passing_by_miss() {
        let c = Point3::origin();
        let q = UnitQuaternion::identity();
        let h = Vector3::repeat(0.5);
        assert_eq!(
            ray_obb(
                &Ray::new(Point3::new(-5.0, 0.0, 0.0), -Vector3::x()),
                &c,
                &q,
                &h
            ),
            None
        );
        assert_eq!(
            ray_obb(
                &Ray::new(Point3::new(-5.0, 0.6, 0.0), Vector3::x()),
                &c,
                &q,
                &h
            ),
            None
        );
    }

    #[test]
    fn a_ray_starting_inside_hits_at_zero() {
        let ray = Ray::new(Point3::new(0.1, 0.0, 0.0), Vector3::new(1.0, 1.0, 0.0));
        let t = ray_obb(
            &ray,
            &Point3::origin(),
            &UnitQuaternion::identity(),
            &Vector3::repeat(0.5),
        );
        assert_eq!(t, Some(0.0));
    }

    #[test]
    fn the_nearest_of_several_boxes_is_picked() {
        let bodies = [
            cube(1, 6.0, 0.0),
            cube(2, 2.0, 0.0),
            cube(3, 4.0, 0.0),
            cube(4, 2.0, 3.0),
        ];
        let ray = Ray::new(Point3::new(-3.0, 0.5, 0.0), Vector3::x());
        let (id, t) = pick_nearest(&ray, &bodies).unwrap();
        assert_eq!(id, 2);
        assert!((t - 4.5).abs() < 1e-5);
        let up = Ray::new(Point3::new(-3.0, 0.5, 0.0), Vector3::y());
        assert_eq!(pick_nearest(&up, &bodies), None);
    }

    #[test]
    fn plane_intersection_and_parallel_rays() {
        let ray = Ray::new(Point3::new(0.0, 5.0, 0.0), Vector3::new(1.0, -1.0, 0.0));
        let hit = ray_plane(&ray, &Point3::origin(), &Vector3::y()).unwrap();
        assert!((hit - Point3::new(5.0, 0.0, 0.0)).norm() < 1e-5);
        let flat = Ray::new(Point3::new(0.0, 5.0, 0.0), Vector3::x());
        assert_eq!(ray_plane(&flat, &Point3::origin(), &Vector3::y()), None);
        let away = Ray::new(Point3::new(0.0, 5.0, 0.0), Vector3::y());
        assert_eq!(ray_plane(&away, &Point3::origin(), &Vector3::y()), None);
    }

    #[test]
    fn throw_velocity_follows_the_recent_drag() {
        let mut tracker = ThrowTracker::default();
        assert_eq!(tracker.velocity(), Vector3::zeros());
        // Slow drag for half a second, then a fast flick along +x at 4 m/s for the last 100 ms.
        for frame in 0..30u64 {
            tracker.record(
                Duration::from_millis(frame * 16),
                Point3::new(0.0, 0.0, frame as f32 * 0.001),
            );
        }
        let start = Point3::new(0.0, 0.0, 0.029);
        for frame in 1..=7u64 {
            let t = Duration::from_millis(29 * 16 + frame * 16);
            tracker.record(t, start + Vector3::x() * (4.0 * frame as f32 * 0.016));
        }
        let v = tracker.velocity();
        assert!(v.x > 3.0 && v.x < 4.5, "{v:?}");
        assert!(v.z.abs() < 0.1, "{v:?}");
        tracker.clear();
        assert_eq!(tracker.velocity(), Vector3::zeros());
    }
}
