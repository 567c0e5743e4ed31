//! The bit-packing back end: each value takes exactly the bits its range needs, on bitstream-io.

use bitstream_io::{BigEndian, BitRead, BitReader, BitWrite, BitWriter};

use crate::error::CodecError;
use crate::quant::bits_for;
use crate::stream::{Ctx, Stream, check_range};

/// Writes values as fixed-width bit fields, most significant bit first.
pub struct BitWriteStream {
    writer: BitWriter<Vec<u8>, BigEndian>,
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

    /// A stream appending to `bytes` (which must be empty or byte-complete; its bits count as written).
    pub fn with_bytes(bytes: Vec<u8>) -> Self {
        let bits = bytes.len() as u64 * 8;
        Self {
            writer: BitWriter::endian(bytes, BigEndian),
            bits,
        }
    }

    /// Bits written so far.
    pub fn bits_written(&self) -> u64 {
        self.bits
    }

    /// Pads to a whole byte with zero bits and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        // Writing into a Vec cannot fail.
        let _ = self.writer.byte_align();
        self.writer.into_writer()
    }

    fn put(&mut self, value: u32, bits: u32) -> Result<(), CodecError> {
        if bits == 0 {
            return Ok(());
        }
        self.writer
            .write_var::<u32>(bits, value)
            .map_err(|_| CodecError::Overflow)?;
        self.bits += u64::from(bits);
        Ok(())
    }
}

impl Stream for BitWriteStream {
    const READING: bool = false;

    #[inline]
    fn bool(&mut self, _ctx: Ctx, value: &mut bool) -> Result<(), CodecError> {
        self.put(u32::from(*value), 1)
    }

    #[inline]
    fn int(&mut self, ctx: Ctx, value: &mut i32, min: i32, max: i32) -> Result<(), CodecError> {
        check_range(ctx, i64::from(*value), min, max)?;
        let span = (i64::from(max) - i64::from(min)) as u32;
        let offset = (i64::from(*value) - i64::from(min)) as u32;
        self.put(offset, bits_for(span))
    }

    #[inline]
    fn bits(&mut self, ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError> {
        if bits < 32 && *value >> bits != 0 {
            return Err(CodecError::Invalid { field: ctx.name });
        }
        self.put(*value, bits)
    }
}

/// Reads what [`BitWriteStream`] wrote; running out of bytes is [`CodecError::Truncated`].
pub struct BitReadStream<'a> {
    reader: BitReader<&'a [u8], BigEndian>,
    bits_left: u64,
}

impl<'a> BitReadStream<'a> {
    /// A stream over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            reader: BitReader::endian(bytes, BigEndian),
            bits_left: bytes.len() as u64 * 8,
        }
    }

    /// Bits not yet read.
    pub fn bits_left(&self) -> u64 {
        self.bits_left
    }

    fn get(&mut self, bits: u32) -> Result<u32, CodecError> {
        if bits == 0 {
            return Ok(0);
        }
        if u64::from(bits) > self.bits_left {
            return Err(CodecError::Truncated);
        }
        self.bits_left -= u64::from(bits);
        self.reader
            .read_var::<u32>(bits)
            .map_err(|_| CodecError::Truncated)
    }
}

impl Stream for BitReadStream<'_> {
    const READING: bool = true;

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
    fn bits(&mut self, _ctx: Ctx, value: &mut u32, bits: u32) -> Result<(), CodecError> {
        *value = self.get(bits)?;
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
    fn writing_too_wide_a_value_is_invalid() {
        let mut w = BitWriteStream::new();
        assert!(w.bits(C, &mut 8, 3).is_err());
        assert!(w.int(C, &mut 1001, -1000, 1000).is_err());
    }
}
