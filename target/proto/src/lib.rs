#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![doc = include_str!("../README.md")]

pub mod armed_faults;
pub mod cobs;
pub mod crc;
pub mod frame;
pub mod last_words;
pub mod ledger;
pub mod message;
pub mod model_slot;

pub use frame::{FrameAccumulator, decode_frame, decode_request_frame, encode_frame};
pub use ledger::EngineLedger;
pub use message::{
    AccelFault, ErrorCode, Hello, JobList, JobTimes, Message, NoteKind, OffloadMode, PlanEntry,
    TargetError,
};

/// The protocol version this crate speaks; `Hello` carries it and the host
/// refuses a firmware that speaks another.
pub const PROTOCOL_VERSION: u16 = 3;

/// The largest message payload (before framing). Chunked messages carry at
/// most [`MAX_CHUNK`] data bytes so that they fit.
pub const MAX_PAYLOAD: usize = 1024;

/// The largest data chunk in `LoadInput` / `OutputChunk`.
pub const MAX_CHUNK: usize = 960;

/// The largest frame on the wire, delimiter included.
pub const MAX_FRAME: usize = cobs::max_encoded_len(MAX_PAYLOAD + 4) + 1;

/// Why a frame could not be made or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ProtoError {
    /// The frame's COBS encoding is invalid.
    Cobs,
    /// The frame is shorter than a tag and a CRC.
    Truncated,
    /// The CRC does not match: the frame was corrupted on the way.
    Crc {
        /// CRC carried by the frame.
        expected: u32,
        /// CRC of what arrived.
        actual: u32,
    },
    /// A frame longer than [`MAX_FRAME`] (its bytes were dropped).
    Oversized,
    /// A tag no message has.
    UnknownTag(u8),
    /// A message the host does not send, where only the host's requests are
    /// read ([`decode_request_frame`]).
    NotARequest(u8),
    /// A payload whose length does not fit its message.
    BadLength {
        /// The message tag.
        tag: u8,
    },
    /// A text field that is not UTF-8.
    BadText,
    /// The output buffer is too small, or a payload exceeds [`MAX_PAYLOAD`].
    BufferTooSmall,
}

impl core::fmt::Display for ProtoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ProtoError::Cobs => f.write_str("invalid COBS framing"),
            ProtoError::Truncated => f.write_str("frame too short"),
            ProtoError::Crc { expected, actual } => {
                write!(
                    f,
                    "CRC mismatch (frame says {expected:#010x}, data gives {actual:#010x})"
                )
            }
            ProtoError::Oversized => write!(f, "frame longer than {MAX_FRAME} bytes"),
            ProtoError::UnknownTag(t) => write!(f, "unknown message tag {t:#04x}"),
            ProtoError::NotARequest(t) => write!(f, "message {t:#04x} is not a request"),
            ProtoError::BadLength { tag } => write!(f, "message {tag:#04x} has the wrong length"),
            ProtoError::BadText => f.write_str("text field is not UTF-8"),
            ProtoError::BufferTooSmall => f.write_str("buffer too small for the message"),
        }
    }
}

impl core::error::Error for ProtoError {}
