//! A guest presses a held cube down onto a resting one, as a player stacking cubes does, and keeps its hand going
//! after the cubes meet. A held object is kinematic and the floor is fixed, so nothing gave way: the cube below was
//! squeezed into the floor on every peer and shot out (peer_feel seed 5: 13 cm into the floor, out at 17 m/s). The
//! holder's grip gives way and the others play the grip it sends, so on every peer, frame by frame, the cube below
//! stays on the floor, and they all end up showing the held cube where its holder does.

use std::time::Duration;

use nalgebra::{Isometry3, Vector3};
use physync_engine::session::sim::host_addr;
use physync_engine::session::{PlayerControls, SessionSim};
use physync_engine::transport::LinkConfig;
use physync_engine::world::World;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::SceneKind;
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};

const BELOW: u16 = 0;
const HELD: u16 = 1;
const GRAB_AT: f64 = 1.0;
const END: f64 = 6.0;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Where guest A's hand is at `t`: on the held cube's start until the grab, then up 0.75 m, over the cube below
/// (shifted off its centre), and down at 0.5 m/s to the height of its centre, where it stays.
fn hand_at(t: f64, start: &Isometry3<f32>, below: &Isometry3<f32>) -> Isometry3<f32> {
    let up = Vector3::y() * 0.75;
    let over = below.translation.vector + Vector3::new(0.15, 0.0, 0.1);
    let path = [
        (GRAB_AT, start.translation.vector),
        (GRAB_AT + 0.4, start.translation.vector + up),
        (GRAB_AT + 1.4, over + up),
        (GRAB_AT + 2.9, over),
    ];
    let mut at = path[0].1;
    for pair in path.windows(2) {
        let ((t0, a), (t1, b)) = (pair[0], pair[1]);
        if t > t0 {
            at = a.lerp(&b, ((t - t0) / (t1 - t0)).min(1.0) as f32);
        }
    }
    Isometry3::from_parts(at.into(), start.rotation)
}

/// How far the cube below sits under the floor's top (m) and how fast it moves (m/s) in `world`.
fn below_cube(world: &World) -> (f32, f32) {
    let half = world.half_extents(BELOW).y;
    let sink = half - world.physics_pose(BELOW).translation.vector.y;
    (sink, world.linear_velocity(BELOW).norm())
}

#[test]
fn a_cube_pressed_onto_another_never_crushes_it_on_any_peer() {
    let link = LinkConfig::from_rtt(
        Duration::from_millis(250),
        Duration::from_millis(50),
        0.05,
        0.0,
    );
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).unwrap();
    let mut sim: SessionSim<PeerHost, PeerGuest> = SessionSim::new(host, link, 11).unwrap();
    for nonce in [1, 2] {
        sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), nonce)))
            .unwrap();
    }
    sim.run_idle_until(secs(GRAB_AT - 0.2)).unwrap();
    let world = sim.guest(0).unwrap().world().unwrap();
    let (start, below) = (world.physics_pose(HELD), world.physics_pose(BELOW));
    let (mut deepest, mut fastest) = (0.0f32, 0.0f32);
    let mut t = GRAB_AT - 0.2;
    while t < END {
        t += 1.0 / 60.0;
        sim.run_until(
            secs(t),
            |_, _| {},
            |i, now, guest| {
                let Some(s) = guest.session_mut() else { return };
                if i != 0 {
                    return;
                }
                let now = now.as_secs_f64();
                s.set_hand_pose(Hand::Right, hand_at(now, &start, &below));
                if now >= GRAB_AT && s.world().grip(s.player(), Hand::Right).is_none() {
                    s.grab(Hand::Right, HELD).unwrap();
                }
            },
        )
        .unwrap();
        let guests = (0..2).map(|i| sim.guest(i).unwrap().world().unwrap());
        for world in std::iter::once(sim.host().world()).chain(guests) {
            let (sink, speed) = below_cube(world);
            deepest = deepest.max(sink);
            fastest = fastest.max(speed);
        }
    }
    assert!(
        deepest < 0.02 && fastest < 2.0,
        "the cube below sank {deepest} m into the floor and reached {fastest} m/s on some peer"
    );
    let a = sim.guest(0).unwrap().world().unwrap();
    assert_eq!(
        a.grip(
            sim.guest(0).unwrap().session().unwrap().player(),
            Hand::Right
        )
        .map(|g| g.object),
        Some(HELD),
        "guest A never held the cube"
    );
    let holder = a.physics_pose(HELD);
    let hand = hand_at(END, &start, &below);
    assert!(
        holder.translation.vector.y > hand.translation.vector.y + 0.2,
        "the held cube went down with the hand to {holder:?}"
    );
    for world in [sim.host().world(), sim.guest(1).unwrap().world().unwrap()] {
        let apart =
            (world.physics_pose(HELD).translation.vector - holder.translation.vector).norm();
        assert!(
            apart < 0.01,
            "the held cube is {apart} m from where its holder shows it"
        );
    }
}
