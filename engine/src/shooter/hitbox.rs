//! Hitboxes and hitscan traces: a body capsule and a head sphere per player, positioned from the player's feet,
//! and the ray test a shot makes against them (closest hit wins, world geometry in front blocks it).

use nalgebra::{Point3, Vector3};
use rapier3d::math::{Pose, Vector as GVec3};
use rapier3d::parry::query::RayCast;
use rapier3d::parry::shape::{Ball, Capsule};
use rapier3d::prelude::Ray;

use super::PlayerId;
use super::convert::{point_to_glam, vector_to_glam};
use super::rules::BodyDims;

/// A hitscan shot: from the shooter's eye along the view direction, up to the weapon's range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShotRay {
    /// Start (the eye), metres.
    pub origin: Point3<f32>,
    /// Unit direction.
    pub direction: Vector3<f32>,
    /// Maximum distance, metres.
    pub range: f32,
}

impl ShotRay {
    /// The point at `distance` along the ray.
    pub fn point_at(&self, distance: f32) -> Point3<f32> {
        self.origin + self.direction * distance
    }
}

/// Which hitbox a shot struck.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HitZone {
    /// The body capsule.
    Body,
    /// The head sphere.
    Head,
}

/// A player's hitboxes as placed at some moment (present or rewound).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetPose {
    /// Whose hitboxes.
    pub player: PlayerId,
    /// Feet position, metres.
    pub feet: Point3<f32>,
    /// Dead players cannot be hit.
    pub alive: bool,
}

/// A shot that struck a player.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlayerHit {
    /// The player hit.
    pub player: PlayerId,
    /// Head or body.
    pub zone: HitZone,
    /// Distance from the shot's origin, metres.
    pub distance: f32,
}

/// Distance and zone where `ray` first enters the hitboxes of a player standing at `feet`, if within
/// `max_distance`. A ray grazing both picks the nearer surface.
pub fn raycast_hitboxes(
    ray: &ShotRay,
    feet: &Point3<f32>,
    dims: &BodyDims,
    max_distance: f32,
) -> Option<(f32, HitZone)> {
    let glam_ray = Ray::new(point_to_glam(&ray.origin), vector_to_glam(&ray.direction));
    let feet = point_to_glam(feet);
    let body_half = ((dims.body_hit_top - 2.0 * dims.body_hit_radius) / 2.0).max(0.0);
    let body = Capsule::new_y(body_half, dims.body_hit_radius);
    let body_pose = Pose::from_translation(feet + GVec3::Y * (dims.body_hit_top / 2.0));
    let head = Ball::new(dims.head_radius);
    let head_pose = Pose::from_translation(feet + GVec3::Y * dims.head_height);
    let body_hit = body.cast_ray(&body_pose, &glam_ray, max_distance, true);
    let head_hit = head.cast_ray(&head_pose, &glam_ray, max_distance, true);
    match (head_hit, body_hit) {
        (Some(h), Some(b)) if b < h => Some((b, HitZone::Body)),
        (Some(h), _) => Some((h, HitZone::Head)),
        (None, Some(b)) => Some((b, HitZone::Body)),
        (None, None) => None,
    }
}

/// Traces `ray` against `targets` (skipping `shooter` and the dead), stopped by a blocker at `blocked_at` (the
/// distance to the first world surface, if any). Returns the nearest player hit.
pub fn trace_shot(
    ray: &ShotRay,
    shooter: PlayerId,
    targets: &[TargetPose],
    blocked_at: Option<f32>,
    dims: &BodyDims,
) -> Option<PlayerHit> {
    let reach = blocked_at.map_or(ray.range, |d| d.min(ray.range));
    targets
        .iter()
        .filter(|t| t.alive && t.player != shooter)
        .filter_map(|t| {
            raycast_hitboxes(ray, &t.feet, dims, reach).map(|(distance, zone)| PlayerHit {
                player: t.player,
                zone,
                distance,
            })
        })
        .min_by(|a, b| a.distance.total_cmp(&b.distance))
}

