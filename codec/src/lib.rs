//! physync-codec: the bits on the wire.
//!
//! Everything here is pure: no sockets, no physics engine, no clocks. The engine feeds it quantized states and
//! gets bytes back, and the other way around; the same functions run on both ends of every link, so the two
//! sides agree on every bit.

pub mod error;
pub mod quant;
pub mod seq;
pub mod state;

pub use error::CodecError;
pub use quant::{
    QuantConfig, QuantizedRotation, RotationQuantizer, ScalarQuantizer, Vec3Quantizer,
};
pub use seq::seq_newer;
pub use state::{AvatarState, BodyState, HandState, HeldObject, ObjectState, QuantizedPose};
