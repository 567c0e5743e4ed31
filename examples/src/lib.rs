//! Helpers the example and benchmark binaries share: the structure-aware fuzzing of the protocol cores, a UDP relay that sits between a client and a server (to
//! record real datagrams, or to lose and delay them), and the process's resident memory.
#![warn(missing_docs)]

pub mod fuzz;
pub mod relay;
pub mod rss;
