//! The Dedicated server mode driven through egui_kittest: a local dedicated server with bots started from the
//! start screen and played first person (W moves, a click fires), a remote server reached by address, and the
//! errors for a bad address, a port in use, a wrong passphrase and a server that does not answer.
//!
//! The sessions run over real UDP on 127.0.0.1 on the wall clock, so waits are bounded polling loops: each
//! iteration draws one frame and stops as soon as the condition holds.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use egui::accesskit::Role;
use egui::{Event, Key, Modifiers, PointerButton, Pos2, Vec2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use physync_engine::connection::key_from_passphrase;
use physync_engine::shooter::{ArenaMap, units};
use physync_engine::shooter_net::{PlayerClaims, mint_from_passphrase};
use physync_guest::dedicated::ClientConfig;
use physync_guest::dedicated::driver::UdpClient;
use physync_host::dedicated::MatchConfig;
use physync_host::dedicated::driver::UdpMatch;
use physync_viewer::app::ViewerApp;
use physync_viewer::launcher::CoreLauncher;
use physync_viewer::shooter::controls::TURN_PER_POINT;
use physync_viewer::shooter::screen::ShooterScreen;
use physync_viewer::shooter::session::ShooterStatus;

/// Longest any wait may take.
const WAIT: Duration = Duration::from_secs(60);
/// Pause between two polled frames, so the network threads get the CPU.
const FRAME: Duration = Duration::from_millis(4);

fn harness() -> Harness<'static, ViewerApp> {
    Harness::builder()
        .with_size(Vec2::new(1200.0, 800.0))
        .with_step_dt(1.0 / 60.0)
        .build_ui_state(
            |ui, app: &mut ViewerApp| app.show(ui),
            ViewerApp::new(Box::new(CoreLauncher::new(7))),
        )
}

fn free_port() -> u16 {
    UdpSocket::bind(("0.0.0.0", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn set_field(h: &mut Harness<'_, ViewerApp>, label: &str, text: &str) {
    h.get_by_label(label).set_text_value_accesskit(text);
    h.run_steps(2);
}

fn set_bots(h: &mut Harness<'_, ViewerApp>, bots: u8) {
    h.get_by_label("Bots").set_value_accesskit(f64::from(bots));
    h.run_steps(2);
}

fn click_button(h: &mut Harness<'_, ViewerApp>, label: &str) {
    h.get_by_role_and_label(Role::Button, label).click();
    h.run_steps(2);
}

/// Draw frames until `done` holds (panics with `what` after [`WAIT`]).
fn wait_for(
    h: &mut Harness<'_, ViewerApp>,
    what: &str,
    mut done: impl FnMut(&Harness<'_, ViewerApp>) -> bool,
) {
    let deadline = Instant::now() + WAIT;
    while !done(h) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        h.run_steps(1);
        std::thread::sleep(FRAME);
    }
}

fn shooter<'a>(h: &'a Harness<'_, ViewerApp>) -> &'a ShooterScreen {
    h.state()
        .shooter_screen()
        .expect("the shooter screen is up")
}

fn alive(h: &Harness<'_, ViewerApp>) -> bool {
    shooter(h)
        .session()
        .client()
        .local_state()
        .is_some_and(|s| s.alive())
}

/// Click the middle of the first-person view.
fn click_view(h: &mut Harness<'_, ViewerApp>) {
    let centre = shooter(h).view_rect().expect("the view was drawn").center();
    let press = |pos: Pos2, pressed: bool| Event::PointerButton {
        pos,
        button: PointerButton::Primary,
        pressed,
        modifiers: Modifiers::NONE,
    };
    h.event(Event::PointerMoved(centre));
    h.run_steps(1);
    h.event(press(centre, true));
    h.run_steps(1);
    h.event(press(centre, false));
    h.run_steps(1);
}

#[test]
fn a_local_dedicated_server_with_bots_plays_first_person() {
    let mut h = harness();
    set_field(&mut h, "Server port", &free_port().to_string());
    set_bots(&mut h, 2);
    click_button(&mut h, "Start dedicated server");
    assert!(
        h.state().shooter_screen().is_some(),
        "the shooter screen opened"
    );

    // The match runs: the scoreboard lists the bots and the local player, the match leaves the waiting phase.
    wait_for(&mut h, "the match with its bots", |h| {
        shooter(h).session().status() == ShooterStatus::Playing
            && shooter(h).session().client().scores().len() == 3
            && h.query_by_label_contains("bot-2").is_some()
            && h.query_by_label_contains("player (you)").is_some()
    });
    wait_for(&mut h, "the countdown or the live match", |h| {
        h.query_all_by_label_contains("Starting in")
            .next()
            .is_some()
            || h.query_all_by_label_contains("Live").next().is_some()
    });
    assert!(
        h.query_by_label_contains("3 players in the match")
            .is_some()
    );

    // W moves the local player forward (along where it looks).
    wait_for(&mut h, "the local player alive", alive);
    let (before, facing) = {
        let s = shooter(&h).session().client().local_state().unwrap();
        (s.position(), s.view_direction())
    };
    h.key_down(Key::W);
    wait_for(&mut h, "the local player to move", |h| {
        let now = shooter(h)
            .session()
            .client()
            .local_state()
            .unwrap()
            .position();
        (now - before).norm() > 0.5
    });
    h.key_up(Key::W);
    h.run_steps(1);
    let moved = shooter(&h)
        .session()
        .client()
        .local_state()
        .unwrap()
        .position()
        - before;
    assert!(
        moved.dot(&facing) > 0.3 || !alive(&h),
        "W moved {moved:?} while facing {facing:?}"
    );

    // A click into the view fires: a shot is predicted and the magazine loses a round, in the HUD too.
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "no shot left the magazine");
        wait_for(&mut h, "the local player alive", alive);
        let ammo = |h: &Harness<'_, ViewerApp>| {
            shooter(h)
                .session()
                .client()
                .local_state()
                .unwrap()
                .weapon
                .ammo
        };
        let before = ammo(&h);
        let shots = shooter(&h).shots_fired();
        click_view(&mut h);
        let fired = Instant::now() + Duration::from_secs(1);
        while shooter(&h).shots_fired() == shots && Instant::now() < fired {
            h.run_steps(1);
            std::thread::sleep(FRAME);
        }
        let after = ammo(&h);
        if after < before {
            h.run_steps(1);
            assert!(shooter(&h).shots_fired() > shots);
            assert!(
                h.query_by_label_contains(&format!("Ammo {after}/20"))
                    .is_some(),
                "the HUD shows {after} rounds"
            );
            break;
        }
    }

    click_button(&mut h, "Leave");
    let start = h
        .state()
        .start_screen()
        .expect("Leave returns to the start screen");
    assert_eq!(start.notice, None);
}

