//! Byte and datagram counters, the raw material of kbps figures.

use std::time::Duration;

/// What crossed one endpoint or one link: payload bytes and datagram counts, each way.
///
/// Bytes are application payload bytes; laminar's own headers and the IP/UDP headers are not included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficCounters {
    /// Datagrams handed to the transport for sending.
    pub datagrams_sent: u64,
    /// Payload bytes handed to the transport for sending.
    pub bytes_sent: u64,
    /// Datagrams delivered to the receiver.
    pub datagrams_received: u64,
    /// Payload bytes delivered to the receiver.
    pub bytes_received: u64,
}

impl TrafficCounters {
    /// Counts one datagram of `len` bytes sent.
    pub fn record_sent(&mut self, len: usize) {
        self.datagrams_sent += 1;
        self.bytes_sent += len as u64;
    }

    /// Counts one datagram of `len` bytes received.
    pub fn record_received(&mut self, len: usize) {
        self.datagrams_received += 1;
        self.bytes_received += len as u64;
    }

    /// What was counted between `earlier` (a copy taken before) and now: the material of a per-second status
    /// line. Saturates at zero if `earlier` is not in fact earlier.
    pub fn since(&self, earlier: &TrafficCounters) -> TrafficCounters {
        TrafficCounters {
            datagrams_sent: self.datagrams_sent.saturating_sub(earlier.datagrams_sent),
            bytes_sent: self.bytes_sent.saturating_sub(earlier.bytes_sent),
            datagrams_received: self
                .datagrams_received
                .saturating_sub(earlier.datagrams_received),
            bytes_received: self.bytes_received.saturating_sub(earlier.bytes_received),
        }
    }

    /// Average upstream rate over `elapsed`, in kilobits (1000 bits) per second; zero for an empty interval.
    pub fn kbps_sent(&self, elapsed: Duration) -> f64 {
        kbps(self.bytes_sent, elapsed)
    }

    /// Average downstream rate over `elapsed`, in kilobits (1000 bits) per second; zero for an empty interval.
    pub fn kbps_received(&self, elapsed: Duration) -> f64 {
        kbps(self.bytes_received, elapsed)
    }
}

fn kbps(bytes: u64, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        bytes as f64 * 8.0 / 1000.0 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_converts_to_kbps() {
        let mut counters = TrafficCounters::default();
        counters.record_sent(1000);
        counters.record_sent(1000);
        counters.record_received(250);
        assert_eq!(counters.datagrams_sent, 2);
        assert_eq!(counters.bytes_sent, 2000);
        assert_eq!(counters.datagrams_received, 1);
        assert!((counters.kbps_sent(Duration::from_secs(2)) - 8.0).abs() < 1e-9);
        assert!((counters.kbps_received(Duration::from_millis(500)) - 4.0).abs() < 1e-9);
        assert_eq!(counters.kbps_sent(Duration::ZERO), 0.0);

        let earlier = counters;
        counters.record_sent(500);
        let window = counters.since(&earlier);
        assert_eq!((window.datagrams_sent, window.bytes_sent), (1, 500));
        assert_eq!((window.datagrams_received, window.bytes_received), (0, 0));
        assert_eq!(earlier.since(&counters), TrafficCounters::default());
    }
}
