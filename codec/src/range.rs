//! A binary range coder: the arithmetic-coding engine under the entropy back end.
//!
//! The design is the classic carry-less-output binary coder with 32-bit range and a one-byte cache for carries
//! (the scheme LZMA made popular). Probabilities are 12-bit estimates of "the bit is 0", adapted after every coded
//! bit by a shift of 4: fast enough to learn a field's statistics within one packet, since every packet starts
//! from fresh models so that each one decodes on its own.

use crate::error::CodecError;

const PROB_BITS: u32 = 12;
/// Probability 1 in the models' fixed point.
pub const PROB_ONE: u16 = 1 << PROB_BITS;
const ADAPT_SHIFT: u32 = 4;
const TOP: u32 = 1 << 24;

/// The starting probability of an adaptive bit model: even odds.
pub const PROB_INIT: u16 = PROB_ONE / 2;

/// Bytes a finished stream carries beyond the bytes already shifted out (the flush): the final value is chosen
/// with its three low bytes zero, so only its top byte is written.
const FLUSH_BYTES: usize = 1;

/// Zero bytes the decoder reads past the end of its input: the ones the flush leaves out.
const IMPLIED_ZEROS: usize = 4 - FLUSH_BYTES;

/// The widest group of even-odds bits coded in one step: the range (at least 2^24 between steps) keeps 8 bits.
const DIRECT_CHUNK: u32 = 16;

/// Bytes an encoder reserves at the start: a snapshot or a small datagram fits without the buffer growing.
const INITIAL_CAPACITY: usize = 256;

/// The encoder's registers at one point, to roll back a tentative write.
#[derive(Debug, Clone, Copy)]
pub struct EncoderCheckpoint {
    low: u64,
    range: u32,
    cache: u8,
    cache_size: u64,
    out_len: usize,
    shifts: usize,
}

/// The encoder's coding registers held apart from it for a run of decisions (see [`RangeEncoder::registers`]).
#[derive(Debug, Clone, Copy)]
pub struct EncoderRegisters {
    low: u64,
    range: u32,
}

/// Encodes bits with adaptive probabilities into bytes.
#[derive(Debug, Clone)]
pub struct RangeEncoder {
    low: u64,
    range: u32,
    cache: u8,
    cache_size: u64,
    out: Vec<u8>,
    shifts: usize,
}

impl Default for RangeEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl RangeEncoder {
    /// An encoder with nothing coded.
    pub fn new() -> Self {
        Self {
            low: 0,
            range: u32::MAX,
            cache: 0,
            cache_size: 1,
            out: Vec::with_capacity(INITIAL_CAPACITY),
            shifts: 0,
        }
    }

    /// Codes `bit` with the adaptive model `prob` (the probability of 0, updated in place).
    #[inline]
    pub fn encode_bit(&mut self, prob: &mut u16, bit: bool) {
        self.encode_decision(*prob, bit);
        if bit {
            *prob -= *prob >> ADAPT_SHIFT;
        } else {
            *prob += (PROB_ONE - *prob) >> ADAPT_SHIFT;
        }
    }

    /// Codes one bit at probability `p0` of 0 (out of [`PROB_ONE`]), leaving the model's update to the caller
    /// (the counterpart of [`RangeDecoder::decode_decision`]).
    #[inline(always)]
    pub fn encode_decision(&mut self, p0: u16, bit: bool) {
        let mut r = self.registers();
        self.decision_in(&mut r, p0, bit);
        self.set_registers(r);
    }

    /// Codes the low `bits` bits of `value` at even odds, most significant first, up to `DIRECT_CHUNK` (16) bits
    /// in one step (the range keeps at least 8 bits of precision, so a chunk costs its width to within 1%).
    #[inline]
    pub fn encode_direct(&mut self, value: u32, bits: u32) {
        let mut r = self.registers();
        self.direct_in(&mut r, value, bits);
        self.set_registers(r);
    }

    /// The coding registers, to code a run of decisions in locals ([`RangeEncoder::decision_in`]) and hand back
    /// with [`RangeEncoder::set_registers`]: kept in machine registers across the run rather than stored and
    /// loaded through the encoder around every model update.
    #[inline(always)]
    pub fn registers(&self) -> EncoderRegisters {
        EncoderRegisters {
            low: self.low,
            range: self.range,
        }
    }

    /// Takes back registers from [`RangeEncoder::registers`] after a run; nothing else may be coded in between.
    #[inline(always)]
    pub fn set_registers(&mut self, r: EncoderRegisters) {
        self.low = r.low;
        self.range = r.range;
    }

