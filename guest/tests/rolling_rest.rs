//! Round bodies come to rest: a guest throws a ball and a cylinder of the playground along the floor, rolling.
//! Without rolling resistance quantize-both-sides froze a slow roll for ever (the ball kept 0.17 m/s, kept the
//! thrower's authority and sat centimetres apart on every peer). Here both must stop, rest on the host, the
//! thrower and a second guest alike, give their authority back to the default, and sit on the same quantized
//! pose everywhere.

use std::time::Duration;

use std::f32::consts::FRAC_PI_2;

use nalgebra::{UnitQuaternion, Vector3};
use physync_engine::session::sim::host_addr;
use physync_engine::session::{PlayerControls, SessionSim};
use physync_engine::transport::LinkConfig;
use physync_engine::world::authority::DEFAULT_AUTHORITY;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::{SceneSpec, Shape};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};

/// The playground's first ball and first cylinder.
const BALL: u16 = 4;
const CYLINDER: u16 = 12;

#[test]
fn a_thrown_ball_and_cylinder_rest_and_converge_on_every_peer_with_one_authority() {
    let scene = SceneSpec::playground();
    assert!(matches!(
        scene.objects[BALL as usize].shape,
        Shape::Ball { .. }
    ));
    assert!(matches!(
        scene.objects[CYLINDER as usize].shape,
        Shape::Cylinder { .. }
    ));
    let host = PeerHost::new(HostConfig::new(scene)).unwrap();
    let link = LinkConfig::from_rtt(
        Duration::from_millis(100),
        Duration::from_millis(10),
        0.05,
        0.0,
    );
    let mut sim: SessionSim<PeerHost, PeerGuest> = SessionSim::new(host, link, 11).unwrap();
    for nonce in [1, 2] {
        sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), nonce)))
            .unwrap();
    }
    sim.run_idle_until(Duration::from_secs(2)).unwrap();
    let start = |id| sim.host().world().physics_pose(id).translation.vector;
    let starts = [start(BALL), start(CYLINDER)];
    // Rolling throws along -x, each spinning as it rolls: the ball, and the cylinder laid on its side.
    let on_side = UnitQuaternion::from_axis_angle(&Vector3::x_axis(), FRAC_PI_2);
    let throws = [
        (BALL, UnitQuaternion::identity(), 3.0, 0.25),
        (CYLINDER, on_side, 2.0, 0.2),
    ];
    for (id, rotation, speed, radius) in throws {
        let thrower = sim.guest_mut(0).unwrap().session_mut().unwrap();
        let mut pose = thrower.world().physics_pose(id);
        thrower.set_hand_pose(Hand::Right, pose);
        thrower.grab(Hand::Right, id).unwrap();
        pose.rotation = rotation;
        pose.translation.y = radius + 0.01;
        thrower.set_hand_pose(Hand::Right, pose);
        sim.run_idle_until(sim.now() + Duration::from_millis(50))
            .unwrap();
        let thrower = sim.guest_mut(0).unwrap().session_mut().unwrap();
        let linear = Vector3::new(-speed, 0.0, 0.0);
        let angular = Vector3::new(0.0, 0.0, speed / radius);
        thrower.throw(Hand::Right, linear, angular).unwrap();
        sim.run_idle_until(sim.now() + Duration::from_millis(50))
            .unwrap();
    }
    sim.run_idle_until(sim.now() + Duration::from_secs(9))
        .unwrap();

    let host = sim.host().world();
    for (id, start) in [BALL, CYLINDER].into_iter().zip(starts) {
        let pose = host.physics_pose(id).translation.vector;
        let rolled = (pose - start).norm();
        assert!(rolled > 1.0, "object {id} rolled only {rolled} m");
        assert!(host.is_at_rest(id), "object {id} still moving on the host");
        assert_eq!(host.authority(id).view.authority, DEFAULT_AUTHORITY);
        for g in 0..2 {
            let guest = sim.guest(g).unwrap().world().unwrap();
            assert!(guest.is_at_rest(id), "object {id} moving on guest {g}");
            assert_eq!(
                guest.authority(id).view,
                host.authority(id).view,
                "object {id} on guest {g}"
            );
            let apart = (guest.physics_pose(id).translation.vector - pose).norm();
            assert!(apart < 0.003, "object {id} {apart} m apart on guest {g}");
        }
    }
}
