//! The bit-packing back end: each value takes exactly the bits its range needs, on bitstream-io.

use bitstream_io::{BigEndian, BitWrite, BitWriter};

use crate::error::CodecError;
use crate::quant::bits_for;
use crate::stream::{Ctx, Stream, check_range};

/// Writes values as fixed-width bit fields, most significant bit first. Fields gather in a 64-bit accumulator that
/// goes to the bitstream-io writer's byte vector a whole 64-bit word at a time, which keeps the per-field cost to a
/// shift and an or.
pub struct BitWriteStream {
    writer: BitWriter<Vec<u8>, BigEndian>,
    /// Pending bits, right-aligned; always fewer than 64.
    acc: u64,
    acc_bits: u32,
    bits: u64,
}

impl Default for BitWriteStream {
    fn default() -> Self {
        Self::new()
    }
}

impl BitWriteStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::with_bytes(Vec::new())
    }

    /// An empty stream with room for `bytes` bytes before it reallocates.
    pub fn with_capacity(bytes: usize) -> Self {
        Self::with_bytes(Vec::with_capacity(bytes))
    }

    /// A stream appending to `bytes` (their bits count as written).
    pub fn with_bytes(bytes: Vec<u8>) -> Self {
        let bits = bytes.len() as u64 * 8;
        Self {
            writer: BitWriter::endian(bytes, BigEndian),
            acc: 0,
            acc_bits: 0,
            bits,
        }
    }

    /// Bits written so far.
    #[inline]
    pub fn bits_written(&self) -> u64 {
        self.bits
    }

    /// Pads to a whole byte with zero bits and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        // Writing into a Vec cannot fail. The accumulator holds fewer than 64 bits: whole bytes first, then the
        // rest padded.
        let whole = self.acc_bits / 8 * 8;
        if whole > 0 {
            let _ = self
                .writer
                .write_var::<u64>(whole, self.acc >> (self.acc_bits - whole));
        }
        let rest = self.acc_bits - whole;
        if rest > 0 {
            let _ = self
                .writer
                .write_var::<u64>(rest, self.acc & ((1u64 << rest) - 1));
        }
        let _ = self.writer.byte_align();
        self.writer.into_writer()
    }

    /// Appends the low `bits` bits of `value` (`bits <= 64`, `value < 2^bits`): a flag, an offset or a packed field
    /// of any width in one step.
    #[inline(always)]
    fn put(&mut self, value: u64, bits: u32) -> Result<(), CodecError> {
        debug_assert!(bits <= 64 && (bits == 64 || value >> bits == 0));
        self.bits += u64::from(bits);
        let free = 64 - self.acc_bits;
        if bits < free {
            // acc_bits < 64 and bits < free, so neither shift reaches 64.
            self.acc = (self.acc << bits) | value;
            self.acc_bits += bits;
            Ok(())
        } else {
            self.flush_word(value, bits, free)
        }
    }

    /// Completes a 64-bit word with the top `free` of `value`'s `bits` bits and hands it to the writer.
    #[inline(never)]
    fn flush_word(&mut self, value: u64, bits: u32, free: u32) -> Result<(), CodecError> {
        // Here 1 <= free <= bits <= 64, so `rest` is below 64; `free` is 64 only for a 64-bit field into an empty
        // accumulator, which then gives nothing to the word.
        let rest = bits - free;
        let word = self.acc.checked_shl(free).unwrap_or(0) | (value >> rest);
        self.acc = value & ((1u64 << rest) - 1);
        self.acc_bits = rest;
        // Only whole words reach the writer until `finish`, so it is byte-aligned here and its byte vector takes the
        // word directly: bitstream-io's bit-level `write` cost about 100 instructions a word. Into room it has (a
        // datagram's writer is made with its budget), with nothing here that calls: the call that grows it, or the
        // bit-level write, is out of line, and this one saves no registers.
        if let Some(bytes) = self.writer.writer()
            && bytes.capacity() - bytes.len() >= 8
        {
            bytes.extend_from_slice(&word.to_be_bytes());
            return Ok(());
        }
        self.write_word_growing(word)
    }

    /// [`BitWriteStream::flush_word`]'s hand-over of `word` where the byte vector has no room for it.
    #[cold]
    #[inline(never)]
    fn write_word_growing(&mut self, word: u64) -> Result<(), CodecError> {
        match self.writer.writer() {
            Some(bytes) => {
                bytes.extend_from_slice(&word.to_be_bytes());
                Ok(())
            }
            None => self
                .writer
                .write::<64, u64>(word)
                .map_err(|_| CodecError::Overflow),
        }
    }
}

