//! The dedicated-server shooter in the viewer: start a local match (or reach a remote one) from the start
//! screen and play it first person.
//!
//! The viewer holds no protocol logic here either: [`session::ShooterSession`] runs physync-host's
//! `UdpMatch` (the dedicated server core on its own thread) and drives physync-guest's `ShooterClient` each frame
//! over a real UDP socket, with optional headless bots (physync-guest's `Bot` over UDP); [`screen::ShooterScreen`]
//! turns mouse and keys into the client's `PlayerInput` ([`controls`]) and draws what the client predicts and
//! interpolates ([`arena_view`], [`hud`]).

pub mod arena_view;
pub mod controls;
pub mod form;
pub mod hud;
pub mod screen;
pub mod session;
