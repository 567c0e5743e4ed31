//! The simulated link's conditions, as the session benchmarks take them on the command line and report them.

use std::time::Duration;

use physync_engine::transport::LinkConfig;
use serde::Serialize;

/// Round trip, jitter, loss and duplication of every link of a simulated session; flattened into a benchmark's
/// arguments and into its JSON report, so both name them the same way.
#[derive(Debug, Clone, Copy, clap::Args, Serialize)]
pub struct LinkArgs {
    /// Round-trip time of every link (ms).
    #[arg(long, default_value_t = 250)]
    pub rtt_ms: u64,
    /// One-way jitter (ms).
    #[arg(long, default_value_t = 50)]
    pub jitter_ms: u64,
    /// Loss probability per datagram.
    #[arg(long, default_value_t = 0.05)]
    pub loss: f64,
    /// Duplication probability per datagram.
    #[arg(long, default_value_t = 0.01)]
    pub duplicate: f64,
}

impl LinkArgs {
    /// The in-memory network's link for these conditions.
    pub fn link_config(&self) -> LinkConfig {
        LinkConfig::from_rtt(
            Duration::from_millis(self.rtt_ms),
            Duration::from_millis(self.jitter_ms),
            self.loss,
            self.duplicate,
        )
    }
}
