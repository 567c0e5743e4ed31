//! The first-person view of the arena: the map's walls and cover as shaded boxes, the physics cubes where the
//! server's snapshots put them, the other players as coloured bodies with a head and a visor (where they look),
//! and every shot as a tracer (the local player's predicted at once, everyone else's as the server reports
//! them, in the shooter's colour), seen from the local player's eye through the viewer's software renderer
//! ([`crate::render3d`]).

use egui::{Color32, Painter, Rect, Stroke};
use nalgebra::{Point3, UnitQuaternion, Vector3};
use physync_engine::shooter::interpolation::InterpolatedPose;
use physync_engine::shooter::map::ArenaMap;
use physync_engine::shooter::rules::BodyDims;
use physync_engine::shooter::{PlayerId, units};

use crate::camera::{NEAR, OrbitCamera};
use crate::palette::{player_color, shade};
use crate::render3d::{self, Solid};

/// Static boxes are cut into pieces at most this long (metres), so the painter's far-to-near order by box
/// centre stays right next to long walls.
const MAX_PIECE: f32 = 2.0;
/// Colour of the walls.
pub const WALL_COLOR: Color32 = Color32::from_rgb(120, 130, 150);
/// Colour of the physics cubes.
pub const CUBE_COLOR: Color32 = Color32::from_rgb(200, 90, 60);
/// Colour of the local player's tracers.
pub const OWN_TRACER: Color32 = Color32::from_rgb(255, 230, 140);
/// Colour of cover boxes.
pub const COVER_COLOR: Color32 = Color32::from_rgb(180, 150, 105);
/// Static boxes at least this tall are walls.
const WALL_HEIGHT: f32 = 3.0;
/// Vertical field of view of the first-person camera.
const FOV_Y_DEGREES: f32 = 70.0;

/// A camera at `eye` looking along the unit `direction`: the orbit camera placed one metre behind its target,
/// so projection, clipping and picking are the renderer's own.
pub fn first_person_camera(eye: &Point3<f32>, direction: &Vector3<f32>) -> OrbitCamera {
    let back = -direction.normalize();
    OrbitCamera {
        target: eye - back,
        yaw: back.z.atan2(back.x),
        pitch: back.y.clamp(-1.0, 1.0).asin(),
        distance: 1.0,
        fov_y: FOV_Y_DEGREES.to_radians(),
    }
}

/// Half the side of the floor to draw for `map`: its largest box whose top is at the ground, rounded up.
pub fn floor_half(map: &ArenaMap) -> f32 {
    map.boxes
        .iter()
        .filter(|b| is_floor(b.center.y, b.half_extents.y))
        .map(|b| b.half_extents.x.max(b.half_extents.z))
        .fold(0.0f32, f32::max)
        .ceil()
}

fn is_floor(center_y: f32, half_y: f32) -> bool {
    center_y + half_y <= 0.01
}

/// The map's walls and cover (the floor box is drawn as the floor), cut into pieces.
pub fn arena_solids(map: &ArenaMap) -> Vec<Solid> {
    let mut out = Vec::new();
    for b in map
        .boxes
        .iter()
        .filter(|b| !is_floor(b.center.y, b.half_extents.y))
    {
        let color = if b.half_extents.y * 2.0 >= WALL_HEIGHT {
            WALL_COLOR
        } else {
            COVER_COLOR
        };
        let h = b.half_extents;
        let nx = (h.x * 2.0 / MAX_PIECE).ceil().max(1.0) as usize;
        let nz = (h.z * 2.0 / MAX_PIECE).ceil().max(1.0) as usize;
        let piece = Vector3::new(h.x / nx as f32, h.y, h.z / nz as f32);
        for i in 0..nx {
            for k in 0..nz {
                let center = Point3::new(
                    b.center.x - h.x + piece.x * (2 * i + 1) as f32,
                    b.center.y,
                    b.center.z - h.z + piece.z * (2 * k + 1) as f32,
                );
                out.push(Solid {
                    center,
                    rotation: UnitQuaternion::identity(),
                    half_extents: piece,
                    color,
                });
            }
        }
    }
    out
}

/// The physics cubes of `map` at `poses` (as the client interpolates them).
pub fn cube_solids(map: &ArenaMap, poses: &[physync_engine::shooter::CubePose]) -> Vec<Solid> {
    map.cubes
        .iter()
        .zip(poses)
        .map(|(spec, pose)| Solid {
            center: pose.center,
            rotation: pose.rotation,
            half_extents: Vector3::repeat(spec.half_extent),
            color: CUBE_COLOR,
        })
        .collect()
}

/// A remote player as boxes: a body in the player's colour, a head and a dark visor on the side it looks at.
/// A dead player lies flat and grey.
pub fn player_solids(slot: PlayerId, pose: &InterpolatedPose, body: &BodyDims) -> Vec<Solid> {
    let turn = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), pose.yaw);
    let color = player_color(slot.0);
    if !pose.alive {
        return vec![Solid {
            center: pose.position + Vector3::new(0.0, 0.15, 0.0),
            rotation: turn,
            half_extents: Vector3::new(body.body_hit_radius, 0.15, body.body_hit_top * 0.5),
            color: shade(color, 0.45),
        }];
    }
    let torso_half = Vector3::new(
        body.body_hit_radius,
        (body.head_height - body.head_radius) * 0.5,
        body.body_hit_radius * 0.7,
    );
    let head = pose.position + Vector3::new(0.0, body.head_height, 0.0);
    let look = turn * UnitQuaternion::from_axis_angle(&Vector3::x_axis(), -pose.pitch);
    let visor = head + look * Vector3::new(0.0, 0.02, body.head_radius);
    vec![
        Solid {
            center: pose.position + Vector3::new(0.0, torso_half.y, 0.0),
            rotation: turn,
            half_extents: torso_half,
            color,
        },
        Solid {
            center: head,
            rotation: look,
            half_extents: Vector3::repeat(body.head_radius),
            color,
        },
        Solid {
            center: visor,
            rotation: look,
            half_extents: Vector3::new(body.head_radius * 0.8, body.head_radius * 0.3, 0.03),
            color: Color32::from_rgb(24, 26, 32),
        },
    ]
}

