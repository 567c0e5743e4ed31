//! The simulated driver: a [`DedicatedServer`] attached to an in-memory network endpoint, pumped on a simulated
//! clock (tests, benchmarks, the viewer's local match).

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::transport::{MemoryNetwork, TransportError};

use super::config::MatchConfig;
use super::server::{DedicatedServer, ServerError};

/// Why a simulated server could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The endpoint could not be attached.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The match configuration was refused.
    #[error(transparent)]
    Server(#[from] ServerError),
}

/// A server on an in-memory network endpoint.
#[derive(Debug)]
pub struct MemoryServer {
    addr: SocketAddr,
    server: DedicatedServer,
}

impl MemoryServer {
    /// Attaches an endpoint at `addr` to `net` and starts a match there at `now`.
    pub fn new(
        net: &mut MemoryNetwork,
        addr: SocketAddr,
        config: MatchConfig,
        now: Duration,
    ) -> Result<Self, SimError> {
        net.add_endpoint(addr)?;
        Ok(Self {
            addr,
            server: DedicatedServer::new(config, now)?,
        })
    }

    /// The endpoint's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The core.
    pub fn server(&self) -> &DedicatedServer {
        &self.server
    }

    /// When the core next wants to run (the network's deliveries are the caller's other deadline).
    pub fn next_deadline(&self) -> Duration {
        self.server.poll_timeout()
    }

    /// Hands the core every datagram due by `now`, runs its due ticks and sends what it produced.
    pub fn pump(&mut self, net: &mut MemoryNetwork, now: Duration) -> Result<(), TransportError> {
        while let Some(d) = net.poll_receive(self.addr, now) {
            self.server.handle_datagram(now, d.from, &d.payload);
        }
        self.server.handle_timeout(now);
        while let Some(t) = self.server.poll_transmit() {
            net.send(now, self.addr, t)?;
        }
        Ok(())
    }
}
