//! The serialize-once abstraction: one generic function per message, run by a stream that writes, reads or
//! measures.
//!
//! A message is described by a function `fn serialize<S: Stream>(s: &mut S, value: &mut T, ..)`. Writing streams
//! read the values behind the references and emit them; reading streams overwrite them with what they decode; the
//! measuring stream only counts the bits the bit-packing back end would spend. Writer and reader therefore cannot
//! drift, and the size of an update is known before it is committed to a packet.
//!
//! Every call names a [`Ctx`]: the entropy-coding back end keeps one adaptive model per context, so values of the
//! same field share statistics; the bit-packing back end ignores it.

use crate::error::CodecError;
use crate::quant::bits_for;

/// A field identity for context modelling, with a name for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    /// Index into the entropy coder's model table (taken modulo [`Ctx::COUNT`]).
    pub id: u16,
    /// The field's name, reported in [`CodecError::Invalid`].
    pub name: &'static str,
}

impl Ctx {
    /// Number of distinct model slots. Ids `0..CODEC` are the codec's own fields; `CODEC..COUNT` are free for state
    /// types defined outside the codec (see [`Ctx::user`]).
    pub const COUNT: usize = Self::CODEC + 64;

    /// Number of model slots the codec's own fields may use (the trained priors cover these).
    pub const CODEC: usize = 254;

    /// A context for a field of the codec itself.
    pub const fn new(id: u16, name: &'static str) -> Self {
        Self { id, name }
    }

    /// A context for a field of a state type defined by another crate: `n` in `0..64`.
    pub const fn user(n: u16, name: &'static str) -> Self {
        Self {
            id: Self::CODEC as u16 + n % 64,
            name,
        }
    }

    /// The context's model slot: its id, taken modulo [`Ctx::COUNT`] only when past it (every id the codec and
    /// [`Ctx::user`] make is below it, so the coder's hot path skips the division's multiply).
    #[inline]
    pub(crate) fn slot(self) -> usize {
        let id = usize::from(self.id);
        if id < Self::COUNT {
            id
        } else {
            id % Self::COUNT
        }
    }
}

/// A bit stream that serializes values by mutable reference: the same code writes, reads and measures.
pub trait Stream {
    /// True for decoding streams: after each call the referenced value holds what was read.
    const READING: bool;

    /// Whether the stream codes values under their contexts (the range coder) rather than ignoring them
    /// (bit-packing, measuring): work that only picks a context may be skipped when it does not.
    const CONTEXTS: bool = true;

    /// Serializes one flag.
    fn bool(&mut self, ctx: Ctx, value: &mut bool) -> Result<(), CodecError>;

    /// Serializes an integer known to lie in `min..=max`. Writing a value outside the range, or reading one, is a
    /// [`CodecError::Invalid`] naming `ctx`.
    fn int(&mut self, ctx: Ctx, value: &mut i32, min: i32, max: i32) -> Result<(), CodecError>;

