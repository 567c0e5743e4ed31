//! physync-engine: the simulation and its rules, shared by every role.
//!
//! The engine holds what both the peer-hosted mode and the dedicated-server mode need beside the wire codec:
//! - [`world`]: the peer-hosted world, a fixed-step rapier3d simulation with quantize-both-sides, at-rest
//!   detection, authority and ownership, interactions, avatars, priorities and visual smoothing;
//! - [`link`]: the per-remote state-sync link every peer keeps (acked baselines, priorities, pacing and budget);
//! - [`replica`]: an authority and a replica world in one process, synchronised through links and the codec over a
//!   simulated lossy, delayed network (for tests and benchmarks);
//! - [`shooter`]: the dedicated-server game, an arena shooter on rapier3d with the client's prediction,
//!   reconciliation and interpolation and the server's input buffers and lag compensation;
//! - [`session`]: what both roles of a peer-hosted session share (control messages, drivers);
//! - [`transport`]: the transports that carry datagrams between sans-IO protocol cores (a laminar UDP driver for
//!   real sockets, an in-memory network with a link conditioner for tests);
//! - [`link`]: the sans-IO state link each peer keeps per remote (acks, baselines, priority accumulator, send
//!   rate and byte budget) over the codec;
//! - [`replica`]: an authority and a replica world joined by links on simulated time, for tests and benchmarks.
#![warn(missing_docs)]

pub mod link;
pub mod replica;
pub mod session;
pub mod shooter;
pub mod transport;
pub mod world;
