//! The simulated driver: a [`DedicatedServer`] attached to an in-memory network endpoint, pumped on a simulated
//! clock (tests, benchmarks, the viewer's local match).

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::connection::{Endpoint, SIM_UNIX_EPOCH, ServerAuth, ServerConfig};
use physync_engine::transport::{Delivery, MemoryNetwork, Transmit, TransportError};

use super::config::MatchConfig;
use super::driver::apply_connection_event;
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

/// A server on an in-memory network endpoint, behind the connection layer: clients need tokens minted under
/// the match's key at [`SIM_UNIX_EPOCH`] that name `addr`.
#[derive(Debug)]
pub struct MemoryServer {
    addr: SocketAddr,
    server: DedicatedServer,
    connection: Endpoint,
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
        let mut public_addrs = config.public_addrs.clone();
        public_addrs.push(addr);
        let auth = ServerAuth::Tokens {
            key: config.token_key,
            public_addrs,
            unix_at_epoch: SIM_UNIX_EPOCH,
        };
        let mut connection_config = ServerConfig::new(auth);
        connection_config.max_sessions = 2 * usize::from(config.max_players);
        let mut seed = [3u8; 32];
        seed[..4].copy_from_slice(&config.match_id.to_le_bytes());
        Ok(Self {
            addr,
            server: DedicatedServer::new(config, now)?,
            connection: Endpoint::server(connection_config, seed),
        })
    }

    /// `payload` sealed for `to` by the server's connection layer, as it would leave the server (tests alter and
    /// replay such datagrams); `None` without a session with `to`.
    pub fn seal(&mut self, now: Duration, to: SocketAddr, payload: &[u8]) -> Option<Vec<u8>> {
        self.connection.seal(now, to, payload)
    }

    /// The connection layer in front of the core.
    pub fn connection(&self) -> &Endpoint {
        &self.connection
    }

    /// The endpoint's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The core.
    pub fn server(&self) -> &DedicatedServer {
        &self.server
    }

    /// The core, mutably (to take its events, as a game does).
    pub fn server_mut(&mut self) -> &mut DedicatedServer {
        &mut self.server
    }

    /// When the core next wants to run (the network's deliveries are the caller's other deadline).
    pub fn next_deadline(&self) -> Duration {
        self.connection
            .poll_timeout()
            .map_or(self.server.poll_timeout(), |t| {
                t.min(self.server.poll_timeout())
            })
    }

    /// Hands the core every datagram due by `now`, runs its due ticks and sends what it produced.
    pub fn pump(&mut self, net: &mut MemoryNetwork, now: Duration) -> Result<(), TransportError> {
        while let Some(d) = net.poll_receive(self.addr, now) {
            let plain = self.connection.handle_datagram(now, d.from, &d.payload);
            while let Some(event) = self.connection.poll_event() {
                apply_connection_event(&mut self.server, event);
            }
            if let Some(plain) = plain {
                self.server.handle_datagram(now, d.from, &plain);
            }
        }
        if self.connection.poll_timeout().is_some_and(|t| t <= now) {
            self.connection.handle_timeout(now);
            while let Some(event) = self.connection.poll_event() {
                apply_connection_event(&mut self.server, event);
            }
        }
        self.server.handle_timeout(now);
        while let Some(t) = self.server.poll_transmit() {
            if let Some(payload) = self.connection.seal(now, t.to, &t.payload) {
                net.send(now, self.addr, Transmit { payload, ..t })?;
            }
        }
        while let Some((to, payload)) = self.connection.poll_transmit() {
            let t = Transmit {
                to,
                delivery: Delivery::Unreliable,
                payload,
            };
            net.send(now, self.addr, t)?;
        }
        Ok(())
    }
}
