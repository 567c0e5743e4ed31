//! Transports that carry datagrams between sans-IO protocol cores.
//!
//! Cores never touch a socket or a clock: they hand out [`Transmit`]s and take in [`Datagram`]s, with time given as
//! a [`Duration`](std::time::Duration) since the session epoch. Two transports carry them:
//!
//! - [`MemoryNetwork`]: many endpoints in one process on a simulated clock, each direction of each link passing
//!   through a seeded [`LinkConditioner`], so whole sessions run deterministically and much faster than real time.
//! - [`LaminarDriver`]: one laminar UDP socket, pumped explicitly, optionally with a [`LinkConditioner`] in front
//!   of its outgoing traffic for manual tests and the viewer.
//!
//! Both carry two kinds of traffic ([`Delivery`]): unreliable datagrams for state, and a reliable, ordered channel
//! for control messages.
//!
//! A session in a test: endpoints on one in-memory network, the clock stepped from one arrival to the next.
//!
//! ```
//! use std::time::Duration;
//! use physync_engine::transport::{Delivery, LinkConfig, MemoryNetwork, SimClock, Transmit};
//!
//! let host = "10.0.0.1:5000".parse().unwrap();
//! let guest = "10.0.0.2:5000".parse().unwrap();
//! let link = LinkConfig::from_rtt(Duration::from_millis(250), Duration::from_millis(50), 0.05, 0.01);
//! let mut net = MemoryNetwork::new(link, 7)?;
//! net.add_endpoint(host)?;
//! net.add_endpoint(guest)?;
//! let mut clock = SimClock::new();
//! let join = Transmit { to: host, delivery: Delivery::ReliableOrdered, payload: b"join".to_vec() };
//! net.send(clock.now(), guest, join)?;
//! let mut received = Vec::new();
//! while let Some(at) = net.next_delivery() {
//!     let now = clock.advance_to(at);
//!     while let Some(datagram) = net.poll_receive(host, now) {
//!         received.push((now, datagram.from, datagram.payload));
//!     }
//! }
//! assert_eq!(received.len(), 1);
//! assert_eq!(received[0].1, guest);
//! assert!(received[0].0 >= Duration::from_millis(75));
//! # Ok::<(), physync_engine::transport::TransportError>(())
//! ```

mod clock;
mod conditioner;
mod datagram;
mod error;
mod guarded_socket;
mod laminar_driver;
mod memory;
mod seed;
mod timed_queue;
mod traffic;

pub use clock::SimClock;
pub use conditioner::{
    LinkConditioner, LinkConfig, LinkStats, MAX_SIMULATED_RETRANSMISSIONS, Schedule,
};
pub use datagram::{Datagram, Delivery, MAX_DATAGRAM_PAYLOAD, MAX_WIRE_PAYLOAD, Transmit};
pub use error::TransportError;
pub use guarded_socket::RawCounters;
pub use laminar_driver::{CONTROL_STREAM, DriverConfig, DriverEvent, LaminarDriver};
pub use memory::MemoryNetwork;
pub use traffic::TrafficCounters;
