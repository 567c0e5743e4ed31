//! The software 3D renderer: boxes, any shape's triangles and a floor drawn as egui meshes.
//!
//! Every face is transformed to view space, back-face culled, clipped at the near plane, Lambert shaded,
//! sorted far-to-near (painter's algorithm) and appended to one mesh. It needs nothing from the GPU beyond
//! drawing triangles, so it runs the same under Xvfb with Mesa's software rasteriser.

use std::sync::Arc;

use egui::epaint::Mesh;
use egui::{Color32, Painter, Pos2, Rect, Shape};
use nalgebra::{Isometry3, Point3, UnitQuaternion, Vector3};

use crate::camera::{OrbitCamera, clip_to_near};
use crate::palette::{authority_color, player_color, shade};
use crate::session::{AvatarView, BodyId, BodyView, LevelView, Tessellation};

/// Floor tiles from the centre to each edge (the checkerboard is 2 × this many tiles on a side).
const FLOOR_TILES: i32 = 12;
/// Half the side of the floor drawn when the scene asks for less, metres.
pub const MIN_FLOOR_HALF: f32 = 12.0;
/// Smallest on-screen size (points) of a face that gets the thin plain rim: on smaller faces the rim is
/// under a pixel, and leaving it out makes a 900-cube scene's mesh five times smaller.
const MIN_PLAIN_RIM_FACE: f32 = 16.0;
/// Background colour above the horizon.
const SKY: Color32 = Color32::from_rgb(28, 32, 40);
/// Unit vector towards the light.
fn light_dir() -> Vector3<f32> {
    Vector3::new(0.45, 1.0, 0.3).normalize()
}

/// How a box's edges are marked.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Edge {
    /// A thin darker rim so neighbouring cubes of one colour stay readable.
    Plain,
    /// A thick near-black rim: the cube is held by someone.
    Held,
    /// A light rim: the cube under the mouse pointer.
    Hovered,
}

/// One box (or, with `mesh`, any shape) to draw.
struct BoxShape {
    center: Point3<f32>,
    rotation: UnitQuaternion<f32>,
    half: Vector3<f32>,
    color: Color32,
    edge: Edge,
    /// Triangles in the body's frame, drawn instead of the box; level meshes are drawn from both sides.
    mesh: Option<(Arc<Tessellation>, bool)>,
}

/// One visible face ready to paint.
struct Face {
    screen: Vec<Pos2>,
    /// Depth of the owning box's centre: boxes are painted whole, far to near, which orders neighbouring
    /// cubes correctly where face centroids would not.
    box_depth: f32,
    /// Mean depth of the face's corners, orders the faces within one box.
    depth: f32,
    color: Color32,
    edge: Option<(Color32, f32)>,
}

/// Corner offsets of the six faces of a unit box, counter-clockwise seen from outside, with the face normal.
const FACES: [([[f32; 3]; 4], [f32; 3]); 6] = [
    (
        [[1., -1., -1.], [1., 1., -1.], [1., 1., 1.], [1., -1., 1.]],
        [1., 0., 0.],
    ),
    (
        [
            [-1., -1., 1.],
            [-1., 1., 1.],
            [-1., 1., -1.],
            [-1., -1., -1.],
        ],
        [-1., 0., 0.],
    ),
    (
        [[-1., 1., -1.], [-1., 1., 1.], [1., 1., 1.], [1., 1., -1.]],
        [0., 1., 0.],
    ),
    (
        [
            [-1., -1., 1.],
            [-1., -1., -1.],
            [1., -1., -1.],
            [1., -1., 1.],
        ],
        [0., -1., 0.],
    ),
    (
        [[-1., -1., 1.], [1., -1., 1.], [1., 1., 1.], [-1., 1., 1.]],
        [0., 0., 1.],
    ),
    (
        [
            [1., -1., -1.],
            [-1., -1., -1.],
            [-1., 1., -1.],
            [1., 1., -1.],
        ],
        [0., 0., -1.],
    ),
];

/// What the renderer draws, collected from a session view.
pub struct Scene<'a> {
    /// Dynamic bodies.
    pub bodies: &'a [BodyView],
    /// Player avatars.
    pub avatars: &'a [AvatarView],
    /// The body under the mouse pointer, if any.
    pub hovered: Option<BodyId>,
    /// Half the side of the square floor, metres (at least [`MIN_FLOOR_HALF`]).
    pub floor_half: f32,
    /// Static level geometry besides the floor.
    pub level: &'a [LevelView],
}

