//! The orbit camera: where the eye is, how world points land on the screen, and which world ray a screen
//! point stands for. Projection and un-projection share one set of numbers so picking hits what is drawn.

use egui::{Pos2, Rect, Vec2};
use nalgebra::{Isometry3, Point3, Vector3};

use crate::picking::Ray;

/// Distance of the near clipping plane in front of the eye, metres.
pub const NEAR: f32 = 0.05;

/// A camera that orbits a target point: drag to turn it, scroll to move it closer or further.
#[derive(Debug, Clone, PartialEq)]
pub struct OrbitCamera {
    /// The point the camera looks at and orbits around.
    pub target: Point3<f32>,
    /// Angle around the vertical axis, radians.
    pub yaw: f32,
    /// Angle above the horizontal plane, radians (kept between the limits in [`OrbitCamera::orbit`]).
    pub pitch: f32,
    /// Distance from the eye to the target, metres.
    pub distance: f32,
    /// Vertical field of view, radians.
    pub fov_y: f32,
}

/// A world point as seen by the camera: its screen position and its distance along the view direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projected {
    /// Where the point lands in the view rectangle, in egui points.
    pub screen: Pos2,
    /// Distance in front of the eye along the viewing direction, metres (larger is further away).
    pub depth: f32,
}

impl Default for OrbitCamera {
    fn default() -> Self {
        Self {
            target: Point3::new(0.0, 0.5, 0.0),
            yaw: 0.9,
            pitch: 0.55,
            distance: 9.0,
            fov_y: 50f32.to_radians(),
        }
    }
}

impl OrbitCamera {
    const MIN_PITCH: f32 = -0.2;
    const MAX_PITCH: f32 = 1.5;
    const MIN_DISTANCE: f32 = 1.0;
    const MAX_DISTANCE: f32 = 60.0;

    /// The eye position in world space.
    pub fn eye(&self) -> Point3<f32> {
        let (sy, cy) = self.yaw.sin_cos();
        let (sp, cp) = self.pitch.sin_cos();
        self.target + Vector3::new(cp * cy, sp, cp * sy) * self.distance
    }

    /// The world-to-view transform (right-handed, looking down -Z in view space, Y up).
    pub fn view(&self) -> Isometry3<f32> {
        Isometry3::look_at_rh(&self.eye(), &self.target, &Vector3::y())
    }

    /// Unit vector from the eye towards the target.
    pub fn forward(&self) -> Vector3<f32> {
        (self.target - self.eye()).normalize()
    }

    /// Back off far enough to see a scene whose objects lie within `radius` metres of the vertical axis
    /// (never closer than the default view, never beyond the zoom limit).
    pub fn fit(&mut self, radius: f32) {
        self.distance = (radius * 2.2).clamp(Self::default().distance, Self::MAX_DISTANCE);
    }

    /// Turn the camera by a mouse drag given in egui points.
    pub fn orbit(&mut self, drag: Vec2) {
        self.yaw += drag.x * 0.01;
        self.pitch = (self.pitch + drag.y * 0.01).clamp(Self::MIN_PITCH, Self::MAX_PITCH);
    }

    /// Move closer (positive `scroll`) or further away, multiplicatively so zoom feels even at every distance.
    pub fn zoom(&mut self, scroll: f32) {
        let factor = (-scroll * 0.002).exp();
        self.distance = (self.distance * factor).clamp(Self::MIN_DISTANCE, Self::MAX_DISTANCE);
    }

    /// Focal length in normalised device units for the vertical axis.
    fn focal(&self) -> f32 {
        1.0 / (self.fov_y * 0.5).tan()
    }

    /// Project a point already in view space onto the rectangle; `None` when it lies behind the near plane.
    pub fn project_view_point(&self, p: &Point3<f32>, rect: Rect) -> Option<Projected> {
        let depth = -p.z;
        if depth < NEAR {
            return None;
        }
        let aspect = rect.width() / rect.height().max(1.0);
        let f = self.focal();
        let ndc_x = f / aspect * p.x / depth;
        let ndc_y = f * p.y / depth;
        let screen = Pos2::new(
            rect.left() + (ndc_x + 1.0) * 0.5 * rect.width(),
            rect.top() + (1.0 - ndc_y) * 0.5 * rect.height(),
        );
        Some(Projected { screen, depth })
    }

    /// Project a world point onto the rectangle; `None` when it lies behind the near plane.
    pub fn project(&self, p: &Point3<f32>, rect: Rect) -> Option<Projected> {
        self.project_view_point(&(self.view() * p), rect)
    }

