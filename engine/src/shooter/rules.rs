//! The match rules every participant shares: tick rate, movement, weapon, health and body dimensions. They are
//! part of the static match data the server sends at connect, so client prediction runs on the same numbers.

use std::time::Duration;

/// Movement limits of a player.
#[derive(Debug, Clone, PartialEq)]
pub struct MovementRules {
    /// Horizontal speed at full stick deflection, m/s.
    pub max_speed: f32,
    /// Upward speed given by a jump, m/s.
    pub jump_speed: f32,
    /// Downward acceleration, m/s².
    pub gravity: f32,
    /// Terminal falling speed, m/s.
    pub max_fall_speed: f32,
}

impl Default for MovementRules {
    fn default() -> Self {
        Self {
            max_speed: 6.0,
            jump_speed: 5.5,
            gravity: 20.0,
            max_fall_speed: 30.0,
        }
    }
}

/// The hitscan weapon every player carries.
#[derive(Debug, Clone, PartialEq)]
pub struct WeaponRules {
    /// Ticks between two shots (4 at 30 Hz: 7.5 shots a second).
    pub fire_interval_ticks: u16,
    /// Rounds in a full magazine.
    pub magazine: u16,
    /// Ticks a reload takes.
    pub reload_ticks: u16,
    /// Damage of a body hit.
    pub body_damage: u16,
    /// Damage of a head hit.
    pub head_damage: u16,
    /// How far a shot reaches, metres.
    pub range: f32,
    /// Impulse a shot gives a physics cube it hits, N·s.
    pub cube_impulse: f32,
}

impl Default for WeaponRules {
    fn default() -> Self {
        Self {
            fire_interval_ticks: 4,
            magazine: 20,
            reload_ticks: 45,
            body_damage: 25,
            head_damage: 60,
            range: 80.0,
            cube_impulse: 30.0,
        }
    }
}

/// Health and respawn.
#[derive(Debug, Clone, PartialEq)]
pub struct VitalsRules {
    /// Health at spawn.
    pub max_health: u16,
    /// Ticks a dead player waits before respawning.
    pub respawn_ticks: u16,
}

impl Default for VitalsRules {
    fn default() -> Self {
        Self {
            max_health: 100,
            respawn_ticks: 90,
        }
    }
}

/// A player's shape: the kinematic capsule that moves and the hitboxes shots are traced against. All heights are
/// measured from the player's position, which is the bottom of the capsule (the feet).
#[derive(Debug, Clone, PartialEq)]
pub struct BodyDims {
    /// Radius of the movement capsule, metres.
    pub capsule_radius: f32,
    /// Half length of the movement capsule's inner segment; total height is `2 * (radius + half_segment)`.
    pub capsule_half_segment: f32,
    /// Height of the eyes, where shots start.
    pub eye_height: f32,
    /// Radius of the body hitbox capsule.
    pub body_hit_radius: f32,
    /// Height of the body hitbox's top (its capsule spans from the feet to here).
    pub body_hit_top: f32,
    /// Radius of the head hitbox sphere.
    pub head_radius: f32,
    /// Height of the head sphere's centre.
    pub head_height: f32,
}

impl Default for BodyDims {
    fn default() -> Self {
        Self {
            capsule_radius: 0.4,
            capsule_half_segment: 0.5,
            eye_height: 1.6,
            body_hit_radius: 0.38,
            body_hit_top: 1.5,
            head_radius: 0.2,
            head_height: 1.62,
        }
    }
}

impl BodyDims {
    /// Height of the capsule's centre above the feet.
    pub fn capsule_center_height(&self) -> f32 {
        self.capsule_radius + self.capsule_half_segment
    }
}

/// Everything a match runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct GameRules {
    /// Simulation ticks per second (30 in seed 000).
    pub tick_rate_hz: u32,
    /// Movement limits.
    pub movement: MovementRules,
    /// The weapon.
    pub weapon: WeaponRules,
    /// Health and respawn.
    pub vitals: VitalsRules,
    /// Player shape.
    pub body: BodyDims,
}

impl Default for GameRules {
    fn default() -> Self {
        Self {
            tick_rate_hz: 30,
            movement: MovementRules::default(),
            weapon: WeaponRules::default(),
            vitals: VitalsRules::default(),
            body: BodyDims::default(),
        }
    }
}

impl GameRules {
    /// Seconds per tick.
    pub fn dt(&self) -> f32 {
        1.0 / self.tick_rate_hz.max(1) as f32
    }

    /// Duration of one tick.
    pub fn tick_duration(&self) -> Duration {
        Duration::from_secs(1) / self.tick_rate_hz.max(1)
    }

    /// The whole number of ticks nearest to `duration`.
    pub fn ticks_in(&self, duration: Duration) -> u32 {
        (duration.as_secs_f64() * f64::from(self.tick_rate_hz.max(1))).round() as u32
    }
}
