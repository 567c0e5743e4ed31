//! Scripted players for headless sessions, tests and benchmarks: a builder stacks towers, a thrower throws cubes
//! at them, a grabber contests the cubes other players reach for. Each drives a [`PlayerControls`] (a guest's
//! session or the host) with seeded randomness, so a session of bots is reproducible.
//!
//! Call [`Bot::act`] before each of the core's deadlines is handled (the drivers' input hook): it moves the hands
//! by the time elapsed and grabs, releases or throws on the frame it decides to.

mod arm;
mod duel;
mod long_haul;
mod pick;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use nalgebra::{Point3, Vector3};
use physync_engine::session::PlayerControls;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::ObjectId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use arm::Arm;

pub use duel::{Duel, DuelRound};
pub use long_haul::LongHaul;

/// Hand speed while reaching and carrying (m/s).
const HAND_SPEED: f32 = 2.0;
/// The grabber's hand speed: it rushes (m/s).
const RUSH_SPEED: f32 = 4.0;
/// Height at which cubes are carried (m).
const CARRY_HEIGHT: f32 = 1.4;
/// Cubes a builder stacks before it starts another tower.
const TOWER_HEIGHT: usize = 5;
/// Horizontal speed of a throw (m/s).
const THROW_SPEED: f32 = 6.0;
/// Shortest flight of a throw (s).
const MIN_FLIGHT: f32 = 0.4;
/// Gravity the thrower aims with (m/s²).
const GRAVITY: f32 = 9.81;
/// How close (m) another player's hand must be to a free cube for the grabber to contest it.
const CONTEST_RADIUS: f32 = 1.2;

/// The bots there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BotKind {
    /// Stacks towers of cubes.
    Builder,
    /// Throws cubes at towers.
    Thrower,
    /// Contests the cubes other players are reaching for.
    Grabber,
}

impl BotKind {
    /// Every bot, in the order sessions hand them out.
    pub const ALL: [BotKind; 3] = [BotKind::Builder, BotKind::Thrower, BotKind::Grabber];

    /// The name it is selected by.
    pub fn name(self) -> &'static str {
        match self {
            BotKind::Builder => "builder",
            BotKind::Thrower => "thrower",
            BotKind::Grabber => "grabber",
        }
    }
}

impl fmt::Display for BotKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A bot name that matches no bot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown bot {0:?} (expected builder, thrower or grabber)")]
pub struct UnknownBot(pub String);

impl FromStr for BotKind {
    type Err = UnknownBot;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BotKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownBot(s.to_owned()))
    }
}

/// What a bot is doing.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Task {
    /// Waiting until the given time.
    Pause { until: Duration },
    /// Moving the hand to a cube to grab it.
    Reach { cube: ObjectId },
    /// Carrying the held cube to a point (then placing, throwing or holding, by kind).
    Carry { cube: ObjectId, to: Point3<f32> },
    /// Lowering the held cube onto a tower.
    Place { cube: ObjectId, to: Point3<f32> },
    /// Holding a cube until the given time.
    Hold { cube: ObjectId, until: Duration },
}

/// One scripted player.
#[derive(Debug, Clone)]
pub struct Bot {
    kind: BotKind,
    rng: ChaCha8Rng,
    arm: Option<Arm>,
    task: Task,
    last: Option<Duration>,
    tower_site: Option<Point3<f32>>,
    placed: usize,
    towers_built: usize,
    actions: BotActions,
    avoid: Vec<ObjectId>,
}

/// What a bot has done, for tests and summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BotActions {
    /// Successful grabs.
    pub grabs: u64,
    /// Grabs refused (someone else held the cube).
    pub refused: u64,
    /// Cubes placed on towers.
    pub placed: u64,
    /// Cubes thrown.
    pub thrown: u64,
    /// Cubes released from a hold.
    pub released: u64,
    /// Cubes that left the hand without the bot letting go (lost to another player).
    pub lost: u64,
}

impl Bot {
    /// A bot of `kind` with its own seeded randomness.
    pub fn new(kind: BotKind, seed: u64) -> Self {
        Self {
            kind,
            rng: ChaCha8Rng::seed_from_u64(seed),
            arm: None,
            task: Task::Pause {
                until: Duration::ZERO,
            },
            last: None,
            tower_site: None,
            placed: 0,
            towers_built: 0,
            actions: BotActions::default(),
            avoid: Vec::new(),
        }
    }

