//! The server's authoritative match state: every player stepped through [`simulate_player`] from its input,
//! shots traced with lag compensation and damage applied in the present, death and respawn, the score, and the
//! physics cubes in a rapier world of their own (players push them as kinematic capsules; shots knock them).

use std::collections::BTreeMap;
use std::time::Duration;

use nalgebra::{Point3, Vector3};
use physync_codec::{BodyState, QuantConfig};
use rapier3d::prelude::{ColliderBuilder, PhysicsWorld, RigidBodyBuilder, RigidBodyHandle};
use thiserror::Error;

use super::convert::{point_to_glam, vector_to_glam};
use super::cubes::{CubePose, CubeTrack, poses_at_view};
use super::hitbox::{HitZone, PlayerHit, ShotRay, TargetPose, trace_shot};
use super::ids::{EntityId, ServerIdAllocator};
use super::input::{InputCommand, PlayerInput, ViewTime};
use super::lagcomp::{HitboxHistory, RecordedPose, RewindError};
use super::map::{ArenaMap, WorldGeometry};
use super::player::{PlayerState, simulate_player};
use super::rules::GameRules;
use super::units;
use super::{PlayerId, Tick};

/// Density of the physics cubes, kg/m³ (a 1 m cube weighs 20 kg: shots and players move it).
const CUBE_DENSITY: f32 = 20.0;

/// Match-level settings that are not game rules.
#[derive(Debug, Clone, PartialEq)]
pub struct WorldConfig {
    /// Most players in the match.
    pub max_players: usize,
    /// Longest rewind granted to a shot (capped at [`super::lagcomp::MAX_REWIND`]).
    pub max_rewind: Duration,
    /// How cube states are quantized for the wire: the states the world records and meets players with are
    /// exactly the ones clients receive.
    pub cube_quant: QuantConfig,
}

impl Default for WorldConfig {
    fn default() -> Self {
        Self {
            max_players: 10,
            max_rewind: Duration::from_secs(1),
            cube_quant: QuantConfig::default(),
        }
    }
}

/// Kills and deaths of one player.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Score {
    /// Players this player killed.
    pub kills: u32,
    /// Times this player died.
    pub deaths: u32,
}

/// Why a player could not join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum JoinError {
    /// The match already holds `max_players`.
    #[error("the match is full")]
    Full,
    /// Another player holds that slot.
    #[error("slot {0:?} is taken")]
    SlotTaken(PlayerId),
}

/// A shot the server resolved this tick.
#[derive(Debug, Clone, PartialEq)]
pub struct ShotEvent {
    /// Server id of the shot (clients draw their own predicted shot under a client-local id).
    pub id: EntityId,
    /// Who fired.
    pub shooter: PlayerId,
    /// The ray, from the shooter's present eye.
    pub ray: ShotRay,
    /// When the shooter saw its targets.
    pub view: ViewTime,
    /// `Ok` when the targets were rewound to `view`, else why they were traced in the present.
    pub rewind: Result<(), RewindError>,
    /// Distance to the world surface (wall, cover or cube) that stopped the shot, if any.
    pub blocked_at: Option<f32>,
    /// The player struck, if any.
    pub hit: Option<PlayerHit>,
    /// Damage applied in the present (0 when the target was already dead or nothing was hit).
    pub damage: u16,
}

/// A kill this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillEvent {
    /// Who fired the killing shot; `None` when the victim left the arena's bounds (fell off the map).
    pub killer: Option<PlayerId>,
    /// Who died.
    pub victim: PlayerId,
}

/// What happened in one tick, for the session layer to report to clients.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TickEvents {
    /// The tick these events belong to.
    pub tick: Tick,
    /// Shots fired.
    pub shots: Vec<ShotEvent>,
    /// Kills.
    pub kills: Vec<KillEvent>,
    /// Players who respawned.
    pub respawns: Vec<PlayerId>,
}

/// A player or a cube, as one state a snapshot carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Entity {
    /// A player by slot.
    Player(PlayerId),
    /// A cube by its index in the map.
    Cube(usize),
}

/// Which snapshot states each client held when it gave an input (the snapshots it had received, and in them
/// the players and cubes that were sent): the server meets the input with exactly the poses the client
/// interpolated from those states, so a lost snapshot changes nothing between prediction and judgement.
pub trait HeldStates {
    /// True when `viewer`, giving its input for `input_tick`, held the state of `entity` at `tick`.
    fn held(&self, viewer: PlayerId, input_tick: Tick, entity: Entity, tick: Tick) -> bool;
}

