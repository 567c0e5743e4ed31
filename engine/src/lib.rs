//! physync-engine: the simulation and its rules.
//!
//! [`world`] holds the peer-hosted world: a fixed-step rapier3d simulation with quantize-both-sides, at-rest
//! detection, authority and ownership, interactions, avatars, priorities and visual smoothing.

#![warn(missing_docs)]

pub mod world;
