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

mod clock;
mod conditioner;
mod datagram;
mod error;
mod laminar_driver;
mod memory;
mod seed;
mod timed_queue;
mod traffic;

pub use clock::SimClock;
pub use conditioner::{
    LinkConditioner, LinkConfig, LinkStats, MAX_SIMULATED_RETRANSMISSIONS, Schedule,
};
pub use datagram::{Datagram, Delivery, MAX_DATAGRAM_PAYLOAD, Transmit};
pub use error::TransportError;
pub use laminar_driver::{CONTROL_STREAM, DriverConfig, DriverEvent, LaminarDriver};
pub use memory::MemoryNetwork;
pub use traffic::TrafficCounters;