/// Every state held: a client on a perfect link (and what a player without an input is met with).
#[derive(Debug, Clone, Copy, Default)]
pub struct HeldEverything;

impl HeldStates for HeldEverything {
    fn held(&self, _: PlayerId, _: Tick, _: Entity, _: Tick) -> bool {
        true
    }
}

/// Counters of the match, cumulative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorldStats {
    /// Shots fired.
    pub shots: u64,
    /// Shots that struck a player.
    pub hits: u64,
    /// Shots traced against rewound hitboxes.
    pub rewound: u64,
    /// Shots whose view time was refused, traced in the present.
    pub not_rewound: u64,
    /// Inputs whose axes, pitch or buttons were outside the rules and were clamped.
    pub clamped_inputs: u64,
}

struct ServerPlayer {
    state: PlayerState,
    body: RigidBodyHandle,
    last_input: PlayerInput,
    score: Score,
}

/// The authoritative match.
pub struct ShooterWorld {
    rules: GameRules,
    config: WorldConfig,
    map: ArenaMap,
    geometry: WorldGeometry,
    physics: PhysicsWorld,
    cubes: Vec<RigidBodyHandle>,
    cube_tracks: Vec<CubeTrack>,
    players: BTreeMap<PlayerId, ServerPlayer>,
    history: HitboxHistory,
    tick: Tick,
    ids: ServerIdAllocator,
    stats: WorldStats,
}

impl ShooterWorld {
    /// A match on `map` at tick 0 with no players yet.
    pub fn new(rules: GameRules, config: WorldConfig, map: ArenaMap) -> Self {
        let geometry = WorldGeometry::new(&map);
        let mut physics = PhysicsWorld::new();
        physics.integration_parameters.dt = rules.dt();
        physics.gravity = rapier3d::math::Vector::new(0.0, -9.81, 0.0);
        map.insert_static(&mut physics);
        let cubes = map
            .cubes
            .iter()
            .map(|cube| {
                let h = cube.half_extent;
                physics
                    .insert(
                        RigidBodyBuilder::dynamic().translation(point_to_glam(&cube.center)),
                        ColliderBuilder::cuboid(h, h, h).density(CUBE_DENSITY),
                    )
                    .0
            })
            .collect();
        let history = HitboxHistory::new(config.max_rewind, rules.tick_rate_hz);
        let track_len = history.window_ticks() as usize + 2;
        let cube_tracks = map
            .cubes
            .iter()
            .map(|_| CubeTrack::new(track_len))
            .collect();
        let mut world = Self {
            rules,
            config,
            map,
            geometry,
            physics,
            cubes,
            cube_tracks,
            players: BTreeMap::new(),
            history,
            tick: 0,
            ids: ServerIdAllocator::default(),
            stats: WorldStats::default(),
        };
        world.record_history();
        world
    }

    /// The rules of the match.
    pub fn rules(&self) -> &GameRules {
        &self.rules
    }

    /// The arena.
    pub fn map(&self) -> &ArenaMap {
        &self.map
    }

    /// The static geometry (the same a client builds from the map for its prediction).
    pub fn geometry(&self) -> &WorldGeometry {
        &self.geometry
    }

    /// The last completed tick.
    pub fn tick(&self) -> Tick {
        self.tick
    }

    /// Cumulative counters.
    pub fn stats(&self) -> WorldStats {
        self.stats
    }

    /// The lag-compensation history.
    pub fn history(&self) -> &HitboxHistory {
        &self.history
    }

    /// Adds a player in slot `id`, spawned at the spawn point farthest from the living players.
    pub fn add_player(&mut self, id: PlayerId) -> Result<&PlayerState, JoinError> {
        if self.players.contains_key(&id) {
            return Err(JoinError::SlotTaken(id));
        }
        if self.players.len() >= self.config.max_players {
            return Err(JoinError::Full);
        }
        let spawn = self.choose_spawn(id);
        let state = PlayerState::spawned(&self.rules, &spawn.position, spawn.yaw);
        let body = &self.rules.body;
        let center = state.position() + Vector3::new(0.0, body.capsule_center_height(), 0.0);
        let (handle, _) = self.physics.insert(
            RigidBodyBuilder::kinematic_position_based().translation(point_to_glam(&center)),
            ColliderBuilder::capsule_y(body.capsule_half_segment, body.capsule_radius),
        );
        let player = self.players.entry(id).or_insert(ServerPlayer {
            state,
            body: handle,
            last_input: PlayerInput {
                yaw: spawn.yaw,
                ..PlayerInput::default()
            },
            score: Score::default(),
        });
        Ok(&player.state)
    }