impl Stream for BitWriteStream {
    const READING: bool = false;
    const CONTEXTS: bool = false;

    #[inline]
    fn bool(&mut self, _ctx: Ctx, value: &mut bool) -> Result<(), CodecError> {
        self.put(u64::from(*value), 1)
    }

    #[inline]
    fn int(&mut self, ctx: Ctx, value: &mut i32, min: i32, max: i32) -> Result<(), CodecError> {
        check_range(ctx, i64::from(*value), min, max)?;
        let span = (i64::from(max) - i64::from(min)) as u32;
        let offset = (i64::from(*value) - i64::from(min)) as u32;
        self.put(u64::from(offset), bits_for(span))
    }

    #[inline]
    fn bits(&mut self, ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError> {
        if bits > 32 || (bits < 32 && *value >> bits != 0) {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        self.put(u64::from(*value), bits)
    }

    #[inline(always)]
    fn packed(&mut self, ctx: Ctx, value: &mut u64, bits: u32) -> Result<(), CodecError> {
        if bits > 64 || (bits < 64 && *value >> bits != 0) {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        self.put(*value, bits)
    }
}

/// Bits worked out ahead of their place in a bit-packed stream, most significant first: the bit-packing section
/// writer works out a changed entry's bits while it plans the entry (see [`crate::DeltaState::plan_packed`]), where
/// it has the residuals at hand, and writes them when the entry's turn comes rather than working them out again.
/// Gathered as [`BitWriteStream`] gathers them: whole 64-bit words, then fewer than 64 pending bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PackedBits {
    words: [u64; PACKED_WORDS],
    /// Whole words in `words`.
    full: u32,
    /// Pending bits, right-aligned; always fewer than 64.
    tail: u64,
    tail_bits: u32,
}

/// Whole words of [`PackedBits`]: a changed rigid body's tags and residual take at most 213 bits.
const PACKED_WORDS: usize = 3;

impl PackedBits {
    /// Appends the low `bits` bits of `code` (`bits <= 64`): [`CodecError::Invalid`] naming `ctx` for a field
    /// [`Stream::packed`] would refuse, [`CodecError::Overflow`] past 255 bits.
    #[inline(always)]
    pub fn push(&mut self, ctx: Ctx, code: u64, bits: u32) -> Result<(), CodecError> {
        if bits > 64 || (bits < 64 && code >> bits != 0) {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        self.push_fitting(code, bits)
    }

    /// [`PackedBits::push`] of a field its caller laid out within `bits` (at most 64) by construction: nothing is
    /// checked but the room left.
    #[inline(always)]
    pub(crate) fn push_fitting(&mut self, code: u64, bits: u32) -> Result<(), CodecError> {
        let free = 64 - self.tail_bits;
        if bits < free {
            // tail_bits < 64 and bits < free, so neither shift reaches 64.
            self.tail = (self.tail << bits) | code;
            self.tail_bits += bits;
            return Ok(());
        }
        // As `BitWriteStream::flush_word`: 1 <= free <= bits <= 64, so `rest` is below 64.
        let rest = bits - free;
        let word = self.tail.checked_shl(free).unwrap_or(0) | (code >> rest);
        let Some(slot) = self.words.get_mut(self.full as usize) else {
            return Err(CodecError::Overflow);
        };
        *slot = word;
        self.full += 1;
        self.tail = code & ((1u64 << rest) - 1);
        self.tail_bits = rest;
        Ok(())
    }

    /// How many bits were pushed.
    #[inline]
    pub fn len(&self) -> u32 {
        64 * self.full + self.tail_bits
    }

    /// Whether none were.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl BitWriteStream {
    /// Appends the bits of `p`, as the [`PackedBits::push`] calls that gathered them would have written them.
    #[inline(always)]
    pub fn put_packed(&mut self, p: &PackedBits) -> Result<(), CodecError> {
        for &w in p.words.iter().take(p.full as usize) {
            self.put(w, 64)?;
        }
        if p.tail_bits > 0 {
            self.put(p.tail, p.tail_bits)?;
        }
        Ok(())
    }
}

/// Reads what [`BitWriteStream`] wrote; running out of bytes is [`CodecError::Truncated`].
///
/// Unlike the writer, the reader cuts its words from the byte slice itself rather than through bitstream-io: every
/// bit-packed datagram and snapshot is decoded here, and bitstream-io's reader (built for any `io::Read`) cost
/// about 110 instructions per 32-bit word, 13% of decoding a full datagram. Here a refill is one 8-byte
/// big-endian load while 8 bytes remain, and a byte at a time for the last few; no length is trusted beyond the
/// slice's.
pub struct BitReadStream<'a> {
    bytes: &'a [u8],
    /// Bytes of `bytes` not yet moved into the accumulator start here.
    pos: usize,
    /// Bits below `acc_bits` are unread, most significant first; bits above are stale and masked off on reading.
    acc: u64,
    acc_bits: u32,
}

impl<'a> BitReadStream<'a> {
    /// A stream over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            acc: 0,
            acc_bits: 0,
        }
    }