/// The client's guess at what its own shot hit, for an immediate hit marker or effect: the shot traced
/// against the remote players as it renders them, stopped by the static geometry. Damage stays the server's
/// word; the server's judgement arrives with a later snapshot.
pub fn predict_hit(
    ray: &ShotRay,
    shooter: PlayerId,
    targets: &[TargetPose],
    geometry: &super::map::WorldGeometry,
    dims: &BodyDims,
) -> Option<PlayerHit> {
    let blocked_at = geometry.cast_ray(&ray.origin, &ray.direction, ray.range);
    trace_shot(ray, shooter, targets, blocked_at, dims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ray_at_height(height: f32) -> ShotRay {
        ShotRay {
            origin: Point3::new(0.0, height, -10.0),
            direction: Vector3::new(0.0, 0.0, 1.0),
            range: 50.0,
        }
    }

    fn target(player: u8, z: f32) -> TargetPose {
        TargetPose {
            player: PlayerId(player),
            feet: Point3::new(0.0, 0.0, z),
            alive: true,
        }
    }

    #[test]
    fn zones_by_height_and_misses_beside() {
        let dims = BodyDims::default();
        let feet = Point3::new(0.0, 0.0, 0.0);
        let chest = raycast_hitboxes(&ray_at_height(1.0), &feet, &dims, 50.0).unwrap();
        assert_eq!(chest.1, HitZone::Body);
        assert!((chest.0 - (10.0 - dims.body_hit_radius)).abs() < 1e-3);
        let head = raycast_hitboxes(&ray_at_height(1.7), &feet, &dims, 50.0).unwrap();
        assert_eq!(head.1, HitZone::Head);
        assert!(raycast_hitboxes(&ray_at_height(1.95), &feet, &dims, 50.0).is_none());
        let beside = ShotRay {
            origin: Point3::new(0.6, 1.0, -10.0),
            ..ray_at_height(1.0)
        };
        assert!(raycast_hitboxes(&beside, &feet, &dims, 50.0).is_none());
        assert!(raycast_hitboxes(&ray_at_height(1.0), &feet, &dims, 5.0).is_none());
    }

    #[test]
    fn nearest_living_target_wins_and_walls_block() {
        let dims = BodyDims::default();
        let ray = ray_at_height(1.0);
        let targets = [target(1, 0.0), target(2, -3.0), target(3, 3.0)];
        let hit = trace_shot(&ray, PlayerId(9), &targets, None, &dims).unwrap();
        assert_eq!(hit.player, PlayerId(2));
        let mut dead_front = targets;
        dead_front[1].alive = false;
        assert_eq!(
            trace_shot(&ray, PlayerId(9), &dead_front, None, &dims).map(|h| h.player),
            Some(PlayerId(1))
        );
        assert_eq!(
            trace_shot(&ray, PlayerId(2), &targets, None, &dims).map(|h| h.player),
            Some(PlayerId(1)),
            "a shooter never hits itself"
        );
        assert!(trace_shot(&ray, PlayerId(9), &targets, Some(5.0), &dims).is_none());
    }

    #[test]
    fn a_predicted_hit_respects_cover() {
        let geometry =
            crate::shooter::map::WorldGeometry::new(&crate::shooter::map::ArenaMap::standard());
        let dims = BodyDims::default();
        // The standard map has a 2 m high cover box across x = -2..2 at z = -11.
        let origin = Point3::new(0.0, 1.6, -16.0);
        let aim = |target: &Point3<f32>| ShotRay {
            origin,
            direction: (target + Vector3::new(0.0, 0.9, 0.0) - origin).normalize(),
            range: 80.0,
        };
        let hidden = TargetPose {
            player: PlayerId(1),
            feet: Point3::new(0.0, 0.0, -8.0),
            alive: true,
        };
        assert_eq!(
            predict_hit(&aim(&hidden.feet), PlayerId(0), &[hidden], &geometry, &dims),
            None
        );
        let open = TargetPose {
            feet: Point3::new(5.0, 0.0, -8.0),
            ..hidden
        };
        let hit = predict_hit(&aim(&open.feet), PlayerId(0), &[open], &geometry, &dims).unwrap();
        assert_eq!((hit.player, hit.zone), (PlayerId(1), HitZone::Body));
    }
}
