//! Per-object send priorities, the input of the codec's priority accumulator.
//!
//! Objects that recently took a hard hit or were thrown diverge fastest between peers, so they are sent
//! first; held objects travel in the avatar state and objects another peer simulates are not ours to send.
//! Objects at rest keep the base priority: the sample found that desyncs at rest spread.

/// Base priority of every sendable object.
pub const BASE_PRIORITY: f32 = 1.0;
/// Priority after a high-energy collision.
pub const COLLISION_PRIORITY: f32 = 10.0;
/// Frames the collision priority lasts.
pub const COLLISION_FRAMES: u32 = 15;
/// Priority after leaving a hand (released or thrown).
pub const THROWN_PRIORITY: f32 = 1_000_000.0;
/// Frames the released priority lasts.
pub const THROWN_FRAMES: u32 = 60;
/// Priority of an object that must not be sent by this peer.
pub const NEVER_SEND: f32 = -1.0;
/// Speed (m/s) at which two bodies must close in along a contact's normal for it to count as a high-energy
/// collision: only the start of an impact does; a resting or sliding contact closes in at no speed.
pub const HIGH_ENERGY_SPEED: f32 = 5.0;

/// Countdown timers that raise one object's priority for a while.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PriorityTimers {
    /// Frames left at [`COLLISION_PRIORITY`].
    pub collision_frames: u32,
    /// Frames left at [`THROWN_PRIORITY`].
    pub thrown_frames: u32,
}

impl PriorityTimers {
    /// Marks a high-energy collision this frame.
    pub fn collided(&mut self) {
        self.collision_frames = COLLISION_FRAMES;
    }

    /// Marks that the object left a hand this frame (released or thrown, by any player).
    pub fn thrown(&mut self) {
        self.thrown_frames = THROWN_FRAMES;
    }

    /// Advances one frame.
    pub fn tick(&mut self) {
        self.collision_frames = self.collision_frames.saturating_sub(1);
        self.thrown_frames = self.thrown_frames.saturating_sub(1);
    }

    /// The priority of an object with these timers; `sendable` is false for held objects and objects this
    /// peer has no business sending.
    pub fn priority(&self, sendable: bool) -> f32 {
        if !sendable {
            NEVER_SEND
        } else if self.thrown_frames > 0 {
            THROWN_PRIORITY
        } else if self.collision_frames > 0 {
            COLLISION_PRIORITY
        } else {
            BASE_PRIORITY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_raise_priority_for_their_duration() {
        let mut t = PriorityTimers::default();
        assert_eq!(t.priority(true), BASE_PRIORITY);
        t.collided();
        for _ in 0..COLLISION_FRAMES {
            assert_eq!(t.priority(true), COLLISION_PRIORITY);
            t.tick();
        }
        assert_eq!(t.priority(true), BASE_PRIORITY);
        t.thrown();
        t.collided();
        assert_eq!(t.priority(true), THROWN_PRIORITY);
        for _ in 0..THROWN_FRAMES - 1 {
            t.tick();
        }
        assert_eq!(t.priority(true), THROWN_PRIORITY);
        t.tick();
        assert_eq!(t.priority(true), BASE_PRIORITY);
        assert_eq!(t.priority(false), NEVER_SEND);
    }
}
