//! physync-host: the host role.
//!
//! - [`peer`]: the arbitrating peer host of a co-op session ([`PeerHost`]), a sans-IO core the binary, the
//!   viewer and the tests drive.
#![warn(missing_docs)]

pub mod peer;

pub use peer::{HostConfig, PeerHost};
