//! The receive side's replay window: each sequence number is accepted at most once, and sequences too far behind
//! the newest are refused, so a recorded datagram replayed later is dropped whatever it holds.

/// Sequences tracked behind the newest one received.
pub const REPLAY_WINDOW: u64 = 1024;

const WORDS: usize = (REPLAY_WINDOW / 64) as usize;

/// A sliding bitmap of the last [`REPLAY_WINDOW`] sequence numbers seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayWindow {
    /// The newest sequence accepted plus one; 0 before the first.
    next: u64,
    bits: [u64; WORDS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayWindow {
    /// An empty window.
    pub fn new() -> Self {
        Self {
            next: 0,
            bits: [0; WORDS],
        }
    }

    fn slot(seq: u64) -> (usize, u64) {
        let index = seq % REPLAY_WINDOW;
        ((index / 64) as usize, 1u64 << (index % 64))
    }

    /// True when `seq` has not been seen and is recent enough to be judged: a packet that passes may still be
    /// forged, so call [`ReplayWindow::mark`] only after it authenticated.
    pub fn is_fresh(&self, seq: u64) -> bool {
        if seq == u64::MAX {
            return false;
        }
        if seq >= self.next {
            return true;
        }
        if self.next - seq > REPLAY_WINDOW {
            return false;
        }
        let (word, bit) = Self::slot(seq);
        self.bits[word] & bit == 0
    }

    /// Records `seq` as received, sliding the window forward if it is the newest. `u64::MAX` is never fresh and
    /// is ignored.
    pub fn mark(&mut self, seq: u64) {
        if seq == u64::MAX {
            return;
        }
        if seq >= self.next {
            let advance = seq - self.next + 1;
            if advance >= REPLAY_WINDOW {
                self.bits = [0; WORDS];
            } else {
                for s in self.next..=seq {
                    let (word, bit) = Self::slot(s);
                    self.bits[word] &= !bit;
                }
            }
            self.next = seq + 1;
        }
        let (word, bit) = Self::slot(seq);
        self.bits[word] |= bit;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sequence_passes_once_and_old_ones_never() {
        let mut w = ReplayWindow::new();
        for seq in [0, 5, 3, 4, 1000] {
            assert!(w.is_fresh(seq), "{seq}");
            w.mark(seq);
            assert!(!w.is_fresh(seq), "{seq} again");
        }
        assert!(
            w.is_fresh(2),
            "a late but unseen sequence inside the window"
        );
        w.mark(5000);
        assert!(!w.is_fresh(1000 + 1), "far behind the window");
        assert!(w.is_fresh(5000 - 10));
        assert!(!w.is_fresh(5000 - REPLAY_WINDOW - 1));
        w.mark(u64::MAX - 1);
        assert!(!w.is_fresh(u64::MAX - 1));
        assert!(
            !w.is_fresh(u64::MAX),
            "the one sequence that cannot advance the window"
        );
    }
}
