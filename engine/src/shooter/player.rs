//! A player's state and the one function that advances it by a tick. The server steps every player through
//! [`simulate_player`]; a client predicts its own player through the very same call, so with the same inputs the
//! two produce bit-identical states.

use nalgebra::{Point3, Vector3};
use rapier3d::control::{CharacterLength, KinematicCharacterController};
use rapier3d::math::{Pose, Vector as GVec3};
use rapier3d::parry::shape::Capsule;

use super::convert::{glam_to_point, point_to_glam};
use super::hitbox::ShotRay;
use super::input::{PlayerInput, buttons};
use super::map::WorldGeometry;
use super::rules::GameRules;
use super::units;

/// Where a player is and how it moves; the part of the state that prediction owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MotionState {
    /// Feet position in position steps.
    pub position: [i32; 3],
    /// Vertical velocity in velocity steps (horizontal velocity follows the input each tick).
    pub vertical_velocity: i32,
    /// View yaw in steps.
    pub yaw: u16,
    /// View pitch in steps.
    pub pitch: i16,
    /// Standing on the ground after the last move.
    pub grounded: bool,
}

/// The weapon's counters; predicted too, so firing and reloading respond at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WeaponState {
    /// Rounds in the magazine.
    pub ammo: u16,
    /// Ticks until the weapon may fire again.
    pub cooldown: u16,
    /// Ticks until a running reload completes; 0 when not reloading.
    pub reload_remaining: u16,
}

/// Health and the respawn countdown. Damage is the server's word: prediction never changes health, it only
/// counts down the respawn timer of a dead player.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Vitals {
    /// Health; 0 means dead.
    pub health: u16,
    /// While dead, ticks until the server respawns the player.
    pub respawn_in: u16,
}

/// A player's complete state at the end of a tick: integers only, so it can be compared exactly, quantized for
/// the wire without loss and delta-encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PlayerState {
    /// Position and view.
    pub motion: MotionState,
    /// Weapon counters.
    pub weapon: WeaponState,
    /// Health and respawn.
    pub vitals: Vitals,
}

impl PlayerState {
    /// A freshly spawned player standing at `position` looking along `yaw`: full health, full magazine. The
    /// feet are placed [`SPAWN_LIFT`] above the point so the character controller starts clear of the floor.
    pub fn spawned(rules: &GameRules, position: &Point3<f32>, yaw: u16) -> Self {
        Self {
            motion: MotionState {
                position: units::quantize_position(
                    &(position + Vector3::new(0.0, SPAWN_LIFT, 0.0)),
                ),
                vertical_velocity: 0,
                yaw,
                pitch: 0,
                grounded: false,
            },
            weapon: WeaponState {
                ammo: rules.weapon.magazine,
                cooldown: 0,
                reload_remaining: 0,
            },
            vitals: Vitals {
                health: rules.vitals.max_health,
                respawn_in: 0,
            },
        }
    }

    /// True while health is above zero.
    pub fn alive(&self) -> bool {
        self.vitals.health > 0
    }

    /// Feet position in metres.
    pub fn position(&self) -> Point3<f32> {
        units::dequantize_position(self.motion.position)
    }

    /// Eye position in metres (where shots start).
    pub fn eye(&self, rules: &GameRules) -> Point3<f32> {
        self.position() + Vector3::new(0.0, rules.body.eye_height, 0.0)
    }

    /// The unit view direction.
    pub fn view_direction(&self) -> Vector3<f32> {
        units::view_direction(self.motion.yaw, self.motion.pitch)
    }
}

/// Height above a spawn point at which a player appears; it settles onto the ground within a tick or two.
/// The character controller keeps a small gap to surfaces and would stick if started inside it.
pub const SPAWN_LIFT: f32 = 0.05;

fn character_controller() -> KinematicCharacterController {
    KinematicCharacterController {
        offset: CharacterLength::Absolute(0.02),
        snap_to_ground: Some(CharacterLength::Absolute(0.1)),
        ..KinematicCharacterController::default()
    }
}

