//! The driver that carries a sans-IO core's datagrams over a real laminar UDP socket.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use laminar::{
    ConnectionManager, DeliveryGuarantee, OrderingGuarantee, Packet, SocketEvent, VirtualConnection,
};

use crate::connection::{ConnectionEvent, ConnectionStats, Endpoint};

use super::conditioner::{LinkConditioner, LinkConfig, LinkStats};
use super::datagram::{Datagram, Delivery, MAX_DATAGRAM_PAYLOAD, Transmit};
use super::error::TransportError;
use super::guarded_socket::{GuardedSocket, RawCounters};
use super::seed::link_seed;
use super::timed_queue::TimedQueue;
use super::traffic::TrafficCounters;

/// The laminar ordering stream that carries [`Delivery::ReliableOrdered`] messages.
pub const CONTROL_STREAM: u8 = 0;

/// How a [`LaminarDriver`] sets up its socket and its optional outgoing conditioner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriverConfig {
    /// laminar sends an empty heartbeat to a connected peer after this long without other traffic to it, so a quiet
    /// but live peer is not taken for gone.
    pub heartbeat_interval: Duration,
    /// laminar drops a peer it has not heard from for this long and reports [`DriverEvent::TimedOut`].
    pub idle_timeout: Duration,
    /// When set, outgoing traffic passes through a [`LinkConditioner`] per destination before reaching the socket.
    pub conditioner: Option<LinkConfig>,
    /// Seed of the outgoing conditioners (each destination draws its own stream from it).
    pub seed: u64,
}

impl Default for DriverConfig {
    /// Heartbeats every 250 ms and a 5 s idle timeout: a peer survives a couple of seconds of total loss, and
    /// a vanished one is noticed well before a player would give up on it.
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_millis(250),
            idle_timeout: Duration::from_secs(5),
            conditioner: None,
            seed: 0,
        }
    }
}

/// What a pump brought in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverEvent {
    /// A datagram for the core.
    Datagram(Datagram),
    /// laminar saw traffic both ways with this peer for the first time.
    Connected(SocketAddr),
    /// laminar heard nothing from this peer for the idle timeout (or it flooded laminar's reliable window) and
    /// forgot it.
    TimedOut(SocketAddr),
    /// A peer that had been [`Connected`](DriverEvent::Connected) was forgotten; follows its `TimedOut`.
    Disconnected(SocketAddr),
}

/// The optional conditioner in front of the socket: one per destination, and the sends it is holding back.
#[derive(Debug)]
struct OutgoingConditioner {
    config: LinkConfig,
    links: BTreeMap<SocketAddr, LinkConditioner>,
}

/// One laminar `Socket`, driven explicitly: [`send`](Self::send) hands it datagrams, [`pump`](Self::pump) moves
/// traffic, [`poll_event`](Self::poll_event) hands out what arrived.
///
/// [`Delivery::Unreliable`] maps to laminar's unreliable packets and [`Delivery::ReliableOrdered`] to its
/// reliable-ordered packets on [`CONTROL_STREAM`]. The driver owns the only mapping from the wall clock to session
/// time: its epoch is the moment it was bound, [`now`](Self::now) reads the session time, and `pump(now)` hands
/// laminar the matching instant.
///
/// With a conditioner configured, each outgoing datagram is scheduled as on the in-memory network and held until
/// a pump at or after its time releases it to the socket (lost unreliable datagrams are never sent, reliable ones
/// are only delayed, and laminar's own reliability still runs underneath). Incoming traffic is not conditioned;
/// condition the sender to shape a direction.
///
/// What laminar 0.5 does underneath, and cores must live with:
/// - Acknowledgements ride only on reliable packets. Reliable messages to a peer that answers only unreliably
///   stay in flight, and at the 513th laminar drops the peer ([`DriverEvent::TimedOut`]); a lost reliable packet
///   is resent only once the peer has acknowledged 32 newer ones. Control protocols should answer on the reliable
///   channel and retry their handshakes until answered.
/// - Heartbeats flow only once a peer is connected (traffic seen both ways); a peer that never sends is dropped
///   after the idle timeout.
/// - Datagrams that are not laminar packets are discarded inside laminar and never reach the core.
///
/// Bound with [`LaminarDriver::bind_secure`], the connection layer ([`crate::connection`]) runs beneath laminar:
/// laminar's datagrams are sealed on the way out and opened on the way in, and nothing from an address that has not
/// passed the challenge reaches laminar or the core.
#[derive(Debug)]
pub struct LaminarDriver {
    socket: ConnectionManager<GuardedSocket, VirtualConnection>,
    local_addr: SocketAddr,
    epoch: Instant,
    seed: u64,
    conditioner: Option<OutgoingConditioner>,
    held: TimedQueue<Transmit>,
    events: VecDeque<DriverEvent>,
    traffic: BTreeMap<SocketAddr, TrafficCounters>,
}

