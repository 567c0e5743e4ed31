//! A whole peer-hosted session in one thread: one host core and guest cores on a [`MemoryNetwork`], on a
//! simulated clock, seeded. The harness tests and benchmarks run sessions with.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::connection::{ClientAuth, ClientConfig, Endpoint, ServerAuth, ServerConfig};
use crate::transport::{
    Datagram, Delivery, LinkConfig, MemoryNetwork, SimClock, TrafficCounters, Transmit,
    TransportError,
};

use super::core::SessionCore;

/// The address the harness gives the host.
pub fn host_addr() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(10, 0, 0, 1), 7000))
}

/// The address the harness gives guest number `index` (0-based).
pub fn guest_addr(index: usize) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(10, 0, 1, (index % 250) as u8 + 1), 7000))
}

/// One guest core in the harness, with its address and connection endpoint.
struct GuestSeat<G> {
    addr: SocketAddr,
    core: G,
    connection: Option<Endpoint>,
}

/// Runs a core's datagrams through its connection endpoint (when the session is secured): `None` means the
/// endpoint took the datagram (a handshake, a keep-alive, or a drop).
fn open(connection: &mut Option<Endpoint>, now: Duration, d: Datagram) -> Option<Datagram> {
    let Some(c) = connection else {
        return Some(d);
    };
    let payload = c.handle_datagram(now, d.from, &d.payload)?;
    Some(Datagram { payload, ..d })
}

/// Datagrams as they entered the network, with their senders.
type Tap = Option<Vec<(SocketAddr, Transmit)>>;

/// Sends `t` from `from`, sealed when the session is secured, and whatever the endpoint has to send; copies what
/// it sends into `tap` when tapping.
fn send(
    net: &mut MemoryNetwork,
    tap: &mut Tap,
    connection: &mut Option<Endpoint>,
    now: Duration,
    from: SocketAddr,
    t: Option<Transmit>,
) -> Result<(), TransportError> {
    let mut wire = Vec::new();
    match (connection.as_mut(), t) {
        (None, Some(t)) => wire.push(t),
        (Some(c), Some(t)) => {
            if let Some(payload) = c.seal(now, t.to, &t.payload) {
                wire.push(Transmit { payload, ..t });
            }
        }
        _ => {}
    }
    while let Some((to, payload)) = connection.as_mut().and_then(Endpoint::poll_transmit) {
        wire.push(Transmit {
            to,
            delivery: Delivery::Unreliable,
            payload,
        });
    }
    for t in wire {
        if let Some(tap) = tap {
            tap.push((from, t.clone()));
        }
        net.send(now, from, t)?;
    }
    Ok(())
}

/// Runs an endpoint's timers when due.
fn service(connection: &mut Option<Endpoint>, now: Duration) {
    if let Some(c) = connection
        && c.poll_timeout().is_some_and(|t| t <= now)
    {
        c.handle_timeout(now);
    }
}

/// One host and guests on an in-memory network. The driver loop: send everything the cores queued, advance the
/// clock to the earliest delivery or core deadline, deliver, run the cores whose deadline came (after the input
/// hook, so a bot acts on the frame it is stepped).
///
/// Built with [`SessionSim::new_secure`], every core talks through the connection layer, as over real UDP: the
/// host behind a peer-mode server endpoint, each guest behind a client endpoint with the join code.
pub struct SessionSim<H, G> {
    net: MemoryNetwork,
    clock: SimClock,
    host: H,
    host_connection: Option<Endpoint>,
    join_code: Option<Option<String>>,
    seed: u64,
    tap: Tap,
    /// Present guests by index; a removed guest's seat goes, so a session with churn holds only present ones.
    guests: BTreeMap<usize, GuestSeat<G>>,
    next_guest: usize,
}

