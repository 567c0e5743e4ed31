//! Simulated-tick scenarios that run the server's [`ShooterWorld`] together with the client-side pieces:
//! prediction against the authoritative step, reconciliation after corrections and lost inputs, lag
//! compensation of a shot at a moving target, damage, death and respawn.

use std::collections::VecDeque;

use nalgebra::Point3;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::input::{InputCommand, PlayerInput, ViewTime, buttons};
use super::input_buffer::{InputBuffer, InputBufferConfig};
use super::lagcomp::RewindError;
use super::map::ArenaMap;
use super::player::{PlayerState, simulate_player};
use super::prediction::{ClientPredictor, PredictionConfig, ReconcileOutcome};
use super::rules::GameRules;
use super::world::{KillEvent, ShooterWorld, WorldConfig, aim_input};
use super::{PlayerId, Tick};

const ME: PlayerId = PlayerId(0);
const TARGET: PlayerId = PlayerId(1);

fn random_input(rng: &mut ChaCha8Rng) -> PlayerInput {
    PlayerInput {
        move_x: rng.random_range(-7..=7),
        move_z: rng.random_range(-7..=7),
        yaw: rng.random(),
        pitch: rng.random_range(-3000..=3000),
        buttons: rng.random::<u8>() & (buttons::FIRE | buttons::JUMP)
            | if rng.random_ratio(1, 20) {
                buttons::RELOAD
            } else {
                0
            },
    }
}

fn world_without_cubes(players: &[PlayerId]) -> ShooterWorld {
    let mut map = ArenaMap::standard();
    map.cubes.clear();
    let mut world = ShooterWorld::new(GameRules::default(), WorldConfig::default(), map);
    for id in players {
        world.add_player(*id).unwrap();
    }
    world
}

fn place(world: &mut ShooterWorld, id: PlayerId, x: f32, z: f32, yaw: u16) {
    let state = PlayerState::spawned(world.rules(), &Point3::new(x, 0.0, z), yaw);
    assert!(world.set_player_state(id, state));
}

fn command(tick: Tick, input: PlayerInput) -> InputCommand {
    InputCommand {
        tick,
        view: ViewTime::at(tick.saturating_sub(1)),
        input,
    }
}

