//! An in-memory network: many endpoints in one process, every link conditioned, on a simulated clock.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::net::SocketAddr;
use std::time::Duration;

use super::conditioner::{LinkConditioner, LinkConfig, LinkStats};
use super::datagram::{Datagram, MAX_WIRE_PAYLOAD, Transmit};
use super::error::TransportError;
use super::seed::link_seed;
use super::timed_queue::TimedQueue;
use super::traffic::TrafficCounters;

#[derive(Debug, Default)]
struct Endpoint {
    inbox: TimedQueue<Datagram>,
    traffic: TrafficCounters,
}

#[derive(Debug)]
struct Link {
    conditioner: LinkConditioner,
    traffic: TrafficCounters,
}

/// Endpoints addressed by [`SocketAddr`] exchanging datagrams through seeded [`LinkConditioner`]s, so a whole
/// session (host and guests) runs in one thread, deterministically and as fast as the cores can compute.
///
/// Time is whatever the caller says it is (usually a [`SimClock`](super::SimClock)): `send` schedules arrivals
/// from the given send time, `poll_receive` hands out what has arrived by the given time. Each direction of each
/// link has its own conditioner, configured by [`set_link`](Self::set_link) or else by the default configuration,
/// and seeded from the network seed and the two addresses. Unreliable datagrams may be lost, duplicated and
/// reordered; reliable-ordered messages are never lost and arrive in send order per (sender, receiver) pair, their
/// simulated losses showing up as retransmission delays, as on laminar's reliable channel.
#[derive(Debug)]
pub struct MemoryNetwork {
    seed: u64,
    default_link: LinkConfig,
    link_configs: BTreeMap<(SocketAddr, SocketAddr), LinkConfig>,
    links: BTreeMap<(SocketAddr, SocketAddr), Link>,
    endpoints: BTreeMap<SocketAddr, Endpoint>,
    undeliverable: u64,
}

impl MemoryNetwork {
    /// An empty network whose links all behave as `default_link` unless configured otherwise.
    pub fn new(default_link: LinkConfig, seed: u64) -> Result<Self, TransportError> {
        default_link.validate()?;
        Ok(Self {
            seed,
            default_link,
            link_configs: BTreeMap::new(),
            links: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            undeliverable: 0,
        })
    }

    /// Attaches an endpoint at `addr`.
    pub fn add_endpoint(&mut self, addr: SocketAddr) -> Result<(), TransportError> {
        if self.endpoints.contains_key(&addr) {
            return Err(TransportError::AddressInUse(addr));
        }
        self.endpoints.insert(addr, Endpoint::default());
        Ok(())
    }

    /// Detaches the endpoint at `addr`, as when a player's machine vanishes: what was on its way to it is lost,
    /// and so is anything sent to it later (counted by [`undeliverable`](Self::undeliverable)). Returns whether
    /// an endpoint was there.
    pub fn remove_endpoint(&mut self, addr: SocketAddr) -> bool {
        match self.endpoints.remove(&addr) {
            Some(endpoint) => {
                self.undeliverable += endpoint.inbox.len() as u64;
                // Its links go with it: a long session with churn holds state only for present endpoints.
                self.links
                    .retain(|&(from, to), _| from != addr && to != addr);
                true
            }
            None => false,
        }
    }

    /// Addresses of the attached endpoints, in address order.
    pub fn endpoints(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.endpoints.keys().copied()
    }

    /// Sets the behaviour of the `from → to` direction, for datagrams sent from now on.
    pub fn set_link(
        &mut self,
        from: SocketAddr,
        to: SocketAddr,
        config: LinkConfig,
    ) -> Result<(), TransportError> {
        config.validate()?;
        if let Some(link) = self.links.get_mut(&(from, to)) {
            link.conditioner.set_config(config)?;
        }
        self.link_configs.insert((from, to), config);
        Ok(())
    }

    /// Sets the behaviour of every direction without its own configuration, for datagrams sent from now on.
    pub fn set_default_link(&mut self, config: LinkConfig) -> Result<(), TransportError> {
        config.validate()?;
        for (key, link) in &mut self.links {
            if !self.link_configs.contains_key(key) {
                link.conditioner.set_config(config)?;
            }
        }
        self.default_link = config;
        Ok(())
    }

