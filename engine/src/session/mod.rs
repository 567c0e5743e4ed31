//! What both roles of a peer-hosted session share: the control messages, the player-input interface, the
//! session-core interface and the drivers that run cores over the in-memory network and over UDP.
//!
//! The cores themselves live in the role crates (`physync-host`'s `PeerHost`, `physync-guest`'s `PeerGuest`);
//! per-link state coding lives in [`crate::link`].

pub mod compare;
pub mod control;
pub mod controls;
pub mod core;
pub mod feel;
pub mod flight;
pub mod jitter;
pub mod playout;
pub mod rate;
pub mod scene_transfer;
pub mod sim;
pub mod udp;

pub use compare::{Divergence, Stillness, divergence, is_still, objects_of, settle_time};
pub use control::{
    ControlError, ControlMessage, PEER_PROTOCOL_ID, PEER_PROTOCOL_VERSION, RejectReason,
    SceneSetup, decode_control, encode_control,
};
pub use controls::PlayerControls;
pub use core::SessionCore;
pub use feel::{Backstep, FeelFigures, FeelMeter};
pub use flight::{BackstepCause, BackstepsByCause, FlightLog, backstep_cause};
pub use jitter::{DEFAULT_JITTER_DELAY, FrameJitterBuffer, MAX_LEAD_STEPS, Upcoming};
pub use playout::ArrivalSpread;
pub use rate::RateMeter;
pub use scene_transfer::{SceneDownload, SceneOffer, SceneTransferError, SceneUpload};
pub use sim::SessionSim;
