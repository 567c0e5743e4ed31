//! The real binaries over real UDP: a `physync-host` process and two `physync-guest` processes on 127.0.0.1,
//! each guest behind a relay (written here) that loses 3% of datagrams each way and delays each by 100 ms (a
//! 200 ms round trip). The guests play, let go and stay still for the settle, and leave; the host runs on a little
//! longer. Every process exits cleanly, the host counts two leaves and no timeout, and every guest's world digest
//! at exit equals the host's.
//!
//! The guest binary is found beside the host binary (`cargo test --workspace` builds both); nothing waits on a
//! wall clock beyond the processes' own run time.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A loss-and-delay relay for one client: the client talks to `front`, the relay forwards from `back` to the
/// server and back again, dropping each datagram with probability `loss` and delaying the rest by `delay`.
struct Relay {
    front: SocketAddr,
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    forwarded: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    fn start(server: SocketAddr, loss: f64, delay: Duration, seed: u64) -> Self {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        let timeout = Some(Duration::from_millis(1));
        front.set_read_timeout(timeout).unwrap();
        back.set_read_timeout(timeout).unwrap();
        let addr = front.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let forwarded = Arc::new(AtomicU64::new(0));
        let (s, d, f) = (stop.clone(), dropped.clone(), forwarded.clone());
        let thread = std::thread::spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut client: Option<SocketAddr> = None;
            // (due, to the server?, bytes)
            let mut held: VecDeque<(Instant, bool, Vec<u8>)> = VecDeque::new();
            let mut buf = [0u8; 2048];
            while !s.load(Ordering::Relaxed) {
                let mut take = |sock: &UdpSocket,
                                to_server: bool,
                                client: &mut Option<SocketAddr>| {
                    while let Ok((n, from)) = sock.recv_from(&mut buf) {
                        if to_server {
                            *client = Some(from);
                        }
                        if rng.random_bool(loss) {
                            d.fetch_add(1, Ordering::Relaxed);
                        } else {
                            held.push_back((Instant::now() + delay, to_server, buf[..n].to_vec()));
                        }
                    }
                };
                take(&front, true, &mut client);
                take(&back, false, &mut client);
                let now = Instant::now();
                while held.front().is_some_and(|(due, _, _)| *due <= now) {
                    let (_, to_server, bytes) = held.pop_front().unwrap();
                    let sent = if to_server {
                        back.send_to(&bytes, server).is_ok()
                    } else {
                        client.is_some_and(|c| front.send_to(&bytes, c).is_ok())
                    };
                    if sent {
                        f.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        Self {
            front: addr,
            stop,
            dropped,
            forwarded,
            thread: Some(thread),
        }
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

fn guest_binary() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_physync-host"))
        .with_file_name(format!("physync-guest{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: build it (cargo build -p physync-guest) or run the workspace's tests",
        path.display()
    );
    path
}

fn json(output: &Output, who: &str) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{who} exited with {}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{who} printed no JSON summary ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn spawn(program: PathBuf, args: &[String]) -> Child {
    Command::new(program)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

#[test]
fn host_and_guest_processes_over_a_lossy_relay_leave_cleanly_with_equal_digests() {
    // A free port for the host (it prints its summary, not its address).
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let host_addr = SocketAddr::from(([127, 0, 0, 1], port));
    let host = spawn(
        PathBuf::from(env!("CARGO_BIN_EXE_physync-host")),
        &[
            "--listen".into(),
            host_addr.to_string(),
            "--seconds".into(),
            "11".into(),
            "--json".into(),
        ],
    );
    let relays: Vec<Relay> = (0..2)
        .map(|i| Relay::start(host_addr, 0.03, Duration::from_millis(100), 7 + i))
        .collect();
    let guests: Vec<Child> = relays
        .iter()
        .enumerate()
        .map(|(i, r)| {
            spawn(
                guest_binary(),
                &[
                    "--connect".into(),
                    r.front.to_string(),
                    "--bot".into(),
                    "builder".into(),
                    "--seconds".into(),
                    "8".into(),
                    "--settle".into(),
                    "4".into(),
                    "--seed".into(),
                    (11 + i).to_string(),
                    "--json".into(),
                ],
            )
        })
        .collect();
    let guests: Vec<serde_json::Value> = guests
        .into_iter()
        .enumerate()
        .map(|(i, g)| json(&g.wait_with_output().unwrap(), &format!("guest {i}")))
        .collect();
    let host = json(&host.wait_with_output().unwrap(), "host");
    for r in &relays {
        assert!(r.forwarded.load(Ordering::Relaxed) > 100);
        assert!(
            r.dropped.load(Ordering::Relaxed) > 0,
            "the relay lost nothing"
        );
    }
    let counters = &host["counters"];
    assert_eq!(counters["joins"], 2, "{host}");
    assert_eq!(
        (counters["leaves"].as_u64(), counters["timeouts"].as_u64()),
        (Some(2), Some(0)),
        "every guest's leave reached the host: {counters}"
    );
    for (i, g) in guests.iter().enumerate() {
        assert_eq!(g["ended"], "Left", "guest {i}: {g}");
        assert!(
            g["digests"]["received"].as_u64() > Some(0),
            "guest {i}: {g}"
        );
        assert_eq!(
            g["digest"], host["digest"],
            "guest {i}'s world at exit differs from the host's: {g}\nhost: {host}"
        );
    }
}