/// The colour a body shows: its authority's while a player simulates it, else its tag's (or the default).
pub fn body_color(b: &BodyView) -> Color32 {
    match (b.authority, b.tag_color) {
        (None, Some(tag)) => tag,
        (authority, _) => authority_color(authority),
    }
}

/// Paint the scene into `rect` seen through `camera`.
pub fn paint(painter: &Painter, rect: Rect, camera: &OrbitCamera, scene: &Scene<'_>) {
    let mut boxes: Vec<BoxShape> = scene
        .bodies
        .iter()
        .map(|b| BoxShape {
            center: b.position,
            rotation: b.rotation,
            half: b.half_extents,
            color: body_color(b),
            edge: if b.owner.is_some() {
                Edge::Held
            } else if scene.hovered == Some(b.id) {
                Edge::Hovered
            } else {
                Edge::Plain
            },
            mesh: b.mesh.clone().map(|m| (m, false)),
        })
        .collect();
    boxes.extend(scene.level.iter().map(|l| BoxShape {
        center: l.pose.translation.vector.into(),
        rotation: l.pose.rotation,
        half: Vector3::zeros(),
        color: l.color,
        edge: Edge::Plain,
        mesh: Some((l.mesh.clone(), true)),
    }));
    for avatar in scene.avatars {
        boxes.extend(avatar_boxes(avatar));
    }
    paint_boxes(painter, rect, camera, scene.floor_half, &boxes);
}

/// A plain shaded box of any colour, for views that are not a cube session (the shooter's arena and players).
#[derive(Debug, Clone, PartialEq)]
pub struct Solid {
    /// Centre, metres.
    pub center: Point3<f32>,
    /// Orientation.
    pub rotation: UnitQuaternion<f32>,
    /// Half the size along the local axes, metres.
    pub half_extents: Vector3<f32>,
    /// Base colour before shading.
    pub color: Color32,
}

/// Paint a checkerboard floor reaching `floor_half` metres from the origin (at least [`MIN_FLOOR_HALF`]) and
/// `solids` into `rect`.
pub fn paint_solids(
    painter: &Painter,
    rect: Rect,
    camera: &OrbitCamera,
    floor_half: f32,
    solids: &[Solid],
) {
    let boxes: Vec<BoxShape> = solids
        .iter()
        .map(|s| BoxShape {
            center: s.center,
            rotation: s.rotation,
            half: s.half_extents,
            color: s.color,
            mesh: None,
            edge: Edge::Plain,
        })
        .collect();
    paint_boxes(painter, rect, camera, floor_half, &boxes);
}

/// The sky, the floor reaching `floor_half` metres from the origin (at least [`MIN_FLOOR_HALF`]), then the
/// boxes far to near.
fn paint_boxes(
    painter: &Painter,
    rect: Rect,
    camera: &OrbitCamera,
    floor_half: f32,
    boxes: &[BoxShape],
) {
    painter.rect_filled(rect, 0.0, SKY);
    let view = camera.view();
    painter.add(Shape::mesh(floor_mesh(
        camera,
        &view,
        rect,
        floor_half.max(MIN_FLOOR_HALF),
    )));
    let mut mesh = Mesh::default();
    for face in &paint_order(boxes, camera, &view, rect) {
        add_face(&mut mesh, face);
    }
    painter.add(Shape::mesh(mesh));
}

/// Half sizes of an avatar's head, its visor and its hands, metres.
const HEAD_HALF: [f32; 3] = [0.1, 0.12, 0.11];
const VISOR_HALF: [f32; 3] = [0.075, 0.03, 0.015];
const HAND_HALF: [f32; 3] = [0.045, 0.025, 0.07];

/// An avatar as boxes: the head with a dark visor on its front (so one can tell where it looks) and two
/// flat hands, all in the player's colour.
fn avatar_boxes(avatar: &AvatarView) -> Vec<BoxShape> {
    let color = player_color(avatar.player);
    let part = |pose: &Isometry3<f32>, half: [f32; 3], color: Color32| BoxShape {
        center: pose.translation.vector.into(),
        rotation: pose.rotation,
        half: Vector3::from(half),
        color,
        edge: Edge::Plain,
        mesh: None,
    };
    let visor_offset = Vector3::new(0.0, 0.025, HEAD_HALF[2] + VISOR_HALF[2]);
    let visor = Isometry3::from_parts(
        (avatar.head.translation.vector + avatar.head.rotation * visor_offset).into(),
        avatar.head.rotation,
    );
    let mut boxes = vec![
        part(&avatar.head, HEAD_HALF, color),
        part(&visor, VISOR_HALF, Color32::from_rgb(24, 26, 32)),
    ];
    boxes.extend(avatar.hands.iter().map(|hand| part(hand, HAND_HALF, color)));
    boxes
}