/// Advances one player by one tick under `input`: view, movement through rapier's kinematic character controller
/// against the static `geometry` (gravity, ground, jump, max speed), then the weapon (cooldown, reload, fire).
/// The result is written back in integer units. Returns the shot fired this tick, if any; tracing it is up to the
/// caller (lag-compensated on the server, a cosmetic effect on a client). A dead player only counts down its
/// respawn timer.
pub fn simulate_player(
    state: &mut PlayerState,
    input: &PlayerInput,
    geometry: &WorldGeometry,
    rules: &GameRules,
) -> Option<ShotRay> {
    let (input, _) = input.sanitized();
    if !state.alive() {
        state.vitals.respawn_in = state.vitals.respawn_in.saturating_sub(1);
        return None;
    }
    state.motion.yaw = input.yaw;
    state.motion.pitch = input.pitch;
    move_player(&mut state.motion, &input, geometry, rules);
    step_weapon(state, &input, rules)
}

fn move_player(
    motion: &mut MotionState,
    input: &PlayerInput,
    geometry: &WorldGeometry,
    rules: &GameRules,
) {
    let dt = rules.dt();
    let movement = &rules.movement;
    let mut wish = GVec3::new(
        f32::from(input.move_x) / f32::from(super::input::MOVE_AXIS_MAX),
        0.0,
        f32::from(input.move_z) / f32::from(super::input::MOVE_AXIS_MAX),
    );
    if wish.length_squared() > 1.0 {
        wish = wish.normalize();
    }
    let (sin_yaw, cos_yaw) = units::yaw_radians(motion.yaw).sin_cos();
    let forward = GVec3::new(sin_yaw, 0.0, cos_yaw);
    let right = forward.cross(GVec3::Y);
    let horizontal = (forward * wish.z + right * wish.x) * movement.max_speed;

    let mut vy = units::dequantize_velocity(motion.vertical_velocity);
    if motion.grounded && input.pressed(buttons::JUMP) {
        vy = movement.jump_speed;
    } else if motion.grounded && wish != GVec3::ZERO {
        // Walking on the ground the move is level and the controller's snap keeps the feet down (and follows a
        // step down): a level move meets nothing on open floor, where one pressing into the floor would hit it
        // and slide, which costs the controller a second cast and contact search every tick. Standing still
        // keeps pressing down: a move of zero would run the controller's depenetration instead, which pushes
        // a capsule resting on the floor's half-space up.
        vy = 0.0;
    } else {
        vy = (vy - movement.gravity * dt).max(-movement.max_fall_speed);
    }
    let desired = GVec3::new(horizontal.x * dt, vy * dt, horizontal.z * dt);

    let body = &rules.body;
    let shape = Capsule::new_y(body.capsule_half_segment, body.capsule_radius);
    let feet = point_to_glam(&units::dequantize_position(motion.position));
    let center = feet + GVec3::Y * body.capsule_center_height();
    let controller = character_controller();
    let mut away = [0i8; 3];
    let result = controller.move_shape(
        dt,
        &geometry.queries(),
        &shape,
        &Pose::from_translation(center),
        desired,
        |collision| note_surface(&mut away, collision.hit.normal1),
    );
    if result.grounded {
        note_surface(&mut away, GVec3::Y);
    }
    let new_feet = feet + result.translation;
    motion.position = quantize_away_from_surfaces(new_feet, away);
    motion.grounded = result.grounded;
    if result.grounded && vy < 0.0 {
        vy = 0.0;
    }
    if !result.grounded && vy > 0.0 && result.translation.y < desired.y * 0.5 {
        // Head hit a ceiling: the upward motion was stopped.
        vy = 0.0;
    }
    motion.vertical_velocity = units::quantize_velocity(vy);
}

/// Records, per axis, which way the surface with (obstacle-to-character) normal `normal` pushes: +1, -1, or 2
/// when surfaces push both ways.
fn note_surface(away: &mut [i8; 3], normal: GVec3) {
    for (axis, component) in [normal.x, normal.y, normal.z].into_iter().enumerate() {
        let sign = if component > 1e-3 {
            1
        } else if component < -1e-3 {
            -1
        } else {
            0
        };
        away[axis] = match (away[axis], sign) {
            (current, 0) => current,
            (0, s) => s,
            (current, s) if current == s => current,
            _ => 2,
        };
    }
}

