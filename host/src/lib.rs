//! physync-host: the host role.
//!
//! - [`peer`]: the arbitrating peer host of a co-op session ([`PeerHost`]), a sans-IO core the binary, the
//!   viewer and the tests drive.
//! - [`cli`]: the `physync-host` command line, kept apart from `main` so other modes can be added beside the
//!   peer host's.
#![warn(missing_docs)]

pub mod cli;
pub mod peer;

pub use peer::{HostConfig, PeerHost};
