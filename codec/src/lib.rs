//! physync-codec: the bits on the wire.
//!
//! Everything here is pure: no sockets, no physics engine, no clocks. The engine feeds it quantized states and
//! gets bytes back, and the other way around; the same functions run on both ends of every link, so the two
//! sides agree on every bit.
//!
//! The layers, bottom up: [`stream`] (the serialize-once [`Stream`] trait, with the bit-packing back end in
//! [`bitpack`] and the range-coded one in [`arith`] over [`range`]); [`quant`] and [`state`] (quantized states);
//! [`predict`], [`delta`] and [`encode`] (delta paths against per-object baselines, for any [`DeltaState`]);
//! [`header`] and [`baseline`] (sequence, acks, the sender's [`AckTracker`] and the receiver's
//! [`ReceiveHistory`]); [`priority`] (which objects go next); [`revisions`] (which objects changed); [`packet`] (whole datagrams to a
//! byte budget).

#![warn(missing_docs)]

pub mod alloc_count;
pub mod arith;
pub mod baseline;
pub mod bitpack;
pub mod delta;
pub mod encode;
pub mod error;
pub mod header;
mod neighbour;
pub mod packet;
pub mod predict;
pub mod priority;
mod priors;
pub mod quant;
pub mod range;
pub mod revisions;
pub mod seq;
pub mod state;
pub mod stream;

pub use baseline::{AckTracker, Baseline, ReceiveHistory};
pub use delta::{DeltaPath, DeltaPlan, DeltaState};
pub use encode::{Buckets, StateConfig, VecCtx};
pub use error::CodecError;
pub use header::{Backend, PacketHeader, ReceivedPackets};
pub use packet::{
    DecodedPacket, EncodedPacket, LinkConfig, PacketReader, PacketWriter, decode_packet,
    encode_packet,
};
pub use predict::Predictor;
pub use priority::PriorityAccumulator;
pub use quant::{
    QuantConfig, QuantizedRotation, RotationQuantizer, ScalarQuantizer, Vec3Quantizer,
};
pub use revisions::StateRevisions;
pub use seq::seq_newer;
pub use state::{AvatarState, BodyState, HandState, HeldObject, ObjectState, QuantizedPose};
pub use stream::{Ctx, MeasureStream, Stream};
