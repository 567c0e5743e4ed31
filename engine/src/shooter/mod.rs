//! The dedicated-server shooter (seeds 000, 001, 004): the game both sides run and the netcode building blocks
//! around it.
//!
//! - The game: [`map::ArenaMap`] and [`map::WorldGeometry`] (the arena's boxes and its cubes where a player saw
//!   them, [`cubes`]), [`player::simulate_player`] (the one
//!   movement-and-weapon step shared by server and client prediction), [`world::ShooterWorld`] (the server's
//!   authoritative match: all players, physics cubes, shots, damage, death, respawn, score).
//! - Server side: [`input_buffer::InputBuffer`] (per-client input jitter buffer with redundancy, repeat and
//!   rejection) and [`lagcomp::HitboxHistory`] (rewind for hitscan shots).
//! - Client side: [`prediction::ClientPredictor`] (32-tick prediction and reconciliation),
//!   [`interpolation::RemoteInterpolator`] (remote players 100 ms in the past, teleport detection),
//!   [`jitter::BufferMeter`] (dynamic buffer sizing) and [`ids`] (client-local id range for predicted shots).
//!
//! Everything is sans-IO and driven by ticks; all state that crosses the wire is integers.
#![warn(missing_docs)]

mod convert;
pub mod cubes;
pub mod hitbox;
pub mod ids;
pub mod input;
pub mod input_buffer;
pub mod interpolation;
pub mod jitter;
pub mod lagcomp;
pub mod map;
pub mod player;
pub mod prediction;
pub mod ring;
pub mod rules;
#[cfg(test)]
mod scenarios;
pub mod units;
pub mod world;

/// A simulation tick number of the match's fixed-rate timeline.
pub type Tick = u32;

/// A player's slot in a match (at most a few dozen; 10 by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PlayerId(pub u8);

pub use cubes::{CubePose, CubeTrack};
pub use hitbox::{HitZone, PlayerHit, ShotRay, TargetPose, predict_hit, trace_shot};
pub use ids::{ClientIdAllocator, EntityId, ServerIdAllocator};
pub use input::{InputCommand, PlayerInput, ViewTime};
pub use input_buffer::{InputBuffer, InputBufferConfig};
pub use interpolation::{InterpolationConfig, RemoteInterpolator, RemoteSample};
pub use jitter::{BufferKind, BufferMeter, BufferMeterConfig, TickAdjust};
pub use lagcomp::{HitboxHistory, RewindError};
pub use map::{ArenaMap, WorldGeometry};
pub use player::{PlayerState, simulate_player};
pub use prediction::{ClientPredictor, PredictionConfig, ReconcileOutcome};
pub use rules::GameRules;
pub use world::{Entity, HeldEverything, HeldStates, ShooterWorld, TickEvents};
