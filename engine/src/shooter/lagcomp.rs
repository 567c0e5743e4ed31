//! Lag compensation: the server's per-tick history of every player's hitbox pose, and the rewind that puts the
//! other players back where a shooter saw them (latency plus interpolation, as named by the view time in the
//! shooter's input). Rewinding builds a separate set of target poses and never moves the present players, so the
//! "restore" step of the classic algorithm cannot be forgotten: the present is untouched by construction.

use std::time::Duration;

use thiserror::Error;

use super::hitbox::TargetPose;
use super::input::ViewTime;
use super::interpolation::{RemoteSample, TELEPORT_DISTANCE, blend, pose_of};
use super::ring::TickRing;
use super::{PlayerId, Tick};

/// The longest rewind the server will ever grant, whatever the configuration says (seeds 000 and 004).
pub const MAX_REWIND: Duration = Duration::from_secs(1);

/// A player's hitbox pose as recorded at the end of a tick, in the same integer units snapshots carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordedPose {
    /// Whose pose.
    pub player: PlayerId,
    /// Feet position in position steps.
    pub position: [i32; 3],
    /// Whether the player could be hit at that tick.
    pub alive: bool,
}

/// Why a shot was not rewound (it is then traced against the present).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RewindError {
    /// The view time is further in the past than the window allows.
    #[error("view tick {view} is {age} ticks old, beyond the {window}-tick window")]
    OutsideWindow {
        /// The view tick asked for.
        view: Tick,
        /// How many ticks before the present it lies.
        age: Tick,
        /// The window in ticks.
        window: Tick,
    },
    /// The view time lies after the present tick.
    #[error("view tick {view} lies in the future of tick {present}")]
    InFuture {
        /// The view tick asked for.
        view: Tick,
        /// The server's present tick.
        present: Tick,
    },
    /// The history holds no frame for the view tick (the match started later).
    #[error("no history recorded for tick {0}")]
    NotRecorded(Tick),
}

/// The ring buffer of hitbox frames, one per tick, long enough for the rewind window.
#[derive(Debug, Clone, PartialEq)]
pub struct HitboxHistory {
    frames: TickRing<Vec<RecordedPose>>,
    window_ticks: Tick,
}

impl HitboxHistory {
    /// A history allowing rewinds up to `max_rewind` (capped at [`MAX_REWIND`]) at `tick_rate_hz`.
    pub fn new(max_rewind: Duration, tick_rate_hz: u32) -> Self {
        let window = max_rewind.min(MAX_REWIND);
        let window_ticks = (window.as_secs_f64() * f64::from(tick_rate_hz)).floor() as Tick;
        Self {
            frames: TickRing::new(window_ticks as usize + 2),
            window_ticks,
        }
    }

    /// The rewind window in ticks.
    pub fn window_ticks(&self) -> Tick {
        self.window_ticks
    }

    /// Stores the poses at the end of `tick`.
    pub fn record(&mut self, tick: Tick, poses: Vec<RecordedPose>) {
        self.frames.insert(tick, poses);
    }

    /// The frame recorded for `tick`, if still held.
    pub fn frame(&self, tick: Tick) -> Option<&[RecordedPose]> {
        self.frames.get(tick).map(Vec::as_slice)
    }

    /// The other players' hitboxes as they stood at `view`, judged at the `present` tick, for a client that
    /// received every snapshot: see [`HitboxHistory::rewind_held`].
    pub fn rewind(&self, present: Tick, view: ViewTime) -> Result<Vec<TargetPose>, RewindError> {
        self.rewind_held(present, view, &|_, _| true)
    }

    /// The other players' hitboxes as the shooter saw them at `view`, judged at the `present` tick: validated
    /// against the window, then, per player, blended exactly as the client's interpolation does
    /// ([`blend`]) between the newest recorded pose at or before the view time and the oldest after it, among
    /// the ticks whose state the shooter held (`held(player, tick)`: the snapshots it had received when it gave
    /// the input). So a lost snapshot moves the hitbox on the server just as it moved the player on the
    /// client's screen.
    pub fn rewind_held(
        &self,
        present: Tick,
        view: ViewTime,
        held: &dyn Fn(PlayerId, Tick) -> bool,
    ) -> Result<Vec<TargetPose>, RewindError> {
        if view.tick > present || (view.tick == present && view.fraction > 0) {
            return Err(RewindError::InFuture {
                view: view.tick,
                present,
            });
        }
        let age = present - view.tick;
        if age > self.window_ticks {
            return Err(RewindError::OutsideWindow {
                view: view.tick,
                age,
                window: self.window_ticks,
            });
        }
        let players = self
            .frame(view.tick)
            .ok_or(RewindError::NotRecorded(view.tick))?;
        let oldest = present.saturating_sub(self.window_ticks + 1);
        let pose_at = |player: PlayerId, tick: Tick| {
            self.frame(tick)?
                .iter()
                .find(|p| p.player == player)
                .map(|p| RemoteSample {
                    position: p.position,
                    alive: p.alive,
                    ..RemoteSample::default()
                })
        };
        let render = view.as_ticks();
        Ok(players
            .iter()
            .filter_map(|recorded| {
                let player = recorded.player;
                let usable = |t: &Tick| held(player, *t);
                let before = (oldest..=view.tick)
                    .rev()
                    .filter(usable)
                    .find_map(|t| Some((t, pose_at(player, t)?)));
                let after = (view.tick + 1..=present)
                    .filter(usable)
                    .find_map(|t| Some((t, pose_at(player, t)?)));
                let pose = match (before, after) {
                    (Some((ta, a)), Some((tb, b))) => {
                        blend((ta, &a), (tb, &b), render, TELEPORT_DISTANCE)
                    }
                    (Some((_, only)), None) | (None, Some((_, only))) => {
                        pose_of(&only, true, false)
                    }
                    (None, None) => return None,
                };
                Some(TargetPose {
                    player,
                    feet: pose.position,
                    alive: pose.alive,
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pose(player: u8, x_steps: i32) -> RecordedPose {
        RecordedPose {
            player: PlayerId(player),
            position: [x_steps, 0, 0],
            alive: true,
        }
    }

    #[test]
    fn window_is_capped_at_one_second() {
        assert_eq!(
            HitboxHistory::new(Duration::from_secs(5), 30).window_ticks(),
            30
        );
        assert_eq!(
            HitboxHistory::new(Duration::from_millis(500), 30).window_ticks(),
            15
        );
    }

    #[test]
    fn rewind_interpolates_and_validates() {
        let mut history = HitboxHistory::new(Duration::from_secs(1), 30);
        for tick in 0..100u32 {
            history.record(tick, vec![pose(1, tick as i32 * 512)]);
        }
        let rewound = history
            .rewind(
                99,
                ViewTime {
                    tick: 90,
                    fraction: 128,
                },
            )
            .unwrap();
        assert_eq!(rewound.len(), 1);
        assert!((rewound[0].feet.x - 90.5).abs() < 1e-4);
        assert_eq!(
            history.rewind(99, ViewTime::at(68)),
            Err(RewindError::OutsideWindow {
                view: 68,
                age: 31,
                window: 30
            })
        );
        assert!(history.rewind(99, ViewTime::at(69)).is_ok());
        assert!(matches!(
            history.rewind(99, ViewTime::at(100)),
            Err(RewindError::InFuture { .. })
        ));
        let fresh = HitboxHistory::new(Duration::from_secs(1), 30);
        assert_eq!(
            fresh.rewind(5, ViewTime::at(3)),
            Err(RewindError::NotRecorded(3))
        );
    }
}
