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
//!
//! A game brings its own world: a [`world::scene::SceneSpec`] (shapes, materials, tags, level geometry,
//! quantization), from a RON file ([`world::scene_file`]) or the [`world::scene::SceneBuilder`]. The host sends it
//! to guests at join ([`session::scene_transfer`]); [`world::World::take_events`] tells the game who took
//! authority over or hold of what.
//!
//! ```
//! use physync_engine::world::scene::{LevelShape, LevelSpec, ObjectSpec, Pose, SceneBuilder, Shape};
//! use physync_engine::world::{World, WorldConfig};
//!
//! let ramp = LevelShape::TriMesh {
//!     vertices: vec![[-1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [-1.0, 1.0, 3.0], [1.0, 1.0, 3.0]],
//!     triangles: vec![[0, 2, 1], [1, 2, 3]],
//! };
//! let scene = SceneBuilder::new("demo")
//!     .floor(10.0)
//!     .level(LevelSpec::new(ramp, Pose::at([0.0, 0.0, 2.0])))
//!     .object(ObjectSpec::new(Shape::ball(0.25), [0.0, 2.0, 0.0]))
//!     .build()
//!     .expect("a valid scene");
//! let mut world = World::new(WorldConfig::default(), &scene);
//! for _ in 0..120 {
//!     world.step();
//! }
//! // The ball fell onto the floor.
//! assert!(world.physics_pose(0).translation.vector.y < 0.3);
//! ```
#![warn(missing_docs)]

pub mod connection;
pub mod digest;
pub mod link;
pub mod mode;
pub mod replica;
pub mod session;
pub mod shooter;
pub mod shooter_net;
pub mod transport;
pub mod world;

/// Counts each thread's allocations in this crate's unit tests, for the tests that check a hot path allocates no
/// more than it hands back (see [`physync_codec::alloc_count`]).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: physync_codec::alloc_count::CountingAllocator =
    physync_codec::alloc_count::CountingAllocator;
