//! How many packets ago each object last travelled on a link, on 64-bit packet counts that never wrap.
//!
//! The wire's 16-bit packet sequences wrap every 65,536 packets (18 minutes at 60 Hz), and a "newer than" test
//! between two of them only holds while they are less than half the space apart. An object left idle, or held in
//! a hand, for longer than that would compare wrongly against the state the link last kept for it. So a link
//! widens every sequence it meets to a count that never wraps, and forgets what it keeps about an object once it
//! has not travelled for [`STALE_PACKETS`]: its next state is coded and stored afresh, as on a new link.

/// Packets after which an object's baselines and received history are forgotten (about 4.5 minutes at 60 Hz):
/// far beyond any baseline a sender uses, far below the half sequence space where 16-bit comparisons fail.
pub const STALE_PACKETS: u64 = 16_384;

/// Objects checked for staleness per packet: a whole 65,536-object table is swept every 4,096 packets, so an
/// object is forgotten before it has been idle for `STALE_PACKETS + 4096`, well short of 32,768.
const SWEEP_PER_PACKET: usize = 16;

/// Widens a 16-bit packet sequence to a 64-bit count, by its distance from `newest` (the widest seen so far).
pub(crate) fn widen(newest: Option<u64>, sequence: u16) -> u64 {
    match newest {
        None => u64::from(sequence),
        Some(newest) => {
            let diff = i64::from(sequence.wrapping_sub(newest as u16) as i16);
            newest.saturating_add_signed(diff)
        }
    }
}

/// Per object: the widened count of the newest packet it travelled in, and a sweep that finds stale objects.
#[derive(Debug, Clone)]
pub(crate) struct Ages {
    newest: Vec<Option<u64>>,
    cursor: usize,
}

impl Ages {
    /// Ages for ids `0..count`, none seen yet.
    pub(crate) fn new(count: usize) -> Self {
        Self {
            newest: vec![None; count],
            cursor: 0,
        }
    }

    /// Notes that `id` travelled in packet `at`; true when that is newer than anything before for `id` (or
    /// `id` was forgotten). Ids out of range are never fresh.
    pub(crate) fn advance(&mut self, id: usize, at: u64) -> bool {
        let Some(newest) = self.newest.get_mut(id) else {
            return false;
        };
        let fresh = newest.is_none_or(|n| at > n);
        if fresh {
            *newest = Some(at);
        }
        fresh
    }

    /// Checks the next few ids: those that last travelled [`STALE_PACKETS`] or more before `now` are forgotten
    /// here and handed to `forget`.
    pub(crate) fn sweep(&mut self, now: u64, mut forget: impl FnMut(u16)) {
        let count = self.newest.len();
        for _ in 0..SWEEP_PER_PACKET.min(count) {
            let id = self.cursor;
            self.cursor = (self.cursor + 1) % count;
            if self.newest[id].is_some_and(|n| now.saturating_sub(n) >= STALE_PACKETS) {
                self.newest[id] = None;
                forget(id as u16);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_widen_across_every_wrap() {
        assert_eq!(widen(None, 65_530), 65_530);
        assert_eq!(widen(Some(65_530), 3), 65_539);
        assert_eq!(widen(Some(65_539), 65_535), 65_535);
        let far = 5 * 65_536 + 100;
        assert_eq!(widen(Some(far), 90), far - 10);
        assert_eq!(widen(Some(far), 32_867), far + 32_767);
        assert_eq!(widen(Some(3), 65_535), 0, "never below zero");
    }

    #[test]
    fn idle_objects_are_forgotten_after_the_stale_window() {
        let mut ages = Ages::new(40);
        assert!(ages.advance(7, 10));
        assert!(!ages.advance(7, 10));
        assert!(!ages.advance(7, 9));
        assert!(ages.advance(3, STALE_PACKETS));
        let mut forgotten = Vec::new();
        for _ in 0..3 {
            ages.sweep(STALE_PACKETS + 10, |id| forgotten.push(id));
        }
        assert_eq!(forgotten, vec![7]);
        // Forgotten, any packet is fresh again.
        assert!(ages.advance(7, 11));
        assert!(!ages.advance(99, 1));
    }
}
