//! AV1's low-overhead bitstream format (the specification's section 5.3):
//! the OBUs of a temporal unit, and the bits and numbers their headers are
//! written in.

use std::ops::Range;

pub(super) const OBU_SEQUENCE_HEADER: u8 = 1;
pub(super) const OBU_TEMPORAL_DELIMITER: u8 = 2;
pub(super) const OBU_FRAME_HEADER: u8 = 3;
pub(super) const OBU_TILE_GROUP: u8 = 4;
pub(super) const OBU_METADATA: u8 = 5;
pub(super) const OBU_FRAME: u8 = 6;
pub(super) const OBU_REDUNDANT_FRAME_HEADER: u8 = 7;
pub(super) const OBU_PADDING: u8 = 15;

/// Bits of a byte slice, most significant first.
pub(super) struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bits<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Bits { data, pos: 0 }
    }

    /// `f(n)`: an unsigned number of `n` bits (`n` <= 32).
    pub(super) fn f(&mut self, n: u32) -> Option<u32> {
        let mut v = 0u64;
        for _ in 0..n {
            let byte = *self.data.get(self.pos / 8)?;
            v = (v << 1) | u64::from((byte >> (7 - self.pos % 8)) & 1);
            self.pos += 1;
        }
        u32::try_from(v).ok()
    }

    pub(super) fn flag(&mut self) -> Option<bool> {
        self.f(1).map(|b| b == 1)
    }

    /// `uvlc()`: an Exp-Golomb-like variable length number.
    pub(super) fn uvlc(&mut self) -> Option<u32> {
        let mut zeros = 0u32;
        while !self.flag()? {
            zeros += 1;
            if zeros >= 32 {
                return Some(u32::MAX);
            }
        }
        Some(self.f(zeros)?.saturating_add((1u32 << zeros) - 1))
    }
}

/// `leb128()` at the start of `data`: the value and the bytes it took.
fn leb128(data: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in data.iter().take(8).enumerate() {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// One OBU of a temporal unit: its type, whether it has an extension and
/// the extension's temporal and spatial ids, its payload, and where the
/// whole OBU (header to payload's end) lies in the unit.
pub(super) struct Obu<'a> {
    pub(super) kind: u8,
    pub(super) extension: bool,
    pub(super) temporal_id: u32,
    pub(super) spatial_id: u32,
    pub(super) payload: &'a [u8],
    pub(super) span: Range<usize>,
}

/// The OBUs of a temporal unit in low-overhead format (as stored: every
/// OBU but perhaps the last carries its size).
pub(super) fn obus(mut data: &[u8]) -> Option<Vec<Obu<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while !data.is_empty() {
        let h = data[0];
        if h & 0x80 != 0 {
            return None;
        }
        let kind = (h >> 3) & 0xf;
        let ext = h & 0x04 != 0;
        let has_size = h & 0x02 != 0;
        let mut at = 1usize;
        let (mut temporal_id, mut spatial_id) = (0, 0);
        if ext {
            let e = *data.get(1)?;
            temporal_id = u32::from(e >> 5);
            spatial_id = u32::from((e >> 3) & 3);
            at = 2;
        }
        let size = if has_size {
            let (v, n) = leb128(data.get(at..)?)?;
            at += n;
            usize::try_from(v).ok()?
        } else {
            data.len() - at
        };
        let payload = data.get(at..at.checked_add(size)?)?;
        out.push(Obu {
            kind,
            extension: ext,
            temporal_id,
            spatial_id,
            payload,
            span: pos..pos + at + size,
        });
        pos += at + size;
        data = &data[at + size..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_read_numbers_most_significant_first() {
        let mut b = Bits::new(&[0b1011_0001, 0b0100_0000]);
        assert_eq!(b.f(1), Some(1));
        assert_eq!(b.f(3), Some(0b011));
        assert_eq!(b.f(6), Some(0b00_0101));
        // uvlc: "010" is 1.
        let mut u = Bits::new(&[0b0100_0000]);
        assert_eq!(u.uvlc(), Some(1));
        let mut short = Bits::new(&[0xff]);
        assert_eq!(short.f(9), None);
        assert_eq!(leb128(&[0x80, 0x01]), Some((128, 2)));
        assert_eq!(leb128(&[0x80]), None);
    }
}
