//! The session screen driven through egui_kittest against a scripted [`SessionHandle`] that records what the
//! screen asks of it: bots, the link conditioner, the network panel, the camera and the end of a session.

use std::sync::{Arc, Mutex};

use egui::accesskit::Role;
use egui::{Event, Modifiers, MouseWheelUnit, PointerButton, Vec2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use nalgebra::{Point3, Vector3};
use physync_viewer::app::ViewerApp;
use physync_viewer::launcher::{HostConfig, JoinConfig, LaunchError, SessionLauncher};
use physync_viewer::session::{
    AvatarView, BodyId, BodyView, BotKind, ConditionerSettings, LinkStats, PlayerId, PlayerView,
    SessionError, SessionHandle, SessionKind, SessionStatus,
};

/// What the screen asked of the session, and the status the test makes it report.
#[derive(Default)]
struct Script {
    bots: Vec<BotKind>,
    conditioner: Vec<ConditionerSettings>,
    status: Option<SessionStatus>,
    updates: usize,
}

struct ScriptedSession {
    script: Arc<Mutex<Script>>,
    players: Vec<PlayerView>,
}

impl SessionHandle for ScriptedSession {
    fn kind(&self) -> SessionKind {
        SessionKind::Host
    }
    fn title(&self) -> String {
        "scripted host".into()
    }
    fn update(&mut self) {
        self.script.lock().unwrap().updates += 1;
    }
    fn status(&self) -> SessionStatus {
        self.script
            .lock()
            .unwrap()
            .status
            .clone()
            .unwrap_or(SessionStatus::Running)
    }
    fn local_player(&self) -> PlayerId {
        0
    }
    fn bodies(&self) -> &[BodyView] {
        &[]
    }
    fn avatars(&self) -> &[AvatarView] {
        &[]
    }
    fn players(&self) -> &[PlayerView] {
        &self.players
    }
    fn link_stats(&self) -> Vec<LinkStats> {
        vec![LinkStats {
            peer: 1,
            kbps_up: 120.0,
            kbps_down: 80.0,
            rtt_ms: 42.0,
            loss_percent: 1.5,
            playout_ms: 58.0,
            conflicts_per_s: 0.5,
            corrections_per_s: 3.0,
        }]
    }
    fn apply_conditioner(&mut self, settings: ConditionerSettings) -> Result<(), SessionError> {
        self.script.lock().unwrap().conditioner.push(settings);
        Ok(())
    }
    fn grab(&mut self, body: BodyId) -> Result<(), SessionError> {
        Err(SessionError::NoSuchCube(body))
    }
    fn move_held(&mut self, _target: Point3<f32>) {}
    fn release(&mut self, _velocity: Vector3<f32>) {}
    fn add_bot(&mut self, kind: BotKind) -> Result<(), SessionError> {
        let mut script = self.script.lock().unwrap();
        script.bots.push(kind);
        if script.bots.len() > 1 {
            Err(SessionError::Full)
        } else {
            Ok(())
        }
    }
    fn take_notice(&mut self) -> Option<String> {
        None
    }
    fn leave(&mut self) {}
}

struct ScriptedLauncher(Arc<Mutex<Script>>);

impl SessionLauncher for ScriptedLauncher {
    fn host(&mut self, _config: &HostConfig) -> Result<Box<dyn SessionHandle>, LaunchError> {
        let players = vec![
            PlayerView {
                id: 0,
                name: "host".into(),
                is_local: true,
                bot: None,
            },
            PlayerView {
                id: 1,
                name: "bot".into(),
                is_local: false,
                bot: Some(BotKind::Builder),
            },
        ];
        Ok(Box::new(ScriptedSession {
            script: Arc::clone(&self.0),
            players,
        }))
    }
    fn join(&mut self, _config: &JoinConfig) -> Result<Box<dyn SessionHandle>, LaunchError> {
        Err(LaunchError::Socket("refused by the test".into()))
    }
}

fn hosted() -> (Harness<'static, ViewerApp>, Arc<Mutex<Script>>) {
    let script = Arc::new(Mutex::new(Script::default()));
    let app = ViewerApp::new(Box::new(ScriptedLauncher(Arc::clone(&script))));
    let mut h = Harness::builder()
        .with_size(Vec2::new(1200.0, 800.0))
        .build_ui_state(|ui, app: &mut ViewerApp| app.show(ui), app);
    let free = std::net::UdpSocket::bind(("0.0.0.0", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    h.get_by_label("Listen port")
        .set_text_value_accesskit(&free.to_string());
    h.run();
    h.get_by_role_and_label(Role::Button, "Host").click();
    h.run_steps(3);
    assert!(h.state().session_screen().is_some());
    (h, script)
}

#[test]
fn players_links_and_time_reach_the_screen() {
    let (mut h, script) = hosted();
    assert!(h.query_by_label_contains("0 · host (you)").is_some());
    assert!(
        h.query_by_label_contains("1 · bot (bot: builder)")
            .is_some()
    );
    assert!(
        h.query_by_label_contains(
            "Link to player 1: up 120 kbps, down 80 kbps, RTT 42 ms, loss 1.5 %, play-out 58 ms"
        )
        .is_some()
    );
    let before = script.lock().unwrap().updates;
    h.run_steps(4);
    assert_eq!(
        script.lock().unwrap().updates,
        before + 4,
        "the session is pumped once per frame"
    );
}

#[test]
fn bot_buttons_add_bots_and_refusals_are_shown() {
    let (mut h, script) = hosted();
    h.get_by_role_and_label(Role::Button, "thrower").click();
    h.run_steps(2);
    assert!(h.query_by_label_contains("the session is full").is_none());
    h.get_by_role_and_label(Role::Button, "grabber").click();
    h.run_steps(2);
    assert_eq!(
        script.lock().unwrap().bots,
        vec![BotKind::Thrower, BotKind::Grabber]
    );
    assert!(h.query_by_label_contains("the session is full").is_some());
}

#[test]
fn moving_a_conditioner_slider_applies_it() {
    let (mut h, script) = hosted();
    h.get_by_role_and_label(Role::Slider, "latency ms")
        .set_value_accesskit(150.0);
    h.run_steps(2);
    let applied = script.lock().unwrap().conditioner.clone();
    assert_eq!(applied.last().map(|c| c.latency_ms), Some(150));
    assert_eq!(applied.last().map(|c| c.loss_percent), Some(0.0));
}

#[test]
fn right_drag_orbits_and_the_wheel_zooms() {
    let (mut h, _script) = hosted();
    let rect = h.state().session_screen().unwrap().view_rect().unwrap();
    let before = h.state().session_screen().unwrap().camera().clone();
    let start = rect.center();
    let button = |pressed, pos| Event::PointerButton {
        pos,
        button: PointerButton::Secondary,
        pressed,
        modifiers: Modifiers::NONE,
    };
    h.event(Event::PointerMoved(start));
    h.event(button(true, start));
    h.run_steps(1);
    for i in 1..=5 {
        h.event(Event::PointerMoved(start + Vec2::new(15.0 * i as f32, 0.0)));
        h.run_steps(1);
    }
    h.event(button(false, start + Vec2::new(75.0, 0.0)));
    h.run_steps(1);
    let orbited = h.state().session_screen().unwrap().camera().clone();
    assert!(
        orbited.yaw > before.yaw + 0.3,
        "{} -> {}",
        before.yaw,
        orbited.yaw
    );
    assert_eq!(orbited.distance, before.distance);

    h.event(Event::MouseWheel {
        unit: MouseWheelUnit::Point,
        delta: Vec2::new(0.0, 200.0),
        modifiers: Modifiers::NONE,
        phase: egui::TouchPhase::Move,
        source: egui::MouseWheelSource::Unknown,
    });
    h.run_steps(10);
    let zoomed = h.state().session_screen().unwrap().camera().clone();
    assert!(
        zoomed.distance < orbited.distance,
        "{} -> {}",
        orbited.distance,
        zoomed.distance
    );
}

#[test]
fn a_session_that_ends_returns_to_the_start_screen_with_the_reason() {
    let (mut h, script) = hosted();
    script.lock().unwrap().status = Some(SessionStatus::Ended("the host left".into()));
    h.run_steps(2);
    assert!(h.state().start_screen().is_some());
    assert!(
        h.query_by_label_contains("The session ended: the host left")
            .is_some()
    );
}