/// Quantizes a position after a move, rounding each axis away from the surfaces touched during the move.
/// The character controller keeps a small gap to every surface and sticks when started inside that gap;
/// rounding towards a surface could put it there. Axes with no touched surface round to nearest, which
/// never reduces an existing gap because the previous position lay on the grid.
fn quantize_away_from_surfaces(feet: GVec3, away: [i8; 3]) -> [i32; 3] {
    let nearest = units::quantize_position(&glam_to_point(feet));
    let coords = [feet.x, feet.y, feet.z];
    [0, 1, 2].map(|axis| {
        let scaled = coords[axis] * units::POSITION_STEPS_PER_METRE;
        match away[axis] {
            1 => scaled.ceil() as i32,
            -1 => scaled.floor() as i32,
            _ => nearest[axis],
        }
    })
}

fn step_weapon(state: &mut PlayerState, input: &PlayerInput, rules: &GameRules) -> Option<ShotRay> {
    let weapon_rules = &rules.weapon;
    let weapon = &mut state.weapon;
    weapon.cooldown = weapon.cooldown.saturating_sub(1);
    if weapon.reload_remaining > 0 {
        weapon.reload_remaining -= 1;
        if weapon.reload_remaining == 0 {
            weapon.ammo = weapon_rules.magazine;
        }
    }
    let reloading = weapon.reload_remaining > 0;
    if input.pressed(buttons::RELOAD) && !reloading && weapon.ammo < weapon_rules.magazine {
        weapon.reload_remaining = weapon_rules.reload_ticks.max(1);
        return None;
    }
    if !input.pressed(buttons::FIRE) || reloading || weapon.cooldown > 0 {
        return None;
    }
    if weapon.ammo == 0 {
        weapon.reload_remaining = weapon_rules.reload_ticks.max(1);
        return None;
    }
    weapon.ammo -= 1;
    weapon.cooldown = weapon_rules.fire_interval_ticks;
    Some(ShotRay {
        origin: state.eye(rules),
        direction: state.view_direction(),
        range: weapon_rules.range,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shooter::map::ArenaMap;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn fire() -> PlayerInput {
        PlayerInput {
            buttons: buttons::FIRE,
            ..PlayerInput::default()
        }
    }

    fn settle(state: &mut PlayerState, geometry: &WorldGeometry, rules: &GameRules) {
        for _ in 0..10 {
            simulate_player(state, &PlayerInput::default(), geometry, rules);
        }
    }

    pub(crate) fn random_input(rng: &mut ChaCha8Rng) -> PlayerInput {
        PlayerInput {
            move_x: rng.random_range(-7..=7),
            move_z: rng.random_range(-7..=7),
            yaw: rng.random(),
            pitch: rng.random_range(-2000..=2000),
            buttons: rng.random::<u8>() & buttons::ALL,
        }
    }

    #[test]
    fn a_spawned_player_lands_on_the_floor_and_stays_grounded() {
        let rules = GameRules::default();
        let geometry = WorldGeometry::new(&ArenaMap::standard());
        let mut state = PlayerState::spawned(&rules, &Point3::new(0.0, 1.0, 0.0), 0);
        for _ in 0..30 {
            simulate_player(&mut state, &PlayerInput::default(), &geometry, &rules);
        }
        assert!(state.motion.grounded);
        assert!(state.position().y.abs() < 0.05, "{:?}", state.position());
        let rested = state;
        simulate_player(&mut state, &PlayerInput::default(), &geometry, &rules);
        assert_eq!(state, rested, "standing still is a fixed point");
    }

    #[test]
    fn full_stick_moves_at_max_speed_and_walls_stop_the_player() {
        let rules = GameRules::default();
        let geometry = WorldGeometry::new(&ArenaMap::standard());
        let mut state = PlayerState::spawned(&rules, &Point3::new(-15.0, 0.0, 15.0), 0);
        settle(&mut state, &geometry, &rules);
        let start = state.position();
        let forward = PlayerInput {
            move_z: 7,
            yaw: 16_384, // +X
            ..PlayerInput::default()
        };
        for _ in 0..30 {
            simulate_player(&mut state, &forward, &geometry, &rules);
        }
        let moved = state.position() - start;
        assert!(
            (moved.x - 6.0).abs() < 0.05,
            "one second at 6 m/s: {moved:?}"
        );
        assert!(moved.z.abs() < 0.01 && moved.y.abs() < 0.01, "{moved:?}");
        // Diagonal input is capped at max speed too.
        let diagonal = PlayerInput {
            move_x: 7,
            move_z: 7,
            ..forward
        };
        let before = state.position();
        simulate_player(&mut state, &diagonal, &geometry, &rules);
        let step = (state.position() - before).norm();
        assert!(step <= 6.0 / 30.0 + 0.005, "step {step}");
        // Run into the +X wall (inner face at x = 20) for five seconds.
        for _ in 0..150 {
            simulate_player(&mut state, &forward, &geometry, &rules);
        }
        let x = state.position().x;
        assert!(
            x < 20.0 - rules.body.capsule_radius + 0.001 && x > 19.0,
            "x {x}"
        );
        // Pressing into the wall while strafing slides along it instead of sticking.
        let along = PlayerInput {
            move_x: -7,
            ..forward
        };
        let z_before = state.position().z;
        for _ in 0..30 {
            simulate_player(&mut state, &along, &geometry, &rules);
        }
        // Yaw +X makes the right-hand side +Z, so a left strafe runs towards -Z.
        let slid = z_before - state.position().z;
        assert!(slid > 2.0, "slid {slid} m along the wall");
        assert!((state.position().x - x).abs() < 0.01);
    }

    /// Walking is a level move kept on the ground by the controller's snap: on open floor a walker stays at the
    /// height it stands at, and it walks off a cover box's top down to the floor.
    #[test]
    fn walkers_keep_their_standing_height_and_step_off_ledges() {
        let rules = GameRules::default();
        let geometry = WorldGeometry::new(&ArenaMap::standard());
        let mut state = PlayerState::spawned(&rules, &Point3::new(6.0, 1.2, 6.0), 0);
        settle(&mut state, &geometry, &rules);
        assert!(state.motion.grounded);
        let on_top = state.motion.position[1];
        assert!(
            (state.position().y - 1.2).abs() < 0.05,
            "{:?}",
            state.position()
        );
        let east = PlayerInput {
            move_z: 7,
            yaw: 16_384, // +X
            ..PlayerInput::default()
        };
        // Two ticks along the top (0.4 m, the box ends 1.5 m east of its centre).
        for _ in 0..2 {
            simulate_player(&mut state, &east, &geometry, &rules);
            assert!(state.motion.grounded);
            assert_eq!(state.motion.position[1], on_top);
        }
        for _ in 0..40 {
            simulate_player(&mut state, &east, &geometry, &rules);
        }
        assert!(state.motion.grounded);
        assert!(state.position().y.abs() < 0.05, "{:?}", state.position());
        let walking = state.motion.position[1];
        for _ in 0..5 {
            simulate_player(&mut state, &PlayerInput::default(), &geometry, &rules);
        }
        assert_eq!(
            state.motion.position[1], walking,
            "standing height is walking height"
        );
    }

    #[test]
    fn jumping_leaves_the_ground_and_comes_back() {
        let rules = GameRules::default();
        let geometry = WorldGeometry::new(&ArenaMap::standard());
        let mut state = PlayerState::spawned(&rules, &Point3::new(2.0, 0.0, -3.0), 0);
        settle(&mut state, &geometry, &rules);
        let jump = PlayerInput {
            buttons: buttons::JUMP,
            ..PlayerInput::default()
        };
        simulate_player(&mut state, &jump, &geometry, &rules);
        assert!(!state.motion.grounded);
        let mut peak: f32 = 0.0;
        for _ in 0..40 {
            // Holding jump in the air gives no second boost.
            simulate_player(&mut state, &jump, &geometry, &rules);
            peak = peak.max(state.position().y);
            if state.motion.grounded {
                break;
            }
        }
        assert!(peak > 0.6 && peak < 0.9, "v²/2g = 0.756 m, got {peak}");
        assert!(state.motion.grounded);
    }

    #[test]
    fn same_inputs_give_identical_states() {
        let rules = GameRules::default();
        let geometry = WorldGeometry::new(&ArenaMap::standard());
        let other_geometry = WorldGeometry::new(&ArenaMap::standard());
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let inputs: Vec<PlayerInput> = (0..600).map(|_| random_input(&mut rng)).collect();
        let spawn = PlayerState::spawned(&rules, &Point3::new(-5.0, 0.0, 4.0), 0);
        let (mut a, mut b) = (spawn, spawn);
        let mut shots = 0;
        for input in &inputs {
            let shot_a = simulate_player(&mut a, input, &geometry, &rules);
            let shot_b = simulate_player(&mut b, input, &other_geometry, &rules);
            assert_eq!(a, b);
            assert_eq!(shot_a, shot_b);
            shots += usize::from(shot_a.is_some());
        }
        assert!(shots > 5, "random inputs fire: {shots}");
        assert_ne!(a.motion.position, spawn.motion.position);
    }

    #[test]
    fn fire_rate_magazine_and_reload_follow_the_rules() {
        let rules = GameRules::default();
        let geometry = WorldGeometry::new(&ArenaMap::standard());
        let mut state = PlayerState::spawned(&rules, &Point3::new(0.0, 0.0, -8.0), 0);
        settle(&mut state, &geometry, &rules);
        let interval = u32::from(rules.weapon.fire_interval_ticks);
        let magazine = u32::from(rules.weapon.magazine);
        let mut shot_ticks = Vec::new();
        let mut tick = 0u32;
        while shot_ticks.len() < magazine as usize + 1 && tick < 400 {
            if simulate_player(&mut state, &fire(), &geometry, &rules).is_some() {
                shot_ticks.push(tick);
            }
            tick += 1;
        }
        // A full magazine at one shot per interval...
        for pair in shot_ticks[..magazine as usize].windows(2) {
            assert_eq!(pair[1] - pair[0], interval);
        }
        // ...then an empty trigger pull starts the reload, and the next shot comes when it completes.
        let last_of_magazine = shot_ticks[magazine as usize - 1];
        let first_after_reload = shot_ticks[magazine as usize];
        let empty_pull = last_of_magazine + interval;
        assert_eq!(
            first_after_reload,
            empty_pull + u32::from(rules.weapon.reload_ticks)
        );
        assert_eq!(state.weapon.ammo, rules.weapon.magazine - 1);

        // A manual reload refills a partial magazine and blocks fire meanwhile.
        let reload = PlayerInput {
            buttons: buttons::RELOAD,
            ..PlayerInput::default()
        };
        simulate_player(&mut state, &reload, &geometry, &rules);
        assert_eq!(state.weapon.reload_remaining, rules.weapon.reload_ticks);
        for _ in 1..rules.weapon.reload_ticks {
            assert!(simulate_player(&mut state, &fire(), &geometry, &rules).is_none());
        }
        assert!(simulate_player(&mut state, &fire(), &geometry, &rules).is_some());
        assert_eq!(state.weapon.ammo, rules.weapon.magazine - 1);
    }

    #[test]
    fn a_dead_player_neither_moves_nor_fires_and_counts_down() {
        let rules = GameRules::default();
        let geometry = WorldGeometry::new(&ArenaMap::standard());
        let mut state = PlayerState::spawned(&rules, &Point3::new(0.0, 0.0, -8.0), 0);
        state.vitals = Vitals {
            health: 0,
            respawn_in: 3,
        };
        let before = state.motion;
        let input = PlayerInput {
            move_z: 7,
            buttons: buttons::FIRE,
            ..PlayerInput::default()
        };
        for expected in [2, 1, 0, 0] {
            assert!(simulate_player(&mut state, &input, &geometry, &rules).is_none());
            assert_eq!(state.vitals.respawn_in, expected);
        }
        assert_eq!(state.motion, before);
    }
}
