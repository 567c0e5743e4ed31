//! The UDP socket laminar runs on, with the connection layer in front of it: every datagram laminar sends is
//! sealed, every datagram that arrives is opened, and only authenticated plaintext from peers that passed the
//! challenge ever reaches laminar. Its connection table therefore never holds state for a spoofed or hostile
//! address, whatever floods the socket.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use laminar::DatagramSocket;

use crate::connection::Endpoint;

/// Datagrams at the socket, before the connection layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawCounters {
    /// Datagrams read from the socket.
    pub datagrams_in: u64,
    /// Bytes read from the socket.
    pub bytes_in: u64,
    /// Datagrams written to the socket (handshakes and keep-alives included).
    pub datagrams_out: u64,
    /// Bytes written to the socket.
    pub bytes_out: u64,
}

/// A non-blocking UDP socket, optionally guarded by a connection [`Endpoint`].
#[derive(Debug)]
pub(super) struct GuardedSocket {
    udp: UdpSocket,
    guard: Option<Endpoint>,
    /// Session time of the pump in progress (laminar's socket calls carry no time).
    pub now: Duration,
    raw: RawCounters,
}

impl GuardedSocket {
    pub fn new(udp: UdpSocket, guard: Option<Endpoint>) -> io::Result<Self> {
        udp.set_nonblocking(true)?;
        Ok(Self {
            udp,
            guard,
            now: Duration::ZERO,
            raw: RawCounters::default(),
        })
    }

    pub fn guard(&self) -> Option<&Endpoint> {
        self.guard.as_ref()
    }

    pub fn guard_mut(&mut self) -> Option<&mut Endpoint> {
        self.guard.as_mut()
    }

    pub fn raw(&self) -> RawCounters {
        self.raw
    }

    fn send_raw(&mut self, to: SocketAddr, bytes: &[u8]) -> io::Result<usize> {
        let sent = self.udp.send_to(bytes, to)?;
        self.raw.datagrams_out += 1;
        self.raw.bytes_out += sent as u64;
        Ok(sent)
    }

    /// Runs the guard's timers and sends its handshakes and keep-alives.
    pub fn service(&mut self) {
        let now = self.now;
        if let Some(guard) = &mut self.guard
            && guard.poll_timeout().is_some_and(|t| t <= now)
        {
            guard.handle_timeout(now);
        }
        self.flush();
    }

    fn flush(&mut self) {
        while let Some((to, bytes)) = self.guard.as_mut().and_then(Endpoint::poll_transmit) {
            if let Err(e) = self.send_raw(to, &bytes) {
                tracing::debug!(%to, "handshake send failed: {e}");
            }
        }
    }
}

impl DatagramSocket for GuardedSocket {
    fn send_packet(&mut self, addr: &SocketAddr, payload: &[u8]) -> io::Result<usize> {
        let Some(guard) = &mut self.guard else {
            return self.send_raw(*addr, payload);
        };
        let sealed = guard.seal(self.now, *addr, payload);
        let sent = match sealed {
            Some(bytes) => self.send_raw(*addr, &bytes)?,
            None => 0,
        };
        self.flush();
        Ok(sent)
    }

    fn receive_packet<'a>(&mut self, buffer: &'a mut [u8]) -> io::Result<(&'a [u8], SocketAddr)> {
        loop {
            let (len, from) = self.udp.recv_from(buffer)?;
            self.raw.datagrams_in += 1;
            self.raw.bytes_in += len as u64;
            let Some(guard) = &mut self.guard else {
                return Ok((&buffer[..len], from));
            };
            let plain = guard.handle_datagram(self.now, from, &buffer[..len]);
            self.flush();
            if let Some(plain) = plain
                && plain.len() <= buffer.len()
            {
                buffer[..plain.len()].copy_from_slice(&plain);
                return Ok((&buffer[..plain.len()], from));
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.udp.local_addr()
    }

    fn is_blocking_mode(&self) -> bool {
        false
    }
}
