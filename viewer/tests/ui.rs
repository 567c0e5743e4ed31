//! The viewer's UI driven through egui_kittest: start-screen validation and the session screen's mouse input.

use std::sync::{Arc, Mutex};

use egui::accesskit::Role;
use egui::{Event, Modifiers, PointerButton, Pos2, Vec2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use physync_viewer::app::ViewerApp;
use physync_viewer::launcher::{HostConfig, JoinConfig, LaunchError, SessionLauncher};
use physync_viewer::offline_preview::OfflinePreview;
use physync_viewer::scene_choice::SceneChoice;
use physync_viewer::session::SessionHandle;

fn harness(app: ViewerApp) -> Harness<'static, ViewerApp> {
    Harness::builder()
        .with_size(Vec2::new(1200.0, 800.0))
        .build_ui_state(|ui, app: &mut ViewerApp| app.show(ui), app)
}

fn set_field(harness: &mut Harness<'_, ViewerApp>, label: &str, text: &str) {
    harness.get_by_label(label).set_text_value_accesskit(text);
    harness.run();
}

fn click_button(harness: &mut Harness<'_, ViewerApp>, label: &str) {
    harness.get_by_role_and_label(Role::Button, label).click();
    harness.run();
}

#[test]
fn an_unparsable_address_shows_an_error() {
    let mut h = harness(ViewerApp::new(None));
    set_field(&mut h, "Host address", "not an address");
    click_button(&mut h, "Join");
    assert!(
        h.query_by_label_contains("'not an address' is not an address")
            .is_some()
    );
    assert!(h.state().start_screen().is_some());
}

#[test]
fn a_port_out_of_range_shows_an_error() {
    let mut h = harness(ViewerApp::new(None));
    set_field(&mut h, "Listen port", "70000");
    click_button(&mut h, "Host");
    assert!(h.query_by_label_contains("'70000' is not a port").is_some());
    assert!(h.state().start_screen().is_some());
}

#[test]
fn a_port_in_use_shows_an_error() {
    let taken = std::net::UdpSocket::bind(("0.0.0.0", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut h = harness(ViewerApp::new(None));
    set_field(&mut h, "Listen port", &port.to_string());
    click_button(&mut h, "Host");
    assert!(
        h.query_by_label_contains(&format!("UDP port {port} cannot be used"))
            .is_some()
    );
}

#[test]
fn without_session_cores_host_says_it_is_not_available() {
    let mut h = harness(ViewerApp::new(None));
    set_field(&mut h, "Listen port", "0");
    click_button(&mut h, "Host");
    assert!(h.query_by_label_contains("'0' is not a port").is_some());
    let free = std::net::UdpSocket::bind(("0.0.0.0", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    set_field(&mut h, "Listen port", &free.to_string());
    click_button(&mut h, "Host");
    assert!(
        h.query_by_label_contains("hosting is not available in this build")
            .is_some()
    );
    assert!(
        h.query_by_label_contains("is not a port").is_none(),
        "the old error is replaced"
    );
}

/// Records what the app asked for and answers with an offline preview, to test the app's screen flow.
struct RecordingLauncher {
    hosted: Arc<Mutex<Vec<HostConfig>>>,
}

impl SessionLauncher for RecordingLauncher {
    fn host(&mut self, config: &HostConfig) -> Result<Box<dyn SessionHandle>, LaunchError> {
        self.hosted.lock().unwrap().push(config.clone());
        Ok(Box::new(OfflinePreview::new(config.scene)))
    }

    fn join(&mut self, _config: &JoinConfig) -> Result<Box<dyn SessionHandle>, LaunchError> {
        Err(LaunchError::Socket("refused by the test".into()))
    }
}

#[test]
fn a_valid_host_form_reaches_the_launcher_and_leave_returns_to_the_start_screen() {
    let hosted = Arc::new(Mutex::new(Vec::new()));
    let launcher = RecordingLauncher {
        hosted: Arc::clone(&hosted),
    };
    let mut h = harness(ViewerApp::new(Some(Box::new(launcher))));
    click_button(&mut h, "Join");
    assert!(h.query_by_label_contains("refused by the test").is_some());

    let free = std::net::UdpSocket::bind(("0.0.0.0", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    set_field(&mut h, "Listen port", &free.to_string());
    h.get_by_role_and_label(Role::Button, "Host").click();
    h.run_steps(3);
    assert_eq!(
        *hosted.lock().unwrap(),
        vec![HostConfig {
            port: free,
            scene: SceneChoice::Table,
            max_players: 4
        }]
    );
    assert!(h.state().session_screen().is_some());
    assert!(h.query_by_label_contains("Cubes by authority").is_some());

    h.get_by_role_and_label(Role::Button, "Leave").click();
    h.run_steps(3);
    let start = h.state().start_screen().expect("back on the start screen");
    assert_eq!(start.host_port, free.to_string(), "the form is kept");
    assert_eq!(start.notice, None, "leaving is not an error");
}

#[test]
fn dragging_a_cube_in_the_view_moves_it_and_marks_it_held_until_release() {
    let mut h = harness(ViewerApp::new(None));
    h.get_by_role_and_label(Role::Button, "Offline preview")
        .click();
    h.run_steps(3);
    let (start, body_id, before) = {
        let screen = h.state().session_screen().expect("the preview opened");
        let rect = screen.view_rect().expect("the view was drawn");
        let body = &screen.handle().bodies()[27];
        let projected = screen.camera().project(&body.position, rect).unwrap();
        (projected.screen, body.id, body.position)
    };
    let body = |h: &Harness<'_, ViewerApp>| {
        h.state()
            .session_screen()
            .unwrap()
            .handle()
            .bodies()
            .iter()
            .find(|b| b.id == body_id)
            .unwrap()
            .clone()
    };
    let press = |pos: Pos2, pressed: bool| Event::PointerButton {
        pos,
        button: PointerButton::Primary,
        pressed,
        modifiers: Modifiers::NONE,
    };
    h.event(Event::PointerMoved(start));
    h.run_steps(1);
    h.event(press(start, true));
    h.run_steps(1);
    let end = start + Vec2::new(120.0, 0.0);
    for step in 1..=6 {
        h.event(Event::PointerMoved(
            start + Vec2::new(20.0 * step as f32, 0.0),
        ));
        h.run_steps(1);
    }
    let held = body(&h);
    assert_eq!(held.owner, Some(0), "the cube is held while dragged");
    h.event(press(end, false));
    h.run_steps(2);
    let released = body(&h);
    assert_eq!(released.owner, None);
    let moved = released.position - before;
    assert!(moved.norm() > 0.3, "moved by {moved:?}");
    // Dragged to the right on screen: the cube ends up further along the camera's right vector.
    let camera = h.state().session_screen().unwrap().camera();
    let right = camera.forward().cross(&nalgebra::Vector3::y()).normalize();
    assert!(moved.dot(&right) > 0.3, "moved by {moved:?}");
}
