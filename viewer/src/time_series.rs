//! A bounded ring buffer of timestamped samples covering a sliding time window, feeding the live plots.

use std::collections::VecDeque;
use std::time::Duration;

/// Samples `(time, value)` over the last `window`, in time order, with a hard cap on how many are kept.
#[derive(Debug, Clone)]
pub struct TimeSeries {
    window: Duration,
    capacity: usize,
    samples: VecDeque<(Duration, f64)>,
}

impl TimeSeries {
    /// A series that keeps samples no older than `window` and at most `capacity` of them.
    pub fn new(window: Duration, capacity: usize) -> Self {
        Self {
            window,
            capacity: capacity.max(1),
            samples: VecDeque::with_capacity(capacity.max(1)),
        }
    }

    /// Append a sample taken at `now`. A sample older than the newest one is ignored (time goes forward).
    pub fn push(&mut self, now: Duration, value: f64) {
        if self.samples.back().is_some_and(|&(t, _)| now < t) {
            return;
        }
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back((now, value));
        self.expire(now);
    }

    /// Drop samples that fell out of the window as of `now`.
    pub fn expire(&mut self, now: Duration) {
        while self
            .samples
            .front()
            .is_some_and(|&(t, _)| now.saturating_sub(t) > self.window)
        {
            self.samples.pop_front();
        }
    }

    /// How many samples are held.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample is held.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The newest value.
    pub fn latest(&self) -> Option<f64> {
        self.samples.back().map(|&(_, v)| v)
    }

    /// Plot points `[seconds relative to now (≤ 0), value]`, oldest first.
    pub fn plot_points(&self, now: Duration) -> Vec<[f64; 2]> {
        self.samples
            .iter()
            .map(|&(t, v)| [t.as_secs_f64() - now.as_secs_f64(), v])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn old_samples_leave_the_window() {
        let mut s = TimeSeries::new(Duration::from_secs(30), 1000);
        for i in 0..=40u64 {
            s.push(Duration::from_secs(i), i as f64);
        }
        assert_eq!(s.len(), 31);
        let points = s.plot_points(Duration::from_secs(40));
        assert_eq!(points.first(), Some(&[-30.0, 10.0]));
        assert_eq!(points.last(), Some(&[0.0, 40.0]));
        s.expire(Duration::from_secs(100));
        assert!(s.is_empty());
    }

    #[test]
    fn capacity_bounds_memory_and_keeps_the_newest() {
        let mut s = TimeSeries::new(Duration::from_secs(30), 4);
        for i in 0..10u64 {
            s.push(ms(i * 10), i as f64);
        }
        assert_eq!(s.len(), 4);
        assert_eq!(s.latest(), Some(9.0));
        assert_eq!(s.plot_points(ms(90))[0][1], 6.0);
    }

    #[test]
    fn samples_going_back_in_time_are_ignored() {
        let mut s = TimeSeries::new(Duration::from_secs(30), 8);
        s.push(ms(500), 1.0);
        s.push(ms(400), 2.0);
        s.push(ms(500), 3.0);
        assert_eq!(s.len(), 2);
        assert_eq!(s.latest(), Some(3.0));
    }
}
