//! The offline preview: a fixed, viewer-side layout of a scene, shown until the viewer is wired to the real
//! host/guest cores, and used by `--screenshot` to exercise the renderer.
//!
//! It is **not** a session: there is no physics, no network and no other player behind it. The authority
//! colours and the two figures standing by are fixed decoration that show what the renderer draws in a live
//! session. Grabbing moves a cube by hand and marks it held; releasing leaves it where it is (nothing
//! simulates a throw here). Bots and the link conditioner are refused.

use std::time::Duration;

use nalgebra::{Isometry3, Point3, UnitQuaternion, Vector3};

use crate::scene_choice::SceneChoice;
use crate::session::{
    AvatarView, BodyId, BodyView, BotKind, ConditionerSettings, LinkStats, PlayerId, PlayerView,
    SessionError, SessionHandle, SessionKind, SessionStatus,
};

/// Half the side of a preview cube, metres.
const HALF: f32 = 0.2;
/// The local player of the preview.
const LOCAL: PlayerId = 0;

/// A static layout of one scene; see the module documentation for what it is not.
#[derive(Debug, Clone)]
pub struct OfflinePreview {
    scene: SceneChoice,
    bodies: Vec<BodyView>,
    avatars: Vec<AvatarView>,
    players: Vec<PlayerView>,
    held: Option<BodyId>,
    status: SessionStatus,
}

fn cube(id: BodyId, position: Point3<f32>, yaw: f32) -> BodyView {
    BodyView {
        id,
        position,
        rotation: UnitQuaternion::from_axis_angle(&Vector3::y_axis(), yaw),
        half_extents: Vector3::repeat(HALF),
        authority: None,
        owner: None,
    }
}

fn layout(scene: SceneChoice) -> Vec<BodyView> {
    match scene {
        SceneChoice::Table => (0..64u32)
            .map(|i| {
                let (row, col) = ((i / 8) as f32, (i % 8) as f32);
                cube(
                    i,
                    Point3::new((col - 3.5) * 0.6, HALF, (row - 3.5) * 0.6),
                    0.0,
                )
            })
            .collect(),
        SceneChoice::Katamari => (0..64u32)
            .map(|i| {
                let angle = i as f32 * 2.399_963;
                let radius = 0.6 + 0.42 * (i as f32).sqrt();
                cube(
                    i,
                    Point3::new(radius * angle.cos(), HALF, radius * angle.sin()),
                    angle,
                )
            })
            .collect(),
        SceneChoice::Tower => (0..64u32)
            .map(|i| {
                if i < 16 {
                    cube(i, Point3::new(0.0, HALF + i as f32 * 2.0 * HALF, 0.0), 0.0)
                } else {
                    let j = i - 16;
                    let angle = j as f32 * std::f32::consts::TAU / 48.0;
                    cube(
                        i,
                        Point3::new(3.0 * angle.cos(), HALF, 3.0 * angle.sin()),
                        angle,
                    )
                }
            })
            .collect(),
    }
}

fn figure(player: PlayerId, at: Point3<f32>, facing: Vector3<f32>) -> AvatarView {
    let look = UnitQuaternion::face_towards(&facing, &Vector3::y());
    let side = Vector3::new(-facing.z, 0.0, facing.x) * 0.3;
    let hand_base = at + Vector3::new(0.0, 1.15, 0.0) + facing * 0.35;
    let pose = |p: Point3<f32>| Isometry3::from_parts(p.coords.into(), look);
    AvatarView {
        player,
        head: pose(at + Vector3::new(0.0, 1.65, 0.0)),
        hands: [pose(hand_base - side), pose(hand_base + side)],
    }
}

impl OfflinePreview {
    /// The fixed layout of `scene`, with a few cubes coloured as if players 1–3 had authority over them.
    pub fn new(scene: SceneChoice) -> Self {
        let mut bodies = layout(scene);
        for (id, authority) in [
            (9, 1),
            (10, 1),
            (17, 1),
            (18, 1),
            (45, 2),
            (46, 2),
            (53, 2),
            (30, 3),
        ] {
            bodies[id].authority = Some(authority);
        }
        bodies[18].owner = Some(1);
        let avatars = vec![
            figure(1, Point3::new(-3.4, 0.0, 0.0), Vector3::x()),
            figure(2, Point3::new(3.4, 0.0, 0.0), -Vector3::x()),
        ];
        let players = vec![PlayerView {
            id: LOCAL,
            name: "you (offline preview)".into(),
            is_local: true,
            bot: None,
        }];
        Self {
            scene,
            bodies,
            avatars,
            players,
            held: None,
            status: SessionStatus::Running,
        }
    }