impl<H: SessionCore, G: SessionCore> SessionSim<H, G> {
    /// A session whose every link is `link` (both directions), seeded; the host sits at [`host_addr`].
    pub fn new(host: H, link: LinkConfig, seed: u64) -> Result<Self, TransportError> {
        let mut net = MemoryNetwork::new(link, seed)?;
        net.add_endpoint(host_addr())?;
        Ok(Self {
            net,
            clock: SimClock::new(),
            host,
            host_connection: None,
            join_code: None,
            seed,
            tap: None,
            guests: BTreeMap::new(),
            next_guest: 0,
        })
    }

    /// A session like [`SessionSim::new`] with every core behind the connection layer; the host admits guests
    /// that give `join_code` (any guest when `None`).
    pub fn new_secure(
        host: H,
        link: LinkConfig,
        seed: u64,
        join_code: Option<String>,
    ) -> Result<Self, TransportError> {
        let mut sim = Self::new(host, link, seed)?;
        let auth = ServerAuth::Peer {
            join_code: join_code.clone(),
        };
        sim.host_connection = Some(Endpoint::server(
            ServerConfig::new(auth),
            seed_bytes(seed, 0),
        ));
        sim.join_code = Some(join_code);
        Ok(sim)
    }

    /// Adds a guest core at [`guest_addr`] of its index, which is returned. In a secured session it joins with
    /// the session's join code.
    pub fn add_guest(&mut self, guest: G) -> Result<usize, TransportError> {
        let code = self.join_code.clone().flatten();
        self.add_guest_with_code(guest, code)
    }

    /// Adds a guest that types `join_code` (which only matters in a secured session).
    pub fn add_guest_with_code(
        &mut self,
        guest: G,
        join_code: Option<String>,
    ) -> Result<usize, TransportError> {
        let index = self.next_guest;
        let addr = guest_addr(index);
        self.net.add_endpoint(addr)?;
        let connection = self.join_code.as_ref().map(|_| {
            let config = ClientConfig::new(host_addr(), ClientAuth::Peer { join_code });
            Endpoint::client(
                config,
                self.clock.now(),
                seed_bytes(self.seed, 1 + index as u64),
            )
        });
        self.guests.insert(
            index,
            GuestSeat {
                addr,
                core: guest,
                connection,
            },
        );
        self.next_guest += 1;
        Ok(index)
    }

    /// Starts (or with `false` stops) recording every datagram the cores put on the network, as an eavesdropper
    /// on the path would see it.
    pub fn set_tap(&mut self, on: bool) {
        self.tap = on.then(Vec::new);
    }