impl LaminarDriver {
    /// Binds a UDP socket at `addr` (port 0 picks a free port) and starts the session clock. Datagrams travel
    /// unauthenticated: use [`LaminarDriver::bind_secure`] for anything facing a network.
    pub fn bind(addr: impl ToSocketAddrs, config: DriverConfig) -> Result<Self, TransportError> {
        Self::bind_with(addr, config, None)
    }

    /// Binds like [`LaminarDriver::bind`], with `connection` (a server or client endpoint whose session time
    /// starts now) between the socket and laminar.
    pub fn bind_secure(
        addr: impl ToSocketAddrs,
        config: DriverConfig,
        connection: Endpoint,
    ) -> Result<Self, TransportError> {
        Self::bind_with(addr, config, Some(connection))
    }

    fn bind_with(
        addr: impl ToSocketAddrs,
        config: DriverConfig,
        connection: Option<Endpoint>,
    ) -> Result<Self, TransportError> {
        let conditioner = config
            .conditioner
            .map(|link| {
                link.validate()?;
                Ok::<_, TransportError>(OutgoingConditioner {
                    config: link,
                    links: BTreeMap::new(),
                })
            })
            .transpose()?;
        let laminar_config = laminar::Config {
            heartbeat_interval: Some(config.heartbeat_interval),
            idle_connection_timeout: config.idle_timeout,
            fragment_size: MAX_DATAGRAM_PAYLOAD as u16,
            ..laminar::Config::default()
        };
        let udp = std::net::UdpSocket::bind(addr).map_err(laminar::ErrorKind::from)?;
        let local_addr = udp.local_addr().map_err(laminar::ErrorKind::from)?;
        let guarded = GuardedSocket::new(udp, connection).map_err(laminar::ErrorKind::from)?;
        let socket = ConnectionManager::new(guarded, laminar_config);
        Ok(Self {
            socket,
            local_addr,
            epoch: Instant::now(),
            seed: config.seed,
            conditioner,
            held: TimedQueue::default(),
            events: VecDeque::new(),
            traffic: BTreeMap::new(),
        })
    }

    /// The address the socket is bound to (with the port the system picked, if 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The current session time: wall-clock time since the driver was bound.
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Queues `transmit` for sending at session time `now`; it leaves on this or a later [`pump`](Self::pump).
    pub fn send(&mut self, now: Duration, transmit: Transmit) -> Result<(), TransportError> {
        let len = transmit.payload.len();
        if len > MAX_DATAGRAM_PAYLOAD {
            return Err(TransportError::PayloadTooLarge { len });
        }
        self.traffic
            .entry(transmit.to)
            .or_default()
            .record_sent(len);
        let Some(conditioner) = &mut self.conditioner else {
            return self.submit(transmit);
        };
        let link = match conditioner.links.entry(transmit.to) {
            Entry::Occupied(link) => link.into_mut(),
            Entry::Vacant(slot) => {
                let seed = link_seed(self.seed, self.local_addr, transmit.to);
                slot.insert(LinkConditioner::new(conditioner.config, seed)?)
            }
        };
        let schedule = link.schedule(now, transmit.delivery, len);
        if let Some((&last, rest)) = schedule.times().split_last() {
            for &at in rest {
                self.held.push(at, transmit.clone());
            }
            self.held.push(last, transmit);
        }
        Ok(())
    }

