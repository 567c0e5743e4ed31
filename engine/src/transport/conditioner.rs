//! A seeded link conditioner: decides when (and whether, and how many times) each datagram arrives.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::datagram::Delivery;
use super::error::TransportError;

/// Retransmissions simulated for one reliable message before it is delivered regardless.
///
/// Bounds the work per message when the configured loss is extreme (a real reliable channel would give up on the
/// connection instead); at 30% loss the chance of reaching it is about 2e-17.
pub const MAX_SIMULATED_RETRANSMISSIONS: u32 = 32;

/// The behaviour of one direction of a link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Base one-way delay.
    pub latency: Duration,
    /// Each datagram's delay is the latency plus an offset drawn uniformly from `[-jitter, +jitter]`, floored at
    /// zero; jitter alone can therefore reorder datagrams sent close together.
    pub jitter: Duration,
    /// Probability in `[0, 1]` that an unreliable datagram is lost; for reliable messages, the probability that
    /// each transmission attempt is lost and must be retransmitted.
    pub loss: f64,
    /// Probability in `[0, 1]` that an unreliable datagram that was not lost arrives a second time, with its own
    /// delay.
    pub duplicate: f64,
    /// Probability in `[0, 1]` that an unreliable datagram is held back by an extra [`reorder_delay`](Self::reorder_delay),
    /// letting later datagrams overtake it.
    pub reorder: f64,
    /// Extra delay of a held-back datagram.
    pub reorder_delay: Duration,
    /// Delay added to a reliable message for each simulated lost transmission: the time a reliable channel takes
    /// to notice the loss and send again.
    pub retransmit_timeout: Duration,
}

impl LinkConfig {
    /// A perfect link: no delay, no loss, no duplication, no reordering.
    pub fn ideal() -> Self {
        Self {
            latency: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            retransmit_timeout: Duration::from_millis(100),
        }
    }

    /// A link described the way scenarios state it: round-trip time (split evenly into two one-way latencies),
    /// one-way jitter, loss and duplication probabilities. The retransmission timeout follows the usual
    /// `rtt + 4 × deviation` rule with a 10 ms floor; no extra reordering beyond what jitter causes.
    pub fn from_rtt(rtt: Duration, jitter: Duration, loss: f64, duplicate: f64) -> Self {
        Self {
            latency: rtt / 2,
            jitter,
            loss,
            duplicate,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            retransmit_timeout: (rtt + jitter * 4).max(Duration::from_millis(10)),
        }
    }

    /// Checks that every probability lies in `[0, 1]`.
    pub fn validate(&self) -> Result<(), TransportError> {
        let probability = |p: f64| (0.0..=1.0).contains(&p);
        if !probability(self.loss) {
            return Err(TransportError::InvalidLinkConfig("loss must lie in [0, 1]"));
        }
        if !probability(self.duplicate) {
            return Err(TransportError::InvalidLinkConfig(
                "duplicate must lie in [0, 1]",
            ));
        }
        if !probability(self.reorder) {
            return Err(TransportError::InvalidLinkConfig(
                "reorder must lie in [0, 1]",
            ));
        }
        Ok(())
    }
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self::ideal()
    }
}

/// What one conditioner did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams offered to the link.
    pub sent: u64,
    /// Unreliable datagrams lost.
    pub dropped: u64,
    /// Extra copies of unreliable datagrams created.
    pub duplicated: u64,
    /// Unreliable datagrams held back by the reorder delay.
    pub reordered: u64,
    /// Simulated retransmissions of reliable messages.
    pub retransmissions: u64,
    /// Arrivals scheduled, duplicates included.
    pub delivered: u64,
    /// Payload bytes offered to the link.
    pub bytes_sent: u64,
    /// Payload bytes scheduled to arrive, duplicates included.
    pub bytes_delivered: u64,
}

/// The arrival times of one datagram: none if it was lost, two if it was duplicated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    times: [Duration; 2],
    len: usize,
}

