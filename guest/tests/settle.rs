//! When a session has settled. A guest throws a cube; it lands and comes to rest, its thrower hands authority back
//! to the default after the rest rule, and the return reaches every other peer through the host. `peer_feel`
//! compares the peers once every world has stood still for `settle_time`; this checks that bound on the
//! benchmark's link (250 ms round trip, ±50 ms jitter, 5% loss, 1% duplication): when the cube first rests
//! everywhere the return has not happened yet, and once every world has stood still for `settle_time` every peer
//! agrees that nobody has the cube.

use std::time::Duration;

use nalgebra::{Isometry3, Vector3};
use physync_engine::session::sim::host_addr;
use physync_engine::session::{
    PlayerControls, SessionSim, Stillness, divergence, is_still, settle_time,
};
use physync_engine::transport::LinkConfig;
use physync_engine::world::authority::DEFAULT_AUTHORITY;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::SceneKind;
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};

/// The table's corner cube, thrown outward so that it lands clear of the others.
const CUBE: u16 = 0;

type Sim = SessionSim<PeerHost, PeerGuest>;

fn all_still(sim: &Sim) -> bool {
    is_still(sim.host().world()) && sim.guests().all(|(_, g)| g.world().is_some_and(is_still))
}

#[test]
fn a_return_to_default_reaches_every_peer_within_the_settle_time() {
    let (rtt, jitter, play_out) = (250, 50, 100);
    let link = LinkConfig::from_rtt(
        Duration::from_millis(rtt),
        Duration::from_millis(jitter),
        0.05,
        0.01,
    );
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).unwrap();
    let mut sim: Sim = SessionSim::new(host, link, 5).unwrap();
    for nonce in [1, 2] {
        sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), nonce)))
            .unwrap();
    }
    sim.run_idle_until(Duration::from_secs(2)).unwrap();
    let thrower = sim.guest_mut(0).unwrap().session_mut().unwrap();
    let player = thrower.player();
    let pose = thrower.world().physics_pose(CUBE);
    thrower.set_hand_pose(Hand::Right, pose);
    thrower.grab(Hand::Right, CUBE).unwrap();
    thrower.set_hand_pose(Hand::Right, Isometry3::translation(0.0, 1.0, 0.0) * pose);
    sim.run_idle_until(sim.now() + Duration::from_millis(300))
        .unwrap();
    let thrower = sim.guest_mut(0).unwrap().session_mut().unwrap();
    thrower
        .throw(
            Hand::Right,
            Vector3::new(-4.0, 2.0, -1.0),
            Vector3::new(0.0, 3.0, 5.0),
        )
        .unwrap();

    let frame = Duration::from_secs(1) / 60;
    let trip = Duration::from_millis(rtt / 2 + jitter + play_out);
    let quiet = settle_time(60, trip);
    let limit = sim.now() + Duration::from_secs(20);
    let mut stillness = Stillness::new();
    let mut rested_with_the_thrower = None;
    while stillness.still_for(sim.now()) < quiet {
        assert!(
            sim.now() < limit,
            "the session never stood still for {quiet:?}"
        );
        sim.run_idle_until(sim.now() + frame).unwrap();
        let still = all_still(&sim);
        if still && stillness.still_for(sim.now()).is_zero() {
            // The first frame of a still stretch: who each peer says has the cube.
            rested_with_the_thrower = Some(
                std::iter::once(sim.host().world())
                    .chain(sim.guests().filter_map(|(_, g)| g.world()))
                    .all(|w| w.authority(CUBE).view.authority == player),
            );
        }
        stillness.observe(sim.now(), still);
    }
    assert_eq!(
        rested_with_the_thrower,
        Some(true),
        "the cube rested everywhere with its thrower's authority, so the return had to cross the settle time"
    );
    let host = sim.host().world();
    assert!(
        host.physics_pose(CUBE).translation.x < -3.5,
        "the cube landed clear of the table"
    );
    assert_eq!(host.authority(CUBE).view.authority, DEFAULT_AUTHORITY);
    for (g, guest) in sim.guests() {
        let d = divergence(host, guest.world().unwrap());
        assert_eq!(d.authority_mismatches, 0, "guest {g}");
        assert_eq!(d.holder_mismatches, 0, "guest {g}");
    }
}