#[test]
fn prediction_matches_the_server_exactly_without_latency() {
    // The standard map, cubes included: players push cubes and cubes stop players; the client predicts against
    // the cubes where its inputs' view time puts them, as the server does, so prediction stays exact.
    let mut world = ShooterWorld::new(
        GameRules::default(),
        WorldConfig::default(),
        ArenaMap::standard(),
    );
    world.add_player(ME).unwrap();
    let mut geometry = super::map::WorldGeometry::new(world.map());
    let rules = world.rules().clone();
    let mut predictor = ClientPredictor::new(
        PredictionConfig::default(),
        world.tick(),
        *world.player(ME).unwrap(),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let mut fired = 0;
    for _ in 0..1800 {
        let input = random_input(&mut rng);
        let cubes = world.cube_poses_at(ViewTime::at(predictor.tick()));
        let predicted_shot = predictor.predict(input, cubes, &mut geometry, &rules);
        let events = world.step(&[(ME, command(predictor.tick(), input))]);
        assert_eq!(world.tick(), predictor.tick());
        assert_eq!(predictor.state(), world.player(ME).unwrap());
        assert_eq!(predicted_shot.is_some(), !events.shots.is_empty());
        if let Some(shot) = predicted_shot {
            assert_eq!(shot, events.shots[0].ray);
            fired += 1;
        }
        let outcome = predictor.reconcile(
            world.tick(),
            world.player(ME).unwrap(),
            &mut geometry,
            &rules,
        );
        assert_eq!(outcome, ReconcileOutcome::Matched);
    }
    assert!(fired > 50, "fired {fired}");
    let stats = predictor.stats();
    assert_eq!(
        (stats.mispredictions, stats.overrides, stats.resyncs),
        (0, 0, 0)
    );
}

/// A client `lead` ticks ahead of the server, server states arriving `lead` ticks late.
struct LaggedSession {
    world: ShooterWorld,
    geometry: super::map::WorldGeometry,
    rules: GameRules,
    predictor: ClientPredictor,
    in_flight: VecDeque<(Tick, PlayerState)>,
    inputs: VecDeque<InputCommand>,
    lead: usize,
}

impl LaggedSession {
    fn new(lead: usize) -> Self {
        let world = world_without_cubes(&[ME]);
        let geometry = super::map::WorldGeometry::new(world.map());
        let rules = world.rules().clone();
        let predictor = ClientPredictor::new(
            PredictionConfig::default(),
            world.tick(),
            *world.player(ME).unwrap(),
        );
        Self {
            world,
            geometry,
            rules,
            predictor,
            in_flight: VecDeque::new(),
            inputs: VecDeque::new(),
            lead,
        }
    }

    /// One client tick: predict, send; the server consumes inputs `lead` ticks old; states return `lead` late.
    fn tick(&mut self, input: PlayerInput) -> Option<ReconcileOutcome> {
        self.predictor
            .predict(input, Vec::new(), &mut self.geometry, &self.rules);
        self.inputs.push_back(command(self.predictor.tick(), input));
        if self.inputs.len() > self.lead {
            let cmd = self.inputs.pop_front().unwrap();
            self.world.step(&[(ME, cmd)]);
            self.in_flight
                .push_back((self.world.tick(), *self.world.player(ME).unwrap()));
        }
        if self.in_flight.len() > self.lead {
            let (tick, state) = self.in_flight.pop_front().unwrap();
            return Some(
                self.predictor
                    .reconcile(tick, &state, &mut self.geometry, &self.rules),
            );
        }
        None
    }
}

#[test]
fn reconciliation_resimulates_the_unacknowledged_inputs_after_a_server_correction() {
    let lead = 6;
    let mut session = LaggedSession::new(lead);
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for _ in 0..120 {
        let outcome = session.tick(random_input(&mut rng));
        assert!(
            matches!(outcome, None | Some(ReconcileOutcome::Matched)),
            "{outcome:?}"
        );
    }
    // The server moves the player one metre (an authoritative correction the client could not predict).
    let mut corrected = *session.world.player(ME).unwrap();
    corrected.motion.position[0] += 512;
    corrected.motion.grounded = false;
    session.world.set_player_state(ME, corrected);
    let corrected_tick = session.world.tick();

    let mut outcome = None;
    let mut inputs_after = Vec::new();
    while outcome.is_none_or(|o| o == ReconcileOutcome::Matched) {
        let input = random_input(&mut rng);
        inputs_after.push(input);
        outcome = session.tick(input);
    }
    let ReconcileOutcome::Corrected {
        resimulated,
        correction_m,
    } = outcome.unwrap()
    else {
        panic!("expected a correction, got {outcome:?}");
    };
    // The state of `corrected_tick` was already in flight; the first state stepped from the correction is the
    // next tick's. When it arrived, everything the client predicted after it was redone.
    assert_eq!(session.predictor.tick() - (corrected_tick + 1), resimulated);
    assert_eq!(resimulated as usize, 2 * lead);
    assert!(
        (correction_m - 1.0).abs() < 0.3,
        "corrected by {correction_m} m"
    );
    assert_eq!(session.predictor.stats().mispredictions, 1);

    // Re-simulating by hand from the server's state gives the same present state.
    let mut expected = corrected;
    for tick in corrected_tick + 1..=session.predictor.tick() {
        let input = session.predictor.input_at(tick).unwrap();
        simulate_player(&mut expected, input, &session.geometry, &session.rules);
    }
    assert_eq!(&expected, session.predictor.state());

    // From then on prediction and server agree again.
    for _ in 0..120 {
        let outcome = session.tick(random_input(&mut rng));
        assert!(
            matches!(outcome, None | Some(ReconcileOutcome::Matched)),
            "{outcome:?}"
        );
    }
    assert_eq!(session.predictor.stats().mispredictions, 1);
}

#[test]
fn lost_inputs_are_recovered_by_redundancy_or_repeated_and_reconciled() {
    let mut world = world_without_cubes(&[ME]);
    let mut geometry = super::map::WorldGeometry::new(world.map());
    let rules = world.rules().clone();
    let mut predictor = ClientPredictor::new(
        PredictionConfig::default(),
        world.tick(),
        *world.player(ME).unwrap(),
    );
    let mut buffer = InputBuffer::new(InputBufferConfig::default(), 1);
    // The server runs six ticks behind the client: its input buffer covers a burst of up to five lost packets.
    let lead = 6;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut states: VecDeque<(Tick, PlayerState)> = VecDeque::new();
    let mut corrections = Vec::new();
    for client_tick in 1..=400u32 {
        let input = random_input(&mut rng);
        predictor.predict(input, Vec::new(), &mut geometry, &rules);
        // Each packet carries this tick's input and the previous five.
        let packet: Vec<InputCommand> = (client_tick.saturating_sub(5).max(1)..=client_tick)
            .rev()
            .map(|t| command(t, *predictor.input_at(t).unwrap()))
            .collect();
        // Packets 100..=103 are lost (recovered by the redundancy); 200..=209 are lost (too many).
        let lost = (100..=103).contains(&client_tick) || (200..=209).contains(&client_tick);
        if !lost {
            buffer.receive(&packet);
        }
        if client_tick > lead {
            let server_tick = world.tick() + 1;
            let taken = buffer.take(server_tick).unwrap();
            world.step(&[(ME, taken.command)]);
            states.push_back((world.tick(), *world.player(ME).unwrap()));
        }
        if states.len() > lead as usize {
            let (tick, state) = states.pop_front().unwrap();
            if let ReconcileOutcome::Corrected { correction_m, .. } =
                predictor.reconcile(tick, &state, &mut geometry, &rules)
            {
                corrections.push((tick, correction_m));
            }
        }
    }
    let stats = buffer.stats();
    assert_eq!(
        stats.repeated,
        10 - 5,
        "the last five of the long gap came back with packet 210"
    );
    assert!(
        !corrections.is_empty() && corrections.iter().all(|(t, _)| (200..=215).contains(t)),
        "only the unrecoverable gap mispredicts: {corrections:?}"
    );
    assert_eq!(predictor.stats().mispredictions, corrections.len() as u64);
    assert!(predictor.stats().max_correction_m > 0.0);
    assert_eq!(predictor.stats().resyncs, 0);
}

#[test]
fn a_state_older_than_the_history_resynchronises_and_a_reordered_one_is_stale() {
    let world = world_without_cubes(&[ME]);
    let mut geometry = super::map::WorldGeometry::new(world.map());
    let rules = world.rules().clone();
    let start = *world.player(ME).unwrap();
    let mut predictor = ClientPredictor::new(PredictionConfig::default(), 0, start);
    for _ in 0..40 {
        predictor.predict(PlayerInput::default(), Vec::new(), &mut geometry, &rules);
    }
    let at_20 = *predictor.state_at(20).unwrap();
    assert_eq!(
        predictor.reconcile(20, &at_20, &mut geometry, &rules),
        ReconcileOutcome::Matched
    );
    assert_eq!(
        predictor.reconcile(5, &at_20, &mut geometry, &rules),
        ReconcileOutcome::Stale
    );
    let mut server = *predictor.state_at(30).unwrap();
    server.motion.position[2] += 1000;
    match predictor.reconcile(30, &server, &mut geometry, &rules) {
        ReconcileOutcome::Corrected {
            resimulated,
            correction_m,
        } => {
            assert_eq!(resimulated, 10);
            assert!(
                (correction_m - 1000.0 / 512.0).abs() < 0.01,
                "{correction_m}"
            );
        }
        other => panic!("expected a correction, got {other:?}"),
    }

    let mut fresh = ClientPredictor::new(PredictionConfig::default(), 0, start);
    for _ in 0..40 {
        fresh.predict(PlayerInput::default(), Vec::new(), &mut geometry, &rules);
    }
    assert_eq!(fresh.state_at(8), None, "32 ticks of history: 9..=40");
    assert_eq!(
        fresh.reconcile(3, &server, &mut geometry, &rules),
        ReconcileOutcome::Resynchronised
    );
    assert_eq!(fresh.tick(), 3);
    assert_eq!(fresh.state(), &server);
    assert_eq!(fresh.stats().resyncs, 1);
}

/// The target runs along +X at full speed past a stationary shooter; returns the world and the target's feet
/// position after every tick (what snapshots of those ticks showed the shooter).
fn moving_target_world(ticks: u32) -> (ShooterWorld, Vec<Point3<f32>>) {
    let mut world = world_without_cubes(&[ME, TARGET]);
    place(&mut world, ME, 0.0, -10.0, 0);
    place(&mut world, TARGET, -9.0, 2.0, 16_384);
    let run = PlayerInput {
        move_z: 7,
        yaw: 16_384,
        ..PlayerInput::default()
    };
    let mut seen = vec![world.player(TARGET).unwrap().position()];
    for _ in 0..ticks {
        let tick = world.tick() + 1;
        let hold = aim_input(world.rules(), world.player(ME).unwrap(), &seen[0], 0);
        world.step(&[(ME, command(tick, hold)), (TARGET, command(tick, run))]);
        seen.push(world.player(TARGET).unwrap().position());
    }
    (world, seen)
}

fn fire_at(
    world: &mut ShooterWorld,
    target_feet: &Point3<f32>,
    view: ViewTime,
) -> super::world::ShotEvent {
    let tick = world.tick() + 1;
    let run = PlayerInput {
        move_z: 7,
        yaw: 16_384,
        ..PlayerInput::default()
    };
    let aim = aim_input(
        world.rules(),
        world.player(ME).unwrap(),
        target_feet,
        buttons::FIRE,
    );
    let events = world.step(&[
        (
            ME,
            InputCommand {
                tick,
                view,
                input: aim,
            },
        ),
        (TARGET, command(tick, run)),
    ]);
    assert_eq!(events.shots.len(), 1);
    events.shots[0].clone()
}

#[test]
fn lag_compensation_hits_where_the_shooter_saw_the_target_within_the_window() {
    // 150 ms RTT at 30 Hz: about 2 ticks each way plus 3 ticks of interpolation; the client sees the target
    // 8 ticks in the past when its shot is simulated.
    let (world, seen) = moving_target_world(45);
    let now = world.tick() + 1;
    let view_tick = now - 8;

    let mut rewound = world_clone(&world, &seen);
    let shot = fire_at(
        &mut rewound,
        &seen[view_tick as usize],
        ViewTime::at(view_tick),
    );
    assert_eq!(shot.rewind, Ok(()));
    assert_eq!(shot.hit.map(|h| h.player), Some(TARGET), "{shot:?}");
    assert_eq!(shot.damage, rewound.rules().weapon.body_damage);
    assert_eq!(
        rewound.player(TARGET).unwrap().vitals.health,
        rewound.rules().vitals.max_health - shot.damage,
        "damage lands on the present target"
    );

    // Aiming at the same place, judged against the present, misses: the target ran 1.6 m on.
    let mut unrewound = world_clone(&world, &seen);
    let shot = fire_at(&mut unrewound, &seen[view_tick as usize], ViewTime::at(now));
    assert_eq!(shot.rewind, Ok(()));
    assert_eq!(shot.hit, None);

    // A sub-tick view time is honoured: aim halfway between two snapshots, rewind halfway between them.
    let mut fractional = world_clone(&world, &seen);
    let a = seen[view_tick as usize];
    let b = seen[view_tick as usize + 1];
    let midpoint = a + (b - a) * 0.5;
    let shot = fire_at(
        &mut fractional,
        &midpoint,
        ViewTime {
            tick: view_tick,
            fraction: 128,
        },
    );
    assert_eq!(shot.hit.map(|h| h.player), Some(TARGET));
}

#[test]
fn a_view_time_outside_the_window_is_not_rewound() {
    let (world, seen) = moving_target_world(45);
    let now = world.tick() + 1;
    let window = world.history().window_ticks();
    assert_eq!(window, 30);

    let old = now - window - 1;
    let mut outside = world_clone(&world, &seen);
    let shot = fire_at(&mut outside, &seen[old as usize], ViewTime::at(old));
    assert!(
        matches!(shot.rewind, Err(RewindError::OutsideWindow { .. })),
        "{shot:?}"
    );
    assert_eq!(
        shot.hit, None,
        "traced against the present, where the target is not"
    );
    assert_eq!(outside.stats().not_rewound, 1);

    let edge = now - window;
    let mut inside = world_clone(&world, &seen);
    let shot = fire_at(&mut inside, &seen[edge as usize], ViewTime::at(edge));
    assert_eq!(shot.rewind, Ok(()));
    assert_eq!(shot.hit.map(|h| h.player), Some(TARGET));

    let mut future = world_clone(&world, &seen);
    let shot = fire_at(&mut future, &seen[now as usize - 1], ViewTime::at(now + 5));
    assert!(matches!(shot.rewind, Err(RewindError::InFuture { .. })));
}

/// Replays the moving-target run into a fresh world (worlds hold a rapier world and are not `Clone`).
fn world_clone(world: &ShooterWorld, seen: &[Point3<f32>]) -> ShooterWorld {
    let (copy, copy_seen) = moving_target_world(world.tick());
    assert_eq!(copy_seen, seen, "the replay is deterministic");
    copy
}

#[test]
fn damage_kills_scores_and_the_victim_respawns_after_the_delay() {
    let mut world = world_without_cubes(&[ME, TARGET]);
    place(&mut world, ME, 0.0, -10.0, 0);
    place(&mut world, TARGET, 0.0, 2.0, 32_768);
    for _ in 0..5 {
        let tick = world.tick() + 1;
        world.step(&[
            (ME, command(tick, PlayerInput::default())),
            (TARGET, command(tick, PlayerInput::default())),
        ]);
    }
    let rules = world.rules().clone();
    let target_feet = world.player(TARGET).unwrap().position();
    let shots_to_kill = rules.vitals.max_health.div_ceil(rules.weapon.body_damage);
    let mut kill_tick = None;
    let mut hits = 0;
    while kill_tick.is_none() {
        let tick = world.tick() + 1;
        let aim = aim_input(
            &rules,
            world.player(ME).unwrap(),
            &target_feet,
            buttons::FIRE,
        );
        let events = world.step(&[
            (ME, command(tick, aim)),
            (TARGET, command(tick, PlayerInput::default())),
        ]);
        hits += events.shots.iter().filter(|s| s.hit.is_some()).count();
        if let Some(kill) = events.kills.first() {
            assert_eq!(
                *kill,
                KillEvent {
                    killer: Some(ME),
                    victim: TARGET
                }
            );
            kill_tick = Some(tick);
        }
        assert!(tick < 200, "the target never died");
    }
    assert_eq!(hits, usize::from(shots_to_kill));
    let dead = *world.player(TARGET).unwrap();
    assert!(!dead.alive());
    assert_eq!(dead.vitals.respawn_in, rules.vitals.respawn_ticks);
    assert_eq!(world.score(ME).unwrap().kills, 1);
    assert_eq!(world.score(TARGET).unwrap().deaths, 1);

    // Shots at the corpse do nothing; the dead target cannot move; it respawns exactly on time.
    let kill_tick = kill_tick.unwrap();
    let respawn_tick = kill_tick + u32::from(rules.vitals.respawn_ticks);
    loop {
        let tick = world.tick() + 1;
        let aim = aim_input(
            &rules,
            world.player(ME).unwrap(),
            &target_feet,
            buttons::FIRE,
        );
        let walk = PlayerInput {
            move_z: 7,
            ..PlayerInput::default()
        };
        let events = world.step(&[(ME, command(tick, aim)), (TARGET, command(tick, walk))]);
        assert!(events.shots.iter().all(|s| s.damage == 0));
        if tick < respawn_tick {
            assert!(events.respawns.is_empty());
            assert_eq!(world.player(TARGET).unwrap().motion, dead.motion);
        } else {
            assert_eq!(events.respawns, vec![TARGET]);
            break;
        }
    }
    let respawned = world.player(TARGET).unwrap();
    assert_eq!(respawned.vitals.health, rules.vitals.max_health);
    assert_eq!(respawned.weapon.ammo, rules.weapon.magazine);
    let at_spawn = world
        .map()
        .spawn_points
        .iter()
        .any(|s| (respawned.position() - s.position).norm() < super::player::SPAWN_LIFT + 0.01);
    assert!(at_spawn, "{:?}", respawned.position());
    assert_eq!(world.score(ME).unwrap().kills, 1);
}

#[test]
fn damage_from_the_server_is_an_override_not_a_misprediction() {
    let mut world = world_without_cubes(&[ME, TARGET]);
    place(&mut world, ME, 0.0, 2.0, 32_768);
    place(&mut world, TARGET, 0.0, -10.0, 0);
    let mut geometry = super::map::WorldGeometry::new(world.map());
    let rules = world.rules().clone();
    let mut predictor = ClientPredictor::new(
        PredictionConfig::default(),
        world.tick(),
        *world.player(ME).unwrap(),
    );
    let mut overridden = 0;
    for _ in 0..120 {
        let mine = PlayerInput::default();
        predictor.predict(mine, Vec::new(), &mut geometry, &rules);
        let tick = world.tick() + 1;
        let my_feet = world.player(ME).unwrap().position();
        let shooter_aim = aim_input(
            &rules,
            world.player(TARGET).unwrap(),
            &my_feet,
            buttons::FIRE,
        );
        world.step(&[
            (ME, command(tick, mine)),
            (TARGET, command(tick, shooter_aim)),
        ]);
        match predictor.reconcile(
            world.tick(),
            world.player(ME).unwrap(),
            &mut geometry,
            &rules,
        ) {
            ReconcileOutcome::Matched => {}
            ReconcileOutcome::Overridden { .. } => overridden += 1,
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(predictor.state(), world.player(ME).unwrap());
    }
    assert!(
        overridden >= 4,
        "hits, the death and the respawn: {overridden}"
    );
    assert_eq!(predictor.stats().mispredictions, 0);
    assert_eq!(world.score(TARGET).unwrap().kills, 1);
}

#[test]
fn shots_push_cubes_and_are_stopped_by_them() {
    let mut world = ShooterWorld::new(
        GameRules::default(),
        WorldConfig::default(),
        ArenaMap::standard(),
    );
    world.add_player(ME).unwrap();
    world.add_player(TARGET).unwrap();
    // The standard map has a cube at (0, 0.5, -3): stand behind it, the target beyond it.
    place(&mut world, ME, 0.0, -8.0, 0);
    place(&mut world, TARGET, 0.0, 2.0, 0);
    for _ in 0..30 {
        let tick = world.tick() + 1;
        world.step(&[
            (ME, command(tick, PlayerInput::default())),
            (TARGET, command(tick, PlayerInput::default())),
        ]);
    }
    let config = physync_codec::QuantConfig::default();
    let before = world.cube_states(&config);
    let cube_index = world
        .map()
        .cubes
        .iter()
        .position(|c| c.center.x == 0.0 && c.center.z == -3.0)
        .unwrap();
    let cube = before[cube_index].position_f32(&config);
    let low_aim = Point3::new(cube[0], cube[1] - 0.3, cube[2]);
    let tick = world.tick() + 1;
    let rules = world.rules().clone();
    let mut aim = aim_input(&rules, world.player(ME).unwrap(), &low_aim, buttons::FIRE);
    // aim_input aims at chest height above the given feet; aim at the cube's centre instead.
    let eye = world.player(ME).unwrap().eye(&rules);
    let centre = Point3::new(cube[0], cube[1], cube[2]);
    (aim.yaw, aim.pitch) = super::units::aim_at(&eye, &centre);
    let events = world.step(&[
        (ME, command(tick, aim)),
        (TARGET, command(tick, PlayerInput::default())),
    ]);
    let shot = &events.shots[0];
    assert!(shot.blocked_at.is_some_and(|d| d < 5.5), "{shot:?}");
    assert_eq!(shot.hit, None);
    for _ in 0..10 {
        let tick = world.tick() + 1;
        world.step(&[
            (ME, command(tick, PlayerInput::default())),
            (TARGET, command(tick, PlayerInput::default())),
        ]);
    }
    let after = world.cube_states(&config)[cube_index].position_f32(&config);
    assert!(
        after[2] > cube[2] + 0.01,
        "pushed along +Z: {cube:?} -> {after:?}"
    );
}

#[test]
fn the_server_rewinds_to_exactly_what_the_client_interpolated() {
    use super::interpolation::{InterpolationConfig, RemoteInterpolator, RemoteSample};
    let (world, _) = moving_target_world(40);
    let mut interpolator = RemoteInterpolator::new(InterpolationConfig::default(), 30);
    // The client received the snapshots of the last 25 ticks up to the present (one lost).
    for tick in world.tick() - 25..=world.tick() {
        if tick == 33 {
            continue;
        }
        let frame = world.history().frame(tick).unwrap();
        let pose = frame.iter().find(|p| p.player == TARGET).unwrap();
        let sample = RemoteSample {
            position: pose.position,
            yaw: 16_384,
            pitch: 0,
            alive: pose.alive,
        };
        interpolator.push(tick, sample);
    }
    let present = world.tick();
    for latest in [
        f64::from(present) - 0.4,
        f64::from(present) - 4.7,
        f64::from(present),
    ] {
        let view = ViewTime::from_ticks(interpolator.render_time(latest));
        let seen = interpolator.sample_at(view.as_ticks()).unwrap();
        let rewound = world.history().rewind(present, view).unwrap();
        let target = rewound.iter().find(|t| t.player == TARGET).unwrap();
        // The lost snapshot leaves the client interpolating over two ticks, which on a straight run is the same.
        assert!(
            (seen.position - target.feet).norm() < 2e-3,
            "view {view:?}: client {:?} server {:?}",
            seen.position,
            target.feet
        );
    }
}

#[test]
fn impossible_movement_is_clamped_and_counted() {
    let mut world = world_without_cubes(&[ME]);
    place(&mut world, ME, 0.0, -15.0, 0);
    for _ in 0..5 {
        let tick = world.tick() + 1;
        world.step(&[(ME, command(tick, PlayerInput::default()))]);
    }
    let max_step = world.rules().movement.max_speed * world.rules().dt();
    let cheat = PlayerInput {
        move_x: i8::MIN,
        move_z: i8::MAX,
        pitch: i16::MIN,
        ..PlayerInput::default()
    };
    for _ in 0..10 {
        let before = world.player(ME).unwrap().position();
        let tick = world.tick() + 1;
        world.step(&[(ME, command(tick, cheat))]);
        let after = world.player(ME).unwrap();
        let horizontal =
            nalgebra::Vector2::new(after.position().x - before.x, after.position().z - before.z);
        assert!(
            horizontal.norm() <= max_step + 0.004,
            "moved {} m in a tick",
            horizontal.norm()
        );
        assert_eq!(after.motion.pitch, -super::units::PITCH_LIMIT);
    }
    assert_eq!(world.stats().clamped_inputs, 10);
}

#[test]
fn a_cube_stops_a_walking_player_on_the_server_and_in_prediction_alike() {
    // The standard map has a cube at (3, 0.5, 0); walk into it along +X from x = 0.
    let mut world = ShooterWorld::new(
        GameRules::default(),
        WorldConfig::default(),
        ArenaMap::standard(),
    );
    world.add_player(ME).unwrap();
    place(&mut world, ME, 0.5, 0.0, 16_384);
    let mut geometry = super::map::WorldGeometry::new(world.map());
    let rules = world.rules().clone();
    let mut predictor = ClientPredictor::new(
        PredictionConfig::default(),
        world.tick(),
        *world.player(ME).unwrap(),
    );
    let forward = PlayerInput {
        move_z: 7,
        yaw: 16_384,
        ..PlayerInput::default()
    };
    for _ in 0..30 {
        let cubes = world.cube_poses_at(ViewTime::at(predictor.tick()));
        predictor.predict(forward, cubes, &mut geometry, &rules);
        world.step(&[(ME, command(predictor.tick(), forward))]);
        assert_eq!(predictor.state(), world.player(ME).unwrap());
    }
    let x = world.player(ME).unwrap().position().x;
    let face = 3.0 - 0.5 - rules.body.capsule_radius;
    assert!(
        x < face + 0.05 && x > face - 0.3,
        "stopped at the cube's face: x {x}"
    );
}

#[test]
fn a_cube_blocks_a_shot_on_the_server_and_in_the_clients_prediction_alike() {
    let mut world = ShooterWorld::new(
        GameRules::default(),
        WorldConfig::default(),
        ArenaMap::standard(),
    );
    world.add_player(ME).unwrap();
    world.add_player(TARGET).unwrap();
    // The cube at (0, 0.5, -3) stands between the shooter at z = -8 and the target at z = 2, kneeling height.
    place(&mut world, ME, 0.0, -8.0, 0);
    place(&mut world, TARGET, 0.0, 2.0, 0);
    for _ in 0..20 {
        let tick = world.tick() + 1;
        world.step(&[
            (ME, command(tick, PlayerInput::default())),
            (TARGET, command(tick, PlayerInput::default())),
        ]);
    }
    let rules = world.rules().clone();
    let me = *world.player(ME).unwrap();
    let target_feet = world.player(TARGET).unwrap().position();
    let low = target_feet + nalgebra::Vector3::new(0.0, 0.4, 0.0);
    let (yaw, pitch) = super::units::aim_at(&me.eye(&rules), &low);
    let ray = super::hitbox::ShotRay {
        origin: me.eye(&rules),
        direction: super::units::view_direction(yaw, pitch),
        range: rules.weapon.range,
    };
    let view = ViewTime::at(world.tick() - 2);
    let mut geometry = super::map::WorldGeometry::new(world.map());
    geometry.place_cubes(&world.cube_poses_at(view));
    let targets = [super::hitbox::TargetPose {
        player: TARGET,
        feet: target_feet,
        alive: true,
    }];
    let predicted = super::hitbox::predict_hit(&ray, ME, &targets, &geometry, &rules.body);
    assert_eq!(predicted, None, "the client sees the cube in the way");
    let tick = world.tick() + 1;
    let input = PlayerInput {
        yaw,
        pitch,
        buttons: buttons::FIRE,
        ..PlayerInput::default()
    };
    let events = world.step(&[
        (ME, InputCommand { tick, view, input }),
        (TARGET, command(tick, PlayerInput::default())),
    ]);
    let shot = &events.shots[0];
    assert_eq!(shot.hit, None, "{shot:?}");
    assert!(shot.blocked_at.is_some_and(|d| d < 5.5), "{shot:?}");
}
