//! How late a jitter buffer needs to play a link's frames: the spread of the link's recent arrival delays. A
//! fixed play-out delay counted from the fastest arrival waits longer on a steadier link (100 ms past a packet
//! 25 ms early is 75 ms past the typical one; past one 50 ms early, only 50), so the link with less jitter showed
//! remote frames, and settled contests, later. [`ArrivalSpread`] measures how far behind the fastest arrival the
//! slow ones come, so the buffer can wait that long and no longer.

use std::collections::VecDeque;
use std::time::Duration;

/// Arrivals a spread is taken over: as long as the fastest delay is remembered, so both describe one window.
pub const SPREAD_MEMORY: Duration = Duration::from_secs(3);

/// The share of arrivals the measured spread covers; the slowest 2% play a step late (their updates are then
/// applied with the next step's, and the lead bridges them).
const COVERED_SHARE: f64 = 0.98;

/// Settled arrivals (see [`ArrivalSpread`]) counted before the spread is trusted (three quarters of a second of a
/// 60 Hz link); until then the buffer plays its longest delay. Fewer leave the top of the spread to chance: the
/// largest of 30 arrivals on a ±50 ms link came 83.2 ms above the fastest in one of twenty seeded runs.
const MIN_SAMPLES: usize = 45;

/// Arrival delays (local arrival minus sender time) of one link over the last [`SPREAD_MEMORY`], and how far
/// above the fastest of them the slow ones reach.
///
/// Only packets sent at least a horizon (the longest delay the buffer plays) before the newest one count toward
/// the spread: the datagrams still on their way are the slow ones, so counting the latest packets, whose slow
/// siblings have not arrived yet, would leave out the top of the spread (half a second of a ±50 ms link measured
/// 78.5 ms that way, and the buffer played up to 5 ms early).
#[derive(Debug, Clone, Default)]
pub struct ArrivalSpread {
    /// Packets sent within this long (s) of the newest one are not counted yet.
    horizon: f64,
    /// The latest sender time seen (s).
    newest_sent: f64,
    /// (local arrival, sender time in seconds), oldest first.
    arrivals: VecDeque<(Duration, f64)>,
    /// Reused to take the quantile without allocating per packet.
    scratch: Vec<f64>,
    /// The spread after the last arrival, once enough arrived.
    spread: Option<f64>,
}

impl ArrivalSpread {
    /// An empty window that counts a packet once every packet sent up to `horizon` before it would have arrived.
    pub fn new(horizon: Duration) -> Self {
        Self {
            horizon: horizon.as_secs_f64(),
            ..Self::default()
        }
    }

    /// Notes a packet of sender time `sent` (s) that arrived at `now`, when the fastest arrival delay of the last
    /// [`SPREAD_MEMORY`] is `fastest` (s; the jitter buffer's sender clock keeps it).
    pub fn observe(&mut self, now: Duration, sent: f64, fastest: f64) {
        while self
            .arrivals
            .front()
            .is_some_and(|&(at, _)| now.saturating_sub(at) > SPREAD_MEMORY)
        {
            self.arrivals.pop_front();
        }
        self.arrivals.push_back((now, sent));
        self.newest_sent = self.newest_sent.max(sent);
        let settled = self.newest_sent - self.horizon;
        self.scratch.clear();
        self.scratch.extend(
            self.arrivals
                .iter()
                .filter(|&&(_, sent)| sent <= settled)
                .map(|&(at, sent)| at.as_secs_f64() - sent - fastest),
        );
        if self.scratch.len() < MIN_SAMPLES {
            self.spread = None;
            return;
        }
        let rank = ((self.scratch.len() - 1) as f64 * COVERED_SHARE).ceil() as usize;
        let (_, spread, _) = self.scratch.select_nth_unstable_by(rank, f64::total_cmp);
        self.spread = Some(*spread);
    }