impl Schedule {
    fn dropped() -> Self {
        Self {
            times: [Duration::ZERO; 2],
            len: 0,
        }
    }

    fn push(&mut self, at: Duration) {
        self.times[self.len] = at;
        self.len += 1;
    }

    /// Session times at which a copy arrives, in the order the copies were scheduled.
    pub fn times(&self) -> &[Duration] {
        &self.times[..self.len]
    }

    /// True when the datagram never arrives.
    pub fn is_dropped(&self) -> bool {
        self.len == 0
    }
}

/// One direction of a link, simulated: given the send time of a datagram, draws when it arrives.
///
/// It performs no I/O and reads no clock, so the same conditioner serves the in-memory network and the queue in
/// front of a real socket. Given the same seed and the same calls it produces the same schedules.
///
/// Unreliable datagrams are lost, duplicated, held back and jittered independently. Reliable messages are never
/// lost: each simulated lost transmission delays the message by the retransmission timeout, and arrival times never
/// decrease from one reliable message to the next, so they arrive in send order.
#[derive(Debug, Clone)]
pub struct LinkConditioner {
    config: LinkConfig,
    rng: ChaCha8Rng,
    last_reliable_arrival: Duration,
    stats: LinkStats,
}

impl LinkConditioner {
    /// A conditioner applying `config`, drawing from a ChaCha8 stream seeded with `seed`.
    pub fn new(config: LinkConfig, seed: u64) -> Result<Self, TransportError> {
        config.validate()?;
        Ok(Self {
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            last_reliable_arrival: Duration::ZERO,
            stats: LinkStats::default(),
        })
    }

    /// The settings in force.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Changes the settings for datagrams sent from now on (live controls in the viewer); datagrams already
    /// scheduled keep their times, and reliable order is preserved across the change.
    pub fn set_config(&mut self, config: LinkConfig) -> Result<(), TransportError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// Counters since creation.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Decides the fate of a datagram of `len` bytes sent at `now` on the given channel.
    pub fn schedule(&mut self, now: Duration, delivery: Delivery, len: usize) -> Schedule {
        self.stats.sent += 1;
        self.stats.bytes_sent += len as u64;
        let schedule = match delivery {
            Delivery::Unreliable => self.schedule_unreliable(now),
            Delivery::ReliableOrdered => self.schedule_reliable(now),
        };
        let copies = schedule.times().len() as u64;
        self.stats.delivered += copies;
        self.stats.bytes_delivered += copies * len as u64;
        schedule
    }

    fn schedule_unreliable(&mut self, now: Duration) -> Schedule {
        let mut schedule = Schedule::dropped();
        if self.chance(self.config.loss) {
            self.stats.dropped += 1;
            return schedule;
        }
        let mut arrival = now + self.one_way_delay();
        if self.chance(self.config.reorder) {
            self.stats.reordered += 1;
            arrival += self.config.reorder_delay;
        }
        schedule.push(arrival);
        if self.chance(self.config.duplicate) {
            self.stats.duplicated += 1;
            let copy = now + self.one_way_delay();
            schedule.push(copy);
        }
        schedule
    }

    fn schedule_reliable(&mut self, now: Duration) -> Schedule {
        let mut departure = now;
        let mut attempts = 0;
        while attempts < MAX_SIMULATED_RETRANSMISSIONS && self.chance(self.config.loss) {
            departure += self.config.retransmit_timeout;
            attempts += 1;
        }
        self.stats.retransmissions += u64::from(attempts);
        let arrival = (departure + self.one_way_delay()).max(self.last_reliable_arrival);
        self.last_reliable_arrival = arrival;
        let mut schedule = Schedule::dropped();
        schedule.push(arrival);
        schedule
    }

    fn chance(&mut self, probability: f64) -> bool {
        probability > 0.0 && self.rng.random::<f64>() < probability
    }

