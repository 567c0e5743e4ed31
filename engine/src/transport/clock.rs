//! The simulated clock that tests and in-memory sessions advance by hand.

use std::time::Duration;

/// Session time under the caller's control: starts at the epoch and only moves when told to.
///
/// In-memory sessions step it from one deadline to the next instead of waiting on a wall clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimClock {
    now: Duration,
}

impl SimClock {
    /// A clock at the session epoch.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current session time.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Moves time forward by `by` and returns the new time.
    pub fn advance(&mut self, by: Duration) -> Duration {
        self.now += by;
        self.now
    }

    /// Moves time forward to `to`; a time in the past leaves the clock where it is, since time never runs
    /// backwards. Returns the new time.
    pub fn advance_to(&mut self, to: Duration) -> Duration {
        self.now = self.now.max(to);
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_and_never_runs_backwards() {
        let mut clock = SimClock::new();
        assert_eq!(clock.now(), Duration::ZERO);
        assert_eq!(
            clock.advance(Duration::from_millis(16)),
            Duration::from_millis(16)
        );
        assert_eq!(
            clock.advance_to(Duration::from_millis(50)),
            Duration::from_millis(50)
        );
        assert_eq!(
            clock.advance_to(Duration::from_millis(10)),
            Duration::from_millis(50)
        );
    }
}