    /// Moves traffic at session time `now`: releases held sends that are due, lets laminar send, receive,
    /// retransmit, heartbeat and time out, and queues what came in for [`poll_event`](Self::poll_event).
    pub fn pump(&mut self, now: Duration) -> Result<(), TransportError> {
        while let Some(transmit) = self.held.pop_due(now) {
            self.submit(transmit)?;
        }
        self.socket.socket_mut().now = now;
        self.socket.socket_mut().service();
        self.socket.manual_poll(self.epoch + now);
        self.socket.socket_mut().service();
        while let Ok(event) = self.socket.event_receiver().try_recv() {
            let event = match event {
                SocketEvent::Packet(packet) => {
                    let datagram = Datagram {
                        from: packet.addr(),
                        delivery: delivery_of(&packet),
                        payload: packet.payload().to_vec(),
                    };
                    self.traffic
                        .entry(datagram.from)
                        .or_default()
                        .record_received(datagram.payload.len());
                    DriverEvent::Datagram(datagram)
                }
                SocketEvent::Connect(peer) => DriverEvent::Connected(peer),
                SocketEvent::Timeout(peer) => DriverEvent::TimedOut(peer),
                SocketEvent::Disconnect(peer) => DriverEvent::Disconnected(peer),
            };
            self.events.push_back(event);
        }
        Ok(())
    }

    /// The next event brought in by a pump, oldest first.
    pub fn poll_event(&mut self) -> Option<DriverEvent> {
        self.events.pop_front()
    }

    /// When the earliest held-back send is due, so a loop knows when to pump next; `None` without a conditioner
    /// or with nothing held.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.held.next_time()
    }

    /// Number of sends the conditioner is holding back.
    pub fn held_sends(&self) -> usize {
        self.held.len()
    }

    /// Puts a conditioner in front of outgoing traffic, changes its settings, or (with `None`) removes it.
    /// Sends already held back keep their times.
    pub fn set_conditioner(&mut self, config: Option<LinkConfig>) -> Result<(), TransportError> {
        match (config, &mut self.conditioner) {
            (None, _) => self.conditioner = None,
            (Some(config), Some(conditioner)) => {
                config.validate()?;
                for link in conditioner.links.values_mut() {
                    link.set_config(config)?;
                }
                conditioner.config = config;
            }
            (Some(config), None) => {
                config.validate()?;
                self.conditioner = Some(OutgoingConditioner {
                    config,
                    links: BTreeMap::new(),
                });
            }
        }
        Ok(())
    }

    /// The outgoing conditioner's counters towards `peer`, if a conditioner is set and has seen traffic to it.
    pub fn conditioner_stats(&self, peer: SocketAddr) -> Option<&LinkStats> {
        self.conditioner
            .as_ref()?
            .links
            .get(&peer)
            .map(LinkConditioner::stats)
    }

    /// Payload bytes and datagrams exchanged with `peer` so far (sent counts what the core handed over, including
    /// datagrams the conditioner then dropped).
    pub fn traffic(&self, peer: SocketAddr) -> TrafficCounters {
        self.traffic.get(&peer).copied().unwrap_or_default()
    }

    /// Every peer with traffic so far, with its counters, in address order.
    pub fn traffic_by_peer(&self) -> impl Iterator<Item = (SocketAddr, TrafficCounters)> + '_ {
        self.traffic
            .iter()
            .map(|(&peer, &counters)| (peer, counters))
    }

    fn submit(&mut self, transmit: Transmit) -> Result<(), TransportError> {
        let packet = match transmit.delivery {
            Delivery::Unreliable => Packet::unreliable(transmit.to, transmit.payload),
            Delivery::ReliableOrdered => {
                Packet::reliable_ordered(transmit.to, transmit.payload, Some(CONTROL_STREAM))
            }
        };
        self.socket
            .event_sender()
            .send(packet)
            .map_err(|_| TransportError::Closed)?;
        Ok(())
    }

    /// The connection layer's next event (a peer passed the challenge, a session ended); `None` when bound
    /// without one.
    pub fn poll_connection_event(&mut self) -> Option<ConnectionEvent> {
        self.socket.socket_mut().guard_mut()?.poll_event()
    }

    /// The connection layer's counters, when bound with one.
    pub fn connection_stats(&self) -> Option<&ConnectionStats> {
        self.socket.socket().guard().map(Endpoint::stats)
    }

    /// The connection layer, when bound with one.
    pub fn connection(&self) -> Option<&Endpoint> {
        self.socket.socket().guard()
    }

    /// The connection layer, mutably (to name the addresses tokens may give after binding).
    pub fn connection_mut(&mut self) -> Option<&mut Endpoint> {
        self.socket.socket_mut().guard_mut()
    }

    /// Ends the connection-layer session with `peer` (its core is done with it).
    pub fn close_peer(&mut self, peer: SocketAddr) {
        if let Some(guard) = self.socket.socket_mut().guard_mut() {
            guard.close(peer);
        }
    }

    /// Datagrams and bytes at the socket itself, before the connection layer and laminar.
    pub fn raw_counters(&self) -> RawCounters {
        self.socket.socket().raw()
    }
}