    /// Bits not yet read.
    pub fn bits_left(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64 * 8 + u64::from(self.acc_bits)
    }

    /// Checks that only the final byte's zero padding is left: a writer never leaves more.
    pub fn finish(mut self) -> Result<(), CodecError> {
        let left = self.bits_left();
        if left >= 8 || self.get(left as u32)? != 0 {
            return Err(CodecError::Invalid {
                field: "trailing bytes",
            });
        }
        Ok(())
    }

    /// Moves whole bytes into the accumulator until it holds more than 56 bits or the input ends. Called only
    /// with fewer than 32 bits held, so at least four bytes fit.
    #[inline(never)]
    fn refill(&mut self) {
        let room = (64 - self.acc_bits) / 8;
        if let Some(word) = self
            .bytes
            .get(self.pos..)
            .and_then(|rest| rest.first_chunk::<8>())
        {
            let take = room * 8;
            // 32 <= take <= 64: both shifts stay below 64 (the left one split in two).
            self.acc = ((self.acc << (take - 1)) << 1) | (u64::from_be_bytes(*word) >> (64 - take));
            self.acc_bits += take;
            self.pos += room as usize;
        } else {
            while self.acc_bits <= 56 {
                let Some(&b) = self.bytes.get(self.pos) else {
                    break;
                };
                self.acc = (self.acc << 8) | u64::from(b);
                self.acc_bits += 8;
                self.pos += 1;
            }
        }
    }

    #[inline(always)]
    fn get(&mut self, bits: u32) -> Result<u32, CodecError> {
        if bits == 0 {
            return Ok(0);
        }
        if self.acc_bits < bits {
            self.refill();
            if self.acc_bits < bits {
                return Err(CodecError::Truncated);
            }
        }
        self.acc_bits -= bits;
        let v = (self.acc >> self.acc_bits) & ((1u64 << bits) - 1);
        Ok(v as u32)
    }
}

