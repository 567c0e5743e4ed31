//! physync-viewer: the desktop app to host, join and watch a physync session.
//!
//! The app ([`app::ViewerApp`]) shows a start screen and a session screen. The session screen talks to a
//! running session only through [`session::SessionHandle`], so all protocol logic stays in the host and
//! guest crates; a [`launcher::SessionLauncher`] creates those handles from the start screen's forms, and
//! [`launcher::CoreLauncher`] is the one over the real cores ([`live::LiveSession`]).
#![warn(missing_docs)]

pub mod app;
pub mod bot_guest;
pub mod camera;
pub mod count_rate;
pub mod input;
pub mod launcher;
pub mod live;
pub mod network_panel;
pub mod palette;
pub mod picking;
pub mod render3d;
pub mod roles;
pub mod screenshot_check;
pub mod session;
pub mod session_screen;
pub mod shooter;
pub mod start_screen;
pub mod time_series;
pub mod world_view;