/// Only laminar's reliable-ordered packets count as the control channel; anything else a peer sends is presented
/// with the weakest guarantee.
fn delivery_of(packet: &Packet) -> Delivery {
    match (packet.delivery_guarantee(), packet.order_guarantee()) {
        (DeliveryGuarantee::Reliable, OrderingGuarantee::Ordered(_)) => Delivery::ReliableOrdered,
        _ => Delivery::Unreliable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upper bound on pump rounds before a test over loopback gives up; each round yields the thread.
    const MAX_ROUNDS: usize = 200_000;
    /// Wall-clock bound on the same loops, so a stuck test fails instead of hanging.
    const MAX_WAIT: Duration = Duration::from_secs(10);

    fn bind() -> LaminarDriver {
        LaminarDriver::bind("127.0.0.1:0", DriverConfig::default()).unwrap()
    }

    fn transmit(to: SocketAddr, delivery: Delivery, payload: &[u8]) -> Transmit {
        Transmit {
            to,
            delivery,
            payload: payload.to_vec(),
        }
    }

    /// Pumps both drivers at their own wall-clock session times, gathering events, until `done` holds;
    /// panics when the round or time bound is hit first.
    fn pump_until(
        a: &mut LaminarDriver,
        b: &mut LaminarDriver,
        seen_a: &mut Vec<DriverEvent>,
        seen_b: &mut Vec<DriverEvent>,
        done: impl Fn(&[DriverEvent], &[DriverEvent]) -> bool,
    ) {
        let started = Instant::now();
        for _ in 0..MAX_ROUNDS {
            a.pump(a.now()).unwrap();
            b.pump(b.now()).unwrap();
            seen_a.extend(std::iter::from_fn(|| a.poll_event()));
            seen_b.extend(std::iter::from_fn(|| b.poll_event()));
            if done(seen_a, seen_b) {
                return;
            }
            assert!(
                started.elapsed() < MAX_WAIT,
                "timed out: a saw {seen_a:?}, b saw {seen_b:?}"
            );
            std::thread::yield_now();
        }
        panic!("gave up after {MAX_ROUNDS} rounds: a saw {seen_a:?}, b saw {seen_b:?}");
    }

    fn datagrams(events: &[DriverEvent], delivery: Delivery) -> Vec<Vec<u8>> {
        events
            .iter()
            .filter_map(|event| match event {
                DriverEvent::Datagram(datagram) if datagram.delivery == delivery => {
                    Some(datagram.payload.clone())
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn two_drivers_exchange_both_channels_over_loopback() {
        let mut a = bind();
        let mut b = bind();
        let (addr_a, addr_b) = (a.local_addr(), b.local_addr());
        assert_ne!(addr_a.port(), 0);

        let control: Vec<Vec<u8>> = (0u8..50).map(|i| vec![b'c', i]).collect();
        for (i, message) in control.iter().enumerate() {
            a.send(
                a.now(),
                transmit(addr_b, Delivery::ReliableOrdered, message),
            )
            .unwrap();
            a.send(
                a.now(),
                transmit(addr_b, Delivery::Unreliable, &[b's', i as u8]),
            )
            .unwrap();
        }
        let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
        pump_until(&mut a, &mut b, &mut seen_a, &mut seen_b, |_, b| {
            datagrams(b, Delivery::ReliableOrdered).len() == control.len()
                && !datagrams(b, Delivery::Unreliable).is_empty()
        });
        assert_eq!(datagrams(&seen_b, Delivery::ReliableOrdered), control);
        let state = datagrams(&seen_b, Delivery::Unreliable);
        assert!(
            state
                .iter()
                .all(|payload| payload[0] == b's' && payload[1] < 50)
        );
        let first = seen_b.iter().find_map(|event| match event {
            DriverEvent::Datagram(datagram) => Some(datagram.from),
            _ => None,
        });
        assert_eq!(first, Some(addr_a));

        b.send(
            b.now(),
            transmit(addr_a, Delivery::ReliableOrdered, b"welcome"),
        )
        .unwrap();
        b.send(b.now(), transmit(addr_a, Delivery::Unreliable, b"state"))
            .unwrap();
        pump_until(&mut a, &mut b, &mut seen_a, &mut seen_b, |a, b| {
            a.contains(&DriverEvent::Connected(addr_b))
                && b.contains(&DriverEvent::Connected(addr_a))
                && datagrams(a, Delivery::ReliableOrdered) == [b"welcome".to_vec()]
                && datagrams(a, Delivery::Unreliable) == [b"state".to_vec()]
        });

        let sent = a.traffic(addr_b);
        assert_eq!(sent.datagrams_sent, 100);
        assert_eq!(sent.bytes_sent, 200);
        assert_eq!(sent.datagrams_received, 2);
        assert_eq!(sent.bytes_received, 12);
        let received = b.traffic(addr_a);
        assert_eq!(received.datagrams_received as usize, 50 + state.len());
        assert_eq!(
            b.traffic_by_peer()
                .map(|(peer, _)| peer)
                .collect::<Vec<_>>(),
            vec![addr_a]
        );
    }

    #[test]
    fn a_conditioner_holds_sends_until_their_time() {
        let link = LinkConfig {
            latency: Duration::from_millis(40),
            ..LinkConfig::ideal()
        };
        let config = DriverConfig {
            conditioner: Some(link),
            seed: 5,
            ..DriverConfig::default()
        };
        let mut a = LaminarDriver::bind("127.0.0.1:0", config).unwrap();
        let mut b = bind();
        let addr_b = b.local_addr();
        let start = a.now();
        a.send(start, transmit(addr_b, Delivery::ReliableOrdered, b"join"))
            .unwrap();
        a.send(start, transmit(addr_b, Delivery::Unreliable, b"state"))
            .unwrap();
        assert_eq!(a.held_sends(), 2);
        assert_eq!(a.next_deadline(), Some(start + Duration::from_millis(40)));
        a.pump(start + Duration::from_millis(39)).unwrap();
        assert_eq!(a.held_sends(), 2, "released before its time");
        a.pump(start + Duration::from_millis(40)).unwrap();
        assert_eq!(a.held_sends(), 0);
        assert_eq!(a.next_deadline(), None);

        let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
        pump_until(&mut a, &mut b, &mut seen_a, &mut seen_b, |_, b| {
            datagrams(b, Delivery::ReliableOrdered).len() == 1
                && datagrams(b, Delivery::Unreliable).len() == 1
        });
        assert_eq!(
            datagrams(&seen_b, Delivery::ReliableOrdered),
            [b"join".to_vec()]
        );
        let stats = a.conditioner_stats(addr_b).unwrap();
        assert_eq!((stats.sent, stats.delivered, stats.dropped), (2, 2, 0));

        let lossy = LinkConfig {
            loss: 1.0,
            ..LinkConfig::ideal()
        };
        a.set_conditioner(Some(lossy)).unwrap();
        a.send(a.now(), transmit(addr_b, Delivery::Unreliable, b"lost"))
            .unwrap();
        assert_eq!(a.held_sends(), 0);
        assert_eq!(a.conditioner_stats(addr_b).unwrap().dropped, 1);
        assert_eq!(a.traffic(addr_b).datagrams_sent, 3);

        a.set_conditioner(None).unwrap();
        assert!(a.conditioner_stats(addr_b).is_none());
        a.send(a.now(), transmit(addr_b, Delivery::Unreliable, b"direct"))
            .unwrap();
        assert_eq!(a.held_sends(), 0);
        pump_until(&mut a, &mut b, &mut seen_a, &mut seen_b, |_, b| {
            datagrams(b, Delivery::Unreliable).len() == 2
        });
        assert_eq!(
            datagrams(&seen_b, Delivery::Unreliable),
            [b"state".to_vec(), b"direct".to_vec()]
        );
    }

    #[test]
    fn oversized_payloads_and_bad_conditioners_are_refused() {
        let mut a = bind();
        let to = a.local_addr();
        let oversized = Transmit {
            to,
            delivery: Delivery::ReliableOrdered,
            payload: vec![0; MAX_DATAGRAM_PAYLOAD + 1],
        };
        assert!(matches!(
            a.send(a.now(), oversized),
            Err(TransportError::PayloadTooLarge { .. })
        ));
        assert_eq!(a.traffic(to), TrafficCounters::default());
        let bad = LinkConfig {
            duplicate: 1.5,
            ..LinkConfig::ideal()
        };
        assert!(a.set_conditioner(Some(bad)).is_err());
        let config = DriverConfig {
            conditioner: Some(bad),
            ..DriverConfig::default()
        };
        assert!(matches!(
            LaminarDriver::bind("127.0.0.1:0", config),
            Err(TransportError::InvalidLinkConfig(_))
        ));
    }

    #[test]
    fn a_silent_peer_times_out_and_disconnects() {
        let mut a = bind();
        let mut b = bind();
        let (addr_a, addr_b) = (a.local_addr(), b.local_addr());
        a.send(
            a.now(),
            transmit(addr_b, Delivery::ReliableOrdered, b"hello"),
        )
        .unwrap();
        b.send(
            b.now(),
            transmit(addr_a, Delivery::ReliableOrdered, b"hello"),
        )
        .unwrap();
        let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
        pump_until(&mut a, &mut b, &mut seen_a, &mut seen_b, |a, _| {
            a.contains(&DriverEvent::Connected(addr_b))
                && !datagrams(a, Delivery::ReliableOrdered).is_empty()
        });
        a.pump(a.now()).unwrap();
        while a.poll_event().is_some() {}
        seen_a.clear();

        let base = a.now();
        let idle = DriverConfig::default().idle_timeout;
        a.pump(base + idle / 2).unwrap();
        assert_eq!(a.poll_event(), None, "dropped before the idle timeout");
        a.pump(base + idle + Duration::from_millis(1)).unwrap();
        seen_a.extend(std::iter::from_fn(|| a.poll_event()));
        assert_eq!(
            seen_a,
            vec![
                DriverEvent::TimedOut(addr_b),
                DriverEvent::Disconnected(addr_b)
            ]
        );
    }

    /// laminar 0.5 carries acknowledgements only on reliable packets, so reliable messages to a peer that answers
    /// only with unreliable traffic stay in flight; past 512 laminar drops the peer. Cores must answer on the
    /// reliable channel now and then; this test pins the limit they design against.
    #[test]
    fn reliable_messages_answered_only_unreliably_drop_the_peer_after_512() {
        let mut a = bind();
        let mut b = bind();
        let (addr_a, addr_b) = (a.local_addr(), b.local_addr());
        let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
        for round in 0u32..512 {
            a.send(
                a.now(),
                transmit(addr_b, Delivery::ReliableOrdered, &round.to_le_bytes()),
            )
            .unwrap();
            b.send(b.now(), transmit(addr_a, Delivery::Unreliable, b"state"))
                .unwrap();
            let expected = round as usize + 1;
            pump_until(&mut a, &mut b, &mut seen_a, &mut seen_b, |_, b| {
                datagrams(b, Delivery::ReliableOrdered).len() == expected
            });
        }
        assert!(seen_a.contains(&DriverEvent::Connected(addr_b)));
        assert!(!seen_a.contains(&DriverEvent::TimedOut(addr_b)));
        a.send(
            a.now(),
            transmit(addr_b, Delivery::ReliableOrdered, b"one too many"),
        )
        .unwrap();
        a.pump(a.now()).unwrap();
        seen_a.extend(std::iter::from_fn(|| a.poll_event()));
        let tail = &seen_a[seen_a.len() - 2..];
        assert_eq!(
            tail,
            [
                DriverEvent::TimedOut(addr_b),
                DriverEvent::Disconnected(addr_b)
            ]
        );
    }
}