impl Stream for BitReadStream<'_> {
    const READING: bool = true;
    const CONTEXTS: bool = false;

    #[inline]
    fn bool(&mut self, _ctx: Ctx, value: &mut bool) -> Result<(), CodecError> {
        *value = self.get(1)? != 0;
        Ok(())
    }

    #[inline]
    fn int(&mut self, ctx: Ctx, value: &mut i32, min: i32, max: i32) -> Result<(), CodecError> {
        let span = (i64::from(max) - i64::from(min)) as u32;
        let v = i64::from(min) + i64::from(self.get(bits_for(span))?);
        check_range(ctx, v, min, max)?;
        *value = v as i32;
        Ok(())
    }

    #[inline]
    fn bits(&mut self, ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError> {
        if bits > 32 {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        *value = self.get(bits)?;
        Ok(())
    }

    #[inline(always)]
    fn peek(&mut self, bits: u32) -> Option<u64> {
        // A refill leaves more than 56 bits held unless the input ends first.
        if !(1..=56).contains(&bits) {
            return None;
        }
        if self.acc_bits < bits {
            self.refill();
            if self.acc_bits < bits {
                return None;
            }
        }
        Some((self.acc >> (self.acc_bits - bits)) & ((1u64 << bits) - 1))
    }

    #[inline(always)]
    fn skip(&mut self, bits: u32) {
        self.acc_bits -= bits.min(self.acc_bits);
    }

    /// The one bits at the top of the accumulator counted at once, instead of [`Stream::take_ones`] a group at a
    /// time: a run of unchanged entries is a few words of ones.
    #[inline]
    fn take_ones_repeated(&mut self, bits: u32, most: u32) -> u32 {
        if !(1..=32).contains(&bits) {
            return 0;
        }
        let mut taken = 0;
        while taken < most {
            if self.acc_bits < bits {
                self.refill();
                if self.acc_bits < bits {
                    break;
                }
            }
            let held = self.acc_bits;
            // 1 <= held <= 64: the shift is below 64. The bits below the held ones come in as zeros.
            let ones = (!(self.acc << (64 - held))).leading_zeros().min(held);
            let groups = (ones / bits).min(most - taken);
            self.acc_bits -= groups * bits;
            taken += groups;
            // A zero among the held bits ends the run; held ones all taken, the next word may go on with it.
            if ones < held {
                break;
            }
        }
        taken
    }

    #[inline(always)]
    fn packed(&mut self, ctx: Ctx, value: &mut u64, bits: u32) -> Result<(), CodecError> {
        if bits > 64 {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        *value = if bits > 32 {
            let high = u64::from(self.get(bits - 32)?);
            high << 32 | u64::from(self.get(32)?)
        } else {
            u64::from(self.get(bits)?)
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::MeasureStream;

    const C: Ctx = Ctx::new(0, "test");

    fn message<S: Stream>(s: &mut S, v: &mut (bool, i32, u32, u16)) -> Result<(), CodecError> {
        s.bool(C, &mut v.0)?;
        s.int(C, &mut v.1, -1000, 1000)?;
        s.bits(C, &mut v.2, 32)?;
        s.u16(C, &mut v.3)
    }

    #[test]
    fn round_trip_and_measure_agree() {
        let mut value = (true, -777, 0xdead_beef, 65535);
        let mut w = BitWriteStream::new();
        message(&mut w, &mut value).unwrap();
        let written = w.bits_written();
        let mut m = MeasureStream::new();
        message(&mut m, &mut value).unwrap();
        assert_eq!(m.bits_counted(), written);
        let bytes = w.finish();
        assert_eq!(bytes.len() as u64, written.div_ceil(8));
        let mut back = (false, 0, 0, 0);
        message(&mut BitReadStream::new(&bytes), &mut back).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn truncated_input_is_an_error() {
        let mut value = (true, 5, 7, 9);
        let mut w = BitWriteStream::new();
        message(&mut w, &mut value).unwrap();
        let bytes = w.finish();
        let mut back = (false, 0, 0, 0);
        let r = message(
            &mut BitReadStream::new(&bytes[..bytes.len() - 2]),
            &mut back,
        );
        assert_eq!(r, Err(CodecError::Truncated));
    }

    #[test]
    fn out_of_range_read_is_invalid() {
        // 11 bits of all ones decode to min + 2047, outside -1000..=1000.
        let bytes = [0xff; 4];
        let mut v = 0;
        let r = BitReadStream::new(&bytes).int(C, &mut v, -1000, 1000);
        assert_eq!(r, Err(CodecError::Invalid { field: "test" }));
    }

    #[test]
    fn long_streams_of_odd_widths_round_trip() {
        let fields: Vec<(u32, u32)> = (0..500u32)
            .map(|i| {
                let w = 1 + i % 32;
                (i.wrapping_mul(2_654_435_761) & (u32::MAX >> (32 - w)), w)
            })
            .collect();
        let mut w = BitWriteStream::new();
        for &(v, n) in &fields {
            w.bits(C, &mut v.clone(), n).unwrap();
        }
        let total = w.bits_written();
        let bytes = w.finish();
        let mut r = BitReadStream::new(&bytes);
        for &(v, n) in &fields {
            let mut x = 0;
            r.bits(C, &mut x, n).unwrap();
            assert_eq!(x, v, "width {n}");
        }
        assert_eq!(r.bits_left(), bytes.len() as u64 * 8 - total);
    }

    /// Packed fields of every width up to 64, at every alignment the narrow fields between them leave, are the
    /// bits a bit-by-bit writer gives, and read back.
    #[test]
    fn packed_fields_of_any_width_are_their_bits_one_by_one() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(64);
        // Two whole words first, each into an empty accumulator.
        let words = [(0xDEAD_BEEF_0123_4567, 64), (u64::MAX, 64)];
        let fields: Vec<(u64, u32)> = words
            .into_iter()
            .chain((0..3000).map(|i| {
                let width = if i % 2 == 0 {
                    rng.random_range(0..=64)
                } else {
                    rng.random_range(0..8)
                };
                let value: u64 = rng.random();
                (value.checked_shr(64 - width).unwrap_or(0), width)
            }))
            .collect();
        let (mut packed, mut one_by_one) = (BitWriteStream::new(), BitWriteStream::new());
        for &(value, width) in &fields {
            packed.packed(C, &mut value.clone(), width).unwrap();
            for bit in (0..width).rev() {
                one_by_one.bool(C, &mut (value >> bit & 1 == 1)).unwrap();
            }
        }
        assert_eq!(packed.bits_written(), one_by_one.bits_written());
        let bytes = packed.finish();
        assert_eq!(bytes, one_by_one.finish());
        let mut r = BitReadStream::new(&bytes);
        for &(value, width) in &fields {
            let mut back = 0;
            r.packed(C, &mut back, width).unwrap();
            assert_eq!(back, value, "width {width}");
        }
        r.finish().unwrap();
    }

    #[test]
    fn every_cut_of_a_stream_is_truncated_not_a_panic() {
        // The reader takes 8 bytes at a time while 8 remain, then single bytes: every cut lands on one path or the
        // other, and each field read before the cut must still come back right.
        let fields: Vec<(u32, u32)> = (0..40u32)
            .map(|i| (i * 7919 % (1 << (1 + i % 20)), 1 + i % 20))
            .collect();
        let mut w = BitWriteStream::new();
        for &(v, n) in &fields {
            w.bits(C, &mut v.clone(), n).unwrap();
        }
        let bytes = w.finish();
        for cut in 0..bytes.len() {
            let mut r = BitReadStream::new(&bytes[..cut]);
            let mut read = 0u64;
            let mut failed = None;
            for &(v, n) in &fields {
                let mut x = 0;
                match r.bits(C, &mut x, n) {
                    Ok(()) => {
                        assert_eq!(x, v, "cut {cut}");
                        read += u64::from(n);
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            assert_eq!(failed, Some(CodecError::Truncated), "cut {cut}");
            assert!(read <= cut as u64 * 8);
        }
    }

    #[test]
    fn ones_are_taken_only_when_all_are_there() {
        let mut w = BitWriteStream::new();
        for &(v, n) in &[(0b1111u32, 4u32), (0b1110, 4), (0b111, 3), (0b1, 1)] {
            w.bits(C, &mut v.clone(), n).unwrap();
        }
        let bytes = w.finish();
        let mut r = BitReadStream::new(&bytes);
        assert!(r.take_ones(4));
        // 1110: not all ones, and nothing read.
        assert!(!r.take_ones(4));
        assert_eq!(r.bits_left(), 16 - 4);
        let mut x = 0;
        r.bits(C, &mut x, 4).unwrap();
        assert_eq!(x, 0b1110);
        // Four ones, then the zero padding: three are there, not four.
        assert!(!r.take_ones(5));
        assert!(r.take_ones(4));
        assert!(!r.take_ones(1));
        assert!(!r.take_ones(0) && !r.take_ones(33));
        assert_eq!(r.bits_left(), 4);
        // Past the end: nothing to take.
        let mut empty = BitReadStream::new(&[]);
        assert!(!empty.take_ones(1));
    }

    #[test]
    fn ones_taken_at_once_are_the_ones_taken_group_by_group() {
        // Streams of long runs of ones broken by a few zeros, cut anywhere: taking groups of ones at once must take
        // as many as taking them one group at a time, and leave the reader where that leaves it.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(10);
        for trial in 0..2000 {
            let mut w = BitWriteStream::new();
            for _ in 0..rng.random_range(0..40) {
                let mut v = if rng.random_bool(0.05) {
                    rng.random_range(0..=u32::MAX)
                } else {
                    u32::MAX
                };
                let n = rng.random_range(1..=32);
                w.bits(C, &mut (v >> (32 - n)), n).unwrap();
                v = 0;
                if rng.random_bool(0.1) {
                    w.bits(C, &mut v, 1).unwrap();
                }
            }
            let bytes = w.finish();
            let bits = rng.random_range(0..=34);
            let most = rng.random_range(0..300);
            let (mut at_once, mut by_group) =
                (BitReadStream::new(&bytes), BitReadStream::new(&bytes));
            // Two reads at different positions: from the start, and after a few bits.
            for _ in 0..2 {
                let taken = at_once.take_ones_repeated(bits, most);
                let mut expected = 0;
                while expected < most && by_group.take_ones(bits) {
                    expected += 1;
                }
                assert_eq!(taken, expected, "trial {trial}");
                assert_eq!(at_once.bits_left(), by_group.bits_left(), "trial {trial}");
                let skip = rng.random_range(1..8).min(at_once.bits_left() as u32);
                let (mut a, mut b) = (0, 0);
                if skip > 0 {
                    at_once.bits(C, &mut a, skip).unwrap();
                    by_group.bits(C, &mut b, skip).unwrap();
                }
                assert_eq!(a, b, "trial {trial}");
            }
        }
    }

    #[test]
    fn a_peek_shows_the_bits_a_read_takes_and_takes_none() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(56);
        for trial in 0..500 {
            let bytes: Vec<u8> = (0..rng.random_range(0..24)).map(|_| rng.random()).collect();
            let (mut peeking, mut reading) =
                (BitReadStream::new(&bytes), BitReadStream::new(&bytes));
            loop {
                let bits = rng.random_range(0..=60);
                let left = peeking.bits_left();
                match peeking.peek(bits) {
                    Some(ahead) => {
                        assert!(
                            (1..=56).contains(&bits) && u64::from(bits) <= left,
                            "trial {trial}"
                        );
                        assert_eq!(peeking.bits_left(), left, "trial {trial}");
                        let used = rng.random_range(0..=bits);
                        let mut read = 0;
                        reading.packed(C, &mut read, used).unwrap();
                        assert_eq!(read, ahead >> (bits - used), "trial {trial}");
                        peeking.skip(used);
                        assert_eq!(peeking.bits_left(), reading.bits_left(), "trial {trial}");
                    }
                    None => {
                        assert!(
                            !(1..=56).contains(&bits) || u64::from(bits) > left,
                            "trial {trial}"
                        );
                        assert_eq!(peeking.bits_left(), left, "trial {trial}");
                        if bits > 0 && u64::from(bits) > left {
                            break;
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn writing_too_wide_a_value_is_invalid() {
        let mut w = BitWriteStream::new();
        assert!(w.bits(C, &mut 8, 3).is_err());
        assert!(w.int(C, &mut 1001, -1000, 1000).is_err());
    }
}
