//! Frames: `COBS(message ‖ CRC-32) 0x00`.

use crate::message::Message;
use crate::{MAX_FRAME, MAX_PAYLOAD, ProtoError, cobs, crc::crc32};

/// Writes `message` as a complete frame (delimiter included) into `out`;
/// returns the frame's length.
pub fn encode_frame(message: &Message<'_>, out: &mut [u8]) -> Result<usize, ProtoError> {
    let mut raw = [0u8; MAX_PAYLOAD + 4];
    let n = message.write(&mut raw[..MAX_PAYLOAD])?;
    let crc = crc32(&raw[..n]);
    raw[n..n + 4].copy_from_slice(&crc.to_le_bytes());
    let len = cobs::encode(&raw[..n + 4], out).ok_or(ProtoError::BufferTooSmall)?;
    *out.get_mut(len).ok_or(ProtoError::BufferTooSmall)? = 0;
    Ok(len + 1)
}

/// Reads a frame (with or without its trailing delimiter), using `scratch`
/// for the decoded bytes the message borrows from.
pub fn decode_frame<'s>(frame: &[u8], scratch: &'s mut [u8]) -> Result<Message<'s>, ProtoError> {
    Message::read(unframe(frame, scratch)?)
}

/// [`decode_frame`] for a target: only the host's requests are read (any
/// other message is [`ProtoError::NotARequest`]), so a firmware links the
/// layouts of the requests alone.
pub fn decode_request_frame<'s>(
    frame: &[u8],
    scratch: &'s mut [u8],
) -> Result<Message<'s>, ProtoError> {
    Message::read_request(unframe(frame, scratch)?)
}

/// The tag and payload of a frame whose COBS and CRC hold.
fn unframe<'s>(frame: &[u8], scratch: &'s mut [u8]) -> Result<&'s [u8], ProtoError> {
    let frame = frame.strip_suffix(&[0]).unwrap_or(frame);
    let n = cobs::decode(frame, scratch).ok_or(ProtoError::Cobs)?;
    if n < 5 {
        return Err(ProtoError::Truncated);
    }
    let (body, crc) = scratch[..n].split_at(n - 4);
    let expected = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let actual = crc32(body);
    if expected != actual {
        return Err(ProtoError::Crc { expected, actual });
    }
    Ok(&scratch[..n - 4])
}

/// Collects bytes from a stream into frames. Bytes of a frame longer than
/// [`MAX_FRAME`] are dropped and reported once as [`ProtoError::Oversized`].
#[derive(Debug)]
pub struct FrameAccumulator {
    buf: [u8; MAX_FRAME],
    len: usize,
    overflowed: bool,
}

impl Default for FrameAccumulator {
    fn default() -> Self {
        FrameAccumulator {
            buf: [0; MAX_FRAME],
            len: 0,
            overflowed: false,
        }
    }
}

impl FrameAccumulator {
    /// Feeds one byte; at a delimiter returns the finished frame's bytes
    /// (without the delimiter), or the oversize error.
    pub fn push(&mut self, byte: u8) -> Option<Result<&[u8], ProtoError>> {
        if byte == 0 {
            let len = core::mem::take(&mut self.len);
            if core::mem::take(&mut self.overflowed) {
                return Some(Err(ProtoError::Oversized));
            }
            if len == 0 {
                return None; // back-to-back delimiters: nothing between them
            }
            return Some(Ok(&self.buf[..len]));
        }
        if self.len == self.buf.len() {
            self.overflowed = true;
        } else if !self.overflowed {
            self.buf[self.len] = byte;
            self.len += 1;
        }
        None
    }

    /// Bytes of an unfinished frame held now.
    pub fn pending(&self) -> usize {
        self.len
    }
}
