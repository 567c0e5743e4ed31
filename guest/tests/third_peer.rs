//! What a third player sees of a throw: guest A lifts a cube by a metre and throws it straight up at 6 m/s; guest
//! B and the host, neither of them the thrower, must show it leave the hand and fly, frame by frame, render and
//! physics pose: never drawn below the floor, never stepping backward, never snapping, never back in the hand.

use std::time::Duration;

use nalgebra::{Isometry3, Vector3};
use physync_engine::session::sim::host_addr;
use physync_engine::session::{FeelFigures, FeelMeter, PlayerControls, SessionSim};
use physync_engine::transport::LinkConfig;
use physync_engine::world::World;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::SceneKind;
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};

const CUBE: u16 = 0;
const GRAB_AT: f64 = 1.0;
const THROW_AT: f64 = 1.5;
const END: f64 = 4.5;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Where the thrower's hand is at `t`: on the cube until the grab, then rising 1 m by the throw.
fn hand(start: &Isometry3<f32>, t: f64) -> Isometry3<f32> {
    let lift = ((t - GRAB_AT) / (THROW_AT - GRAB_AT)).clamp(0.0, 1.0) as f32;
    Isometry3::translation(0.0, 0.1 + lift, 0.0) * start
}

/// What the observers showed: the meters of guest B and of the host, and whether either put the cube back in a
/// hand after showing it free.
struct Observed {
    guest: FeelFigures,
    host: FeelFigures,
    regrabbed: bool,
    flew: bool,
}

impl Observed {
    fn of(guest: &Watched, host: &Watched) -> Self {
        Observed {
            guest: guest.meter.figures(),
            host: host.meter.figures(),
            regrabbed: guest.regrabbed || host.regrabbed,
            flew: guest.released && host.released,
        }
    }
}

/// One observer's meter, and whether it showed the cube free and then back in a hand.
#[derive(Default)]
struct Watched {
    meter: FeelMeter,
    released: bool,
    regrabbed: bool,
}

impl Watched {
    fn watch(&mut self, world: &World) {
        self.meter.observe(world);
        match world.holder(CUBE) {
            None if world.render_pose(CUBE).translation.y > 1.0 => self.released = true,
            Some(_) if self.released => self.regrabbed = true,
            _ => {}
        }
    }
}

/// Guest A's part: grabs the cube at [`GRAB_AT`], lifts it by [`hand`] and throws it with `velocity` at
/// [`THROW_AT`]. Returns whether it threw on this step.
fn carry_and_throw(
    s: &mut impl PlayerControls,
    start: &Isometry3<f32>,
    t: f64,
    velocity: Vector3<f32>,
) -> bool {
    if t < THROW_AT || s.world().grip(s.player(), Hand::Right).is_some() {
        s.set_hand_pose(Hand::Right, hand(start, t));
    }
    if t >= GRAB_AT && s.world().holder(CUBE).is_none() && t < THROW_AT {
        s.grab(Hand::Right, CUBE).unwrap();
    }
    let throws = t >= THROW_AT && s.world().grip(s.player(), Hand::Right).is_some();
    if throws {
        s.throw(Hand::Right, velocity, Vector3::zeros());
    }
    throws
}

/// A host and guests A and B on the `table` scene, run idle until just before the grab.
fn three_players(link: LinkConfig, seed: u64) -> SessionSim<PeerHost, PeerGuest> {
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).unwrap();
    let mut sim = SessionSim::new(host, link, seed).unwrap();
    for nonce in [1, 2] {
        sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), nonce)))
            .unwrap();
    }
    sim.run_idle_until(secs(GRAB_AT - 0.2)).unwrap();
    sim
}

fn throw_seen_by_others(link: LinkConfig, seed: u64) -> Observed {
    let mut sim = three_players(link, seed);
    let start = sim.guest(0).unwrap().world().unwrap().physics_pose(CUBE);
    let (mut guest_b, mut host) = (Watched::default(), Watched::default());
    sim.run_until(
        secs(END),
        |_, h| host.watch(h.world()),
        |i, now, guest| {
            let t = now.as_secs_f64();
            if i == 1 {
                if let Some(w) = guest.world() {
                    guest_b.watch(w);
                }
                return;
            }
            let Some(s) = guest.session_mut() else { return };
            carry_and_throw(s, &start, t, Vector3::new(0.0, 6.0, 0.0));
        },
    )
    .unwrap();
    Observed::of(&guest_b, &host)
}

fn assert_smooth(what: &str, o: &Observed) {
    assert!(o.flew, "{what}: the throw never showed as flying");
    assert!(!o.regrabbed, "{what}: the cube went back into the hand");
    for (peer, f) in [("guest B", o.guest), ("host", o.host)] {
        assert!(f.frames > 100, "{what}, {peer}: {f:?}");
        assert!(
            f.max_render_below_floor_m <= 0.0,
            "{what}, {peer}: drawn below the floor: {f:?}"
        );
        assert!(
            f.max_backstep_m <= 0.01,
            "{what}, {peer}: stepped back: {f:?}"
        );
        assert_eq!(f.snaps, 0, "{what}, {peer}: snapped: {f:?}");
    }
}

#[test]
fn a_throw_flies_on_every_other_peer_on_a_clean_link() {
    for rtt in [100, 250] {
        let link = LinkConfig::from_rtt(Duration::from_millis(rtt), Duration::ZERO, 0.0, 0.0);
        assert_smooth(&format!("{rtt} ms"), &throw_seen_by_others(link, 3));
    }
}