    /// Serializes an unsigned field of `bits` bits (1..=32).
    fn bits(&mut self, ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError>;

    /// Serializes the low `bits` bits (0..=64) of `value` as one field, most significant bit first: what
    /// [`Stream::bits`] calls of the high part and then the low 32 bits would code. For streams that ignore
    /// contexts ([`Stream::CONTEXTS`] false), whose hand-written paths write a residual's tag and components as
    /// one field (the bit-packing writer takes it with one shift and or); the default makes those calls.
    fn packed(&mut self, ctx: Ctx, value: &mut u64, bits: u32) -> Result<(), CodecError> {
        if bits > 64 || (bits < 64 && *value >> bits != 0) {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        let mut low = *value as u32;
        if bits > 32 {
            let mut high = (*value >> 32) as u32;
            self.bits(ctx, &mut high, bits - 32)?;
            self.bits(ctx, &mut low, 32)?;
            *value = u64::from(high) << 32 | u64::from(low);
        } else {
            self.bits(ctx, &mut low, bits)?;
            *value = u64::from(low);
        }
        Ok(())
    }

    /// Reads the next `bits` bits (1..=32) if they are all ones, and says whether it did: a reader's shortcut for
    /// the commonest run of flags in a section, through [`Stream::peek`] (so never, reading nothing, on a stream
    /// that codes under contexts and cannot look ahead).
    #[inline(always)]
    fn take_ones(&mut self, bits: u32) -> bool {
        if !(1..=32).contains(&bits) {
            return false;
        }
        let ones = self.peek(bits).is_some_and(|next| next == (1 << bits) - 1);
        if ones {
            self.skip(bits);
        }
        ones
    }

    /// The next `bits` bits (1..=56), right-aligned, without reading them; `None` when fewer are left, or for a
    /// stream that cannot look ahead (its default: a stream that codes under contexts). A reader's shortcut for a
    /// field whose width depends on its own first bits (a residual vector's bucket tag and components), read by
    /// [`Stream::skip`] once it is known. Only a reading stream that ignores contexts overrides it.
    fn peek(&mut self, _bits: u32) -> Option<u64> {
        None
    }

    /// Reads `bits` bits that the last [`Stream::peek`] showed (at most as many as it showed), without looking at
    /// them again. Only a stream whose `peek` can show bits does anything.
    fn skip(&mut self, _bits: u32) {}

    /// [`Stream::take_ones`] of `bits` bits, up to `most` times in a row while it takes them: how many times it
    /// did. A reader takes a run of unchanged entries so, and then their baselines at once.
    fn take_ones_repeated(&mut self, bits: u32, most: u32) -> u32 {
        let mut taken = 0;
        while taken < most && self.take_ones(bits) {
            taken += 1;
        }
        taken
    }

    /// Serializes a `u8`.
    fn u8(&mut self, ctx: Ctx, value: &mut u8) -> Result<(), CodecError> {
        let mut v = u32::from(*value);
        self.bits(ctx, &mut v, 8)?;
        *value = v as u8;
        Ok(())
    }

    /// Serializes a `u16`.
    fn u16(&mut self, ctx: Ctx, value: &mut u16) -> Result<(), CodecError> {
        let mut v = u32::from(*value);
        self.bits(ctx, &mut v, 16)?;
        *value = v as u16;
        Ok(())
    }

    /// Serializes an unsigned count bounded by `max`: reading more than `max` is an error, so a length read from
    /// the wire can size an allocation.
    fn count(&mut self, ctx: Ctx, value: &mut u32, max: u32) -> Result<(), CodecError> {
        let max_i = i32::try_from(max).unwrap_or(i32::MAX);
        let mut v = i32::try_from(*value).unwrap_or(i32::MAX);
        self.int(ctx, &mut v, 0, max_i)
            .map_err(|_| CodecError::TooLarge {
                field: ctx.name,
                value: u64::from(*value),
                limit: u64::from(max),
            })?;
        *value = v as u32;
        Ok(())
    }
}

/// Checks a value against its range; the writing and reading streams share it.
#[inline]
pub(crate) fn check_range(ctx: Ctx, value: i64, min: i32, max: i32) -> Result<(), CodecError> {
    if value < i64::from(min) || value > i64::from(max) {
        Err(CodecError::Invalid { field: ctx.name })
    } else {
        Ok(())
    }
}

/// Counts the bits the bit-packing back end would write, without writing them. The priority accumulator's packet
/// filler and the delta encoder's choice of path both run messages through it.
#[derive(Debug, Default, Clone, Copy)]
pub struct MeasureStream {
    bits: u64,
}

impl MeasureStream {
    /// A stream that has counted nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bits counted so far.
    pub fn bits_counted(&self) -> u64 {
        self.bits
    }
}

impl Stream for MeasureStream {
    const READING: bool = false;
    const CONTEXTS: bool = false;

    #[inline]
    fn bool(&mut self, _ctx: Ctx, _value: &mut bool) -> Result<(), CodecError> {
        self.bits += 1;
        Ok(())
    }

    #[inline]
    fn int(&mut self, ctx: Ctx, value: &mut i32, min: i32, max: i32) -> Result<(), CodecError> {
        check_range(ctx, i64::from(*value), min, max)?;
        self.bits += u64::from(bits_for((i64::from(max) - i64::from(min)) as u32));
        Ok(())
    }

    #[inline]
    fn bits(&mut self, ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError> {
        // The same check as the bit-packing writer: a value wider than its field cannot be written.
        if bits > 32 || (bits < 32 && *value >> bits != 0) {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        self.bits += u64::from(bits);
        Ok(())
    }

    #[inline]
    fn packed(&mut self, ctx: Ctx, value: &mut u64, bits: u32) -> Result<(), CodecError> {
        if bits > 64 || (bits < 64 && *value >> bits != 0) {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        self.bits += u64::from(bits);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Ctx = Ctx::new(0, "test");

    #[test]
    fn measure_counts_bitpack_sizes() {
        let mut m = MeasureStream::new();
        m.bool(C, &mut true).unwrap();
        m.int(C, &mut 3, -4, 3).unwrap();
        m.bits(C, &mut 0, 17).unwrap();
        m.u16(C, &mut 9).unwrap();
        assert_eq!(m.bits_counted(), 1 + 3 + 17 + 16);
    }

    #[test]
    fn measure_rejects_out_of_range() {
        let mut m = MeasureStream::new();
        assert_eq!(
            m.int(C, &mut 4, -4, 3),
            Err(CodecError::Invalid { field: "test" })
        );
        assert_eq!(
            m.bits(C, &mut 8, 3),
            Err(CodecError::Invalid { field: "test" })
        );
        assert!(matches!(
            m.count(C, &mut 10, 9),
            Err(CodecError::TooLarge {
                value: 10,
                limit: 9,
                ..
            })
        ));
    }

    #[test]
    fn packed_fields_round_trip_through_the_default() {
        // The range coder keeps the default: the high part, then the low 32 bits.
        let fields = [
            (0u64, 0u32),
            (1, 1),
            (0x2f, 6),
            (0xdead_beef, 32),
            (0x1_2345_6789, 33),
        ];
        let mut w = crate::arith::ArithWriteStream::new();
        for &(v, bits) in &fields {
            w.packed(C, &mut v.clone(), bits).unwrap();
        }
        let mut all = u64::MAX;
        w.packed(C, &mut all, 64).unwrap();
        assert!(w.packed(C, &mut 4, 2).is_err());
        let bytes = w.finish();
        let mut r = crate::arith::ArithReadStream::new(&bytes).unwrap();
        for &(v, bits) in &fields {
            let mut x = 0;
            r.packed(C, &mut x, bits).unwrap();
            assert_eq!(x, v);
        }
        let mut x = 0;
        r.packed(C, &mut x, 64).unwrap();
        assert_eq!(x, u64::MAX);
    }

    #[test]
    fn user_contexts_stay_out_of_codec_range() {
        assert_eq!(Ctx::user(0, "a").slot(), Ctx::CODEC);
        assert_eq!(Ctx::user(63, "a").slot(), Ctx::COUNT - 1);
        assert_eq!(Ctx::user(64, "a").slot(), Ctx::CODEC);
        // An id past the table wraps, as it did when every slot was taken modulo the count.
        assert_eq!(Ctx::new(Ctx::COUNT as u16, "a").slot(), 0);
        assert_eq!(Ctx::new(Ctx::COUNT as u16 * 2 + 5, "a").slot(), 5);
        assert_eq!(
            Ctx::new(u16::MAX, "a").slot(),
            usize::from(u16::MAX) % Ctx::COUNT
        );
    }
}