    fn one_way_delay(&mut self) -> Duration {
        let latency = self.config.latency.as_nanos() as i128;
        let jitter = self.config.jitter.as_nanos() as i128;
        let offset = if jitter > 0 {
            self.rng.random_range(-jitter..=jitter)
        } else {
            0
        };
        let nanos = (latency + offset).max(0);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SENDS: u64 = 100_000;
    const STEP: Duration = Duration::from_micros(16_667);

    fn lossy() -> LinkConfig {
        LinkConfig {
            latency: Duration::from_millis(125),
            jitter: Duration::from_millis(50),
            loss: 0.05,
            duplicate: 0.01,
            reorder: 0.02,
            reorder_delay: Duration::from_millis(40),
            retransmit_timeout: Duration::from_millis(300),
        }
    }

    fn schedules(config: LinkConfig, seed: u64, delivery: Delivery) -> Vec<(Duration, Schedule)> {
        let mut conditioner = LinkConditioner::new(config, seed).unwrap();
        (0..SENDS)
            .map(|i| {
                let now = STEP * i as u32;
                (now, conditioner.schedule(now, delivery, 100))
            })
            .collect()
    }

    #[test]
    fn unreliable_rates_match_the_configuration() {
        let config = lossy();
        let mut conditioner = LinkConditioner::new(config, 42).unwrap();
        for i in 0..SENDS {
            conditioner.schedule(STEP * i as u32, Delivery::Unreliable, 100);
        }
        let stats = *conditioner.stats();
        let rate = |count: u64, of: u64| count as f64 / of as f64;
        assert_eq!(stats.sent, SENDS);
        assert!(
            (rate(stats.dropped, SENDS) - 0.05).abs() < 0.003,
            "loss {stats:?}"
        );
        let survivors = SENDS - stats.dropped;
        assert!(
            (rate(stats.duplicated, survivors) - 0.01).abs() < 0.0015,
            "dup {stats:?}"
        );
        assert!(
            (rate(stats.reordered, survivors) - 0.02).abs() < 0.002,
            "reorder {stats:?}"
        );
        assert_eq!(stats.delivered, survivors + stats.duplicated);
        assert_eq!(stats.bytes_sent, SENDS * 100);
        assert_eq!(stats.bytes_delivered, stats.delivered * 100);
        assert_eq!(stats.retransmissions, 0);
    }

    #[test]
    fn latency_and_jitter_stay_within_bounds_and_fill_the_range() {
        let config = LinkConfig {
            reorder: 0.0,
            ..lossy()
        };
        let delays: Vec<Duration> = schedules(config, 3, Delivery::Unreliable)
            .into_iter()
            .flat_map(|(now, schedule)| {
                schedule
                    .times()
                    .iter()
                    .map(move |&at| at - now)
                    .collect::<Vec<_>>()
            })
            .collect();
        let low = config.latency - config.jitter;
        let high = config.latency + config.jitter;
        let min = *delays.iter().min().unwrap();
        let max = *delays.iter().max().unwrap();
        assert!(
            min >= low && max <= high,
            "delays {min:?}..{max:?} outside {low:?}..{high:?}"
        );
        assert!(
            min < low + Duration::from_millis(1),
            "jitter never reached its low end: {min:?}"
        );
        assert!(
            max > high - Duration::from_millis(1),
            "jitter never reached its high end: {max:?}"
        );
        let mean = delays.iter().sum::<Duration>() / delays.len() as u32;
        let error = mean.abs_diff(config.latency);
        assert!(error < Duration::from_millis(1), "mean delay {mean:?}");
    }

    #[test]
    fn held_back_datagrams_are_overtaken() {
        let config = LinkConfig {
            latency: Duration::from_millis(20),
            reorder: 0.1,
            reorder_delay: Duration::from_millis(40),
            ..LinkConfig::ideal()
        };
        let arrivals: Vec<Duration> = schedules(config, 9, Delivery::Unreliable)
            .iter()
            .map(|(_, schedule)| schedule.times()[0])
            .collect();
        let overtaken = arrivals.windows(2).filter(|pair| pair[1] < pair[0]).count() as f64;
        assert!(
            (overtaken / SENDS as f64 - 0.09).abs() < 0.01,
            "overtaken {overtaken}"
        );
    }

    #[test]
    fn same_seed_same_schedule_other_seed_other_schedule() {
        let a = schedules(lossy(), 11, Delivery::Unreliable);
        let b = schedules(lossy(), 11, Delivery::Unreliable);
        let c = schedules(lossy(), 12, Delivery::Unreliable);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn reliable_messages_are_never_lost_and_stay_in_order() {
        let config = LinkConfig {
            loss: 0.3,
            ..lossy()
        };
        let mut conditioner = LinkConditioner::new(config, 5).unwrap();
        let mut last = Duration::ZERO;
        for i in 0..SENDS {
            let now = STEP * i as u32;
            let schedule = conditioner.schedule(now, Delivery::ReliableOrdered, 40);
            assert_eq!(schedule.times().len(), 1);
            let at = schedule.times()[0];
            assert!(at >= last, "reliable message {i} overtook its predecessor");
            assert!(at >= now + config.latency - config.jitter);
            last = at;
        }
        let stats = *conditioner.stats();
        assert_eq!(stats.dropped, 0);
        assert_eq!(stats.duplicated, 0);
        assert_eq!(stats.delivered, SENDS);
        let expected = 0.3 / 0.7;
        let retransmissions = stats.retransmissions as f64 / SENDS as f64;
        assert!(
            (retransmissions - expected).abs() < 0.02,
            "retransmissions {retransmissions}"
        );
    }

    #[test]
    fn total_loss_still_delivers_reliable_after_the_retransmission_cap() {
        let config = LinkConfig {
            loss: 1.0,
            retransmit_timeout: Duration::from_millis(10),
            ..LinkConfig::ideal()
        };
        let mut conditioner = LinkConditioner::new(config, 1).unwrap();
        assert!(
            conditioner
                .schedule(Duration::ZERO, Delivery::Unreliable, 10)
                .is_dropped()
        );
        let schedule = conditioner.schedule(Duration::ZERO, Delivery::ReliableOrdered, 10);
        let cap = Duration::from_millis(10) * MAX_SIMULATED_RETRANSMISSIONS;
        assert_eq!(schedule.times(), &[cap]);
    }

    #[test]
    fn ideal_link_delivers_everything_at_once() {
        let mut conditioner = LinkConditioner::new(LinkConfig::ideal(), 0).unwrap();
        let now = Duration::from_millis(7);
        for delivery in [Delivery::Unreliable, Delivery::ReliableOrdered] {
            assert_eq!(conditioner.schedule(now, delivery, 1).times(), &[now]);
        }
    }

    #[test]
    fn out_of_range_probabilities_are_refused() {
        for bad in [
            LinkConfig {
                loss: 1.5,
                ..LinkConfig::ideal()
            },
            LinkConfig {
                duplicate: -0.1,
                ..LinkConfig::ideal()
            },
            LinkConfig {
                reorder: f64::NAN,
                ..LinkConfig::ideal()
            },
        ] {
            assert!(matches!(
                LinkConditioner::new(bad, 0),
                Err(TransportError::InvalidLinkConfig(_))
            ));
        }
        let mut conditioner = LinkConditioner::new(LinkConfig::ideal(), 0).unwrap();
        assert!(
            conditioner
                .set_config(LinkConfig {
                    loss: 2.0,
                    ..LinkConfig::ideal()
                })
                .is_err()
        );
        assert_eq!(conditioner.config(), &LinkConfig::ideal());
    }

    #[test]
    fn from_rtt_splits_the_round_trip() {
        let config = LinkConfig::from_rtt(
            Duration::from_millis(250),
            Duration::from_millis(50),
            0.05,
            0.01,
        );
        assert_eq!(config.latency, Duration::from_millis(125));
        assert_eq!(config.retransmit_timeout, Duration::from_millis(450));
        assert!(config.validate().is_ok());
    }
}