#[test]
fn a_throw_flies_on_every_other_peer_under_jitter() {
    let link = LinkConfig::from_rtt(
        Duration::from_millis(250),
        Duration::from_millis(50),
        0.0,
        0.0,
    );
    for seed in [4, 5] {
        assert_smooth(&format!("seed {seed}"), &throw_seen_by_others(link, seed));
    }
}

/// The cube in the throw's path that guest B snatches away, down through the floor (see
/// [`a_throw_stopped_on_the_throwers_side_never_steps_back_elsewhere`]): the next one along +x from cube 0.
const OBSTACLE: u16 = 8;
const SNATCH_AT: f64 = THROW_AT + 0.05;
/// The throw's velocity: from a metre up, cube 0 lands on the obstacle's top 0.27 s later at 3.6 m/s downward.
const LOB: Vector3<f32> = Vector3::new(3.0, -0.94, 0.0);

/// Guest A lobs cube 0 onto the next cube along the row, which guest B holds where it stood; B snatches it
/// down and away just after the throw. A's world sees the snatch a round trip later, so A's cube lands on the
/// held obstacle while B's world has nothing there any more: what happens whenever the thrower's world has a
/// third player's object where the others do not. Returns the meters of guest B and of the host, the largest
/// speed A's cube lost in one step of its flight, and the largest step back A's own cube made (m).
fn throw_stopped_on_the_throwers_side(link: LinkConfig, seed: u64) -> (Observed, f32, f32) {
    let mut sim = three_players(link, seed);
    let world = sim.guest(0).unwrap().world().unwrap();
    let (start, obstacle) = (world.physics_pose(CUBE), world.physics_pose(OBSTACLE));
    let (mut guest_b, mut host) = (Watched::default(), Watched::default());
    let (mut thrown, mut last_speed, mut stopped_by) = (false, 0.0_f32, 0.0_f32);
    let mut own = OwnSteps::default();
    sim.run_until(
        secs(END),
        |_, h| host.watch(h.world()),
        |i, now, guest| {
            let t = now.as_secs_f64();
            if i == 1 {
                if let Some(w) = guest.world() {
                    guest_b.watch(w);
                }
                let Some(s) = guest.session_mut() else { return };
                if t >= GRAB_AT && s.world().holder(OBSTACLE).is_none() {
                    s.set_hand_pose(Hand::Left, obstacle);
                    s.grab(Hand::Left, OBSTACLE).unwrap();
                }
                if t >= SNATCH_AT && s.world().grip(s.player(), Hand::Left).is_some() {
                    s.set_hand_pose(
                        Hand::Left,
                        Isometry3::translation(0.0, -2.0, 0.0) * obstacle,
                    );
                }
                return;
            }
            let Some(s) = guest.session_mut() else { return };
            let speed = s.world().linear_velocity(CUBE).norm();
            if thrown && s.world().holder(CUBE).is_none() {
                stopped_by = stopped_by.max(last_speed - speed);
                own.observe(s.world().physics_pose(CUBE).translation.vector);
            }
            last_speed = speed;
            thrown |= carry_and_throw(s, &start, t, LOB);
        },
    )
    .unwrap();
    (
        Observed::of(&guest_b, &host),
        stopped_by,
        own.max_backstep_m,
    )
}

/// The thrower's own cube, step by step: how far it ever stepped against its own direction of motion (a
/// bounce on the thrower's world is a step back that every faithful observer shows too).
#[derive(Default)]
struct OwnSteps {
    last: Option<Vector3<f32>>,
    last_step: Option<Vector3<f32>>,
    max_backstep_m: f32,
}

impl OwnSteps {
    fn observe(&mut self, position: Vector3<f32>) {
        if let Some(last) = self.last {
            let step = position - last;
            if let Some(previous) = self.last_step
                && previous.norm() >= 1e-3
            {
                self.max_backstep_m = self.max_backstep_m.max(-step.dot(&previous.normalize()));
            }
            self.last_step = Some(step);
        }
        self.last = Some(position);
    }
}

#[test]
fn a_throw_stopped_on_the_throwers_side_never_steps_back_elsewhere() {
    let clean = LinkConfig::from_rtt(Duration::from_millis(250), Duration::ZERO, 0.0, 0.0);
    let jitter = LinkConfig::from_rtt(
        Duration::from_millis(250),
        Duration::from_millis(50),
        0.0,
        0.0,
    );
    let lossy = LinkConfig::from_rtt(Duration::from_millis(250), Duration::ZERO, 0.1, 0.0);
    for (what, link, seed) in [
        ("clean", clean, 3),
        ("jitter", jitter, 4),
        ("lossy", lossy, 5),
        ("lossy", lossy, 6),
        ("lossy", lossy, 7),
    ] {
        let (o, stopped_by, own) = throw_stopped_on_the_throwers_side(link, seed);
        assert!(
            stopped_by > 2.0,
            "{what}: the thrower's cube never landed on the obstacle (lost {stopped_by} m/s at most in a step)"
        );
        assert!(!o.regrabbed, "{what}: the cube went back into the hand");
        for (peer, f) in [("guest B", o.guest), ("host", o.host)] {
            assert!(f.frames > 100, "{what}, {peer}: {f:?}");
            assert!(
                f.max_backstep_m <= own + 0.002,
                "{what}, {peer}: stepped back {} mm, the thrower's own cube {} mm: {f:?}",
                f.max_backstep_m * 1000.0,
                own * 1000.0
            );
            assert_eq!(f.snaps, 0, "{what}, {peer}: snapped: {f:?}");
        }
    }
}
