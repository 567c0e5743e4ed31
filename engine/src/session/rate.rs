//! Traffic rates for status lines and summaries: bytes counted into one-second windows.

use std::time::Duration;

/// Length of a rate window.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);

/// Counts bytes and reports the rate of the last complete window and the average since the first byte.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateMeter {
    window_start: Option<Duration>,
    window_bytes: u64,
    last_kbps: f64,
    total_bytes: u64,
    first: Option<Duration>,
}

impl RateMeter {
    /// A meter that has counted nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Closes windows that ended by `now`.
    pub fn tick(&mut self, now: Duration) {
        let start = *self.window_start.get_or_insert(now);
        let elapsed = now.saturating_sub(start);
        if elapsed >= RATE_WINDOW {
            let windows = elapsed.as_nanos() / RATE_WINDOW.as_nanos();
            // Bytes of the closed window; any further whole windows were empty.
            self.last_kbps = if windows == 1 {
                self.window_bytes as f64 * 8.0 / 1000.0 / RATE_WINDOW.as_secs_f64()
            } else {
                0.0
            };
            self.window_bytes = 0;
            self.window_start = Some(start + RATE_WINDOW * windows as u32);
        }
    }

    /// Counts `bytes` at `now`.
    pub fn record(&mut self, now: Duration, bytes: usize) {
        self.tick(now);
        self.first.get_or_insert(now);
        self.window_bytes += bytes as u64;
        self.total_bytes += bytes as u64;
    }

    /// Kilobits per second over the last complete window.
    pub fn kbps(&self) -> f64 {
        self.last_kbps
    }

    /// Every byte counted.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Kilobits per second from the first byte counted to `now`.
    pub fn average_kbps(&self, now: Duration) -> f64 {
        let Some(first) = self.first else {
            return 0.0;
        };
        let secs = now.saturating_sub(first).as_secs_f64();
        if secs <= 0.0 {
            0.0
        } else {
            self.total_bytes as f64 * 8.0 / 1000.0 / secs
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_close_with_time() {
        let mut m = RateMeter::new();
        let ms = Duration::from_millis;
        for i in 0..10 {
            m.record(ms(i * 100), 125);
        }
        assert_eq!(m.kbps(), 0.0);
        m.tick(ms(1000));
        assert!((m.kbps() - 10.0).abs() < 1e-9);
        m.tick(ms(3500));
        assert_eq!(m.kbps(), 0.0);
        assert_eq!(m.total_bytes(), 1250);
        assert!((m.average_kbps(ms(1000)) - 10.0).abs() < 1e-9);
    }
}