    /// Cubes the bot never goes for (a script keeps them idle, or in another hand).
    pub fn avoid(&mut self, cubes: &[ObjectId]) {
        self.avoid = cubes.to_vec();
    }

    /// The bot's kind.
    pub fn kind(&self) -> BotKind {
        self.kind
    }

    /// What it has done so far.
    pub fn actions(&self) -> BotActions {
        self.actions
    }

    /// Whether the bot holds something right now.
    pub fn is_holding(&self, controls: &dyn PlayerControls) -> bool {
        controls
            .world()
            .grip(controls.player(), Hand::Right)
            .is_some()
    }

    /// Acts at `now`: moves the hand for the time since the last call and advances the task.
    pub fn act(&mut self, now: Duration, controls: &mut dyn PlayerControls) {
        let dt = self
            .last
            .map_or(0.0, |l| now.saturating_sub(l).as_secs_f32())
            .min(0.1);
        self.last = Some(now);
        let arm = *self.arm.get_or_insert_with(|| Arm::at_rest(controls));
        let mut arm = arm;
        let held = controls
            .world()
            .grip(controls.player(), Hand::Right)
            .map(|g| g.object);
        self.task = match self.task {
            Task::Pause { until } => {
                if now >= until {
                    self.pick(now, controls)
                } else {
                    self.task
                }
            }
            Task::Reach { cube } => self.reach(now, controls, &mut arm, cube, dt),
            Task::Carry { cube, to } => {
                if held != Some(cube) {
                    self.actions.lost += 1;
                    self.pause(now, 0.3)
                } else if arm.move_toward(to, HAND_SPEED, dt) {
                    self.arrived(now, controls, &arm, cube)
                } else {
                    self.task
                }
            }
            Task::Place { cube, to } => {
                if held != Some(cube) {
                    self.actions.lost += 1;
                    self.pause(now, 0.3)
                } else if arm.move_toward(to, HAND_SPEED * 0.25, dt) {
                    controls.release(Hand::Right);
                    self.actions.placed += 1;
                    self.placed += 1;
                    if self.placed >= TOWER_HEIGHT {
                        self.placed = 0;
                        self.towers_built += 1;
                        self.tower_site = None;
                    }
                    self.pause(now, 0.5)
                } else {
                    self.task
                }
            }
            Task::Hold { cube, until } => {
                if held != Some(cube) {
                    self.actions.lost += 1;
                    self.pause(now, 0.3)
                } else if now >= until {
                    controls.release(Hand::Right);
                    self.actions.released += 1;
                    let wait = self.rng.random_range(0.3..0.8);
                    self.pause(now, wait)
                } else {
                    self.task
                }
            }
        };
        controls.set_hand_pose(Hand::Right, arm.pose());
        self.arm = Some(arm);
    }

    fn pause(&self, now: Duration, seconds: f32) -> Task {
        Task::Pause {
            until: now + Duration::from_secs_f32(seconds),
        }
    }

    /// Chooses the next cube to go for.
    fn pick(&mut self, now: Duration, controls: &dyn PlayerControls) -> Task {
        let world = controls.world();
        let me = controls.player();
        let hand = self.arm_position();
        let site = (self.kind == BotKind::Builder).then(|| self.site(controls));
        let avoid = &self.avoid;
        let allowed = |id: ObjectId| !avoid.contains(&id);
        let cube = match (self.kind, site) {
            (BotKind::Grabber, _) => pick::contested(world, me, CONTEST_RADIUS)
                .filter(|&id| allowed(id))
                .or_else(|| pick::random_free(world, &mut self.rng, allowed)),
            (BotKind::Builder, Some(site)) => {
                pick::nearest_free(world, &mut self.rng, hand, |id| {
                    allowed(id) && pick::horizontal_distance(world, id, site) > 0.6
                })
            }
            (BotKind::Thrower | BotKind::Builder, _) => {
                pick::nearest_free(world, &mut self.rng, hand, allowed)
            }
        };
        match cube {
            Some(cube) => Task::Reach { cube },
            None => self.pause(now, 0.5),
        }
    }

