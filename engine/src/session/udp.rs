//! Running a session core over a real UDP socket ([`LaminarDriver`]): one pump of the loop, shared by both roles'
//! binaries, the viewer and the UDP tests.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::connection::{ClientAuth, ClientConfig, Endpoint, ServerAuth, ServerConfig, os_seed};
use crate::transport::{DriverConfig, DriverEvent, LaminarDriver, TransportError};

use super::core::SessionCore;

/// Longest a driver loop waits between pumps, so incoming datagrams are picked up promptly even when the core has
/// no deadline sooner (laminar offers no blocking wait that a core deadline could interrupt).
pub const MAX_PUMP_INTERVAL: Duration = Duration::from_millis(2);

/// Binds a peer host's UDP driver at `addr` behind the connection layer: guests pass the challenge, agree keys
/// with X25519 and, when `join_code` is set, must give the same code.
pub fn bind_peer_host(
    addr: impl ToSocketAddrs,
    config: DriverConfig,
    join_code: Option<String>,
) -> Result<LaminarDriver, TransportError> {
    let auth = ServerAuth::Peer { join_code };
    LaminarDriver::bind_secure(
        addr,
        config,
        Endpoint::server(ServerConfig::new(auth), os_seed()),
    )
}

/// Binds a peer guest's UDP driver at `addr`, its connection layer joining `host` with `join_code`.
pub fn bind_peer_guest(
    addr: impl ToSocketAddrs,
    config: DriverConfig,
    host: SocketAddr,
    join_code: Option<String>,
) -> Result<LaminarDriver, TransportError> {
    let auth = ClientAuth::Peer { join_code };
    let endpoint = Endpoint::client(ClientConfig::new(host, auth), Duration::ZERO, os_seed());
    LaminarDriver::bind_secure(addr, config, endpoint)
}

/// One turn of the UDP loop at the driver's current time: moves socket traffic, hands arrived datagrams to the
/// core, runs the core's deadline if due (after `input`, where a local player or a bot acts), and sends what the
/// core queued. Returns how long the caller may wait before the next turn.
pub fn pump_udp<C: SessionCore>(
    driver: &mut LaminarDriver,
    core: &mut C,
    mut input: impl FnMut(Duration, &mut C),
) -> Result<Duration, TransportError> {
    let now = driver.now();
    driver.pump(now)?;
    while let Some(event) = driver.poll_event() {
        match event {
            DriverEvent::Datagram(d) => core.handle_datagram(now, d),
            DriverEvent::Connected(peer) => tracing::debug!(%peer, "laminar connected"),
            DriverEvent::TimedOut(peer) => tracing::debug!(%peer, "laminar timed out"),
            DriverEvent::Disconnected(peer) => tracing::debug!(%peer, "laminar disconnected"),
        }
    }
    while let Some(event) = driver.poll_connection_event() {
        tracing::debug!(?event, "connection");
    }
    if core.poll_timeout().is_some_and(|t| t <= now) {
        input(now, core);
        core.handle_timeout(now);
    }
    while let Some(t) = core.poll_transmit() {
        driver.send(now, t)?;
    }
    driver.pump(now)?;
    let next = [core.poll_timeout(), driver.next_deadline()]
        .into_iter()
        .flatten()
        .min()
        .map_or(MAX_PUMP_INTERVAL, |t| t.saturating_sub(driver.now()));
    Ok(next.min(MAX_PUMP_INTERVAL))
}

/// Runs `core` over `driver` until `tick` returns false: each turn pumps ([`pump_udp`], with `input` before the
/// core's deadlines), then calls `tick` with the session time (status lines, stop conditions), then waits for the
/// next turn.
pub fn run_udp<C: SessionCore>(
    driver: &mut LaminarDriver,
    core: &mut C,
    mut input: impl FnMut(Duration, &mut C),
    mut tick: impl FnMut(Duration, &mut C) -> bool,
) -> Result<(), TransportError> {
    loop {
        let wait = pump_udp(driver, core, &mut input)?;
        if !tick(driver.now(), core) {
            return Ok(());
        }
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

/// Keeps pumping for `linger` after a core stopped (left the session), so its last reliable messages leave the
/// socket and laminar can resend them if the first copy is lost.
pub fn linger<C: SessionCore>(
    driver: &mut LaminarDriver,
    core: &mut C,
    linger: Duration,
) -> Result<(), TransportError> {
    let until = driver.now() + linger;
    run_udp(driver, core, |_, _| {}, |now, _| now < until)
}