    /// The datagrams recorded since the last call, with their senders.
    pub fn take_tapped(&mut self) -> Vec<(SocketAddr, Transmit)> {
        self.tap.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The host's connection endpoint, in a secured session.
    pub fn host_connection(&self) -> Option<&Endpoint> {
        self.host_connection.as_ref()
    }

    /// Guest `index`'s connection endpoint, in a secured session.
    pub fn guest_connection(&self, index: usize) -> Option<&Endpoint> {
        self.guests.get(&index)?.connection.as_ref()
    }

    /// Takes a guest off the network without a word (a crash or a pulled cable); it is returned to the caller.
    pub fn remove_guest(&mut self, index: usize) -> Option<G> {
        let seat = self.guests.remove(&index)?;
        self.net.remove_endpoint(seat.addr);
        Some(seat.core)
    }

    /// The simulated time.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// The host core.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// The host core, mutably (local input between runs).
    pub fn host_mut(&mut self) -> &mut H {
        &mut self.host
    }

    /// Guest `index`, unless removed.
    pub fn guest(&self, index: usize) -> Option<&G> {
        self.guests.get(&index).map(|s| &s.core)
    }

    /// Guest `index`, mutably, unless removed.
    pub fn guest_mut(&mut self, index: usize) -> Option<&mut G> {
        self.guests.get_mut(&index).map(|s| &mut s.core)
    }

    /// The guests still in the harness, with their indices.
    pub fn guests(&self) -> impl Iterator<Item = (usize, &G)> {
        self.guests.iter().map(|(&i, seat)| (i, &seat.core))
    }

    /// The network, for traffic counters and link statistics.
    pub fn network(&self) -> &MemoryNetwork {
        &self.net
    }

    /// The network, mutably (to change a link's conditions mid-session).
    pub fn network_mut(&mut self) -> &mut MemoryNetwork {
        &mut self.net
    }

    /// What guest `index` sent (up) and received (down) so far.
    pub fn guest_traffic(&self, index: usize) -> TrafficCounters {
        self.guests
            .get(&index)
            .and_then(|seat| self.net.traffic(seat.addr))
            .unwrap_or_default()
    }

    /// What the host sent and received so far.
    pub fn host_traffic(&self) -> TrafficCounters {
        self.net.traffic(host_addr()).unwrap_or_default()
    }

    /// Runs the session until simulated time `until`. `host_input` runs right before each host deadline is
    /// handled, `guest_input` likewise with the guest's index: that is where bots act.
    pub fn run_until(
        &mut self,
        until: Duration,
        mut host_input: impl FnMut(Duration, &mut H),
        mut guest_input: impl FnMut(usize, Duration, &mut G),
    ) -> Result<(), TransportError> {
        loop {
            self.flush()?;
            let next = [
                self.net.next_delivery(),
                self.host.poll_timeout(),
                self.guests
                    .values()
                    .filter_map(|s| s.core.poll_timeout())
                    .min(),
                self.host_connection
                    .as_ref()
                    .and_then(Endpoint::poll_timeout),
                self.guests
                    .values()
                    .filter_map(|s| s.connection.as_ref()?.poll_timeout())
                    .min(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next.filter(|&t| t <= until) else {
                self.clock.advance_to(until);
                return Ok(());
            };
            let now = self.clock.advance_to(next.max(self.clock.now()));
            while let Some(d) = self.net.poll_receive(host_addr(), now) {
                if let Some(d) = open(&mut self.host_connection, now, d) {
                    self.host.handle_datagram(now, d);
                }
            }
            for seat in self.guests.values_mut() {
                while let Some(d) = self.net.poll_receive(seat.addr, now) {
                    if let Some(d) = open(&mut seat.connection, now, d) {
                        seat.core.handle_datagram(now, d);
                    }
                }
            }
            service(&mut self.host_connection, now);
            for seat in self.guests.values_mut() {
                service(&mut seat.connection, now);
            }
            if self.host.poll_timeout().is_some_and(|t| t <= now) {
                host_input(now, &mut self.host);
                self.host.handle_timeout(now);
            }
            for (&i, seat) in &mut self.guests {
                if seat.core.poll_timeout().is_some_and(|t| t <= now) {
                    guest_input(i, now, &mut seat.core);
                    seat.core.handle_timeout(now);
                }
            }
        }
    }

    /// Runs without input until `until`.
    pub fn run_idle_until(&mut self, until: Duration) -> Result<(), TransportError> {
        self.run_until(until, |_, _| {}, |_, _, _| {})
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        let now = self.clock.now();
        loop {
            let t = self.host.poll_transmit();
            let done = t.is_none();
            send(
                &mut self.net,
                &mut self.tap,
                &mut self.host_connection,
                now,
                host_addr(),
                t,
            )?;
            if done {
                break;
            }
        }
        for seat in self.guests.values_mut() {
            loop {
                let t = seat.core.poll_transmit();
                let done = t.is_none();
                send(
                    &mut self.net,
                    &mut self.tap,
                    &mut seat.connection,
                    now,
                    seat.addr,
                    t,
                )?;
                if done {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// 32 seed bytes for endpoint `which` of a session seeded `seed`.
fn seed_bytes(seed: u64, which: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    out[..8].copy_from_slice(&seed.to_le_bytes());
    out[8..16].copy_from_slice(&which.to_le_bytes());
    out
}
