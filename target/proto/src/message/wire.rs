//! The little-endian primitives every message layout is made of: fixed
//! width integers, raw bytes, and byte strings with a `u16` length first.
//!
//! Shared by the encoder, the decoder and the records, so it sits below
//! all three. Each field of every frame passes through these, so they are
//! `#[inline]`: the encoder and decoder live in other modules (other
//! codegen units) and must still inline them as they did when all were one
//! file.

use crate::ProtoError;

/// Writes little-endian fields into a caller's buffer, from `at` on.
pub(super) struct Writer<'b> {
    pub(super) buf: &'b mut [u8],
    pub(super) at: usize,
}

impl Writer<'_> {
    #[inline]
    pub(super) fn bytes(&mut self, b: &[u8]) -> Result<(), ProtoError> {
        let end = self.at + b.len();
        self.buf
            .get_mut(self.at..end)
            .ok_or(ProtoError::BufferTooSmall)?
            .copy_from_slice(b);
        self.at = end;
        Ok(())
    }
    #[inline]
    pub(super) fn u8(&mut self, v: u8) -> Result<(), ProtoError> {
        self.bytes(&[v])
    }
    #[inline]
    pub(super) fn u16(&mut self, v: u16) -> Result<(), ProtoError> {
        self.bytes(&v.to_le_bytes())
    }
    #[inline]
    pub(super) fn u32(&mut self, v: u32) -> Result<(), ProtoError> {
        self.bytes(&v.to_le_bytes())
    }
    #[inline]
    pub(super) fn u64(&mut self, v: u64) -> Result<(), ProtoError> {
        self.bytes(&v.to_le_bytes())
    }
    /// A length-prefixed (u16) byte string.
    #[inline]
    pub(super) fn blob(&mut self, b: &[u8]) -> Result<(), ProtoError> {
        self.u16(u16::try_from(b.len()).map_err(|_| ProtoError::BufferTooSmall)?)?;
        self.bytes(b)
    }
}

/// Reads little-endian fields from a payload, from `at` on.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) at: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    pub(super) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.buf.get(self.at..self.at + n)?;
        self.at += n;
        Some(b)
    }
    #[inline]
    pub(super) fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }
    #[inline]
    pub(super) fn u16(&mut self) -> Option<u16> {
        let b = self.bytes(2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }
    #[inline]
    pub(super) fn u32(&mut self) -> Option<u32> {
        let b = self.bytes(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    #[inline]
    pub(super) fn u64(&mut self) -> Option<u64> {
        let b = self.bytes(8)?;
        Some(u64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }
    #[inline]
    pub(super) fn blob(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        self.bytes(n)
    }
    #[inline]
    pub(super) fn done(&self) -> bool {
        self.at == self.buf.len()
    }
}
