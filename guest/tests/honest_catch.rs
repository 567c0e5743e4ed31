//! Honest races are not forgeries: guest A throws a cube up and guest B, seeing it leave A's hand, grabs it low
//! and carries it off sideways. On the host B's grab wins (newer ownership) while A's updates of the cube still
//! flying keep arriving for a round trip. Those are stale, and the arbitration refuses them as a conflict; the
//! host's plausibility check must not call them implausible (they lie metres from B's hand, but no physics of
//! A's claim is wrong), so an honest session counts no refused update.

use std::time::Duration;

use nalgebra::{Isometry3, Translation3, Vector3};
use physync_engine::session::sim::host_addr;
use physync_engine::session::{PlayerControls, SessionSim};
use physync_engine::transport::LinkConfig;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::SceneKind;
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};

const CUBE: u16 = 0;
const GRAB_AT: f64 = 1.0;
const THROW_AT: f64 = 1.5;
const END: f64 = 4.0;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[test]
fn a_thrown_cube_caught_by_another_guest_is_a_conflict_not_a_refusal() {
    let link = LinkConfig::from_rtt(Duration::from_millis(250), Duration::ZERO, 0.0, 0.0);
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).unwrap();
    let mut sim: SessionSim<PeerHost, PeerGuest> = SessionSim::new(host, link, 7).unwrap();
    for nonce in [1, 2] {
        sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), nonce)))
            .unwrap();
    }
    sim.run_idle_until(secs(GRAB_AT - 0.2)).unwrap();
    let start = sim.guest(0).unwrap().world().unwrap().physics_pose(CUBE);
    let mut caught: Option<(f64, Isometry3<f32>)> = None;
    sim.run_until(
        secs(END),
        |_, _| {},
        |i, now, guest| {
            let t = now.as_secs_f64();
            let Some(s) = guest.session_mut() else { return };
            let holding = s.world().grip(s.player(), Hand::Right).is_some();
            if i == 0 {
                // A: grab, lift a metre, throw straight up at 6 m/s.
                let lift = ((t - GRAB_AT) / (THROW_AT - GRAB_AT)).clamp(0.0, 1.0) as f32;
                if t < THROW_AT || holding {
                    s.set_hand_pose(
                        Hand::Right,
                        Isometry3::translation(0.0, 0.1 + lift, 0.0) * start,
                    );
                }
                if (GRAB_AT..THROW_AT).contains(&t) && s.world().holder(CUBE).is_none() {
                    s.grab(Hand::Right, CUBE).unwrap();
                }
                if t >= THROW_AT && holding {
                    s.throw(Hand::Right, Vector3::new(0.0, 6.0, 0.0), Vector3::zeros());
                }
                return;
            }
            // B: as soon as its own view shows the cube free after the throw, grab it where B sees it and carry
            // it 3 m sideways at 10 m/s.
            match caught {
                None if t > THROW_AT && s.world().holder(CUBE).is_none() => {
                    let at = s.world().physics_pose(CUBE);
                    s.set_hand_pose(Hand::Right, at);
                    if s.grab(Hand::Right, CUBE).is_ok() {
                        caught = Some((t, at));
                    }
                }
                Some((t0, at)) if holding => {
                    let dx = (10.0 * (t - t0)).min(3.0) as f32;
                    s.set_hand_pose(Hand::Right, Translation3::new(dx, 0.0, 0.0) * at);
                }
                _ => {}
            }
        },
    )
    .unwrap();
    assert!(caught.is_some(), "guest B never caught the cube");
    let c = sim.host().counters();
    assert_eq!(
        sim.host().world().holder(CUBE).map(|h| h.player),
        Some(sim.guest(1).unwrap().session().unwrap().player()),
        "{c:?}"
    );
    assert!(
        c.conflicts > 0,
        "A's stale updates never reached the host: {c:?}"
    );
    assert_eq!(c.bad_updates.total(), 0, "honest updates refused: {c:?}");
}
