//! Embedding physync in a game: build a world in code (balls, capsules, a convex hull, a static triangle-mesh
//! ramp), host it, join two guests over the in-memory network (they download the scene at join), play scripted
//! throws, count the authority and ownership events the game would show, and check every guest converged.
//!
//! `cargo run --release -p physync-examples --bin embed -- --json` (it always prints one JSON object).

use std::f32::consts::FRAC_1_SQRT_2;
use std::time::Duration;

use nalgebra::{Isometry3, Vector3};
use physync_engine::session::sim::host_addr;
use physync_engine::session::{PlayerControls, SessionSim, divergence};
use physync_engine::transport::LinkConfig;
use physync_engine::world::avatar::Hand;
use physync_engine::world::events::WorldEvent;
use physync_engine::world::scene::{
    LevelShape, LevelSpec, Material, ObjectSpec, Pose, SceneBuilder, SceneSpec, Shape, Tag,
};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};

/// The game's world: a ramp, a row of balls, a row of capsules and a convex hull gem.
fn build_scene() -> Result<SceneSpec, Box<dyn std::error::Error>> {
    let (lo, hi) = (
        [[-2.0, 0.0, 0.0], [2.0, 0.0, 0.0]],
        [[-2.0, 1.5, 5.0], [2.0, 1.5, 5.0]],
    );
    let vertices = [lo, hi].concat();
    let ramp = LevelShape::TriMesh {
        vertices,
        triangles: vec![[0, 2, 1], [1, 2, 3]],
    };
    let (bouncy, red) = (
        Material::new(500.0, 0.6, 0.2).with_rolling_resistance(0.05),
        Tag::new(1, [220, 60, 50]),
    );
    let mut scene = SceneBuilder::new("embed")
        .floor(15.0)
        .level(LevelSpec::new(ramp, Pose::at([0.0, 0.0, 3.0])));
    for i in 0..4 {
        let x = i as f32 - 1.5;
        scene = scene
            .object(
                ObjectSpec::new(Shape::ball(0.2), [x, 0.2, -1.0])
                    .with_material(bouncy)
                    .with_tag(red),
            )
            .object(
                ObjectSpec::new(Shape::capsule(0.15, 0.1), [x, 0.1, -2.0])
                    .with_material(Material::default().with_rolling_resistance(0.05))
                    .with_rotation([0.0, 0.0, FRAC_1_SQRT_2, FRAC_1_SQRT_2]),
            );
    }
    let ring = (0..4).map(|k| (k as f32 * std::f32::consts::FRAC_PI_2).sin_cos());
    let mut points: Vec<[f32; 3]> = ring.map(|(s, c)| [0.2 * c, 0.0, 0.2 * s]).collect();
    points.extend([[0.0, 0.3, 0.0], [0.0, -0.1, 0.0]]);
    let gem = Shape::ConvexHull { points };
    Ok(scene
        .object(ObjectSpec::new(gem, [0.0, 0.1, -3.0]))
        .build()?)
}

/// A throw: who, which object, when (s), and the velocity it leaves the hand with.
type Throw = (usize, u16, f64, [f32; 3]);

/// One scripted throw: reach the object, grab it, carry it up for half a second, let fly.
fn play<C: PlayerControls>(c: &mut C, now: f64, &(_, object, at, velocity): &Throw) {
    let phase = now - at;
    if !(0.0..0.6).contains(&phase) {
        return;
    }
    if c.world().holder(object).is_none() && phase < 0.1 {
        let pose = c.world().physics_pose(object);
        c.set_hand_pose(Hand::Right, pose);
        let _ = c.grab(Hand::Right, object);
    } else if phase < 0.5 {
        let lift = Isometry3::translation(0.0, 0.02, 0.0);
        let hand = c.world().avatar_pose(c.player()).hands[Hand::Right.index()];
        c.set_hand_pose(Hand::Right, lift * hand);
    } else {
        c.throw(Hand::Right, Vector3::from(velocity), Vector3::zeros());
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let host = PeerHost::new(HostConfig::new(build_scene()?))?;
    let ms = Duration::from_millis;
    let link = LinkConfig::from_rtt(ms(100), ms(10), 0.02, 0.0);
    let mut sim: SessionSim<PeerHost, PeerGuest> = SessionSim::new(host, link, 7)?;
    for nonce in [11, 12] {
        sim.add_guest(PeerGuest::new(GuestConfig::new(host_addr(), nonce)))?;
    }
    let throws: [Throw; 4] = [
        (0, 1, 1.0, [0.0, 3.0, 4.0]),
        (1, 3, 1.5, [1.0, 4.0, 3.0]),
        (2, 8, 2.0, [-1.0, 3.0, 5.0]),
        (1, 5, 3.5, [0.0, 5.0, 2.0]),
    ];
    let (mut authority_events, mut ownership_events) = (0, 0);
    let mut now = Duration::ZERO;
    while now < Duration::from_secs(6) {
        now += Duration::from_millis(10);
        let s = now.as_secs_f64();
        sim.run_until(
            now,
            |_, host| {
                throws
                    .iter()
                    .filter(|t| t.0 == 0)
                    .for_each(|t| play(host, s, t))
            },
            |i, _, guest| {
                let mine = throws.iter().filter(|t| t.0 == i + 1);
                if let Some(g) = guest.session_mut() {
                    mine.for_each(|t| play(g, s, t));
                }
            },
        )?;
        for e in sim.host_mut().input_world().take_events() {
            let authority = matches!(e, WorldEvent::AuthorityChanged { .. });
            *[&mut ownership_events, &mut authority_events][usize::from(authority)] += 1;
        }
    }
    sim.run_idle_until(Duration::from_secs(20))?;
    let host_world = sim.host().world();
    let (mut max_mm, mut mismatches, mut joined) = (0.0f32, 0, 0);
    for (_, g) in sim.guests() {
        if let Some(world) = g.world() {
            joined += 1;
            let d = divergence(host_world, world);
            max_mm = max_mm.max(d.max_position_m * 1000.0);
            mismatches += d.authority_mismatches + d.holder_mismatches;
        }
    }
    let converged = joined == 2 && max_mm <= 3.0 && mismatches == 0;
    let report = serde_json::json!({
        "converged": converged,
        "guests_joined": joined,
        "objects": host_world.object_count(),
        "max_divergence_mm": max_mm,
        "mismatches": mismatches,
        "authority_events_on_host": authority_events,
        "ownership_events_on_host": ownership_events,
    });
    println!("{report}");
    Ok(())
}
