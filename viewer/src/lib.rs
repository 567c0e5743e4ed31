//! physync-viewer: the desktop app to host, join and watch a physync session.
//!
//! The app ([`app::ViewerApp`]) shows a start screen and a session screen. The session screen talks to a
//! running session only through [`session::SessionHandle`], so all protocol logic stays in the host and
//! guest crates; a [`launcher::SessionLauncher`] creates those handles from the start screen's forms.
#![warn(missing_docs)]

pub mod app;
pub mod camera;
pub mod input;
pub mod launcher;
pub mod network_panel;
pub mod offline_preview;
pub mod palette;
pub mod picking;
pub mod render3d;
pub mod scene_choice;
pub mod screenshot_check;
pub mod session;
pub mod session_screen;
pub mod shooter;
pub mod start_screen;
pub mod time_series;
