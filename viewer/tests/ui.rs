//! The start screen driven through egui_kittest: bad input is explained in the window.

use egui::Vec2;
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use physync_viewer::app::ViewerApp;
use std::sync::{Arc, Mutex};

use physync_viewer::launcher::{
    CoreLauncher, HostConfig, JoinConfig, LaunchError, SessionLauncher,
};
use physync_viewer::session::SessionHandle;

fn viewer() -> ViewerApp {
    ViewerApp::new(Box::new(CoreLauncher::new(7)))
}

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
    let mut h = harness(viewer());
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
    let mut h = harness(viewer());
    set_field(&mut h, "Listen port", "70000");
    click_button(&mut h, "Host");
    assert!(h.query_by_label_contains("'70000' is not a port").is_some());
    assert!(h.state().start_screen().is_some());
}

#[test]
fn a_port_in_use_shows_an_error() {
    let taken = std::net::UdpSocket::bind(("0.0.0.0", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut h = harness(viewer());
    set_field(&mut h, "Listen port", &port.to_string());
    click_button(&mut h, "Host");
    assert!(
        h.query_by_label_contains(&format!("UDP port {port} cannot be used"))
            .is_some()
    );
}

/// A launcher that records what the Join and Host forms asked for and starts nothing.
#[derive(Default, Clone)]
struct RecordingLauncher(Arc<Mutex<Vec<JoinConfig>>>, Arc<Mutex<Vec<HostConfig>>>);

/// A viewer over a recording launcher, and the launcher's records.
fn recording_viewer() -> (Harness<'static, ViewerApp>, RecordingLauncher) {
    let launcher = RecordingLauncher::default();
    let h = harness(ViewerApp::new(Box::new(launcher.clone())));
    (h, launcher)
}

impl SessionLauncher for RecordingLauncher {
    fn host(&mut self, config: &HostConfig) -> Result<Box<dyn SessionHandle>, LaunchError> {
        self.1.lock().unwrap().push(config.clone());
        Err(LaunchError::Socket("recorded by the test".into()))
    }
    fn join(&mut self, config: &JoinConfig) -> Result<Box<dyn SessionHandle>, LaunchError> {
        self.0.lock().unwrap().push(config.clone());
        Err(LaunchError::Socket("recorded by the test".into()))
    }
}

#[test]
fn the_join_code_typed_on_the_join_form_reaches_the_guest() {
    let (mut h, records) = recording_viewer();
    set_field(&mut h, "Host address", "127.0.0.1:40000");
    click_button(&mut h, "Join");
    set_field(&mut h, "Join code", "  K7QZ-M4PX ");
    click_button(&mut h, "Join");
    let joins = records.0.lock().unwrap();
    let codes: Vec<Option<&str>> = joins.iter().map(|j| j.join_code.as_deref()).collect();
    assert_eq!(codes, [None, Some("K7QZ-M4PX")]);
    assert_eq!(joins[1].address, ([127, 0, 0, 1], 40000).into());
}

#[test]
fn the_join_code_typed_on_the_host_form_reaches_the_host() {
    let (mut h, records) = recording_viewer();
    let port = std::net::UdpSocket::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    set_field(&mut h, "Listen port", &port.to_string());
    click_button(&mut h, "Host");
    set_field(&mut h, "Require join code", " K7QZ-M4PX  ");
    click_button(&mut h, "Host");
    let hosts = records.1.lock().unwrap();
    let codes: Vec<Option<&str>> = hosts.iter().map(|c| c.join_code.as_deref()).collect();
    assert_eq!(codes, [None, Some("K7QZ-M4PX")]);
    assert_eq!(hosts[1].port, port);
}