    /// The world ray from the eye through a screen position inside `rect`.
    pub fn ray_through(&self, screen: Pos2, rect: Rect) -> Ray {
        let aspect = rect.width() / rect.height().max(1.0);
        let f = self.focal();
        let ndc_x = (screen.x - rect.left()) / rect.width() * 2.0 - 1.0;
        let ndc_y = 1.0 - (screen.y - rect.top()) / rect.height() * 2.0;
        let dir_view = Vector3::new(ndc_x * aspect / f, ndc_y / f, -1.0);
        let dir = self.view().inverse() * dir_view;
        Ray::new(self.eye(), dir)
    }
}

/// Clip a convex polygon given in view space to the half-space in front of the near plane.
///
/// Faces and floor tiles that cross the eye plane keep their visible part instead of vanishing or flipping.
pub fn clip_to_near(polygon: &[Point3<f32>]) -> Vec<Point3<f32>> {
    let inside = |p: &Point3<f32>| -p.z >= NEAR;
    let mut out = Vec::with_capacity(polygon.len() + 2);
    for (i, current) in polygon.iter().enumerate() {
        let next = &polygon[(i + 1) % polygon.len()];
        if inside(current) {
            out.push(*current);
        }
        if inside(current) != inside(next) {
            let t = (-NEAR - current.z) / (next.z - current.z);
            out.push(current + (next - current) * t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect() -> Rect {
        Rect::from_min_size(Pos2::new(10.0, 20.0), Vec2::new(800.0, 600.0))
    }

    #[test]
    fn target_projects_to_the_centre_of_the_view() {
        let cam = OrbitCamera::default();
        let p = cam.project(&cam.target, rect()).unwrap();
        assert!((p.screen - rect().center()).length() < 1e-3, "{p:?}");
        assert!((p.depth - cam.distance).abs() < 1e-4);
    }

    #[test]
    fn ray_through_a_projected_point_passes_through_it() {
        let cam = OrbitCamera {
            yaw: -2.1,
            pitch: 0.3,
            distance: 7.0,
            ..OrbitCamera::default()
        };
        for point in [
            Point3::new(1.0, 0.2, -0.5),
            Point3::new(-2.0, 1.5, 1.0),
            Point3::new(0.3, 0.0, 2.2),
        ] {
            let projected = cam.project(&point, rect()).unwrap();
            let ray = cam.ray_through(projected.screen, rect());
            let to_point = point - ray.origin;
            let along = to_point.dot(&ray.dir);
            let miss = (to_point - ray.dir * along).norm();
            assert!(miss < 1e-4, "ray misses {point:?} by {miss}");
            assert!(along > 0.0);
        }
    }

    #[test]
    fn points_behind_the_eye_do_not_project() {
        let cam = OrbitCamera::default();
        let behind = cam.eye() - cam.forward() * 2.0;
        assert!(cam.project(&behind, rect()).is_none());
    }

    #[test]
    fn higher_points_appear_higher_on_screen() {
        let cam = OrbitCamera::default();
        let low = cam.project(&Point3::new(0.0, 0.0, 0.0), rect()).unwrap();
        let high = cam.project(&Point3::new(0.0, 1.0, 0.0), rect()).unwrap();
        assert!(high.screen.y < low.screen.y);
    }

    #[test]
    fn zoom_and_orbit_stay_within_limits() {
        let mut cam = OrbitCamera::default();
        cam.zoom(1.0e6);
        assert_eq!(cam.distance, OrbitCamera::MIN_DISTANCE);
        cam.zoom(-1.0e6);
        assert_eq!(cam.distance, OrbitCamera::MAX_DISTANCE);
        cam.orbit(Vec2::new(0.0, 1.0e4));
        assert_eq!(cam.pitch, OrbitCamera::MAX_PITCH);
    }

    #[test]
    fn fitting_backs_off_for_large_scenes_only() {
        let mut cam = OrbitCamera::default();
        cam.fit(4.0);
        assert_eq!(cam.distance, OrbitCamera::default().distance);
        cam.fit(20.0);
        assert_eq!(cam.distance, 44.0);
        cam.fit(1000.0);
        assert_eq!(cam.distance, OrbitCamera::MAX_DISTANCE);
    }

    #[test]
    fn clipping_keeps_the_part_in_front_of_the_near_plane() {
        let quad = [
            Point3::new(-1.0, 0.0, -2.0),
            Point3::new(1.0, 0.0, -2.0),
            Point3::new(1.0, 0.0, 2.0),
            Point3::new(-1.0, 0.0, 2.0),
        ];
        let clipped = clip_to_near(&quad);
        assert_eq!(clipped.len(), 4);
        assert!(clipped.iter().all(|p| -p.z >= NEAR - 1e-6));
        assert!(clip_to_near(&quad.map(|p| Point3::new(p.x, p.y, 3.0))).is_empty());
    }
}
