//! The shooter client (seeds 000, 001, 004): [`ShooterClient`], the sans-IO core a first-person view or a bot
//! drives; [`Bot`], headless players for tests and load; the UDP driver and its arguments ([`driver`], [`cli`]); the in-memory driver ([`sim`]).
//!
//! Typical use (a viewer): create the client with a [`ClientConfig`], feed it datagrams and time, call
//! [`ShooterClient::set_input`] each frame from mouse and keys, render [`ShooterClient::local_state`] first
//! person, [`ShooterClient::remote_poses`] for everyone else and [`ShooterClient::cube_poses`] for the physics
//! cubes, draw [`ClientEvent::Shot`] tracers for the local player's shots and [`ClientEvent::RemoteShot`] ones
//! for everyone else's, a hit marker on [`ClientEvent::HitConfirmed`] (the server's word), a kill feed from
//! [`ShooterClient::kill_feed`], and a scoreboard from [`ShooterClient::scores`] and [`ShooterClient::roster`].

pub mod bot;
pub mod cli;
pub mod client;
pub mod driver;
pub mod sim;

pub use bot::{Bot, BotConfig};
pub use cli::DedicatedArgs;
pub use client::{
    ClientConfig, ClientEvent, ClientPhase, ClientStats, KillLine, PredictedShot, ShooterClient,
};
pub use driver::run;
pub use sim::MemoryClient;