/// The visible faces of all boxes in the order to paint them: far boxes first, each box's faces far first.
fn paint_order(
    boxes: &[BoxShape],
    camera: &OrbitCamera,
    view: &Isometry3<f32>,
    rect: Rect,
) -> Vec<Face> {
    let mut faces: Vec<Face> = boxes
        .iter()
        .flat_map(|b| box_faces(b, camera, view, rect))
        .collect();
    faces.sort_by(|a, b| {
        b.box_depth
            .total_cmp(&a.box_depth)
            .then(b.depth.total_cmp(&a.depth))
    });
    faces
}

/// The colour a box of `color` shows on its upward face, the face every camera above the floor sees; used
/// to find cubes of a given authority in a screenshot.
pub fn top_face_color(color: Color32) -> Color32 {
    shade(color, lambert(&Vector3::y()))
}

/// Lambert factor for a surface with the given world normal, with an ambient floor so shadowed faces stay visible.
fn lambert(normal: &Vector3<f32>) -> f32 {
    0.38 + 0.62 * normal.dot(&light_dir()).max(0.0)
}

/// The visible, shaded triangles of a shape given as a mesh: culled when facing away (or, drawn from both
/// sides, shaded as seen), clipped, projected, no rims except a held body's dark outline colour.
fn mesh_faces(
    b: &BoxShape,
    mesh: &Tessellation,
    double_sided: bool,
    camera: &OrbitCamera,
    view: &Isometry3<f32>,
    rect: Rect,
) -> Vec<Face> {
    let eye = camera.eye();
    let box_depth = -(view * b.center).z;
    let color = match b.edge {
        Edge::Held => shade(b.color, 0.55),
        Edge::Hovered => Color32::from_rgb(255, 236, 120),
        Edge::Plain => b.color,
    };
    let mut out = Vec::new();
    for tri in &mesh.triangles {
        let Some(world) = tri
            .iter()
            .map(|&i| {
                mesh.vertices
                    .get(i as usize)
                    .map(|v| b.center + b.rotation * v)
            })
            .collect::<Option<Vec<Point3<f32>>>>()
        else {
            continue;
        };
        let mut normal = (world[1] - world[0]).cross(&(world[2] - world[0]));
        if normal.norm_squared() <= 1e-12 {
            continue;
        }
        normal.normalize_mut();
        if normal.dot(&(world[0] - eye)) >= 0.0 {
            if !double_sided {
                continue;
            }
            normal = -normal;
        }
        let Some((screen, depth)) = project_polygon(&world, camera, view, rect) else {
            continue;
        };
        out.push(Face {
            screen,
            box_depth,
            depth,
            color: shade(color, lambert(&normal)),
            edge: None,
        });
    }
    out
}

/// A world-space polygon clipped at the near plane and projected: its screen points and mean depth, or `None`
/// when too little of it is in front of the camera or a point falls off the projection.
fn project_polygon(
    world: &[Point3<f32>],
    camera: &OrbitCamera,
    view: &Isometry3<f32>,
    rect: Rect,
) -> Option<(Vec<Pos2>, f32)> {
    let in_view: Vec<Point3<f32>> = world.iter().map(|p| view * p).collect();
    let clipped = clip_to_near(&in_view);
    if clipped.len() < 3 {
        return None;
    }
    let projected: Vec<_> = clipped
        .iter()
        .filter_map(|p| camera.project_view_point(p, rect))
        .collect();
    if projected.len() != clipped.len() {
        return None;
    }
    let depth = projected.iter().map(|p| p.depth).sum::<f32>() / projected.len() as f32;
    Some((projected.iter().map(|p| p.screen).collect(), depth))
}

