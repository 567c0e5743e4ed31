//! Real sessions over 127.0.0.1: two viewers (each a `ViewerApp` in an egui_kittest harness, with the real
//! host and guest cores behind them) host and join, the guest grabs and moves a cube with the mouse, and the
//! host sees the authority change; bots join a hosted session; a full session and a silent host end a join
//! with a message.
//!
//! Every wait is a bounded loop of frames/pumps with a millisecond yield between rounds while the sockets
//! deliver, and a wall-clock bound that fails the test instead of hanging.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use egui::accesskit::Role;
use egui::{Event, Modifiers, PointerButton, Pos2, Vec2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use physync_engine::world::scene::SceneKind;
use physync_viewer::app::ViewerApp;
use physync_viewer::launcher::{CoreLauncher, HostConfig, JoinConfig, SessionLauncher};
use physync_viewer::network_panel::authority_counts;
use physync_viewer::picking::pick_nearest;
use physync_viewer::session::{
    BodyId, BodyView, BotKind, ConditionerSettings, LinkStats, SessionError, SessionHandle,
    SessionStatus,
};

/// Rounds a wait may take before the test fails.
const MAX_ROUNDS: usize = 20_000;
/// Wall-clock bound on a wait.
const MAX_WAIT: Duration = Duration::from_secs(20);
/// The pause between rounds, so the other socket's datagrams arrive.
const YIELD: Duration = Duration::from_millis(1);

type H = Harness<'static, ViewerApp>;

fn harness(seed: u64) -> H {
    let app = ViewerApp::new(Box::new(CoreLauncher::new(seed)));
    Harness::builder()
        .with_size(Vec2::new(1200.0, 800.0))
        .build_ui_state(|ui, app: &mut ViewerApp| app.show(ui), app)
}

fn free_port() -> u16 {
    UdpSocket::bind(("0.0.0.0", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Steps every harness a frame per round until `done` holds; panics with `what` when the bounds are hit.
fn run_until(hs: &mut [&mut H], what: &str, mut done: impl FnMut(&[&mut H]) -> bool) {
    let started = Instant::now();
    for _ in 0..MAX_ROUNDS {
        for h in hs.iter_mut() {
            h.step();
        }
        if done(hs) {
            return;
        }
        assert!(started.elapsed() < MAX_WAIT, "timed out waiting: {what}");
        std::thread::sleep(YIELD);
    }
    panic!("gave up after {MAX_ROUNDS} rounds waiting: {what}");
}

fn handle(h: &H) -> &dyn SessionHandle {
    h.state()
        .session_screen()
        .expect("a session screen")
        .handle()
}

fn body(h: &H, id: BodyId) -> BodyView {
    handle(h)
        .bodies()
        .iter()
        .find(|b| b.id == id)
        .expect("the body")
        .clone()
}

/// Hosts from the start screen on a free port; returns the port.
fn host_from_start_screen(h: &mut H) -> u16 {
    let port = free_port();
    h.get_by_label("Listen port")
        .set_text_value_accesskit(&port.to_string());
    h.run();
    h.get_by_role_and_label(Role::Button, "Host").click();
    h.run_steps(2);
    assert!(
        h.state().session_screen().is_some(),
        "the host screen opened"
    );
    port
}

/// Joins `port` on 127.0.0.1 from the start screen and waits until both sides count the guest.
fn join_from_start_screen(host: &mut H, guest: &mut H, port: u16) {
    guest
        .get_by_label("Host address")
        .set_text_value_accesskit(&format!("127.0.0.1:{port}"));
    guest.run();
    guest.get_by_role_and_label(Role::Button, "Join").click();
    guest.run_steps(2);
    run_until(&mut [host, guest], "the guest joins", |hs| {
        handle(hs[0]).players().len() == 2
            && handle(hs[1]).status() == SessionStatus::Running
            && !handle(hs[1]).bodies().is_empty()
    });
}

/// A cube whose centre, seen through the guest's camera, picks that same cube; with its screen position.
fn cube_under_its_own_centre(h: &H) -> (BodyId, Pos2) {
    let screen = h.state().session_screen().unwrap();
    let rect = screen.view_rect().expect("the view was drawn");
    let bodies = screen.handle().bodies();
    bodies
        .iter()
        .filter(|b| b.owner.is_none())
        .find_map(|b| {
            let p = screen.camera().project(&b.position, rect)?.screen;
            let inner = rect.shrink(150.0).contains(p);
            let picked = pick_nearest(&screen.camera().ray_through(p, rect), bodies);
            (inner && picked.map(|(id, _)| id) == Some(b.id)).then_some((b.id, p))
        })
        .expect("some cube is visible")
}

fn press(pos: Pos2, pressed: bool) -> Event {
    Event::PointerButton {
        pos,
        button: PointerButton::Primary,
        pressed,
        modifiers: Modifiers::NONE,
    }
}

#[test]
fn a_guest_grabs_and_moves_a_cube_and_the_host_sees_the_authority_change() {
    let mut host = harness(1);
    let mut guest = harness(2);
    let port = host_from_start_screen(&mut host);
    join_from_start_screen(&mut host, &mut guest, port);
    assert!(
        host.query_by_label_contains("1 · guest").is_some(),
        "the host lists the guest"
    );
    assert!(guest.query_by_label_contains("1 · guest (you)").is_some());
    assert!(
        host.query_by_label_contains("Link to player 1").is_some(),
        "the host plots its link to the guest"
    );

    // Let the panels take their final sizes (the link plots arrive), so the view does not move under the mouse.
    for _ in 0..10 {
        guest.step();
        host.step();
    }
    let rect = guest.state().session_screen().unwrap().view_rect();
    guest.step();
    assert_eq!(
        rect,
        guest.state().session_screen().unwrap().view_rect(),
        "the layout settled"
    );
    let (id, start) = cube_under_its_own_centre(&guest);
    let before = body(&guest, id).position;
    assert_eq!(
        body(&host, id).authority,
        None,
        "default authority at first"
    );
    guest.event(Event::PointerMoved(start));
    guest.step();
    guest.event(press(start, true));
    guest.step();
    for step in 1..=6 {
        guest.event(Event::PointerMoved(
            start + Vec2::new(20.0 * step as f32, 0.0),
        ));
        guest.step();
        host.step();
    }
    let held = body(&guest, id);
    assert_eq!(
        held.owner,
        Some(1),
        "the guest holds it at once ({:?})",
        guest.state().session_screen().unwrap().message()
    );
    assert_eq!(held.authority, Some(1), "and has authority over it at once");
    assert!(
        (held.position - before).norm() > 0.3,
        "it moved on the guest's screen on the frame of the drag"
    );

    run_until(
        &mut [&mut host, &mut guest],
        "the host sees the guest holding the cube",
        |hs| {
            let b = body(hs[0], id);
            b.authority == Some(1) && b.owner == Some(1)
        },
    );
    assert!(
        authority_counts(handle(&host).bodies())
            .iter()
            .any(|(authority, n)| *authority == Some(1) && *n >= 1),
        "the host counts cubes under the guest's authority"
    );

    let end = start + Vec2::new(120.0, 0.0);
    guest.event(press(end, false));
    guest.step();
    assert_eq!(body(&guest, id).owner, None, "released");
    run_until(
        &mut [&mut host, &mut guest],
        "the host sees the cube let go where the guest moved it",
        |hs| {
            let b = body(hs[0], id);
            b.owner.is_none() && (b.position - before).norm() > 0.3
        },
    );
}

/// One figure of this viewer's link to player 1, 0 until the link reports any.
fn link_to_player_1(h: &H, figure: fn(&LinkStats) -> f64) -> f64 {
    handle(h)
        .link_stats()
        .iter()
        .find(|l| l.peer == 1)
        .map_or(0.0, figure)
}

#[test]
fn a_bot_added_from_the_ui_and_the_guest_conditioner_show_on_the_host() {
    let mut host = harness(9);
    let mut guest = harness(10);
    let port = host_from_start_screen(&mut host);
    join_from_start_screen(&mut host, &mut guest, port);
    host.get_by_role_and_label(Role::Button, "thrower").click();
    run_until(&mut [&mut host, &mut guest], "the bot joins", |hs| {
        handle(hs[0]).players().len() == 3 && handle(hs[1]).players().len() == 3
    });
    host.step();
    assert!(
        host.query_by_label_contains("2 · bot (bot: thrower)")
            .is_some()
    );
    assert!(
        guest.query_by_label_contains("2 · guest").is_some(),
        "the guest sees a third player (that it is a bot is known only where it runs)"
    );
    assert_eq!(handle(&guest).avatars().len(), 3, "and its avatar");

    let rtt_to_guest = |h: &H| link_to_player_1(h, |l| l.rtt_ms);
    run_until(
        &mut [&mut host, &mut guest],
        "a round trip is measured",
        |hs| rtt_to_guest(hs[0]) > 0.0,
    );
    assert!(rtt_to_guest(&host) < 100.0, "{}", rtt_to_guest(&host));
    guest
        .get_by_role_and_label(Role::Slider, "latency ms")
        .set_value_accesskit(200.0);
    guest.step();
    run_until(
        &mut [&mut host, &mut guest],
        "the guest's added latency shows in the host's round trip",
        |hs| rtt_to_guest(hs[0]) > 150.0,
    );

    // The host plays the guest's frames only as late as their measured jitter needs: well under the 100 ms a
    // fixed buffer waits on a steady local link, and near it once the guest's conditioner adds 80 ms of jitter.
    let playout_of_guest = |h: &H| link_to_player_1(h, |l| l.playout_ms);
    run_until(
        &mut [&mut host, &mut guest],
        "the guest's frames play less than 100 ms late on a steady link",
        |hs| (1.0..90.0).contains(&playout_of_guest(hs[0])),
    );
    guest
        .get_by_role_and_label(Role::Slider, "jitter ms")
        .set_value_accesskit(80.0);
    guest.step();
    run_until(
        &mut [&mut host, &mut guest],
        "the guest's added jitter lengthens the host's play-out delay",
        |hs| playout_of_guest(hs[0]) > 75.0,
    );
}

#[test]
fn the_host_leaving_ends_the_guest_session_with_a_message() {
    let mut host = harness(3);
    let mut guest = harness(4);
    let port = host_from_start_screen(&mut host);
    join_from_start_screen(&mut host, &mut guest, port);
    host.get_by_role_and_label(Role::Button, "Leave").click();
    host.run_steps(2);
    assert!(host.state().start_screen().is_some());
    run_until(
        &mut [&mut host, &mut guest],
        "the guest learns the host left",
        |hs| hs[1].state().start_screen().is_some(),
    );
    guest.step();
    assert!(
        guest
            .query_by_label_contains("The session ended: the host left the session")
            .is_some()
    );
}

#[test]
fn a_host_that_does_not_answer_ends_the_join_with_a_message() {
    let app = ViewerApp::new(Box::new(
        CoreLauncher::new(5).with_join_timeout(Duration::from_millis(300)),
    ));
    let mut guest = Harness::builder()
        .with_size(Vec2::new(1200.0, 800.0))
        .build_ui_state(|ui, app: &mut ViewerApp| app.show(ui), app);
    let port = free_port();
    guest
        .get_by_label("Host address")
        .set_text_value_accesskit(&format!("127.0.0.1:{port}"));
    guest.run();
    guest.get_by_role_and_label(Role::Button, "Join").click();
    guest.run_steps(2);
    assert!(
        guest.query_by_label_contains("Connecting").is_some(),
        "the guest waits for an answer"
    );
    run_until(&mut [&mut guest], "the join times out", |hs| {
        hs[0].state().start_screen().is_some()
    });
    guest.step();
    assert!(
        guest
            .query_by_label_contains("did not answer within 0.3 s")
            .is_some()
    );
}

/// A host started through the launcher on `port` (0 picks one).
fn host_on(
    launcher: &mut CoreLauncher,
    port: u16,
    scene: SceneKind,
    max_players: u8,
) -> Box<dyn SessionHandle> {
    launcher
        .host(&HostConfig {
            port,
            scene: scene.spec(),
            max_players,
            join_code: None,
        })
        .unwrap()
}

/// A guest started through the launcher, joining the host on `port` of 127.0.0.1 without a join code.
fn join_local(launcher: &mut CoreLauncher, port: u16) -> Box<dyn SessionHandle> {
    launcher
        .join(&JoinConfig {
            address: ([127, 0, 0, 1], port).into(),
            join_code: None,
        })
        .unwrap()
}

/// Pumps handles until `done` holds.
fn pump_until(
    handles: &mut [&mut dyn SessionHandle],
    what: &str,
    mut done: impl FnMut(&[&mut dyn SessionHandle]) -> bool,
) {
    let started = Instant::now();
    for _ in 0..MAX_ROUNDS {
        for h in handles.iter_mut() {
            h.update();
        }
        if done(handles) {
            return;
        }
        assert!(started.elapsed() < MAX_WAIT, "timed out waiting: {what}");
        std::thread::sleep(YIELD);
    }
    panic!("gave up after {MAX_ROUNDS} rounds waiting: {what}");
}

#[test]
fn bots_fill_a_session_and_play_under_their_own_authority() {
    let mut launcher = CoreLauncher::new(6);
    let mut host = host_on(&mut launcher, 0, SceneKind::Table, 4);
    for kind in BotKind::ALL {
        host.add_bot(kind).unwrap();
    }
    assert_eq!(
        host.add_bot(BotKind::Builder),
        Err(SessionError::Full),
        "three bots and the host fill four seats"
    );
    pump_until(&mut [host.as_mut()], "the bots join", |hs| {
        hs[0].players().len() == 4
    });
    let bots: Vec<_> = host.players().iter().filter_map(|p| p.bot).collect();
    assert_eq!(bots.len(), 3, "{:?}", host.players());
    assert_eq!(host.avatars().len(), 4, "every player has an avatar");
    pump_until(
        &mut [host.as_mut()],
        "two bots have authority over cubes",
        |hs| {
            let mut authorities: Vec<_> =
                hs[0].bodies().iter().filter_map(|b| b.authority).collect();
            authorities.sort_unstable();
            authorities.dedup();
            authorities.len() >= 2
        },
    );
    assert_eq!(host.link_stats().len(), 3, "one link per bot");
}

#[test]
fn a_full_session_refuses_a_guest_with_a_message() {
    let mut launcher = CoreLauncher::new(8);
    let port = free_port();
    let mut host = host_on(&mut launcher, port, SceneKind::Tower, 2);
    host.add_bot(BotKind::Grabber).unwrap();
    pump_until(&mut [host.as_mut()], "the bot joins", |hs| {
        hs[0].players().len() == 2
    });
    let mut guest = join_local(&mut launcher, port);
    pump_until(
        &mut [host.as_mut(), guest.as_mut()],
        "the guest is refused",
        |hs| matches!(hs[1].status(), SessionStatus::Ended(_)),
    );
    assert_eq!(
        guest.status(),
        SessionStatus::Ended(format!("the session at 127.0.0.1:{port} is full"))
    );
}

#[test]
fn a_guest_leaving_through_a_lossy_link_is_let_go_by_the_host_before_its_timeout() {
    let mut launcher = CoreLauncher::new(11);
    let port = free_port();
    let mut host = host_on(&mut launcher, port, SceneKind::Table, 4);
    let mut guest = join_local(&mut launcher, port);
    pump_until(
        &mut [host.as_mut(), guest.as_mut()],
        "the guest joins",
        |hs| hs[0].players().len() == 2 && hs[1].status() == SessionStatus::Running,
    );
    guest
        .apply_conditioner(ConditionerSettings {
            latency_ms: 100,
            loss_percent: 40.0,
            ..ConditionerSettings::default()
        })
        .unwrap();
    let lossy = Instant::now();
    pump_until(
        &mut [host.as_mut(), guest.as_mut()],
        "a second of play over the lossy link",
        |_| lossy.elapsed() > Duration::from_secs(1),
    );
    guest.leave();
    let left = Instant::now();
    pump_until(&mut [host.as_mut()], "the host lets the guest go", |hs| {
        hs[0].players().len() == 1
    });
    assert!(
        left.elapsed() < Duration::from_secs(3),
        "the host heard the leave only after {:?}: it timed the guest out (5 s) instead",
        left.elapsed()
    );
}

#[test]
fn a_host_that_requires_a_join_code_lets_in_a_guest_that_gives_it() {
    let mut launcher = CoreLauncher::new(9);
    let port = free_port();
    let mut host = launcher
        .host(&HostConfig {
            port,
            scene: SceneKind::Table.spec(),
            max_players: 4,
            join_code: Some("K7QZ-M4PX".into()),
        })
        .unwrap();
    let mut guest = launcher
        .join(&JoinConfig {
            address: ([127, 0, 0, 1], port).into(),
            join_code: Some("K7QZ-M4PX".into()),
        })
        .unwrap();
    pump_until(
        &mut [host.as_mut(), guest.as_mut()],
        "the guest with the code joins",
        |hs| hs[0].players().len() == 2 && hs[1].status() == SessionStatus::Running,
    );
}
