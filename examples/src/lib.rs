//! Game code shared by the example binaries: scripts that run on top of the engine's public API, the way a game
//! adopting physync would write them.

pub mod katamari;
