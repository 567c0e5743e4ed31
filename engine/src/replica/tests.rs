//! The replica stays exactly on the authority's quantized state, through the real codec and a lossy network.

use std::time::Duration;

use nalgebra::Vector3;

use super::{Replica, ReplicaConfig};
use crate::world::avatar::Hand;
use crate::world::scene::SceneSpec;

const DELAY: Duration = Duration::from_millis(50);

fn tower_stays_bit_identical(loss: f64, seed: u64) {
    let mut r = Replica::new(
        &SceneSpec::towers(&[20]),
        ReplicaConfig::lossy(loss, DELAY, seed),
    )
    .unwrap();
    let settled = (0..600).find(|_| {
        r.step().unwrap();
        (0..20).all(|id| r.authority().is_at_rest(id) && r.replica().is_at_rest(id))
    });
    assert!(settled.is_some(), "the tower settles on both sides");
    // Let the last datagrams of the settling arrive.
    for _ in 0..10 {
        r.step().unwrap();
    }
    let reference = r.authority().object_states();
    assert!(reference.iter().all(|s| s.body.at_rest));
    let mut delivered = 0;
    for frame in 0..3600 {
        delivered += r.step().unwrap().delivered_to_replica;
        assert_eq!(
            r.authority().object_states(),
            reference,
            "authority, frame {frame}"
        );
        assert_eq!(
            r.replica().object_states(),
            reference,
            "replica, frame {frame}"
        );
    }
    let lost = 3600 - delivered;
    if loss > 0.0 {
        assert!((100..300).contains(&lost), "{lost} datagrams lost");
    } else {
        assert_eq!(lost, 0);
    }
    assert_eq!(r.replica_link().stats().decode_errors, 0);
    assert_eq!(r.authority_link().stats().decode_errors, 0);
}

#[test]
fn a_tower_replica_is_bit_identical_for_a_minute() {
    tower_stays_bit_identical(0.0, 1);
}

#[test]
fn a_tower_replica_is_bit_identical_for_a_minute_under_loss() {
    tower_stays_bit_identical(0.05, 2);
}

#[test]
fn after_a_second_without_input_the_replica_matches_the_authority_under_loss() {
    for seed in 3..8 {
        matches_after_a_quiet_second(seed);
    }
}

fn matches_after_a_quiet_second(seed: u64) {
    let scene = SceneSpec::table();
    let mut r = Replica::new(&scene, ReplicaConfig::lossy(0.05, DELAY, seed)).unwrap();
    for _ in 0..60 {
        r.step().unwrap();
    }
    let start: Vec<Vector3<f32>> = (0..64)
        .map(|id| r.authority().physics_pose(id).translation.vector)
        .collect();
    // Input: over a quarter of a second the host picks up cubes and throws them across the table.
    for (i, id) in [0u16, 9, 18, 27, 36, 45, 54, 63].into_iter().enumerate() {
        let host = r.authority_mut();
        host.grab(0, Hand::Right, id).unwrap();
        let v = Vector3::new(2.0 - i as f32 * 0.5, 1.5, 1.0);
        host.throw(0, Hand::Right, v, Vector3::zeros()).unwrap();
        r.step().unwrap();
        r.step().unwrap();
    }
    for _ in 0..14 {
        r.step().unwrap();
    }
    let moved = (0..64u16)
        .filter(|&id| {
            (r.authority().physics_pose(id).translation.vector - start[usize::from(id)]).norm()
                > 0.3
        })
        .count();
    assert!(moved >= 8, "{moved} cubes moved");
    for _ in 0..60 {
        r.step().unwrap();
    }
    let quant = r.authority().config().quant;
    let half_step = quant.position.axes[0].max_error();
    for id in 0..64 {
        let (a, b) = (r.authority().physics_pose(id), r.replica().physics_pose(id));
        let d = a.translation.vector - b.translation.vector;
        assert!(
            d.iter().all(|c| c.abs() <= half_step + 1e-6),
            "object {id}: {d:?}"
        );
        assert!(a.rotation.angle_to(&b.rotation) < 0.005, "object {id}");
        assert_eq!(
            r.replica().object_state(id),
            r.authority().object_state(id),
            "object {id}"
        );
    }
    assert!(r.authority_link().stats().packets_lost > 0);
}