/// A dedicated server run by the test on its own thread, as `physync-host --mode dedicated` would.
struct TestServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    fn start(passphrase: &str) -> Self {
        Self::start_on(passphrase, ArenaMap::standard())
    }

    /// The standard arena without its cover and cubes: every spawn point sees every other.
    fn start_open(passphrase: &str) -> Self {
        let mut map = ArenaMap::standard();
        map.boxes
            .retain(|b| b.center.y < 0.0 || b.half_extents.y * 2.0 >= 3.0);
        map.cubes.clear();
        Self::start_on(passphrase, map)
    }

    fn start_on(passphrase: &str, map: ArenaMap) -> Self {
        let config = MatchConfig {
            token_key: key_from_passphrase(passphrase),
            min_players: 1,
            map,
            ..MatchConfig::default()
        };
        let m = UdpMatch::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), config).unwrap();
        let addr = m.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            m.run(&flag, Some(Duration::from_secs(60))).unwrap();
        });
        Self {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

#[test]
fn a_server_is_reached_by_address_and_a_wrong_passphrase_is_refused() {
    let server = TestServer::start("physync-dev");
    let mut h = harness();
    set_field(&mut h, "Server address", &server.addr.to_string());
    set_bots(&mut h, 0);
    click_button(&mut h, "Connect");
    wait_for(&mut h, "the remote match", |h| {
        shooter(h).session().status() == ShooterStatus::Playing
            && h.query_by_label_contains("player (you)").is_some()
    });
    assert!(!shooter(&h).session().is_local_match());
    click_button(&mut h, "Leave");
    assert!(h.state().start_screen().is_some());

    let other = TestServer::start("another passphrase");
    set_field(&mut h, "Server address", &other.addr.to_string());
    click_button(&mut h, "Connect");
    // A token from another passphrase gets no answer at all (the server does not talk to strangers).
    wait_for(&mut h, "the refusal", |h| {
        h.state().start_screen().is_some()
    });
    h.run_steps(1);
    let notice = h.state().start_screen().unwrap().notice.clone();
    assert!(
        h.query_by_label_contains("is a dedicated server running there, with this passphrase?")
            .is_some(),
        "{notice:?}"
    );
}

#[test]
fn a_bad_address_and_a_port_in_use_show_errors() {
    let mut h = harness();
    set_field(&mut h, "Server address", "not an address");
    click_button(&mut h, "Connect");
    assert!(
        h.query_by_label_contains("'not an address' is not an address")
            .is_some()
    );
    assert!(h.state().start_screen().is_some());

    let taken = UdpSocket::bind(("0.0.0.0", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    set_field(&mut h, "Server port", &port.to_string());
    click_button(&mut h, "Start dedicated server");
    assert!(
        h.query_by_label_contains(&format!("UDP port {port} cannot be used"))
            .is_some()
    );
    assert!(h.state().start_screen().is_some());
}

#[test]
fn a_server_that_does_not_answer_is_reported() {
    let mut h = harness();
    set_field(
        &mut h,
        "Server address",
        &format!("127.0.0.1:{}", free_port()),
    );
    set_bots(&mut h, 0);
    click_button(&mut h, "Connect");
    assert!(h.state().shooter_screen().is_some());
    wait_for(&mut h, "the connection to give up", |h| {
        h.state().start_screen().is_some()
    });
    let notice = h.state().start_screen().unwrap().notice.clone().unwrap();
    assert!(notice.contains("no answer from 127.0.0.1:"), "{notice}");
}

/// A player that joins `server` and stands still (no bot), pumped on its own thread.
struct StandingPlayer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StandingPlayer {
    fn join(server: SocketAddr) -> Self {
        let claims = PlayerClaims::new(1, "target");
        let token =
            mint_from_passphrase("physync-dev", &claims, &[server], Duration::from_secs(600))
                .unwrap();
        let mut client = UdpClient::bind(
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            ClientConfig::new(server, token),
            None,
        )
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                client.pump().unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for StandingPlayer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

#[test]
fn mouse_look_aims_at_a_standing_player_and_a_hit_shows_the_marker() {
    let server = TestServer::start_open("physync-dev");
    let _target = StandingPlayer::join(server.addr);
    let mut h = harness();
    set_field(&mut h, "Server address", &server.addr.to_string());
    set_bots(&mut h, 0);
    click_button(&mut h, "Connect");
    wait_for(&mut h, "the target in view of the client", |h| {
        shooter(h).session().status() == ShooterStatus::Playing
            && alive(h)
            && shooter(h)
                .session()
                .client()
                .remote_poses(shooter(h).session().now())
                .iter()
                .any(|(_, p)| p.alive)
    });
    // The first click into the view captures the mouse; from then on pointer motion turns the view.
    click_view(&mut h);
    let centre = shooter(&h).view_rect().unwrap().center();
    let deadline = Instant::now() + WAIT;
    while shooter(&h).hits_confirmed() == 0 {
        if Instant::now() >= deadline {
            let s = shooter(&h);
            let c = s.session().client();
            panic!(
                "no hit was confirmed: shots {} me {:?} others {:?} phase {:?} stats {:?}",
                s.shots_fired(),
                c.local_state(),
                c.remote_poses(s.session().now()),
                c.match_phase(),
                c.stats()
            );
        }
        let (aim_yaw, aim_pitch) = {
            let s = shooter(&h);
            let client = s.session().client();
            let rules = &client.match_data().unwrap().rules;
            let me = client.local_state().unwrap();
            let (_, target) = client.remote_poses(s.session().now())[0];
            let chest =
                target.position + nalgebra::Vector3::new(0.0, rules.body.body_hit_top * 0.6, 0.0);
            let (yaw, pitch) = units::aim_at(&me.eye(rules), &chest);
            (units::yaw_radians(yaw), units::pitch_radians(pitch))
        };
        let (yaw, pitch) = shooter(&h).view_angles();
        let turn = (aim_yaw - yaw + std::f32::consts::PI).rem_euclid(std::f32::consts::TAU)
            - std::f32::consts::PI;
        h.event(Event::PointerMoved(centre));
        h.event(Event::MouseMoved(Vec2::new(
            -turn / TURN_PER_POINT,
            -(aim_pitch - pitch) / TURN_PER_POINT,
        )));
        h.run_steps(1);
        let (yaw, pitch) = shooter(&h).view_angles();
        let yaw_error = (aim_yaw - yaw + std::f32::consts::PI).rem_euclid(std::f32::consts::TAU)
            - std::f32::consts::PI;
        assert!(yaw_error.abs() < 1e-3 && (aim_pitch - pitch).abs() < 1e-3);
        click_view(&mut h);
        for _ in 0..10 {
            if shooter(&h).hits_confirmed() > 0 {
                break;
            }
            h.run_steps(1);
            std::thread::sleep(FRAME);
        }
    }
    assert!(shooter(&h).hit_marker_showing(), "the hit marker shows");
    h.run_steps(1);
    let hits = shooter(&h).hits_confirmed();
    assert!(
        h.query_by_label_contains(&format!("hits confirmed {hits}"))
            .is_some()
    );
}
