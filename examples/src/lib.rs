//! What the example and benchmark binaries share: game code written on the engine's public API the way a game
//! adopting physync would write it (the katamari's forces), the structure-aware fuzzing of the protocol cores, a UDP
//! relay that sits between a client and a server (to record real datagrams, or to lose and delay them), and the
//! process's resident memory.
#![warn(missing_docs)]

pub mod fuzz;
pub mod katamari;
pub mod link_args;
pub mod relay;
pub mod rss;