    /// Codes one bit at probability `p0` of 0 on registers taken out with [`RangeEncoder::registers`] (what
    /// [`RangeEncoder::encode_decision`] does on its own), the registers written back to the encoder only to shift
    /// bytes out.
    #[inline(always)]
    pub fn decision_in(&mut self, r: &mut EncoderRegisters, p0: u16, bit: bool) {
        let bound = (r.range >> PROB_BITS) * u32::from(p0);
        if bit {
            r.low += u64::from(bound);
            r.range -= bound;
        } else {
            r.range = bound;
        }
        if r.range < TOP {
            self.normalize_registers(r);
        }
    }

    /// Codes bits at even odds on registers taken out with [`RangeEncoder::registers`] (what
    /// [`RangeEncoder::encode_direct`] does on its own).
    #[inline(always)]
    pub fn direct_in(&mut self, r: &mut EncoderRegisters, value: u32, bits: u32) {
        let mut left = bits.min(32);
        while left > 0 {
            let n = left.min(DIRECT_CHUNK);
            left -= n;
            let chunk = (u64::from(value) >> left) & ((1u64 << n) - 1);
            r.range >>= n;
            r.low += u64::from(r.range) * chunk;
            if r.range < TOP {
                self.normalize_registers(r);
            }
        }
    }

    /// [`RangeEncoder::normalize`] of registers held outside the encoder.
    #[inline(always)]
    fn normalize_registers(&mut self, r: &mut EncoderRegisters) {
        self.set_registers(*r);
        self.normalize();
        *r = self.registers();
    }

    /// The length in bytes the stream would have if finished now.
    pub fn finished_len(&self) -> usize {
        self.shifts + FLUSH_BYTES
    }

    /// Saves the registers, so that everything coded after can be undone with [`RangeEncoder::rollback`].
    pub fn checkpoint(&self) -> EncoderCheckpoint {
        EncoderCheckpoint {
            low: self.low,
            range: self.range,
            cache: self.cache,
            cache_size: self.cache_size,
            out_len: self.out.len(),
            shifts: self.shifts,
        }
    }

    /// Returns to a checkpoint taken on this encoder. Bytes already emitted before it never change afterwards
    /// (carries only reach the cache), so truncating the output is enough.
    pub fn rollback(&mut self, c: EncoderCheckpoint) {
        self.low = c.low;
        self.range = c.range;
        self.cache = c.cache;
        self.cache_size = c.cache_size;
        self.out.truncate(c.out_len);
        self.shifts = c.shifts;
    }

    /// Flushes the registers and returns exactly [`RangeEncoder::finished_len`] bytes. Any value in
    /// `[low, low + range)` decodes the same; the range holds at least 2^24, so that interval contains a multiple of
    /// 2^24, whose three low bytes the decoder reads as implied zeros.
    pub fn finish(mut self) -> Vec<u8> {
        self.low = (self.low + u64::from(TOP - 1)) & !u64::from(TOP - 1);
        for _ in 0..=FLUSH_BYTES {
            self.shift_low();
        }
        // The first byte out is always the initial cache, zero: the decoder assumes it.
        self.out.remove(0);
        self.out
    }

    /// Shifts out bytes until the range holds at least 24 bits again: at most two after a modelled bit (its range
    /// keeps at least `2^24 >> 12` of `2^24`), at most three after a chunk of even-odds bits.
    #[inline(always)]
    fn normalize(&mut self) {
        while self.range < TOP {
            self.range <<= 8;
            self.shift_low();
            self.shifts += 1;
        }
    }

    #[inline(always)]
    fn shift_low(&mut self) {
        // The common case: no carry, no run of 0xFF bytes held back, and the top byte not 0xFF. The cached byte goes
        // out as it is and the cache takes the next one.
        if self.cache_size == 1 && self.low < 0xFF00_0000 {
            self.out.push(self.cache);
            self.cache = ((self.low >> 24) & 0xFF) as u8;
            self.low = (self.low & 0x00FF_FFFF) << 8;
            return;
        }
        self.shift_low_carry();
    }

    /// [`RangeEncoder::shift_low`] with a carry or a run of 0xFF bytes to resolve.
    #[inline(never)]
    fn shift_low_carry(&mut self) {
        if (self.low as u32) < 0xFF00_0000 || (self.low >> 32) != 0 {
            let carry = (self.low >> 32) as u8;
            let mut byte = self.cache;
            loop {
                self.out.push(byte.wrapping_add(carry));
                byte = 0xFF;
                self.cache_size -= 1;
                if self.cache_size == 0 {
                    break;
                }
            }
            self.cache = ((self.low >> 24) & 0xFF) as u8;
        }
        self.cache_size += 1;
        self.low = (self.low & 0x00FF_FFFF) << 8;
    }
}

