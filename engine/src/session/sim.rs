//! A whole peer-hosted session in one thread: one host core and guest cores on a [`MemoryNetwork`], on a
//! simulated clock, seeded. The harness tests and benchmarks run sessions with.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::transport::{LinkConfig, MemoryNetwork, SimClock, TrafficCounters, TransportError};

use super::core::SessionCore;

/// The address the harness gives the host.
pub fn host_addr() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(10, 0, 0, 1), 7000))
}

/// The address the harness gives guest number `index` (0-based).
pub fn guest_addr(index: usize) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(10, 0, 1, (index % 250) as u8 + 1), 7000))
}

/// One guest core in the harness, with its address; `None` once removed.
struct GuestSeat<G> {
    addr: SocketAddr,
    core: Option<G>,
}

/// One host and guests on an in-memory network. The driver loop: send everything the cores queued, advance the
/// clock to the earliest delivery or core deadline, deliver, run the cores whose deadline came (after the input
/// hook, so a bot acts on the frame it is stepped).
pub struct SessionSim<H, G> {
    net: MemoryNetwork,
    clock: SimClock,
    host: H,
    guests: Vec<GuestSeat<G>>,
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
            guests: Vec::new(),
        })
    }

    /// Adds a guest core at [`guest_addr`] of its index, which is returned.
    pub fn add_guest(&mut self, guest: G) -> Result<usize, TransportError> {
        let index = self.guests.len();
        let addr = guest_addr(index);
        self.net.add_endpoint(addr)?;
        self.guests.push(GuestSeat {
            addr,
            core: Some(guest),
        });
        Ok(index)
    }

    /// Takes a guest off the network without a word (a crash or a pulled cable); it is returned to the caller.
    pub fn remove_guest(&mut self, index: usize) -> Option<G> {
        let seat = self.guests.get_mut(index)?;
        self.net.remove_endpoint(seat.addr);
        seat.core.take()
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
        self.guests.get(index)?.core.as_ref()
    }

    /// Guest `index`, mutably, unless removed.
    pub fn guest_mut(&mut self, index: usize) -> Option<&mut G> {
        self.guests.get_mut(index)?.core.as_mut()
    }

    /// The guests still in the harness, with their indices.
    pub fn guests(&self) -> impl Iterator<Item = (usize, &G)> {
        self.guests
            .iter()
            .enumerate()
            .filter_map(|(i, seat)| seat.core.as_ref().map(|g| (i, g)))
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
            .get(index)
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
                    .iter()
                    .filter_map(|s| s.core.as_ref()?.poll_timeout())
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
                self.host.handle_datagram(now, d);
            }
            for seat in &mut self.guests {
                if let Some(core) = &mut seat.core {
                    while let Some(d) = self.net.poll_receive(seat.addr, now) {
                        core.handle_datagram(now, d);
                    }
                }
            }
            if self.host.poll_timeout().is_some_and(|t| t <= now) {
                host_input(now, &mut self.host);
                self.host.handle_timeout(now);
            }
            for (i, seat) in self.guests.iter_mut().enumerate() {
                if let Some(core) = &mut seat.core
                    && core.poll_timeout().is_some_and(|t| t <= now)
                {
                    guest_input(i, now, core);
                    core.handle_timeout(now);
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
        while let Some(t) = self.host.poll_transmit() {
            self.net.send(now, host_addr(), t)?;
        }
        for seat in &mut self.guests {
            if let Some(core) = &mut seat.core {
                while let Some(t) = core.poll_transmit() {
                    self.net.send(now, seat.addr, t)?;
                }
            }
        }
        Ok(())
    }
}
