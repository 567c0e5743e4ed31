//! A UDP relay for one client: the client talks to the relay's front socket, the relay forwards to the server from
//! its back socket and back again, dropping and delaying datagrams as configured, and can record what the client
//! sent (real datagrams for a replay attack). Runs on its own thread until dropped.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How the relay treats each direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelayConfig {
    /// Probability each datagram is dropped.
    pub loss: f64,
    /// One-way delay added to every datagram.
    pub delay: Duration,
    /// Most client datagrams recorded.
    pub record: usize,
    /// Seed of the loss dice.
    pub seed: u64,
}

/// What crossed the relay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayCounters {
    /// Datagrams from the client.
    pub from_client: u64,
    /// Datagrams from the server.
    pub from_server: u64,
    /// Datagrams the relay dropped on purpose.
    pub dropped: u64,
}

struct Shared {
    recorded: Vec<Vec<u8>>,
    counters: RelayCounters,
}

/// A running relay.
pub struct Relay {
    front: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    /// Starts a relay to `server` on 127.0.0.1; clients connect to [`Relay::addr`].
    pub fn start(server: SocketAddr, config: RelayConfig) -> std::io::Result<Self> {
        let front = UdpSocket::bind("127.0.0.1:0")?;
        let back = UdpSocket::bind("127.0.0.1:0")?;
        front.set_nonblocking(true)?;
        back.set_nonblocking(true)?;
        let addr = front.local_addr()?;
        let shared = Arc::new(Mutex::new(Shared {
            recorded: Vec::new(),
            counters: RelayCounters::default(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
            std::thread::spawn(move || run(front, back, server, config, &shared, &stop))
        };
        Ok(Self {
            front: addr,
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// Where clients send to.
    pub fn addr(&self) -> SocketAddr {
        self.front
    }

    /// The client datagrams recorded so far.
    pub fn recorded(&self) -> Vec<Vec<u8>> {
        self.shared
            .lock()
            .map(|s| s.recorded.clone())
            .unwrap_or_default()
    }

    /// What crossed so far.
    pub fn counters(&self) -> RelayCounters {
        self.shared.lock().map(|s| s.counters).unwrap_or_default()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    front: UdpSocket,
    back: UdpSocket,
    server: SocketAddr,
    config: RelayConfig,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut client: Option<SocketAddr> = None;
    // (due, to server?, bytes)
    let mut held: VecDeque<(Instant, bool, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let mut busy = false;
        while let Ok((n, from)) = front.recv_from(&mut buf) {
            busy = true;
            client = Some(from);
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            s.counters.from_client += 1;
            if s.recorded.len() < config.record {
                s.recorded.push(buf[..n].to_vec());
            }
            if rng.random_bool(config.loss) {
                s.counters.dropped += 1;
            } else {
                held.push_back((now + config.delay, true, buf[..n].to_vec()));
            }
        }
        while let Ok((n, _)) = back.recv_from(&mut buf) {
            busy = true;
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            s.counters.from_server += 1;
            if rng.random_bool(config.loss) {
                s.counters.dropped += 1;
            } else {
                held.push_back((now + config.delay, false, buf[..n].to_vec()));
            }
        }
        while held.front().is_some_and(|(due, _, _)| *due <= now) {
            if let Some((_, to_server, bytes)) = held.pop_front() {
                let _ = if to_server {
                    back.send_to(&bytes, server)
                } else if let Some(c) = client {
                    front.send_to(&bytes, c)
                } else {
                    Ok(0)
                };
            }
        }
        if !busy {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}