    fn body_mut(&mut self, id: BodyId) -> Option<&mut BodyView> {
        self.bodies.iter_mut().find(|b| b.id == id)
    }
}

impl SessionHandle for OfflinePreview {
    fn kind(&self) -> SessionKind {
        SessionKind::OfflinePreview
    }

    fn title(&self) -> String {
        format!(
            "Offline preview of the '{}' layout — no session, no network, no physics",
            self.scene
        )
    }

    fn update(&mut self, _now: Duration) {}

    fn status(&self) -> SessionStatus {
        self.status.clone()
    }

    fn local_player(&self) -> PlayerId {
        LOCAL
    }

    fn bodies(&self) -> &[BodyView] {
        &self.bodies
    }

    fn avatars(&self) -> &[AvatarView] {
        &self.avatars
    }

    fn players(&self) -> &[PlayerView] {
        &self.players
    }

    fn link_stats(&self) -> Vec<LinkStats> {
        Vec::new()
    }

    fn apply_conditioner(&mut self, _settings: ConditionerSettings) -> Result<(), SessionError> {
        Err(SessionError::Unsupported(
            "the offline preview has no network to condition",
        ))
    }

    fn grab(&mut self, body: BodyId) -> Result<(), SessionError> {
        let target = self
            .body_mut(body)
            .ok_or(SessionError::Unsupported("no such cube"))?;
        match target.owner {
            Some(other) if other != LOCAL => Err(SessionError::HeldByOther(other)),
            _ => {
                target.owner = Some(LOCAL);
                self.held = Some(body);
                Ok(())
            }
        }
    }

    fn move_held(&mut self, target: Point3<f32>) {
        if let Some(id) = self.held
            && let Some(body) = self.body_mut(id)
        {
            body.position = Point3::new(target.x, target.y.max(body.half_extents.y), target.z);
        }
    }

    fn release(&mut self, _velocity: Vector3<f32>) {
        if let Some(id) = self.held.take()
            && let Some(body) = self.body_mut(id)
        {
            body.owner = None;
        }
    }

    fn add_bot(&mut self, _kind: BotKind) -> Result<(), SessionError> {
        Err(SessionError::Unsupported(
            "bots join a live session; the offline preview is not one",
        ))
    }

    fn leave(&mut self) {
        self.status = SessionStatus::Ended("Closed the offline preview.".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_has_64_cubes_resting_on_or_above_the_floor() {
        for scene in SceneChoice::ALL {
            let preview = OfflinePreview::new(scene);
            assert_eq!(preview.bodies().len(), 64, "{scene}");
            assert!(preview.bodies().iter().all(|b| b.position.y >= HALF - 1e-6));
        }
    }

    #[test]
    fn grabbing_marks_the_cube_and_moving_keeps_it_above_the_floor() {
        let mut p = OfflinePreview::new(SceneChoice::Table);
        assert_eq!(p.grab(18), Err(SessionError::HeldByOther(1)));
        p.grab(0).unwrap();
        assert_eq!(p.bodies()[0].owner, Some(LOCAL));
        p.move_held(Point3::new(1.0, -3.0, 2.0));
        assert_eq!(p.bodies()[0].position, Point3::new(1.0, HALF, 2.0));
        p.release(Vector3::x());
        assert_eq!(p.bodies()[0].owner, None);
        assert_eq!(p.bodies()[0].position, Point3::new(1.0, HALF, 2.0));
    }

    #[test]
    fn network_features_are_refused_and_leaving_ends_it() {
        let mut p = OfflinePreview::new(SceneChoice::Tower);
        assert!(p.add_bot(BotKind::Thrower).is_err());
        assert!(p.apply_conditioner(ConditionerSettings::default()).is_err());
        assert_eq!(p.status(), SessionStatus::Running);
        p.leave();
        assert!(matches!(p.status(), SessionStatus::Ended(_)));
    }
}