    /// Removes a player; returns whether it was present.
    pub fn remove_player(&mut self, id: PlayerId) -> bool {
        match self.players.remove(&id) {
            Some(player) => {
                self.physics.remove_body(player.body);
                true
            }
            None => false,
        }
    }

    /// A player's current state.
    pub fn player(&self, id: PlayerId) -> Option<&PlayerState> {
        self.players.get(&id).map(|p| &p.state)
    }

    /// Every player's current state, in slot order.
    pub fn players(&self) -> impl Iterator<Item = (PlayerId, &PlayerState)> {
        self.players.iter().map(|(id, p)| (*id, &p.state))
    }

    /// A player's score.
    pub fn score(&self, id: PlayerId) -> Option<Score> {
        self.players.get(&id).map(|p| p.score)
    }

    /// Overwrites a player's state (tests and scenario setup: teleport, set health).
    pub fn set_player_state(&mut self, id: PlayerId, state: PlayerState) -> bool {
        match self.players.get_mut(&id) {
            Some(player) => {
                player.state = state;
                true
            }
            None => false,
        }
    }

    /// The cubes' states quantized with `config`, in map order (cubes at rest report zero velocities).
    pub fn cube_states(&self, config: &QuantConfig) -> Vec<BodyState> {
        self.cubes
            .iter()
            .map(|handle| {
                let body = &self.physics.bodies[*handle];
                let t = body.translation();
                let r = body.rotation();
                let v = body.linvel();
                let w = body.angvel();
                BodyState::quantize(
                    config,
                    [t.x, t.y, t.z],
                    [r.x, r.y, r.z, r.w],
                    [v.x, v.y, v.z],
                    [w.x, w.y, w.z],
                    body.is_sleeping(),
                )
            })
            .collect()
    }

    /// Runs one tick with the players' commands for it (the command's `tick` is the caller's business; a player
    /// without a command repeats its previous movement and view with no button held). Order: every player moves and fires through
    /// [`simulate_player`]; the shots are traced against the other players rewound to each shot's view time and
    /// damage lands in the present; the physics cubes step; the dead whose timer ran out respawn; the tick's
    /// hitbox poses are recorded for later rewinds.
    pub fn step(&mut self, commands: &[(PlayerId, InputCommand)]) -> TickEvents {
        self.step_held(commands, &HeldEverything)
    }

    /// [`ShooterWorld::step`] for clients that held only the snapshot states `held` says: each input meets the
    /// cubes, and each shot the other players, blended from those states alone.
    pub fn step_held(
        &mut self,
        commands: &[(PlayerId, InputCommand)],
        held: &dyn HeldStates,
    ) -> TickEvents {
        self.tick += 1;
        let tick = self.tick;
        let commands: BTreeMap<PlayerId, &InputCommand> =
            commands.iter().map(|(id, c)| (*id, c)).collect();
        let mut pending = Vec::new();
        for (id, player) in self.players.iter_mut() {
            let (input, view, input_tick) = match commands.get(id) {
                Some(command) => (command.input, command.view, Some(command.tick)),
                None => (
                    player.last_input.repeated(),
                    ViewTime::at(tick.saturating_sub(1)),
                    None,
                ),
            };
            let had = |k: usize, t: Tick| {
                input_tick.is_none_or(|i| held.held(*id, i, Entity::Cube(k), t))
            };
            let (input, clamped) = input.sanitized();
            self.stats.clamped_inputs += u64::from(clamped);
            player.last_input = input;
            let seen = poses_at_view(&self.cube_tracks, view, self.geometry.initial_cubes(), &had);
            self.geometry.place_cubes(&seen);
            if let Some(ray) =
                simulate_player(&mut player.state, &input, &self.geometry, &self.rules)
            {
                pending.push((*id, ray, view, input_tick));
            }
        }

        let mut events = TickEvents {
            tick,
            ..TickEvents::default()
        };
        self.remove_the_fallen(&mut events.kills);

        for (shooter, ray, view, input_tick) in pending {
            let had = |entity: Entity, t: Tick| {
                input_tick.is_none_or(|i| held.held(shooter, i, entity, t))
            };
            let shot = self.resolve_shot(tick, shooter, ray, view, &had, &mut events.kills);
            events.shots.push(shot);
        }

        for player in self.players.values() {
            let center = player.state.position()
                + Vector3::new(0.0, self.rules.body.capsule_center_height(), 0.0);
            if let Some(body) = self.physics.bodies.get_mut(player.body) {
                // The dead leave no body for cubes to bump into.
                body.set_enabled(player.state.alive());
                body.set_next_kinematic_translation(point_to_glam(&center));
            }
        }
        self.physics.step();

        let ready: Vec<PlayerId> = self
            .players
            .iter()
            .filter(|(_, p)| !p.state.alive() && p.state.vitals.respawn_in == 0)
            .map(|(id, _)| *id)
            .collect();
        for id in ready {
            let spawn = self.choose_spawn(id);
            if let Some(player) = self.players.get_mut(&id) {
                player.state = PlayerState::spawned(&self.rules, &spawn.position, spawn.yaw);
                let center = spawn.position
                    + Vector3::new(0.0, self.rules.body.capsule_center_height(), 0.0);
                if let Some(body) = self.physics.bodies.get_mut(player.body) {
                    body.set_enabled(true);
                    body.set_translation(point_to_glam(&center), true);
                }
                events.respawns.push(id);
            }
        }

        self.record_history();
        events
    }

