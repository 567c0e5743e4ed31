//! physync-guest: the guest role.
//!
//! - [`peer`]: the peer guest of a co-op session ([`PeerGuest`]), a sans-IO core the binary, the viewer and
//!   the tests drive.
//! - [`cli`]: the `physync-guest` command line, kept apart from `main` so other modes can be added beside it.
//! - [`bots`]: scripted players (builder, thrower, grabber) that drive a guest or the host.
#![warn(missing_docs)]

pub mod bots;
pub mod cli;
pub mod peer;

pub use peer::{GuestConfig, PeerGuest};
