//! The simulated driver: a [`ShooterClient`] (optionally played by a [`Bot`]) attached to an in-memory network
//! endpoint, pumped on a simulated clock (tests, benchmarks, the viewer's local match).

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::connection::ClientPhase as ConnectionPhase;
use physync_engine::connection::{self, ClientAuth, Endpoint};
use physync_engine::shooter::PlayerInput;
use physync_engine::transport::{Delivery, MemoryNetwork, Transmit, TransportError};

use super::bot::Bot;
use super::client::{ClientConfig, ShooterClient};

/// A client on an in-memory network endpoint, behind the connection layer with its config's token.
#[derive(Debug)]
pub struct MemoryClient {
    addr: SocketAddr,
    server: SocketAddr,
    client: ShooterClient,
    connection: Endpoint,
    bot: Option<Bot>,
}

impl MemoryClient {
    /// Attaches an endpoint at `addr` to `net` and starts connecting at `now`; with `bot`, the bot plays.
    pub fn new(
        net: &mut MemoryNetwork,
        addr: SocketAddr,
        config: ClientConfig,
        bot: Option<Bot>,
        now: Duration,
    ) -> Result<Self, TransportError> {
        net.add_endpoint(addr)?;
        let auth = ClientAuth::Token(Box::new(config.token.clone()));
        let connection_config = connection::ClientConfig::new(config.server, auth);
        let seed: [u8; 32] = config.token.private[..32].try_into().unwrap_or([7; 32]);
        Ok(Self {
            addr,
            server: config.server,
            client: ShooterClient::new(config, now),
            connection: Endpoint::client(connection_config, now, seed),
            bot,
        })
    }

    /// `payload` sealed for the server by this client's connection layer, as it would leave the client (tests
    /// alter and replay such datagrams).
    pub fn seal(&mut self, now: Duration, payload: &[u8]) -> Option<Vec<u8>> {
        self.connection.seal(now, self.server, payload)
    }

    /// Sends `payload` to the server sealed by this client's connection layer, bypassing the core: how a client
    /// that holds keys and turned hostile reaches the server.
    pub fn send_sealed(
        &mut self,
        net: &mut MemoryNetwork,
        now: Duration,
        payload: Vec<u8>,
    ) -> Result<(), TransportError> {
        let to = self.server;
        if let Some(payload) = self.connection.seal(now, to, &payload) {
            let t = Transmit {
                to,
                delivery: Delivery::Unreliable,
                payload,
            };
            net.send(now, self.addr, t)?;
        }
        Ok(())
    }

    /// The connection layer under the core.
    pub fn connection(&self) -> &Endpoint {
        &self.connection
    }

    /// The endpoint's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The core.
    pub fn client(&self) -> &ShooterClient {
        &self.client
    }

    /// The core, mutably (to take its events, as a game does).
    pub fn client_mut(&mut self) -> &mut ShooterClient {
        &mut self.client
    }

    /// When the core next wants to run.
    pub fn next_deadline(&self) -> Option<Duration> {
        let core = (!handshaking(&self.connection))
            .then(|| self.client.poll_timeout())
            .flatten();
        [core, self.connection.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Hands the core every datagram due by `now`; when a tick is due, takes its input from `input` (or, when
    /// that gives none, from the bot); runs the core and sends what it produced.
    pub fn pump(
        &mut self,
        net: &mut MemoryNetwork,
        now: Duration,
        input: impl FnOnce(&ShooterClient, Duration) -> Option<PlayerInput>,
    ) -> Result<(), TransportError> {
        while let Some(d) = net.poll_receive(self.addr, now) {
            if let Some(plain) = self.connection.handle_datagram(now, d.from, &d.payload) {
                self.client.handle_datagram(now, d.from, &plain);
            }
        }
        if self.connection.poll_timeout().is_some_and(|t| t <= now) {
            self.connection.handle_timeout(now);
        }
        if handshaking(&self.connection) {
            return self.flush(net, now);
        }
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            let chosen = match input(&self.client, now) {
                Some(i) => Some(i),
                None => self.bot.as_mut().map(|b| b.input(&self.client, now)),
            };
            if let Some(i) = chosen {
                self.client.set_input(i);
            }
        }
        self.client.handle_timeout(now);
        while let Some(t) = self.client.poll_transmit() {
            if let Some(payload) = self.connection.seal(now, t.to, &t.payload) {
                net.send(now, self.addr, Transmit { payload, ..t })?;
            }
        }
        self.flush(net, now)
    }

    /// Sends the connection layer's handshakes and keep-alives.
    fn flush(&mut self, net: &mut MemoryNetwork, now: Duration) -> Result<(), TransportError> {
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

/// True while the connection layer is still shaking hands: the core waits, so that what it measures (its
/// connect's round trip among others) starts from an open channel.
pub fn handshaking(connection: &Endpoint) -> bool {
    matches!(
        connection.client_phase(),
        Some(ConnectionPhase::Requesting | ConnectionPhase::Responding)
    )
}
