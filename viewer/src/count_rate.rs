//! Per-second rates of ever-growing counters (conflicts, corrections), for the network plots.

use std::time::Duration;

/// How long a rate window lasts.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);

/// Turns a running total into events per second over the last complete window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CountRate {
    window: Option<(Duration, u64)>,
    per_second: f64,
}

impl CountRate {
    /// Takes the total at `now`; closes the window once it is [`RATE_WINDOW`] old and returns the latest rate.
    pub fn update(&mut self, now: Duration, total: u64) -> f64 {
        match self.window {
            None => self.window = Some((now, total)),
            Some((start, at_start)) => {
                let elapsed = now.saturating_sub(start);
                if elapsed >= RATE_WINDOW {
                    self.per_second = total.saturating_sub(at_start) as f64 / elapsed.as_secs_f64();
                    self.window = Some((now, total));
                }
            }
        }
        self.per_second
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_covers_the_last_complete_window() {
        let ms = Duration::from_millis;
        let mut r = CountRate::default();
        assert_eq!(r.update(ms(0), 10), 0.0);
        assert_eq!(r.update(ms(500), 14), 0.0, "the first window is not over");
        assert_eq!(r.update(ms(1000), 16), 6.0);
        assert_eq!(r.update(ms(1500), 30), 6.0);
        assert_eq!(r.update(ms(3000), 31), 7.5);
    }
}
