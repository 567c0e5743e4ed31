//! Headless bots: inputs that move and shoot at the nearest visible player, computed from what a client sees
//! (its predicted self and the interpolated others), for tests and load.

use std::time::Duration;

use physync_engine::shooter::input::buttons;
use physync_engine::shooter::units;
use physync_engine::shooter::{PlayerId, PlayerInput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::client::ShooterClient;

/// A bot's temperament.
#[derive(Debug, Clone, PartialEq)]
pub struct BotConfig {
    /// Largest aim error, yaw steps (65536 a turn).
    pub aim_error: u16,
    /// Probability per tick of pulling the trigger while a target is in sight.
    pub trigger: f64,
    /// Ticks between changes of the strafe direction, at least.
    pub strafe_ticks: u32,
}

impl Default for BotConfig {
    fn default() -> Self {
        Self {
            aim_error: 400,
            trigger: 0.6,
            strafe_ticks: 20,
        }
    }
}

/// One bot's state: its dice, its strafe and its current target.
#[derive(Debug, Clone)]
pub struct Bot {
    config: BotConfig,
    rng: ChaCha8Rng,
    strafe: i8,
    forward: i8,
    until_change: u32,
    target: Option<PlayerId>,
}

impl Bot {
    /// A bot with `config`, its dice seeded by `seed`.
    pub fn new(config: BotConfig, seed: u64) -> Self {
        Self {
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            strafe: 7,
            forward: 0,
            until_change: 0,
            target: None,
        }
    }

    /// The target the bot aims at, if any.
    pub fn target(&self) -> Option<PlayerId> {
        self.target
    }

    /// The input for the client's next tick, from what the client sees at `now`.
    pub fn input(&mut self, client: &ShooterClient, now: Duration) -> PlayerInput {
        let (Some(me), Some(data)) = (client.local_state(), client.match_data()) else {
            return PlayerInput::default();
        };
        if self.until_change == 0 {
            self.until_change = self.config.strafe_ticks
                + self.rng.random_range(0..self.config.strafe_ticks.max(1));
            self.strafe = if self.rng.random_bool(0.5) { 7 } else { -7 };
            self.forward = self.rng.random_range(-7..=7);
        }
        self.until_change -= 1;
        let eye = me.eye(&data.rules);
        let nearest = client.nearest_opponent_in_sight(now);
        let mut input = PlayerInput {
            move_x: self.strafe,
            move_z: self.forward,
            yaw: me.motion.yaw,
            pitch: 0,
            buttons: 0,
        };
        self.target = nearest.map(|(id, _)| id);
        match nearest {
            Some((_, chest)) => {
                let (yaw, pitch) = units::aim_at(&eye, &chest);
                let error = i32::from(self.config.aim_error);
                let jitter = self.rng.random_range(-error..=error);
                input.yaw = (i32::from(yaw) + jitter).rem_euclid(65_536) as u16;
                input.pitch = pitch;
                if self.rng.random_bool(self.config.trigger) {
                    input.buttons |= buttons::FIRE;
                }
            }
            None => {
                // Wander: turn slowly so someone comes into view.
                input.yaw = me.motion.yaw.wrapping_add(900);
            }
        }
        if me.weapon.ammo == 0 {
            input.buttons |= buttons::RELOAD;
        }
        if self.rng.random_ratio(1, 90) {
            input.buttons |= buttons::JUMP;
        }
        input
    }
}
