//! The katamari game script gives the published scene's statistics: the short variant of the bandwidth ladder's
//! run (20 s of its 60: two whole cycles of the script), counting the cubes whose quantized state differs from their state 6 frames (100 ms) before,
//! the figure the codec's bits per changed cube divide by.

use std::collections::VecDeque;

use physync_engine::world::scene::SceneSpec;
use physync_engine::world::{World, WorldConfig};
use physync_examples::katamari::{KatamariScript, KatamariTuning, Phase};

#[test]
fn the_katamari_changes_at_least_eight_percent_of_its_cubes_a_frame() {
    let mut world = World::new(WorldConfig::default(), &SceneSpec::katamari());
    let mut script = KatamariScript::new(&world, KatamariTuning::default()).expect("player cube");
    let n = world.object_count();
    let mut history = VecDeque::from([world.object_states()]);
    let (mut changed, mut frames, mut blown) = (0usize, 0usize, 0usize);
    let start = world.physics_pose(900).translation.vector;
    for _ in 0..1200 {
        let phase = script
            .apply(&mut world)
            .expect("the host pushes its own cubes");
        blown += usize::from(phase == Phase::Blow);
        world.step();
        let states = world.object_states();
        let old = &history[0];
        changed += states.iter().zip(old).filter(|(a, b)| a != b).count();
        frames += 1;
        history.push_back(states);
        if history.len() > 6 {
            history.pop_front();
        }
    }
    let per_frame = changed as f64 / frames as f64;
    assert!(
        per_frame >= 0.08 * n as f64,
        "{per_frame:.1} cubes changed a frame"
    );
    assert_eq!(blown, 40, "one blow phase every 10 s");
    // The player cube rolled under its forces, well into the grid.
    let moved = world.physics_pose(900).translation.vector - start;
    assert!(moved.norm() > 20.0, "player moved {moved:?}");
}
