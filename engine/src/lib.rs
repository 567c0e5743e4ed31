//! physync-engine: the simulation and its rules, shared by every role.
//!
//! The engine holds what both the peer-hosted mode and the dedicated-server mode need beside the wire codec:
//! - [`world`]: the peer-hosted world, a fixed-step rapier3d simulation with quantize-both-sides, at-rest
//!   detection, authority and ownership, interactions, avatars, priorities and visual smoothing;
//! - [`connection`]: the connection layer both modes share between the transport and the cores (challenge round
//!   trip, ChaCha20-Poly1305 sessions with a replay window, connect tokens, per-source rate limits);
//! - [`link`]: the per-remote state-sync link every peer keeps (acked baselines, priorities, pacing and budget);
//! - [`mode`]: the `--mode` both binaries share (peer-hosted or dedicated server);
//! - [`replica`]: an authority and a replica world in one process, synchronised through links and the codec over a
//!   simulated lossy, delayed network (for tests and benchmarks);
//! - [`shooter`]: the dedicated-server game, an arena shooter on rapier3d with the client's prediction,
//!   reconciliation and interpolation and the server's input buffers and lag compensation;
//! - [`shooter_net`]: the dedicated-server wire protocol (connect tokens, messages, match data, snapshots);
//! - [`session`]: what both roles of a peer-hosted session share (control messages, drivers);
//! - [`transport`]: the transports that carry datagrams between sans-IO protocol cores (a laminar UDP driver for
//!   real sockets, an in-memory network with a link conditioner for tests).
#![warn(missing_docs)]

pub mod connection;
pub mod link;
pub mod mode;
pub mod replica;
pub mod session;
pub mod shooter;
pub mod shooter_net;
pub mod transport;
pub mod world;
