//! The dedicated-server shooter's wire protocol, shared by the server (physync-host) and the client
//! (physync-guest): datagram framing on the codec's header ([`wire`]), connect tokens ([`token`]), control and
//! input messages ([`messages`]), the static match data and its chunking ([`match_data`]), the per-client
//! delta-coded snapshots ([`snapshot`]) and the shots, hits and kills they carry ([`events`]).
//!
//! Every decoder returns a typed [`wire::WireError`], reads no length without a bound and never panics.
#![warn(missing_docs)]

pub mod events;
pub mod match_data;
pub mod messages;
pub mod snapshot;
pub mod token;
pub mod wire;

pub use events::{EventKind, GameEvent, ShotSeen};
pub use match_data::{MatchData, MatchDataAssembler};
pub use messages::{Accept, MatchResults, Message, RejectReason, Roster};
pub use snapshot::{LocalPlayerSnap, MatchPhase, RemotePlayerSnap, ScoreLine, Sighting, Snapshot};
pub use token::{MAX_NAME_BYTES, PlayerClaims, mint_from_passphrase, mint_token};
pub use wire::{PacketKind, WireError};
