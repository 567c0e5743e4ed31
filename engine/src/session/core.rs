//! The interface every session core offers its driver, so one memory harness and one UDP loop serve the host and
//! the guest alike.

use std::time::Duration;

use crate::transport::{Datagram, Transmit};

/// A sans-IO protocol participant as a driver sees it: datagrams and deadlines in, datagrams out. Time is a
/// [`Duration`] since the session epoch.
pub trait SessionCore {
    /// Feeds one received datagram.
    fn handle_datagram(&mut self, now: Duration, datagram: Datagram);

    /// The next datagram to send, if any.
    fn poll_transmit(&mut self) -> Option<Transmit>;

    /// When [`SessionCore::handle_timeout`] must next run; `None` when the core waits only for datagrams (or has
    /// ended).
    fn poll_timeout(&self) -> Option<Duration>;

    /// Runs everything due by `now`: fixed steps, state packets, keep-alives, timeouts.
    fn handle_timeout(&mut self, now: Duration);
}