    fn arm_position(&self) -> Point3<f32> {
        self.arm.map_or(Point3::origin(), |a| a.position())
    }

    fn reach(
        &mut self,
        now: Duration,
        controls: &mut dyn PlayerControls,
        arm: &mut Arm,
        cube: ObjectId,
        dt: f32,
    ) -> Task {
        let world = controls.world();
        if world.holder(cube).is_some() {
            self.actions.refused += 1;
            return self.pause(now, 0.2);
        }
        let target = Point3::from(world.physics_pose(cube).translation.vector + Vector3::y() * 0.3);
        let speed = if self.kind == BotKind::Grabber {
            RUSH_SPEED
        } else {
            HAND_SPEED
        };
        if !arm.move_toward(target, speed, dt) {
            return self.task;
        }
        controls.set_hand_pose(Hand::Right, arm.pose());
        if controls.grab(Hand::Right, cube).is_err() {
            self.actions.refused += 1;
            return self.pause(now, 0.2);
        }
        self.actions.grabs += 1;
        match self.kind {
            BotKind::Builder => {
                let site = self.site(controls);
                Task::Carry {
                    cube,
                    to: Point3::new(site.x, CARRY_HEIGHT, site.z),
                }
            }
            BotKind::Thrower => {
                let head = controls.world().avatar_pose(controls.player()).head;
                let ahead = head * Point3::new(0.0, -0.3, 0.8);
                Task::Carry { cube, to: ahead }
            }
            BotKind::Grabber => {
                let hold = self.rng.random_range(0.6..1.4);
                Task::Hold {
                    cube,
                    until: now + Duration::from_secs_f32(hold),
                }
            }
        }
    }

    fn arrived(
        &mut self,
        now: Duration,
        controls: &mut dyn PlayerControls,
        arm: &Arm,
        cube: ObjectId,
    ) -> Task {
        match self.kind {
            BotKind::Builder => {
                let site = self.site(controls);
                let half = controls.world().half_extents(cube).y;
                let y = half + self.placed as f32 * 2.0 * half + 0.02;
                Task::Place {
                    cube,
                    to: Point3::new(site.x, y, site.z),
                }
            }
            BotKind::Thrower => {
                let target =
                    pick::tower_top(controls.world()).unwrap_or(Point3::new(0.0, 0.25, 0.0));
                let from = arm.position();
                let velocity = aim(from, target);
                let spin = Vector3::new(
                    self.rng.random_range(-2.0..2.0),
                    self.rng.random_range(-2.0..2.0),
                    self.rng.random_range(-2.0..2.0),
                );
                controls.throw(Hand::Right, velocity, spin);
                self.actions.thrown += 1;
                let wait = self.rng.random_range(1.5..3.0);
                self.pause(now, wait)
            }
            BotKind::Grabber => self.pause(now, 0.3),
        }
    }

    /// The builder's current tower site: between its spawn and the table centre, moved along for each tower.
    fn site(&mut self, controls: &dyn PlayerControls) -> Point3<f32> {
        if let Some(site) = self.tower_site {
            return site;
        }
        let spawn = controls.world().avatar_pose(controls.player()).head;
        let sideways = (self.towers_built % 3) as f32 - 1.0;
        let site = spawn * Point3::new(sideways * 0.9, 0.0, 1.6);
        let site = Point3::new(site.x, 0.0, site.z);
        self.tower_site = Some(site);
        site
    }
}

/// Launch velocity from `from` that lands on `to`: at most [`THROW_SPEED`] horizontally, in the air at least
/// [`MIN_FLIGHT`] seconds (a lob for close targets, never a rocket).
fn aim(from: Point3<f32>, to: Point3<f32>) -> Vector3<f32> {
    let d = to - from;
    let horizontal = Vector3::new(d.x, 0.0, d.z);
    let t = (horizontal.norm() / THROW_SPEED).max(MIN_FLIGHT);
    let vy = (d.y + 0.5 * GRAVITY * t * t) / t;
    horizontal / t + Vector3::y() * vy
}
