//! The dedicated shooter server (seeds 000, 001, 004): [`DedicatedServer`], the sans-IO core of one match, and
//! the UDP driver that runs several matches in one process, one thread each ([`driver`], [`cli`]), and the
//! in-memory driver ([`sim`]); and the token issuer's command line ([`token_cli`]).
//!
//! The wire protocol it speaks is `physync_engine::shooter_net`, shared with the client in physync-guest.

pub mod cli;
pub mod config;
pub mod driver;
pub mod interest;
pub mod server;
pub mod sim;
#[cfg(test)]
mod tests;
pub mod token_cli;

pub use cli::DedicatedArgs;
pub use config::MatchConfig;
pub use driver::run;
pub use server::{DedicatedServer, HostileCounters, ServerError, ServerEvent, ServerStats};
pub use sim::MemoryServer;