    /// Kills every living player outside the bounds a snapshot can carry (fallen off the map, or put there by
    /// game code) and holds it at the edge until it respawns, so one player can never make the snapshots of the
    /// whole match unencodable.
    fn remove_the_fallen(&mut self, kills: &mut Vec<KillEvent>) {
        let respawn_ticks = self.rules.vitals.respawn_ticks;
        for (id, player) in self.players.iter_mut() {
            let motion = &mut player.state.motion;
            if units::in_bounds(motion.position) {
                continue;
            }
            motion.position = units::clamp_to_bounds(motion.position);
            motion.vertical_velocity = 0;
            if player.state.alive() {
                player.state.vitals.health = 0;
                player.state.vitals.respawn_in = respawn_ticks;
                player.score.deaths += 1;
                kills.push(KillEvent {
                    killer: None,
                    victim: *id,
                });
            }
        }
    }

    fn resolve_shot(
        &mut self,
        tick: Tick,
        shooter: PlayerId,
        ray: ShotRay,
        view: ViewTime,
        had: &dyn Fn(Entity, Tick) -> bool,
        kills: &mut Vec<KillEvent>,
    ) -> ShotEvent {
        self.stats.shots += 1;
        let rewound = if view == ViewTime::at(tick) {
            Ok(self.present_targets())
        } else {
            self.history
                .rewind_held(tick, view, &|p, t| had(Entity::Player(p), t))
        };
        let (targets, rewind) = match rewound {
            Ok(targets) => {
                self.stats.rewound += 1;
                (targets, Ok(()))
            }
            Err(error) => {
                self.stats.not_rewound += 1;
                (self.present_targets(), Err(error))
            }
        };
        // The cubes stand where the shooter saw them, like the other players.
        let cube_view = if rewind.is_ok() {
            view
        } else {
            ViewTime::at(tick.saturating_sub(1))
        };
        let rewound_ok = rewind.is_ok();
        let seen = poses_at_view(
            &self.cube_tracks,
            cube_view,
            self.geometry.initial_cubes(),
            &|k, t| !rewound_ok || had(Entity::Cube(k), t),
        );
        self.geometry.place_cubes(&seen);
        let blocker = self
            .geometry
            .cast_ray_at(&ray.origin, &ray.direction, ray.range);
        let blocked_at = blocker.map(|(toi, _)| toi);
        let hit = trace_shot(&ray, shooter, &targets, blocked_at, &self.rules.body);
        if hit.is_none()
            && let Some((toi, Some(cube))) = blocker
        {
            self.push_cube(cube, &seen[cube], &ray, toi);
        }
        let mut damage = 0;
        if let Some(hit) = hit {
            self.stats.hits += 1;
            damage = self.apply_damage(shooter, &hit, kills);
        }
        ShotEvent {
            id: self.ids.allocate(),
            shooter,
            ray,
            view,
            rewind,
            blocked_at,
            hit,
            damage,
        }
    }