    /// Sends `transmit` from the endpoint at `from` at session time `now`.
    ///
    /// The sender must be attached and the payload at most [`MAX_WIRE_PAYLOAD`] bytes (a core's payload, sealed). A destination with no
    /// endpoint is not an error (UDP cannot tell either); the datagram is counted as sent and then as
    /// undeliverable.
    pub fn send(
        &mut self,
        now: Duration,
        from: SocketAddr,
        transmit: Transmit,
    ) -> Result<(), TransportError> {
        let len = transmit.payload.len();
        if len > MAX_WIRE_PAYLOAD {
            return Err(TransportError::PayloadTooLarge { len });
        }
        let sender = self
            .endpoints
            .get_mut(&from)
            .ok_or(TransportError::UnknownEndpoint(from))?;
        sender.traffic.record_sent(len);
        if !self.endpoints.contains_key(&transmit.to) {
            // No link state for a destination that is not there: a peer that keeps sending to a vanished address
            // (until it times out) must not grow the network.
            self.undeliverable += 1;
            return Ok(());
        }

        let link = self.link(from, transmit.to)?;
        link.traffic.record_sent(len);
        let schedule = link.conditioner.schedule(now, transmit.delivery, len);

        let Some(receiver) = self.endpoints.get_mut(&transmit.to) else {
            self.undeliverable += schedule.times().len() as u64;
            return Ok(());
        };
        for &at in schedule.times() {
            let datagram = Datagram {
                from,
                delivery: transmit.delivery,
                payload: transmit.payload.clone(),
            };
            receiver.inbox.push(at, datagram);
        }
        Ok(())
    }

    /// The next datagram that has arrived at `addr` by `now`, earliest arrival first (send order on ties).
    pub fn poll_receive(&mut self, addr: SocketAddr, now: Duration) -> Option<Datagram> {
        let endpoint = self.endpoints.get_mut(&addr)?;
        let datagram = endpoint.inbox.pop_due(now)?;
        let len = datagram.payload.len();
        endpoint.traffic.record_received(len);
        if let Some(link) = self.links.get_mut(&(datagram.from, addr)) {
            link.traffic.record_received(len);
        }
        Some(datagram)
    }

    /// The earliest arrival time of anything in flight, to any endpoint.
    pub fn next_delivery(&self) -> Option<Duration> {
        self.endpoints
            .values()
            .filter_map(|endpoint| endpoint.inbox.next_time())
            .min()
    }

    /// The earliest arrival time of anything in flight to `addr`.
    pub fn next_delivery_for(&self, addr: SocketAddr) -> Option<Duration> {
        self.endpoints.get(&addr)?.inbox.next_time()
    }

    /// Datagrams scheduled but not yet received, over all endpoints.
    pub fn in_flight(&self) -> usize {
        self.endpoints
            .values()
            .map(|endpoint| endpoint.inbox.len())
            .sum()
    }

    /// Everything the endpoint at `addr` sent and received so far.
    pub fn traffic(&self, addr: SocketAddr) -> Option<TrafficCounters> {
        self.endpoints.get(&addr).map(|endpoint| endpoint.traffic)
    }

    /// What went from `from` to `to` so far (sent by `from`, received by `to`); zero if nothing ever did.
    pub fn link_traffic(&self, from: SocketAddr, to: SocketAddr) -> TrafficCounters {
        self.links
            .get(&(from, to))
            .map(|link| link.traffic)
            .unwrap_or_default()
    }

    /// The conditioner counters of the `from → to` direction, once something was sent on it.
    pub fn link_stats(&self, from: SocketAddr, to: SocketAddr) -> Option<&LinkStats> {
        self.links
            .get(&(from, to))
            .map(|link| link.conditioner.stats())
    }

    /// Arrivals that found no endpoint: sent to an unknown address, or to an endpoint removed meanwhile.
    pub fn undeliverable(&self) -> u64 {
        self.undeliverable
    }