/// Decodes what [`RangeEncoder`] wrote. Needing a byte past the end is [`CodecError::Truncated`]. It is `Copy`: a
/// run of decisions can be decoded on a local copy, whose registers the compiler keeps in machine registers, and the
/// copy written back after.
#[derive(Debug, Clone, Copy)]
pub struct RangeDecoder<'a> {
    code: u32,
    range: u32,
    input: &'a [u8],
    pos: usize,
}

impl<'a> RangeDecoder<'a> {
    /// Starts decoding `input`.
    pub fn new(input: &'a [u8]) -> Result<Self, CodecError> {
        let mut d = Self {
            code: 0,
            range: u32::MAX,
            input,
            pos: 0,
        };
        for _ in 0..4 {
            d.code = (d.code << 8) | u32::from(d.next_byte()?);
        }
        Ok(d)
    }

    /// Bytes consumed so far, counting the implied zeros after the input.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// True once the decoder has read exactly what the encoder's flush stands for: every byte of the input and
    /// the implied zeros after it.
    pub fn is_at_end(&self) -> bool {
        self.pos == self.input.len() + IMPLIED_ZEROS
    }

    /// Length of the input.
    pub fn len(&self) -> usize {
        self.input.len()
    }

    /// True for an empty input (which [`RangeDecoder::new`] refuses).
    pub fn is_empty(&self) -> bool {
        self.input.is_empty()
    }

    /// Decodes one bit with the adaptive model `prob`, updating it as the encoder did.
    #[inline]
    pub fn decode_bit(&mut self, prob: &mut u16) -> Result<bool, CodecError> {
        let bit = self.decode_decision(*prob)?;
        if bit {
            *prob -= *prob >> ADAPT_SHIFT;
        } else {
            *prob += (PROB_ONE - *prob) >> ADAPT_SHIFT;
        }
        Ok(bit)
    }

    /// Decodes one bit coded at probability `p0` of 0 (out of [`PROB_ONE`]), leaving the model's update to the
    /// caller.
    #[inline(always)]
    pub fn decode_decision(&mut self, p0: u16) -> Result<bool, CodecError> {
        let bound = (self.range >> PROB_BITS) * u32::from(p0);
        let bit = if self.code < bound {
            self.range = bound;
            false
        } else {
            self.code -= bound;
            self.range -= bound;
            true
        };
        self.normalize()?;
        Ok(bit)
    }

    /// Decodes `bits` bits coded at even odds by [`RangeEncoder::encode_direct`]. A chunk the encoder cannot
    /// have written (hostile input) is an error.
    #[inline(always)]
    pub fn decode_direct(&mut self, bits: u32) -> Result<u32, CodecError> {
        let mut value = 0u64;
        let mut left = bits.min(32);
        while left > 0 {
            let n = left.min(DIRECT_CHUNK);
            left -= n;
            self.range >>= n;
            let chunk = self.code / self.range.max(1);
            if u64::from(chunk) >> n != 0 {
                return Err(CodecError::Invalid {
                    field: "even-odds bits",
                });
            }
            self.code -= chunk * self.range;
            value = (value << n) | u64::from(chunk);
            self.normalize()?;
        }
        Ok(value as u32)
    }

    #[inline(always)]
    fn normalize(&mut self) -> Result<(), CodecError> {
        while self.range < TOP {
            self.range <<= 8;
            self.code = (self.code << 8) | u32::from(self.next_byte()?);
        }
        Ok(())
    }

