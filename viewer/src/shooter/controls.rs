//! Mouse and keys to the shooter's [`PlayerInput`]: W/A/S/D move, the mouse turns the view (while captured by
//! a click into the view, or while dragging with the right button), the left button fires, R reloads, Space
//! jumps. A press shorter than a tick is latched until the client has run a tick with it, so no click is lost
//! between two 30 Hz ticks however fast frames come.

use egui::{InputState, Key, Vec2};
use physync_engine::shooter::input::{MOVE_AXIS_MAX, buttons};
use physync_engine::shooter::{PlayerInput, Tick, units};

/// Radians of turn per point of pointer motion.
pub const TURN_PER_POINT: f32 = 0.004;

/// The view angles and button latches of the local player.
#[derive(Debug, Clone, Default)]
pub struct Controls {
    /// View yaw, radians (0 looks along +Z, growing towards +X).
    yaw: f32,
    /// View pitch, radians (positive looks up).
    pitch: f32,
    /// Whether the view was set from the player's state yet (spawn yaw).
    aimed: bool,
    /// Pointer motion turns the view without a button held.
    captured: bool,
    /// Buttons pressed since the last tick that saw them, with the client tick at the press.
    latched: u8,
    latched_at: Option<Tick>,
}

/// What the view area reported about the pointer this frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct PointerOnView {
    /// The pointer is over the view.
    pub hovered: bool,
    /// The primary button went down on the view this frame.
    pub primary_pressed: bool,
    /// The primary button is held on the view.
    pub primary_down: bool,
    /// The secondary button is dragging on the view.
    pub secondary_drag: bool,
}

impl Controls {
    /// Take the view angles from the player's state (at spawn, before the mouse moved them).
    pub fn aim_from(&mut self, yaw: u16, pitch: i16) {
        if !self.aimed {
            self.yaw = units::yaw_radians(yaw);
            self.pitch = units::pitch_radians(pitch);
            self.aimed = true;
        }
    }

    /// Set the view angles outright (a director turning the view, as the `--screenshot` job does).
    pub fn look(&mut self, yaw: u16, pitch: i16) {
        self.yaw = units::yaw_radians(yaw);
        self.pitch = units::pitch_radians(pitch);
        self.aimed = true;
    }

    /// Whether pointer motion turns the view without a button held.
    pub fn captured(&self) -> bool {
        self.captured
    }

    /// Release the pointer (Esc, leaving).
    pub fn release(&mut self) {
        self.captured = false;
    }

    /// The current view yaw and pitch, radians.
    pub fn view_angles(&self) -> (f32, f32) {
        (self.yaw, self.pitch)
    }

    /// Turn the view by pointer motion in points (right and down positive).
    pub fn turn(&mut self, motion: Vec2) {
        self.yaw -= motion.x * TURN_PER_POINT;
        self.yaw = self.yaw.rem_euclid(std::f32::consts::TAU);
        let limit = units::pitch_radians(units::PITCH_LIMIT);
        self.pitch = (self.pitch - motion.y * TURN_PER_POINT).clamp(-limit, limit);
    }

    /// Read keys and the pointer for this frame and give the input for the next ticks; `tick` is the client's
    /// predicted tick before this frame's update.
    pub fn input(
        &mut self,
        input: &InputState,
        pointer: PointerOnView,
        tick: Option<Tick>,
    ) -> PlayerInput {
        if pointer.primary_pressed {
            self.captured = true;
        }
        if input.key_pressed(Key::Escape) {
            self.captured = false;
        }
        let motion = input
            .pointer
            .motion()
            .unwrap_or_else(|| input.pointer.delta());
        if pointer.secondary_drag || (self.captured && pointer.hovered) {
            self.turn(motion);
        }
        let mut pressed = 0;
        if pointer.primary_pressed {
            pressed |= buttons::FIRE;
        }
        if input.key_pressed(Key::R) {
            pressed |= buttons::RELOAD;
        }
        if input.key_pressed(Key::Space) {
            pressed |= buttons::JUMP;
        }
        if pressed != 0 {
            self.latched |= pressed;
            self.latched_at = tick;
        }
        let mut held = self.latched;
        if pointer.primary_down {
            held |= buttons::FIRE;
        }
        let axis = |plus: Key, minus: Key| -> i8 {
            let mut v = 0;
            if input.key_down(plus) {
                v += MOVE_AXIS_MAX;
            }
            if input.key_down(minus) {
                v -= MOVE_AXIS_MAX;
            }
            v
        };
        PlayerInput {
            move_x: axis(Key::D, Key::A),
            move_z: axis(Key::W, Key::S),
            yaw: units::yaw_from_radians(self.yaw),
            pitch: units::pitch_from_radians(self.pitch),
            buttons: held,
        }
    }

    /// Drop the latches once the client has run a tick past the one they were pressed at.
    pub fn ticked(&mut self, tick: Option<Tick>) {
        if self.latched != 0 && tick.is_some() && tick != self.latched_at {
            self.latched = 0;
            self.latched_at = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moving_the_pointer_right_turns_right_and_down_looks_down() {
        let mut c = Controls::default();
        c.turn(Vec2::new(50.0, 40.0));
        let (yaw, pitch) = c.view_angles();
        let forward = units::view_direction(units::yaw_from_radians(yaw), 0);
        // Looking along +Z at first, right is -X (the simulation's strafe-right direction).
        assert!(forward.x < 0.0, "{forward:?}");
        assert!(pitch < 0.0);
        c.turn(Vec2::new(0.0, -1.0e6));
        assert!((c.view_angles().1 - units::pitch_radians(units::PITCH_LIMIT)).abs() < 1e-6);
    }

    #[test]
    fn a_latch_lasts_until_the_client_ticks() {
        let mut c = Controls {
            latched: buttons::FIRE,
            latched_at: Some(10),
            ..Controls::default()
        };
        c.ticked(Some(10));
        assert_eq!(c.latched, buttons::FIRE, "no tick ran yet");
        c.ticked(Some(11));
        assert_eq!(c.latched, 0);
    }
}