    fn link(&mut self, from: SocketAddr, to: SocketAddr) -> Result<&mut Link, TransportError> {
        match self.links.entry((from, to)) {
            Entry::Occupied(link) => Ok(link.into_mut()),
            Entry::Vacant(slot) => {
                let config = self
                    .link_configs
                    .get(&(from, to))
                    .copied()
                    .unwrap_or(self.default_link);
                let conditioner = LinkConditioner::new(config, link_seed(self.seed, from, to))?;
                Ok(slot.insert(Link {
                    conditioner,
                    traffic: TrafficCounters::default(),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Delivery, SimClock};
    use super::*;

    const FRAME: Duration = Duration::from_micros(16_667);

    fn addr(i: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, i as u8], 7000 + i))
    }

    fn network(config: LinkConfig, seed: u64, endpoints: u16) -> MemoryNetwork {
        let mut network = MemoryNetwork::new(config, seed).unwrap();
        for i in 1..=endpoints {
            network.add_endpoint(addr(i)).unwrap();
        }
        network
    }

    fn transmit(to: SocketAddr, delivery: Delivery, payload: Vec<u8>) -> Transmit {
        Transmit {
            to,
            delivery,
            payload,
        }
    }

    #[test]
    fn reliable_ordered_arrives_complete_and_in_order_under_30_percent_loss() {
        let config = LinkConfig::from_rtt(
            Duration::from_millis(200),
            Duration::from_millis(40),
            0.3,
            0.05,
        );
        let mut net = network(config, 17, 2);
        let (a, b) = (addr(1), addr(2));
        let mut clock = SimClock::new();
        let mut control = Vec::new();
        let mut state = 0usize;
        for i in 0u32..2000 {
            let now = clock.advance(FRAME);
            net.send(
                now,
                a,
                transmit(b, Delivery::ReliableOrdered, i.to_le_bytes().to_vec()),
            )
            .unwrap();
            net.send(now, a, transmit(b, Delivery::Unreliable, vec![0xEE; 64]))
                .unwrap();
            while let Some(datagram) = net.poll_receive(b, now) {
                match datagram.delivery {
                    Delivery::ReliableOrdered => control.push(datagram.payload),
                    Delivery::Unreliable => state += 1,
                }
            }
        }
        while let Some(at) = net.next_delivery() {
            let now = clock.advance_to(at);
            while let Some(datagram) = net.poll_receive(b, now) {
                if datagram.delivery == Delivery::ReliableOrdered {
                    control.push(datagram.payload);
                }
            }
        }
        let expected: Vec<Vec<u8>> = (0u32..2000).map(|i| i.to_le_bytes().to_vec()).collect();
        assert_eq!(control, expected);
        let stats = net.link_stats(a, b).unwrap();
        assert!(
            stats.retransmissions > 500,
            "loss was not simulated: {stats:?}"
        );
        assert!(
            state < 2000 * 8 / 10,
            "unreliable state was not lost: {state}"
        );
    }

    #[test]
    fn nothing_arrives_before_its_time() {
        let config = LinkConfig {
            latency: Duration::from_millis(50),
            ..LinkConfig::ideal()
        };
        let mut net = network(config, 1, 2);
        net.send(
            Duration::from_millis(10),
            addr(1),
            transmit(addr(2), Delivery::Unreliable, vec![1, 2, 3]),
        )
        .unwrap();
        assert_eq!(net.next_delivery(), Some(Duration::from_millis(60)));
        assert_eq!(
            net.next_delivery_for(addr(2)),
            Some(Duration::from_millis(60))
        );
        assert_eq!(net.next_delivery_for(addr(1)), None);
        assert_eq!(net.poll_receive(addr(2), Duration::from_millis(59)), None);
        assert_eq!(net.in_flight(), 1);
        let datagram = net
            .poll_receive(addr(2), Duration::from_millis(60))
            .unwrap();
        assert_eq!(datagram.from, addr(1));
        assert_eq!(datagram.delivery, Delivery::Unreliable);
        assert_eq!(datagram.payload, vec![1, 2, 3]);
        assert_eq!(net.next_delivery(), None);
    }

    /// Every datagram received: sender, receiver, the frame time it was polled at, payload.
    type DeliveryLog = Vec<(SocketAddr, SocketAddr, Duration, Vec<u8>)>;

    /// Four endpoints all sending to each other at 60 Hz for a minute of session time, every frame polled: the
    /// delivery log must be identical for the same seed, different for another, and the counters must balance.
    fn full_mesh_minute(seed: u64) -> (DeliveryLog, MemoryNetwork) {
        let config = LinkConfig {
            reorder: 0.01,
            reorder_delay: Duration::from_millis(30),
            ..LinkConfig::from_rtt(
                Duration::from_millis(250),
                Duration::from_millis(50),
                0.05,
                0.01,
            )
        };
        let mut net = network(config, seed, 4);
        let mut clock = SimClock::new();
        let mut log = Vec::new();
        for frame in 0u32..60 * 60 {
            let now = clock.advance(FRAME);
            for from in 1..=4 {
                for to in (1..=4).filter(|&to| to != from) {
                    let mut payload = frame.to_le_bytes().to_vec();
                    payload.resize(80 + (frame % 40) as usize, from as u8);
                    let delivery = if frame % 60 == 0 {
                        Delivery::ReliableOrdered
                    } else {
                        Delivery::Unreliable
                    };
                    net.send(now, addr(from), transmit(addr(to), delivery, payload))
                        .unwrap();
                }
            }
            for to in 1..=4 {
                while let Some(datagram) = net.poll_receive(addr(to), now) {
                    log.push((datagram.from, addr(to), now, datagram.payload));
                }
            }
        }
        (log, net)
    }

    #[test]
    fn a_minute_of_four_endpoints_is_deterministic_and_balanced() {
        let (log, net) = full_mesh_minute(99);
        let (again, _) = full_mesh_minute(99);
        let (other, _) = full_mesh_minute(100);
        assert_eq!(log, again);
        assert_ne!(log, other);

        let mut received = 0;
        for from in 1..=4 {
            let traffic = net.traffic(addr(from)).unwrap();
            assert_eq!(traffic.datagrams_sent, 3 * 3600);
            received += traffic.datagrams_received;
            for to in (1..=4).filter(|&to| to != from) {
                let stats = net.link_stats(addr(from), addr(to)).unwrap();
                let link = net.link_traffic(addr(from), addr(to));
                assert_eq!(stats.sent, 3600);
                assert_eq!(link.bytes_sent, stats.bytes_sent);
                assert!(stats.dropped > 100 && stats.dropped < 260, "{stats:?}");
                assert!(stats.duplicated > 10, "{stats:?}");
            }
        }
        assert_eq!(received as usize, log.len());
        let delivered: u64 = (1..=4)
            .flat_map(|from| {
                (1..=4)
                    .filter(move |&to| to != from)
                    .map(move |to| (from, to))
            })
            .map(|(from, to)| net.link_stats(addr(from), addr(to)).unwrap().delivered)
            .sum();
        assert_eq!(delivered, received + net.in_flight() as u64);
    }

    #[test]
    fn links_can_be_configured_per_direction() {
        let mut net = network(LinkConfig::ideal(), 3, 2);
        let slow = LinkConfig {
            latency: Duration::from_millis(80),
            ..LinkConfig::ideal()
        };
        net.set_link(addr(1), addr(2), slow).unwrap();
        net.send(
            Duration::ZERO,
            addr(1),
            transmit(addr(2), Delivery::Unreliable, vec![1]),
        )
        .unwrap();
        net.send(
            Duration::ZERO,
            addr(2),
            transmit(addr(1), Delivery::Unreliable, vec![2]),
        )
        .unwrap();
        assert_eq!(
            net.next_delivery_for(addr(2)),
            Some(Duration::from_millis(80))
        );
        assert_eq!(net.next_delivery_for(addr(1)), Some(Duration::ZERO));

        net.set_default_link(slow).unwrap();
        net.send(
            Duration::ZERO,
            addr(2),
            transmit(addr(1), Delivery::Unreliable, vec![3]),
        )
        .unwrap();
        assert_eq!(
            net.poll_receive(addr(1), Duration::ZERO).unwrap().payload,
            vec![2]
        );
        assert_eq!(
            net.next_delivery_for(addr(1)),
            Some(Duration::from_millis(80))
        );
        let bad = LinkConfig {
            loss: 3.0,
            ..LinkConfig::ideal()
        };
        assert!(net.set_link(addr(1), addr(2), bad).is_err());
        assert!(net.set_default_link(bad).is_err());
    }

    #[test]
    fn removed_and_unknown_endpoints_lose_their_datagrams() {
        let config = LinkConfig {
            latency: Duration::from_millis(30),
            ..LinkConfig::ideal()
        };
        let mut net = network(config, 4, 2);
        net.send(
            Duration::ZERO,
            addr(1),
            transmit(addr(2), Delivery::ReliableOrdered, vec![9]),
        )
        .unwrap();
        assert!(net.remove_endpoint(addr(2)));
        assert!(!net.remove_endpoint(addr(2)));
        assert_eq!(net.in_flight(), 0);
        assert_eq!(net.undeliverable(), 1);
        net.send(
            Duration::ZERO,
            addr(1),
            transmit(addr(5), Delivery::Unreliable, vec![9]),
        )
        .unwrap();
        assert_eq!(net.undeliverable(), 2);
        assert_eq!(net.poll_receive(addr(2), Duration::from_secs(1)), None);
        assert_eq!(net.traffic(addr(1)).unwrap().datagrams_sent, 2);
        assert_eq!(net.endpoints().collect::<Vec<_>>(), vec![addr(1)]);
    }

    #[test]
    fn bad_sends_are_refused() {
        let mut net = network(LinkConfig::ideal(), 0, 1);
        assert!(matches!(
            net.add_endpoint(addr(1)),
            Err(TransportError::AddressInUse(_))
        ));
        let oversized = transmit(addr(1), Delivery::Unreliable, vec![0; MAX_WIRE_PAYLOAD + 1]);
        assert!(matches!(
            net.send(Duration::ZERO, addr(1), oversized),
            Err(TransportError::PayloadTooLarge { len }) if len == MAX_WIRE_PAYLOAD + 1
        ));
        let stranger = transmit(addr(1), Delivery::Unreliable, vec![0]);
        assert!(matches!(
            net.send(Duration::ZERO, addr(9), stranger),
            Err(TransportError::UnknownEndpoint(_))
        ));
        assert_eq!(net.traffic(addr(1)).unwrap(), TrafficCounters::default());
        let full = transmit(addr(1), Delivery::Unreliable, vec![0; MAX_WIRE_PAYLOAD]);
        assert!(net.send(Duration::ZERO, addr(1), full).is_ok());
        assert_eq!(
            net.poll_receive(addr(1), Duration::ZERO)
                .unwrap()
                .payload
                .len(),
            MAX_WIRE_PAYLOAD
        );
    }
}