/// A shot's trail: from the muzzle to where it stopped, fading out.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracer {
    /// Where it starts (beside the eye).
    pub from: Point3<f32>,
    /// Where it stopped (a surface or the weapon's range).
    pub to: Point3<f32>,
    /// Seconds left to show it.
    pub life: f32,
    /// Its colour (the shooter's).
    pub color: Color32,
    /// True for the local player's own (predicted) shot.
    pub own: bool,
}

/// Paint the arena, the players and the tracers into `rect` from `camera`.
pub fn paint(
    painter: &Painter,
    rect: Rect,
    camera: &OrbitCamera,
    floor_half: f32,
    solids: &[Solid],
    tracers: &[Tracer],
) {
    render3d::paint_solids(painter, rect, camera, floor_half, solids);
    let view = camera.view();
    for t in tracers {
        let Some((a, b)) = clip_segment(view * t.from, view * t.to) else {
            continue;
        };
        if let (Some(a), Some(b)) = (
            camera.project_view_point(&a, rect),
            camera.project_view_point(&b, rect),
        ) {
            let alpha = (t.life * 4.0).clamp(0.0, 1.0);
            let [r, g, b_, _] = t.color.to_array();
            let color = Color32::from_rgba_unmultiplied(r, g, b_, (alpha * 255.0) as u8);
            painter.line_segment([a.screen, b.screen], Stroke::new(2.0, color));
            painter.circle_filled(a.screen, 3.0, color);
        }
    }
}

/// The part of a view-space segment in front of the near plane.
fn clip_segment(a: Point3<f32>, b: Point3<f32>) -> Option<(Point3<f32>, Point3<f32>)> {
    let inside = |p: &Point3<f32>| -p.z >= NEAR;
    let cut = |from: Point3<f32>, to: Point3<f32>| {
        let t = (-NEAR - from.z) / (to.z - from.z);
        from + (to - from) * t
    };
    match (inside(&a), inside(&b)) {
        (true, true) => Some((a, b)),
        (false, true) => Some((cut(a, b), b)),
        (true, false) => Some((a, cut(b, a))),
        (false, false) => None,
    }
}

/// The eye position of a player whose feet are at `feet`.
pub fn eye_of(feet: &Point3<f32>, body: &BodyDims) -> Point3<f32> {
    feet + Vector3::new(0.0, body.eye_height, 0.0)
}

/// The unit view direction for view angles in radians.
pub fn direction_of(yaw: f32, pitch: f32) -> Vector3<f32> {
    units::view_direction(
        units::yaw_from_radians(yaw),
        units::pitch_from_radians(pitch),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use egui::{Pos2, Vec2};

    fn rect() -> Rect {
        Rect::from_min_size(Pos2::ZERO, Vec2::new(800.0, 600.0))
    }

    #[test]
    fn the_first_person_camera_sits_at_the_eye_and_looks_along_the_view() {
        let eye = Point3::new(3.0, 1.6, -2.0);
        let dir = units::view_direction(12_000, -2_000);
        let cam = first_person_camera(&eye, &dir);
        assert!((cam.eye() - eye).norm() < 1e-4, "{:?}", cam.eye());
        assert!((cam.forward() - dir).norm() < 1e-4);
        let ahead = cam.project(&(eye + dir * 10.0), rect()).unwrap();
        assert!((ahead.screen - rect().center()).length() < 1e-2);
    }

    #[test]
    fn the_standard_arena_becomes_walls_and_cover_on_a_floor_that_covers_it() {
        let map = ArenaMap::standard();
        assert_eq!(floor_half(&map), 21.0);
        let solids = arena_solids(&map);
        assert!(
            solids
                .iter()
                .all(|s| s.half_extents.x <= 1.0 + 1e-4 && s.half_extents.z <= 1.0 + 1e-4)
        );
        assert!(solids.iter().any(|s| s.color == WALL_COLOR));
        assert!(solids.iter().any(|s| s.color == COVER_COLOR));
        assert!(solids.iter().all(|s| s.center.y > 0.0), "no floor box");
        // The pieces of each box add up to its volume.
        let volume: f32 = solids.iter().map(|s| s.half_extents.product() * 8.0).sum();
        let expected: f32 = map
            .boxes
            .iter()
            .skip(1)
            .map(|b| b.half_extents.product() * 8.0)
            .sum();
        assert!((volume - expected).abs() < 0.01 * expected);
    }

    #[test]
    fn a_player_shows_its_colour_and_looks_where_it_faces() {
        let body = BodyDims::default();
        let pose = InterpolatedPose {
            position: Point3::new(1.0, 0.0, 1.0),
            yaw: std::f32::consts::FRAC_PI_2,
            pitch: 0.0,
            alive: true,
            snapped: false,
            held: false,
        };
        let solids = player_solids(PlayerId(3), &pose, &body);
        assert_eq!(solids.len(), 3);
        assert_eq!(solids[0].color, player_color(3));
        // Yaw a quarter turn looks along +X: the visor is on the +X side of the head.
        assert!(solids[2].center.x > solids[1].center.x + body.head_radius * 0.9);
        let dead = player_solids(
            PlayerId(3),
            &InterpolatedPose {
                alive: false,
                ..pose
            },
            &body,
        );
        assert_eq!(dead.len(), 1);
        assert!(dead[0].center.y < 0.5);
    }
}
