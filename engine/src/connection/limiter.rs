//! A per-source rate limit on handshake packets that costs the same memory whether ten or ten million addresses
//! send: sources are hashed (with a secret key, so an attacker cannot aim at a victim's bucket) into a fixed table
//! of token buckets.

use std::hash::Hasher;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use siphasher::sip::SipHasher13;

/// Buckets in the table; sources that share one share its budget.
pub const LIMITER_BUCKETS: usize = 1024;

/// Handshake packets a source may send per second, sustained.
pub const HANDSHAKES_PER_SECOND: f64 = 20.0;

/// Handshake packets a source may send in a burst.
pub const HANDSHAKE_BURST: f64 = 40.0;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    tokens: f64,
    refilled_at: Duration,
    used: bool,
}

/// The fixed table of token buckets, keyed by the source's IP address (not its port, which is free to pick).
#[derive(Debug, Clone)]
pub struct SourceLimiter {
    key: (u64, u64),
    buckets: Box<[Bucket; LIMITER_BUCKETS]>,
}

impl SourceLimiter {
    /// A table whose hashing is keyed by `key`.
    pub fn new(key: (u64, u64)) -> Self {
        Self {
            key,
            buckets: Box::new([Bucket::default(); LIMITER_BUCKETS]),
        }
    }

    fn index(&self, source: SocketAddr) -> usize {
        let mut h = SipHasher13::new_with_keys(self.key.0, self.key.1);
        match source.ip() {
            IpAddr::V4(ip) => h.write(&ip.octets()),
            IpAddr::V6(ip) => h.write(&ip.octets()),
        }
        (h.finish() % LIMITER_BUCKETS as u64) as usize
    }

    /// Takes one token from `source`'s bucket at `now`; false when it is empty.
    pub fn allow(&mut self, now: Duration, source: SocketAddr) -> bool {
        let index = self.index(source);
        let bucket = &mut self.buckets[index];
        if !bucket.used {
            *bucket = Bucket {
                tokens: HANDSHAKE_BURST,
                refilled_at: now,
                used: true,
            };
        }
        let elapsed = now.saturating_sub(bucket.refilled_at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * HANDSHAKES_PER_SECOND).min(HANDSHAKE_BURST);
        bucket.refilled_at = bucket.refilled_at.max(now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_gets_its_burst_then_its_rate() {
        let mut l = SourceLimiter::new((1, 2));
        let a: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let t = Duration::from_secs(5);
        let allowed = (0..100).filter(|_| l.allow(t, a)).count();
        assert_eq!(allowed, HANDSHAKE_BURST as usize);
        let later = t + Duration::from_millis(500);
        let allowed = (0..100).filter(|_| l.allow(later, a)).count();
        assert_eq!(allowed, (HANDSHAKES_PER_SECOND / 2.0) as usize);
        let other_port: SocketAddr = "10.0.0.1:2".parse().unwrap();
        assert!(
            !l.allow(later, other_port),
            "ports share their address's bucket"
        );
    }
}
