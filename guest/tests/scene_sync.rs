//! A scene the guest has never seen: the host serves the playground (every dynamic shape kind, a triangle-mesh
//! ramp, a heightfield) and the guest downloads it at join over a lossy link, builds the same world, and tracks
//! every object (thrown ones included) to within quantization error.

use std::time::Duration;

use nalgebra::Vector3;
use physync_engine::session::sim::host_addr;
use physync_engine::session::{PlayerControls, SessionSim, divergence};
use physync_engine::transport::LinkConfig;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::{SceneKind, SceneSpec};
use physync_guest::peer::GuestPhase;
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};

#[test]
fn every_shape_kind_arrives_with_the_scene_and_syncs_to_the_guest() {
    let scene = SceneSpec::playground();
    let host = PeerHost::new(HostConfig::new(scene.clone())).unwrap();
    let link = LinkConfig::from_rtt(
        Duration::from_millis(120),
        Duration::from_millis(10),
        0.1,
        0.0,
    );
    let mut sim: SessionSim<PeerHost, PeerGuest> = SessionSim::new(host, link, 3).unwrap();
    sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), 9)))
        .unwrap();
    sim.run_idle_until(Duration::from_secs(2)).unwrap();
    let guest = sim.guest(0).unwrap();
    assert_eq!(guest.phase(), GuestPhase::Joined);
    assert_eq!(
        guest.world().unwrap().scene(),
        &scene,
        "the downloaded scene"
    );
    // The host throws one object of each kind (one per row of the playground) high into the air.
    for kind in 0..7u16 {
        let id = kind * 4;
        let host = sim.host_mut();
        host.set_hand_pose(Hand::Right, host.world().physics_pose(id));
        host.grab(Hand::Right, id).unwrap();
        host.throw(
            Hand::Right,
            Vector3::new(0.5, 4.0, 0.3),
            Vector3::new(0.0, 2.0, 0.0),
        );
        let t = sim.now() + Duration::from_millis(50);
        sim.run_idle_until(t).unwrap();
    }
    // Mid-flight the guest follows the host within what latency allows...
    sim.run_idle_until(sim.now() + Duration::from_millis(300))
        .unwrap();
    let flying = divergence(sim.host().world(), sim.guest(0).unwrap().world().unwrap());
    assert!(flying.max_position_m < 0.5, "{flying:?}");
    // ...and once everything lands and rests (round shapes stop by their rolling resistance), every object sits
    // where the host has it.
    sim.run_idle_until(sim.now() + Duration::from_secs(8))
        .unwrap();
    let (host, guest) = (sim.host().world(), sim.guest(0).unwrap().world().unwrap());
    let d = divergence(host, guest);
    assert_eq!(d.authority_mismatches, 0, "{d:?}");
    assert_eq!(d.holder_mismatches, 0, "{d:?}");
    for (id, object) in scene.objects.iter().enumerate() {
        let id = id as u16;
        let apart = (host.physics_pose(id).translation.vector
            - guest.physics_pose(id).translation.vector)
            .norm();
        assert!(
            apart < 0.003,
            "object {id} ({}) {apart} m apart",
            object.shape.kind_name()
        );
    }
}

/// While a guest downloads the katamari (3 deflated chunks over a 250 ms round trip, 5% loss), the host sends it no
/// world state: the guest has no world yet and could only throw it away. Once the guest plays, state flows.
#[test]
fn the_host_sends_no_world_state_to_a_guest_still_downloading_the_scene() {
    let host = PeerHost::new(HostConfig::new(SceneKind::Katamari.spec())).unwrap();
    let link = LinkConfig::from_rtt(
        Duration::from_millis(250),
        Duration::from_millis(20),
        0.05,
        0.0,
    );
    let mut sim: SessionSim<PeerHost, PeerGuest> = SessionSim::new(host, link, 5).unwrap();
    sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), 4)))
        .unwrap();
    let mut joined_at = None;
    while joined_at.is_none() && sim.now() < Duration::from_secs(20) {
        sim.run_idle_until(sim.now() + Duration::from_millis(10))
            .unwrap();
        if sim.guest(0).unwrap().phase() == GuestPhase::Joined {
            joined_at = Some(sim.now());
        }
    }
    let joined_at = joined_at.expect("the guest joined");
    assert!(
        joined_at > Duration::from_millis(250),
        "the join took {joined_at:?}: too short to show anything"
    );
    sim.run_idle_until(joined_at + Duration::from_secs(2))
        .unwrap();
    let guest = sim.guest(0).unwrap();
    assert_eq!(
        guest.drops().before_join,
        0,
        "state datagrams the guest dropped while downloading"
    );
    let accepted = guest.session().unwrap().counters().accepted;
    assert!(
        accepted > 0,
        "no world state reached the guest after the join"
    );
}