/// The visible, shaded faces of one box (or of the shape its mesh gives).
fn box_faces(b: &BoxShape, camera: &OrbitCamera, view: &Isometry3<f32>, rect: Rect) -> Vec<Face> {
    if let Some((mesh, double_sided)) = &b.mesh {
        return mesh_faces(b, mesh, *double_sided, camera, view, rect);
    }
    let eye = camera.eye();
    let box_depth = -(view * b.center).z;
    let mut out = Vec::with_capacity(3);
    for (corners, normal) in FACES {
        let normal = b.rotation * Vector3::from(normal);
        let world: Vec<Point3<f32>> = corners
            .iter()
            .map(|c| b.center + b.rotation * Vector3::from(*c).component_mul(&b.half))
            .collect();
        if normal.dot(&(world[0] - eye)) >= 0.0 {
            continue;
        }
        let Some((screen, depth)) = project_polygon(&world, camera, view, rect) else {
            continue;
        };
        let color = shade(b.color, lambert(&normal));
        let bounds = Rect::from_points(&screen);
        let rim_visible = bounds.width().min(bounds.height()) >= MIN_PLAIN_RIM_FACE;
        let edge = (screen.len() == 4)
            .then_some(b.edge)
            .and_then(|edge| match edge {
                Edge::Plain => rim_visible.then(|| (shade(color, 0.72), 0.06)),
                Edge::Held => Some((Color32::from_rgb(20, 20, 24), 0.2)),
                Edge::Hovered => Some((Color32::from_rgb(255, 236, 120), 0.12)),
            });
        out.push(Face {
            screen,
            box_depth,
            depth,
            color,
            edge,
        });
    }
    out
}

/// Append a convex polygon as a triangle fan.
fn add_polygon(mesh: &mut Mesh, points: &[Pos2], color: Color32) {
    let base = mesh.vertices.len() as u32;
    for p in points {
        mesh.colored_vertex(*p, color);
    }
    for i in 1..points.len() as u32 - 1 {
        mesh.add_triangle(base, base + i, base + i + 1);
    }
}

/// Append a face, with its rim drawn as four trapezoids around an inset centre.
fn add_face(mesh: &mut Mesh, face: &Face) {
    let Some((edge_color, width)) = face.edge else {
        add_polygon(mesh, &face.screen, face.color);
        return;
    };
    let centroid = face
        .screen
        .iter()
        .fold(Pos2::ZERO, |acc, p| acc + p.to_vec2())
        / face.screen.len() as f32;
    let inner: Vec<Pos2> = face
        .screen
        .iter()
        .map(|p| *p + (centroid - *p) * width)
        .collect();
    add_polygon(mesh, &inner, face.color);
    let n = face.screen.len();
    for i in 0..n {
        let j = (i + 1) % n;
        add_polygon(
            mesh,
            &[face.screen[i], face.screen[j], inner[j], inner[i]],
            edge_color,
        );
    }
}

/// The floor as a checkerboard, which doubles as the grid: one-metre tiles on the smallest floor, larger
/// ones on larger floors.
fn floor_mesh(camera: &OrbitCamera, view: &Isometry3<f32>, rect: Rect, half: f32) -> Mesh {
    let size = half / FLOOR_TILES as f32;
    let mut mesh = Mesh::default();
    let light = Color32::from_rgb(92, 98, 108);
    let dark = Color32::from_rgb(78, 84, 94);
    for x in -FLOOR_TILES..FLOOR_TILES {
        for z in -FLOOR_TILES..FLOOR_TILES {
            let (x0, z0) = (x as f32 * size, z as f32 * size);
            let tile = [
                Point3::new(x0, 0.0, z0),
                Point3::new(x0, 0.0, z0 + size),
                Point3::new(x0 + size, 0.0, z0 + size),
                Point3::new(x0 + size, 0.0, z0),
            ];
            let in_view: Vec<Point3<f32>> = tile.iter().map(|p| view * p).collect();
            let clipped = clip_to_near(&in_view);
            let projected: Vec<Pos2> = clipped
                .iter()
                .filter_map(|p| camera.project_view_point(p, rect))
                .map(|p| p.screen)
                .collect();
            if projected.len() >= 3 && projected.len() == clipped.len() {
                add_polygon(
                    &mut mesh,
                    &projected,
                    if (x + z).rem_euclid(2) == 0 {
                        light
                    } else {
                        dark
                    },
                );
            }
        }
    }
    mesh
}

#[cfg(test)]
mod tests {
    use super::*;
    use egui::Vec2;

    fn rect() -> Rect {
        Rect::from_min_size(Pos2::ZERO, Vec2::new(640.0, 480.0))
    }

    fn unit_box(center: Point3<f32>, color: Color32) -> BoxShape {
        BoxShape {
            center,
            rotation: UnitQuaternion::identity(),
            half: Vector3::repeat(0.5),
            color,
            edge: Edge::Plain,
            mesh: None,
        }
    }