    #[inline(always)]
    fn next_byte(&mut self) -> Result<u8, CodecError> {
        let b = match self.input.get(self.pos) {
            Some(&b) => b,
            None if self.pos < self.input.len() + IMPLIED_ZEROS => 0,
            None => return Err(CodecError::Truncated),
        };
        self.pos += 1;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(bits: &[(bool, usize)], models: usize) -> Vec<u8> {
        let mut probs = vec![PROB_INIT; models];
        let mut e = RangeEncoder::new();
        for &(b, m) in bits {
            e.encode_bit(&mut probs[m % models], b);
        }
        let expected = e.finished_len();
        let out = e.finish();
        assert_eq!(out.len(), expected);
        out
    }

    #[test]
    fn skewed_bits_compress() {
        // 4000 bits, 1 in 50 set: entropy is about 0.14 bits a bit, so about 70 bytes; bit-packing needs 500.
        let bits: Vec<(bool, usize)> = (0..4000).map(|i| (i % 50 == 0, 0)).collect();
        let out = encode(&bits, 1);
        assert!(out.len() < 150, "{} bytes", out.len());
        let mut d = RangeDecoder::new(&out).unwrap();
        let mut p = PROB_INIT;
        for &(b, _) in &bits {
            assert_eq!(d.decode_bit(&mut p).unwrap(), b);
        }
        assert!(d.is_at_end());
    }

    #[test]
    fn the_flush_is_one_byte_and_every_cut_or_extra_byte_is_caught() {
        for seed in 0..64u32 {
            let bits: Vec<(bool, usize)> = (0..300u32)
                .map(|i| {
                    (
                        (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % 7 < 2,
                        0,
                    )
                })
                .collect();
            let mut probs = [PROB_INIT];
            let mut e = RangeEncoder::new();
            for &(b, _) in &bits {
                e.encode_bit(&mut probs[0], b);
            }
            let shifted = e.shifts;
            let out = e.finish();
            assert_eq!(out.len(), shifted + 1);
            let decodes = |bytes: &[u8]| -> Result<bool, CodecError> {
                let mut d = RangeDecoder::new(bytes)?;
                let mut p = PROB_INIT;
                for &(b, _) in &bits {
                    if d.decode_bit(&mut p)? != b {
                        return Ok(false);
                    }
                }
                Ok(d.is_at_end())
            };
            assert_eq!(decodes(&out), Ok(true));
            let mut longer = out.clone();
            longer.push(0);
            assert_ne!(decodes(&longer), Ok(true));
            assert_ne!(decodes(&out[..out.len() - 1]), Ok(true));
        }
    }

    #[test]
    fn rollback_restores_the_stream() {
        let mut probs = [PROB_INIT; 2];
        let mut e = RangeEncoder::new();
        for i in 0..100 {
            e.encode_bit(&mut probs[0], i % 3 == 0);
        }
        let saved_probs = probs;
        let c = e.checkpoint();
        for i in 0..500 {
            e.encode_bit(&mut probs[1], i % 7 == 0);
            e.encode_direct(i, 9);
        }
        e.rollback(c);
        probs = saved_probs;
        e.encode_bit(&mut probs[1], true);
        let out = e.finish();
        let mut d = RangeDecoder::new(&out).unwrap();
        let mut p = [PROB_INIT; 2];
        for i in 0..100 {
            assert_eq!(d.decode_bit(&mut p[0]).unwrap(), i % 3 == 0);
        }
        assert!(d.decode_bit(&mut p[1]).unwrap());
    }

    #[test]
    fn truncation_is_detected() {
        let bits: Vec<(bool, usize)> = (0..400).map(|i| (i % 2 == 0, 0)).collect();
        let out = encode(&bits, 1);
        let cut = &out[..out.len() - 3];
        let mut d = RangeDecoder::new(cut).unwrap();
        let mut p = PROB_INIT;
        let r: Result<Vec<bool>, _> = bits.iter().map(|_| d.decode_bit(&mut p)).collect();
        assert_eq!(r, Err(CodecError::Truncated));
        assert_eq!(RangeDecoder::new(&[]).err(), Some(CodecError::Truncated));
    }

    /// The coder as first written (LZMA's textbook loop: every shift through the carry path, one byte at a time):
    /// the fast paths must give the same bytes.
    fn reference_encode(ops: &[(bool, usize, u32, u32)]) -> Vec<u8> {
        struct E {
            low: u64,
            range: u32,
            cache: u8,
            cache_size: u64,
            out: Vec<u8>,
        }
        impl E {
            fn shift_low(&mut self) {
                if (self.low as u32) < 0xFF00_0000 || (self.low >> 32) != 0 {
                    let carry = (self.low >> 32) as u8;
                    let mut byte = self.cache;
                    loop {
                        self.out.push(byte.wrapping_add(carry));
                        byte = 0xFF;
                        self.cache_size -= 1;
                        if self.cache_size == 0 {
                            break;
                        }
                    }
                    self.cache = ((self.low >> 24) & 0xFF) as u8;
                }
                self.cache_size += 1;
                self.low = (self.low & 0x00FF_FFFF) << 8;
            }
            fn normalize(&mut self) {
                while self.range < TOP {
                    self.range <<= 8;
                    self.shift_low();
                }
            }
        }
        let mut e = E {
            low: 0,
            range: u32::MAX,
            cache: 0,
            cache_size: 1,
            out: Vec::new(),
        };
        let mut probs = [PROB_INIT; 8];
        for &(bit, m, v, n) in ops {
            let prob = &mut probs[m];
            let bound = (e.range >> PROB_BITS) * u32::from(*prob);
            if bit {
                e.low += u64::from(bound);
                e.range -= bound;
                *prob -= *prob >> ADAPT_SHIFT;
            } else {
                e.range = bound;
                *prob += (PROB_ONE - *prob) >> ADAPT_SHIFT;
            }
            e.normalize();
            let mut left = n;
            while left > 0 {
                let k = left.min(DIRECT_CHUNK);
                left -= k;
                e.range >>= k;
                e.low += u64::from(e.range) * ((u64::from(v) >> left) & ((1u64 << k) - 1));
                e.normalize();
            }
        }
        e.low = (e.low + u64::from(TOP - 1)) & !u64::from(TOP - 1);
        for _ in 0..=FLUSH_BYTES {
            e.shift_low();
        }
        e.out.remove(0);
        e.out
    }

    proptest! {
        #[test]
        fn fast_paths_give_the_reference_bytes(
            ops in prop::collection::vec((any::<bool>(), 0usize..8, any::<u32>(), 0u32..=32), 0..400),
            skew in 0usize..8,
        ) {
            // Long runs of one bit in a skewed model drive the range low and the carries into runs of 0xFF.
            let ops: Vec<_> = ops
                .iter()
                .flat_map(|&op| std::iter::repeat_n(op, 1 + skew * usize::from(op.1 == 0)))
                .collect();
            let mut probs = [PROB_INIT; 8];
            let mut e = RangeEncoder::new();
            for &(b, m, v, n) in &ops {
                e.encode_bit(&mut probs[m], b);
                e.encode_direct(v & ((1u64 << n) - 1) as u32, n);
            }
            let masked: Vec<_> = ops
                .iter()
                .map(|&(b, m, v, n)| (b, m, v & ((1u64 << n) - 1) as u32, n))
                .collect();
            prop_assert_eq!(e.finish(), reference_encode(&masked));
        }

        #[test]
        fn registers_held_apart_give_the_reference_bytes(
            ops in prop::collection::vec((any::<bool>(), 0usize..8, any::<u32>(), 0u32..=32), 0..400),
            skew in 0usize..8,
            run in 1usize..6,
        ) {
            // As above, the decisions coded in runs on registers taken out of the encoder (the writer's wide
            // values): long runs of one bit drive carries and runs of 0xFF through the normalization it calls.
            let ops: Vec<_> = ops
                .iter()
                .map(|&(b, m, v, n)| (b, m, v & ((1u64 << n) - 1) as u32, n))
                .flat_map(|op| std::iter::repeat_n(op, 1 + skew * usize::from(op.1 == 0)))
                .collect();
            let mut probs = [PROB_INIT; 8];
            let mut e = RangeEncoder::new();
            for chunk in ops.chunks(run) {
                let mut r = e.registers();
                for &(b, m, v, n) in chunk {
                    let prob = &mut probs[m];
                    e.decision_in(&mut r, *prob, b);
                    if b {
                        *prob -= *prob >> ADAPT_SHIFT;
                    } else {
                        *prob += (PROB_ONE - *prob) >> ADAPT_SHIFT;
                    }
                    e.direct_in(&mut r, v, n);
                }
                e.set_registers(r);
            }
            prop_assert_eq!(e.finish(), reference_encode(&ops));
        }

        #[test]
        fn round_trips_mixed_bits(
            ops in prop::collection::vec((any::<bool>(), 0usize..8, any::<u32>(), 0u32..=32), 0..300)
        ) {
            let mut probs = [PROB_INIT; 8];
            let mut e = RangeEncoder::new();
            for &(b, m, v, n) in &ops {
                e.encode_bit(&mut probs[m], b);
                let v = if n == 32 { v } else { v & ((1u32 << n) - 1) };
                e.encode_direct(v, n);
            }
            let out = e.finish();
            let mut d = RangeDecoder::new(&out).unwrap();
            let mut probs = [PROB_INIT; 8];
            for &(b, m, v, n) in &ops {
                prop_assert_eq!(d.decode_bit(&mut probs[m]).unwrap(), b);
                let v = if n == 32 { v } else { v & ((1u32 << n) - 1) };
                prop_assert_eq!(d.decode_direct(n).unwrap(), v);
            }
        }
    }
}