    /// How far (seconds) above the fastest recent arrival delay [`COVERED_SHARE`] of recent arrivals came;
    /// `None` until enough arrived.
    pub fn spread(&self) -> Option<f64> {
        self.spread
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::session::jitter::SenderClock;

    /// A 60 Hz link's arrivals noted as a jitter buffer notes them: its sender clock keeps the fastest delay, the
    /// spread the rest (a 100 ms horizon).
    struct Measured {
        clock: SenderClock,
        spread: ArrivalSpread,
    }

    impl Measured {
        fn new() -> Self {
            Self {
                clock: SenderClock::new(60),
                spread: ArrivalSpread::new(Duration::from_millis(100)),
            }
        }

        /// Frame `frame` arrived `delay` seconds after it was sent; the spread then.
        fn arrive(&mut self, frame: u32, delay: f64) -> Option<f64> {
            let now = Duration::from_secs_f64(f64::from(frame) / 60.0 + delay);
            let sent = self.clock.observe(now, frame as u16);
            let fastest = self.clock.delay().expect("a packet arrived");
            self.spread.observe(now, sent, fastest);
            self.spread.spread()
        }
    }

    /// Arrivals 125 ms ± `jitter` (uniform) after their frame, one a frame for `seconds`; the spread at the end.
    fn spread_of(jitter: f64, seconds: u32) -> Option<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut link = Measured::new();
        let mut spread = None;
        for frame in 0..seconds * 60 {
            spread = link.arrive(frame, 0.125 + rng.random_range(-jitter..=jitter));
        }
        spread
    }

    #[test]
    fn the_spread_is_nearly_the_whole_range_of_arrival_delays() {
        for jitter in [0.0, 0.025, 0.05] {
            let s = spread_of(jitter, 10).unwrap();
            assert!(
                s <= 2.0 * jitter + 1e-9 && s >= 1.9 * jitter,
                "±{jitter} s of jitter measured as a spread of {s} s"
            );
        }
    }

    /// The first seconds of a ±50 ms link, datagrams fed in the order they arrive: the slow ones of the last
    /// 100 ms are still on their way. The spread claimed must still cover the link's jitter, so a buffer capped at
    /// 100 ms plays as a fixed 100 ms one from the start (counting the latest packets too, half a second of
    /// arrivals measured 78.5 ms in a peer session, and its frames played 5 ms early).
    #[test]
    fn a_spread_claimed_at_the_start_of_a_link_covers_its_jitter() {
        for seed in 0..20 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut arrivals: Vec<(f64, u32, f64)> = (0..600)
                .filter_map(|frame| {
                    let lost = rng.random_range(0.0..1.0) < 0.05;
                    let delay = 0.125 + rng.random_range(-0.05..=0.05);
                    (!lost).then_some((f64::from(frame) / 60.0 + delay, frame, delay))
                })
                .collect();
            arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut link = Measured::new();
            for (at, frame, delay) in arrivals {
                if let Some(s) = link.arrive(frame, delay) {
                    assert!(
                        s + 1.0 / 60.0 >= 0.1,
                        "seed {seed}: a spread of {s} s claimed {at} s into a ±50 ms link"
                    );
                }
            }
        }
    }

    #[test]
    fn no_spread_is_claimed_from_a_handful_of_arrivals() {
        let mut spread = ArrivalSpread::new(Duration::ZERO);
        // Arrivals every 1/64 s, each 125 ms after it was sent: times exact in binary, so the spread is exactly 0.
        let mut steady = |k: u32| {
            let now = Duration::from_secs_f64(f64::from(k) / 64.0);
            spread.observe(now, now.as_secs_f64() - 0.125, 0.125);
            spread.spread()
        };
        for k in 0..MIN_SAMPLES as u32 - 1 {
            assert_eq!(steady(k), None);
        }
        assert_eq!(steady(64), Some(0.0));
    }

    /// A link that was steady for ten seconds turns jittery: within a second the spread covers the new jitter;
    /// once it is steady again, the jittery arrivals leave the window after [`SPREAD_MEMORY`].
    #[test]
    fn the_spread_follows_a_link_that_turns_jittery_and_steady_again() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut link = Measured::new();
        let mut at = |frame: u32, jitter: f64, link: &mut Measured| {
            link.arrive(frame, 0.1 + rng.random_range(-jitter..=jitter))
                .unwrap_or(0.0)
        };
        for frame in 0..600 {
            at(frame, 0.0, &mut link);
        }
        let mut covered = None;
        for frame in 600..1200 {
            if at(frame, 0.04, &mut link) > 0.06 && covered.is_none() {
                covered = Some(frame - 600);
            }
        }
        let covered = covered.expect("the spread grows to the new jitter");
        assert!(covered < 60, "covered after {covered} frames");
        let mut last = 0.0;
        for frame in 1200..1500 {
            last = at(frame, 0.0, &mut link);
        }
        assert!(last < 0.001, "spread {last} s once steady again");
    }
}