    #[test]
    fn a_box_shows_at_most_three_faces_and_never_its_back() {
        let cam = OrbitCamera::default();
        let faces = box_faces(
            &unit_box(Point3::new(0.0, 0.5, 0.0), Color32::WHITE),
            &cam,
            &cam.view(),
            rect(),
        );
        assert!((1..=3).contains(&faces.len()), "{}", faces.len());
        // The default camera is above the floor, so the bottom face (darkest possible shade) is culled
        // and the lit top face is among those drawn.
        let top = shade(Color32::WHITE, lambert(&Vector3::y()));
        assert!(faces.iter().any(|f| f.color == top));
    }

    #[test]
    fn faces_facing_the_light_are_brighter() {
        assert!(lambert(&Vector3::y()) > lambert(&Vector3::x()));
        assert!(lambert(&-Vector3::y()) < lambert(&Vector3::z()));
        assert!(lambert(&-Vector3::y()) > 0.3);
    }

    #[test]
    fn far_faces_sort_before_near_ones() {
        let cam = OrbitCamera::default();
        let view = cam.view();
        let near = box_faces(
            &unit_box(cam.target + (cam.eye() - cam.target) * 0.3, Color32::RED),
            &cam,
            &view,
            rect(),
        );
        let far = box_faces(
            &unit_box(cam.target - (cam.eye() - cam.target) * 0.3, Color32::BLUE),
            &cam,
            &view,
            rect(),
        );
        let near_max = near.iter().map(|f| f.depth).fold(f32::MIN, f32::max);
        let far_min = far.iter().map(|f| f.depth).fold(f32::MAX, f32::min);
        assert!(far_min > near_max);
    }

    #[test]
    fn neighbouring_cubes_are_painted_whole_far_one_first() {
        // Two cubes separated by a vertical plane facing the eye, the far one higher up: the near one may
        // cover the far one, never the reverse. Sorting single faces by depth interleaves them here (the far
        // cube's side face sorts after the near cube's top); painting whole boxes far-to-near does not.
        let cam = OrbitCamera::default();
        let toward_eye = (cam.eye() - cam.target).normalize();
        let flat = Vector3::new(toward_eye.x, 0.0, toward_eye.z).normalize();
        let near = unit_box(Point3::new(0.0, 2.5, 0.0) + flat * 1.0, Color32::RED);
        let far = unit_box(Point3::new(0.0, 4.0, 0.0), Color32::BLUE);
        let faces = paint_order(&[near, far], &cam, &cam.view(), rect());
        let is_red = |f: &Face| f.color.r() > f.color.b();
        let first_red = faces.iter().position(is_red).unwrap();
        assert!(first_red > 0, "the far cube shows faces");
        assert!(faces[..first_red].iter().all(|f| !is_red(f)));
        assert!(faces[first_red..].iter().all(is_red));
    }

    #[test]
    fn an_avatar_is_a_head_a_visor_in_front_and_two_hands() {
        let look = UnitQuaternion::face_towards(&Vector3::x(), &Vector3::y());
        let at = |x, y, z| Isometry3::from_parts(Vector3::new(x, y, z).into(), look);
        let avatar = AvatarView {
            player: 2,
            head: at(0.0, 1.6, 0.0),
            hands: [at(0.3, 1.1, -0.3), at(0.3, 1.1, 0.3)],
        };
        let boxes = avatar_boxes(&avatar);
        assert_eq!(boxes.len(), 4);
        assert!(boxes.iter().filter(|b| b.color == player_color(2)).count() == 3);
        // The visor sits on the side the head looks at (+X here).
        assert!(boxes[1].center.x > boxes[0].center.x + HEAD_HALF[2]);
        assert!((boxes[1].center.z - boxes[0].center.z).abs() < 1e-5);
    }

    #[test]
    fn a_box_behind_the_camera_draws_nothing() {
        let cam = OrbitCamera::default();
        let behind = cam.eye() - cam.forward() * 3.0;
        assert!(box_faces(&unit_box(behind, Color32::WHITE), &cam, &cam.view(), rect()).is_empty());
    }

    #[test]
    fn held_faces_get_a_thick_dark_rim() {
        let cam = OrbitCamera::default();
        let mut b = unit_box(Point3::new(0.0, 0.5, 0.0), Color32::WHITE);
        b.edge = Edge::Held;
        let faces = box_faces(&b, &cam, &cam.view(), rect());
        let mut mesh = Mesh::default();
        add_face(&mut mesh, &faces[0]);
        // Inner quad plus four rim quads, each two triangles.
        assert_eq!(mesh.indices.len(), 5 * 2 * 3);
        assert!(
            mesh.vertices
                .iter()
                .any(|v| v.color == Color32::from_rgb(20, 20, 24))
        );
    }
}
