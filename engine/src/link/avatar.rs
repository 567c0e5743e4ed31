//! Avatars on the wire with the time they were sampled: the remote side's jitter buffer places each pose on its
//! own timeline from the packet's frame plus this offset.
//!
//! The codec's [`AvatarState`] has no time field, so this wrapper adds one through the codec's [`Stream`] trait:
//! the avatar is delta-coded exactly as the codec does it, and the offset follows it as a small absolute integer.

use std::time::Duration;

use physync_codec::{AvatarState, CodecError, Ctx, DeltaState, StateConfig, Stream};

/// The largest sample-time offset carried, in milliseconds; larger offsets are clamped to it.
pub const MAX_SAMPLE_OFFSET_MS: u16 = 1023;

const SAMPLE_OFFSET: Ctx = Ctx::user(0, "avatar sample offset");

/// An avatar state and how long before the packet's frame it was sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TimedAvatar {
    /// The avatar's head and hands, and what they hold.
    pub state: AvatarState,
    /// Milliseconds between the sample and the sender's frame time (0..=[`MAX_SAMPLE_OFFSET_MS`]).
    pub sample_offset_ms: u16,
}

impl TimedAvatar {
    /// An avatar sampled `offset` before the frame it is sent with (clamped to [`MAX_SAMPLE_OFFSET_MS`]).
    pub fn new(state: AvatarState, offset: Duration) -> Self {
        let ms = offset.as_millis().min(u128::from(MAX_SAMPLE_OFFSET_MS)) as u16;
        Self {
            state,
            sample_offset_ms: ms,
        }
    }

    /// The sample-time offset as a duration.
    pub fn sample_offset(&self) -> Duration {
        Duration::from_millis(u64::from(self.sample_offset_ms))
    }
}

fn offset<S: Stream>(s: &mut S, value: &mut TimedAvatar) -> Result<(), CodecError> {
    let mut ms = i32::from(value.sample_offset_ms);
    s.int(SAMPLE_OFFSET, &mut ms, 0, i32::from(MAX_SAMPLE_OFFSET_MS))?;
    value.sample_offset_ms = ms as u16;
    Ok(())
}

impl DeltaState for TimedAvatar {
    type Config = StateConfig;

    fn predict(_: &StateConfig, _: &Self, _: u16) -> Option<Self> {
        None
    }

    fn serialize_residual<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
        reference: &Self,
    ) -> Result<(), CodecError> {
        AvatarState::serialize_residual(s, config, &mut value.state, &reference.state)?;
        offset(s, value)
    }

    fn serialize_absolute<S: Stream>(
        s: &mut S,
        config: &StateConfig,
        value: &mut Self,
    ) -> Result<(), CodecError> {
        AvatarState::serialize_absolute(s, config, &mut value.state)?;
        offset(s, value)
    }
}