    /// Knocks cube `cube`, struck at distance `toi` along `ray` while it stood at `seen`: the impulse lands on
    /// the cube in the present, at the same point relative to its centre.
    fn push_cube(&mut self, cube: usize, seen: &CubePose, ray: &ShotRay, toi: f32) {
        let Some(body) = self
            .cubes
            .get(cube)
            .and_then(|h| self.physics.bodies.get_mut(*h))
        else {
            return;
        };
        let t = body.translation();
        let present = Point3::new(t.x, t.y, t.z);
        let point = present + (ray.point_at(toi) - seen.center);
        let impulse = vector_to_glam(&(ray.direction * self.rules.weapon.cube_impulse));
        body.apply_impulse_at_point(impulse, point_to_glam(&point), true);
    }

    fn apply_damage(
        &mut self,
        shooter: PlayerId,
        hit: &PlayerHit,
        kills: &mut Vec<KillEvent>,
    ) -> u16 {
        let amount = match hit.zone {
            HitZone::Body => self.rules.weapon.body_damage,
            HitZone::Head => self.rules.weapon.head_damage,
        };
        let respawn_ticks = self.rules.vitals.respawn_ticks;
        let Some(victim) = self.players.get_mut(&hit.player) else {
            return 0;
        };
        if !victim.state.alive() {
            return 0;
        }
        let dealt = amount.min(victim.state.vitals.health);
        victim.state.vitals.health -= dealt;
        if victim.state.alive() {
            return dealt;
        }
        victim.state.vitals.respawn_in = respawn_ticks;
        victim.score.deaths += 1;
        if let Some(killer) = self.players.get_mut(&shooter) {
            killer.score.kills += 1;
        }
        kills.push(KillEvent {
            killer: Some(shooter),
            victim: hit.player,
        });
        dealt
    }

    fn present_targets(&self) -> Vec<TargetPose> {
        self.players
            .iter()
            .map(|(id, p)| TargetPose {
                player: *id,
                feet: p.state.position(),
                alive: p.state.alive(),
            })
            .collect()
    }

    /// Every cube's pose at `view` as the world has it (what a client that received every snapshot sees).
    pub fn cube_poses_at(&self, view: ViewTime) -> Vec<CubePose> {
        poses_at_view(
            &self.cube_tracks,
            view,
            self.geometry.initial_cubes(),
            &|_, _| true,
        )
    }

    fn record_history(&mut self) {
        let states = self.cube_states(&self.config.cube_quant);
        for (track, state) in self.cube_tracks.iter_mut().zip(states) {
            track.push(self.tick, state, &self.config.cube_quant);
        }
        let poses = self
            .players
            .iter()
            .map(|(id, p)| RecordedPose {
                player: *id,
                position: p.state.motion.position,
                alive: p.state.alive(),
            })
            .collect();
        self.history.record(self.tick, poses);
    }

    fn choose_spawn(&self, joining: PlayerId) -> super::map::SpawnPoint {
        let others: Vec<Point3<f32>> = self
            .players
            .iter()
            .filter(|(id, p)| **id != joining && p.state.alive())
            .map(|(_, p)| p.state.position())
            .collect();
        let spawns = &self.map.spawn_points;
        if spawns.is_empty() {
            return super::map::SpawnPoint {
                position: Point3::new(0.0, 0.0, 0.0),
                yaw: 0,
            };
        }
        if others.is_empty() {
            return spawns[usize::from(joining.0) % spawns.len()].clone();
        }
        let clearance = |p: &Point3<f32>| {
            others
                .iter()
                .map(|o| nalgebra::distance_squared(p, o))
                .fold(f32::INFINITY, f32::min)
        };
        let mut best = &spawns[0];
        for spawn in &spawns[1..] {
            if clearance(&spawn.position) > clearance(&best.position) {
                best = spawn;
            }
        }
        best.clone()
    }
}

impl std::fmt::Debug for ShooterWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShooterWorld")
            .field("tick", &self.tick)
            .field("players", &self.players.len())
            .field("cubes", &self.cubes.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// An input that holds a player at `state` still and aims its eye at the chest of a player standing at
/// `target_feet`, with `buttons` held: how bots and tests aim at what they see.
pub fn aim_input(
    rules: &GameRules,
    state: &PlayerState,
    target_feet: &Point3<f32>,
    buttons: u8,
) -> PlayerInput {
    let chest = target_feet + Vector3::new(0.0, rules.body.body_hit_top * 0.6, 0.0);
    let (yaw, pitch) = units::aim_at(&state.eye(rules), &chest);
    PlayerInput {
        move_x: 0,
        move_z: 0,
        yaw,
        pitch,
        buttons,
    }
}
