//! Dynamic buffer sizing (seed 000). A client watches the fill of two jitter buffers — its own buffer of server
//! states, and the server's buffer of its inputs (reported in every snapshot) — over a window of ticks. When the
//! window is complete it looks at the variance first: too high means the network was too jumpy to judge and the
//! measurement restarts. Otherwise a mean fill above the target band means the buffer holds more delay than it
//! needs, below means it runs dry, and the client steers it by running one extra simulation tick or skipping one.

/// Which buffer a meter watches; it decides which way a tick adjustment steers the fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferKind {
    /// The client's buffer of received server states: an extra tick drains it, a skipped tick lets it fill.
    ClientStates,
    /// The server's buffer of this client's inputs: a skipped client tick lets it drain (the client falls back
    /// towards the server), an extra tick fills it (the client runs further ahead).
    ServerInputs,
}

/// What the client should do with its simulation clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TickAdjust {
    /// Run one extra simulation tick this frame.
    AddTick,
    /// Skip one simulation tick this frame.
    SkipTick,
    /// Leave the clock alone.
    Hold,
}

/// Window and thresholds of a meter.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferMeterConfig {
    /// Samples (ticks) per measurement.
    pub window: u32,
    /// Mean fill below this is too little.
    pub low: f64,
    /// Mean fill above this is too much.
    pub high: f64,
    /// Variance above this makes the window untrustworthy; the measurement restarts.
    pub max_variance: f64,
}

impl Default for BufferMeterConfig {
    /// Two seconds at 30 Hz, aiming at 1 to 3 buffered ticks (seed 000 started at 3), variance at most 2.
    fn default() -> Self {
        Self {
            window: 60,
            low: 1.0,
            high: 3.0,
            max_variance: 2.0,
        }
    }
}

/// Running mean and variance (Welford) of a buffer's fill, with the add/skip/hold decision.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferMeter {
    kind: BufferKind,
    config: BufferMeterConfig,
    count: u32,
    mean: f64,
    m2: f64,
    restarts: u64,
}

impl BufferMeter {
    /// A meter for `kind` with `config`.
    pub fn new(kind: BufferKind, config: BufferMeterConfig) -> Self {
        Self {
            kind,
            config,
            count: 0,
            mean: 0.0,
            m2: 0.0,
            restarts: 0,
        }
    }

    /// Samples in the current window.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Mean fill of the current window.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Variance of the fill in the current window.
    pub fn variance(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.m2 / f64::from(self.count)
        }
    }

    /// Measurements thrown away for high variance.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Records one tick's fill; returns the decision when this sample completes a window (then a new window
    /// starts), [`TickAdjust::Hold`] otherwise.
    pub fn record(&mut self, fill: u32) -> TickAdjust {
        self.count += 1;
        let x = f64::from(fill);
        let delta = x - self.mean;
        self.mean += delta / f64::from(self.count);
        self.m2 += delta * (x - self.mean);
        if self.count < self.config.window.max(1) {
            return TickAdjust::Hold;
        }
        let (mean, variance) = (self.mean, self.variance());
        self.reset();
        if variance > self.config.max_variance {
            self.restarts += 1;
            return TickAdjust::Hold;
        }
        let too_full = mean > self.config.high;
        let too_empty = mean < self.config.low;
        match (self.kind, too_full, too_empty) {
            (BufferKind::ClientStates, true, _) | (BufferKind::ServerInputs, _, true) => {
                TickAdjust::AddTick
            }
            (BufferKind::ClientStates, _, true) | (BufferKind::ServerInputs, true, _) => {
                TickAdjust::SkipTick
            }
            _ => TickAdjust::Hold,
        }
    }

    fn reset(&mut self) {
        self.count = 0;
        self.mean = 0.0;
        self.m2 = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn run(meter: &mut BufferMeter, fills: impl IntoIterator<Item = u32>) -> Vec<TickAdjust> {
        fills
            .into_iter()
            .map(|f| meter.record(f))
            .filter(|a| *a != TickAdjust::Hold)
            .collect()
    }

    #[test]
    fn steady_fill_inside_the_band_holds() {
        let mut meter = BufferMeter::new(BufferKind::ClientStates, BufferMeterConfig::default());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!(run(&mut meter, (0..600).map(|_| rng.random_range(1..=3))).is_empty());
        assert_eq!(meter.restarts(), 0);
    }

    #[test]
    fn overfull_and_starved_buffers_steer_in_opposite_directions_per_kind() {
        let config = BufferMeterConfig::default();
        let mut states = BufferMeter::new(BufferKind::ClientStates, config.clone());
        let mut inputs = BufferMeter::new(BufferKind::ServerInputs, config);
        assert_eq!(run(&mut states, [5; 60]), vec![TickAdjust::AddTick]);
        assert_eq!(run(&mut states, [0; 60]), vec![TickAdjust::SkipTick]);
        assert_eq!(run(&mut inputs, [5; 60]), vec![TickAdjust::SkipTick]);
        assert_eq!(run(&mut inputs, [0; 60]), vec![TickAdjust::AddTick]);
        assert_eq!(
            run(&mut inputs, [5; 59]),
            vec![],
            "no decision before the window completes"
        );
    }

    #[test]
    fn high_variance_restarts_the_measurement() {
        let mut meter = BufferMeter::new(BufferKind::ClientStates, BufferMeterConfig::default());
        let spiky = (0..60).map(|i| if i % 2 == 0 { 0 } else { 9 });
        assert!(run(&mut meter, spiky).is_empty());
        assert_eq!(meter.restarts(), 1);
        assert_eq!(meter.count(), 0);
        meter.record(2);
        meter.record(4);
        assert!((meter.mean() - 3.0).abs() < 1e-12);
        assert!((meter.variance() - 1.0).abs() < 1e-12);
    }
}
