//! What a player sends each tick: a joystick-like move command quantized to small integers, the view angles,
//! buttons, and the time at which the player sees the rest of the world (for lag compensation).

use super::Tick;
use super::units::PITCH_LIMIT;

/// Largest magnitude of a move axis: a stick is quantized to `-MOVE_AXIS_MAX..=MOVE_AXIS_MAX` (4 bits with sign).
pub const MOVE_AXIS_MAX: i8 = 7;

/// Button bits of [`PlayerInput::buttons`].
pub mod buttons {
    /// Trigger held.
    pub const FIRE: u8 = 1;
    /// Reload requested.
    pub const RELOAD: u8 = 1 << 1;
    /// Jump requested.
    pub const JUMP: u8 = 1 << 2;
    /// Every defined bit; anything else is dropped by sanitizing.
    pub const ALL: u8 = FIRE | RELOAD | JUMP;
}

/// One tick of player input. Identical on client and server: prediction and the authoritative step consume it
/// through the same function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PlayerInput {
    /// Strafe axis, positive to the right, in `-MOVE_AXIS_MAX..=MOVE_AXIS_MAX`.
    pub move_x: i8,
    /// Forward axis, positive forward, in `-MOVE_AXIS_MAX..=MOVE_AXIS_MAX`.
    pub move_z: i8,
    /// View yaw in [`crate::shooter::units`] steps.
    pub yaw: u16,
    /// View pitch in steps, within `±PITCH_LIMIT`.
    pub pitch: i16,
    /// Bit set of [`buttons`].
    pub buttons: u8,
}

impl PlayerInput {
    /// True when `button` (one of [`buttons`]) is held.
    pub fn pressed(&self, button: u8) -> bool {
        self.buttons & button != 0
    }

    /// What the server applies for a tick whose input never arrived: the same movement and view, no button. A
    /// button is an action the player chose for one moment; repeating it would fire shots nobody fired.
    pub fn repeated(&self) -> Self {
        Self {
            buttons: 0,
            ..*self
        }
    }

    /// The input brought within the rules (axes and pitch clamped, unknown buttons dropped), and whether anything
    /// had to change: a changed input is impossible for an honest client and is counted by the server.
    pub fn sanitized(&self) -> (Self, bool) {
        let clean = Self {
            move_x: self.move_x.clamp(-MOVE_AXIS_MAX, MOVE_AXIS_MAX),
            move_z: self.move_z.clamp(-MOVE_AXIS_MAX, MOVE_AXIS_MAX),
            yaw: self.yaw,
            pitch: self.pitch.clamp(-PITCH_LIMIT, PITCH_LIMIT),
            buttons: self.buttons & buttons::ALL,
        };
        (clean, clean != *self)
    }
}

/// A moment of the server's timeline at sub-tick resolution: the tick plus `fraction / 256` of the way to the
/// next one. A client interpolating remote players between two snapshots sees the world at such a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct ViewTime {
    /// Whole server tick.
    pub tick: Tick,
    /// Progress towards `tick + 1`, in 1/256.
    pub fraction: u8,
}

impl ViewTime {
    /// A view time exactly at `tick`.
    pub fn at(tick: Tick) -> Self {
        Self { tick, fraction: 0 }
    }

    /// A view time from fractional ticks (negative clamps to 0).
    pub fn from_ticks(ticks: f64) -> Self {
        let ticks = if ticks.is_nan() { 0.0 } else { ticks.max(0.0) };
        let whole = ticks.floor();
        let fraction = ((ticks - whole) * 256.0).floor().min(255.0) as u8;
        Self {
            tick: whole.min(f64::from(Tick::MAX)) as Tick,
            fraction,
        }
    }

    /// The view time as fractional ticks.
    pub fn as_ticks(&self) -> f64 {
        f64::from(self.tick) + f64::from(self.fraction) / 256.0
    }
}

/// A player's input for one tick as it travels to the server: the tick it is for, when the player saw the world
/// (which also acknowledges a snapshot), and the input itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct InputCommand {
    /// The tick this input is to be applied at.
    pub tick: Tick,
    /// The moment of the server's timeline the player saw other players at when giving this input.
    pub view: ViewTime,
    /// The input.
    pub input: PlayerInput,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizing_clamps_and_reports() {
        let honest = PlayerInput {
            move_x: -7,
            move_z: 7,
            yaw: 100,
            pitch: 200,
            buttons: buttons::FIRE,
        };
        assert_eq!(honest.sanitized(), (honest, false));
        let cheating = PlayerInput {
            move_x: 100,
            move_z: -128,
            pitch: i16::MAX,
            buttons: 0xF0 | buttons::JUMP,
            ..honest
        };
        let (clean, changed) = cheating.sanitized();
        assert!(changed);
        assert_eq!(
            (clean.move_x, clean.move_z),
            (MOVE_AXIS_MAX, -MOVE_AXIS_MAX)
        );
        assert_eq!(clean.pitch, PITCH_LIMIT);
        assert_eq!(clean.buttons, buttons::JUMP);
    }

    #[test]
    fn view_time_round_trips_through_ticks() {
        let v = ViewTime::from_ticks(41.75);
        assert_eq!(
            v,
            ViewTime {
                tick: 41,
                fraction: 192
            }
        );
        assert_eq!(v.as_ticks(), 41.75);
        assert_eq!(ViewTime::from_ticks(-3.0), ViewTime::at(0));
    }
}
