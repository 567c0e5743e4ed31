//! The simulated driver: a [`ShooterClient`] (optionally played by a [`Bot`]) attached to an in-memory network
//! endpoint, pumped on a simulated clock (tests, benchmarks, the viewer's local match).

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::shooter::PlayerInput;
use physync_engine::transport::{MemoryNetwork, TransportError};

use super::bot::Bot;
use super::client::{ClientConfig, ShooterClient};

/// A client on an in-memory network endpoint.
#[derive(Debug)]
pub struct MemoryClient {
    addr: SocketAddr,
    client: ShooterClient,
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
        Ok(Self {
            addr,
            client: ShooterClient::new(config, now),
            bot,
        })
    }

    /// The endpoint's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The core.
    pub fn client(&self) -> &ShooterClient {
        &self.client
    }

    /// When the core next wants to run.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.client.poll_timeout()
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
            self.client.handle_datagram(now, d.from, &d.payload);
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
            net.send(now, self.addr, t)?;
        }
        Ok(())
    }
}
