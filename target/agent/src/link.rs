//! Frames out to the host over the wire, and the wire's failures.

use core::fmt;

use embedded_io::{Error as _, ErrorKind, Write};
use hilt_proto::{ErrorCode, MAX_FRAME, Message, ProtoError, TargetError, encode_frame};
use hilt_runtime::wire_form::FormWriter;

use crate::notes::Note;

/// Why a session stopped talking: the wire failed, or a message could not
/// be framed. The wire's own error is kept as its `embedded_io` kind, so
/// this stays `Copy` whatever the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum WireError {
    /// Reading from the host failed.
    Read(ErrorKind),
    /// Writing to the host failed.
    Write(ErrorKind),
    /// The wire reached its end (a read returned no bytes): on a target
    /// this does not happen; an in-memory wire in a test ends here.
    Closed,
    /// A message did not fit a frame (a bug: every message the agent sends
    /// is sized to fit).
    Frame(ProtoError),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Read(kind) => write!(f, "reading from the host failed: {kind}"),
            WireError::Write(kind) => write!(f, "writing to the host failed: {kind}"),
            WireError::Closed => f.write_str("the wire to the host is closed"),
            WireError::Frame(e) => write!(f, "a message did not fit a frame: {e:?}"),
        }
    }
}

impl core::error::Error for WireError {}

impl WireError {
    /// What failed, in words that need no formatting (for a firmware's last
    /// line, which must not link `core::fmt`).
    pub fn as_str(&self) -> &'static str {
        match self {
            WireError::Read(_) => "reading from the host failed",
            WireError::Write(_) => "writing to the host failed",
            WireError::Closed => "the wire to the host is closed",
            WireError::Frame(_) => "a message did not fit a frame",
        }
    }
}

/// The outgoing half: frames, written whole and flushed one at a time (the
/// host waits for each answer, so a buffered serial port must not hold one).
pub(crate) struct Link<'s, W> {
    pub(crate) wire: W,
    /// Address of the arena's first byte (canary offsets are relative to it).
    pub(crate) arena_base: u32,
    frame: &'s mut [u8; MAX_FRAME],
    #[cfg(feature = "fault-injection")]
    corrupted: bool,
}

impl<'s, W: Write> Link<'s, W> {
    pub(crate) fn new(wire: W, arena_base: u32, frame: &'s mut [u8; MAX_FRAME]) -> Self {
        Link {
            wire,
            arena_base,
            frame,
            #[cfg(feature = "fault-injection")]
            corrupted: false,
        }
    }

    pub(crate) fn send(&mut self, message: &Message<'_>) -> Result<(), WireError> {
        let n = encode_frame(message, self.frame).map_err(WireError::Frame)?;
        #[cfg(feature = "fault-injection")]
        if crate::faults::armed(crate::faults::Fault::CorruptFrame) {
            crate::faults::corrupt_first_output(message, &mut self.frame[..n], &mut self.corrupted);
        }
        write_frame(&mut self.wire, &self.frame[..n])
    }

    pub(crate) fn error(&mut self, code: ErrorCode, op: u16, detail: u32) -> Result<(), WireError> {
        self.send(&Message::Error(TargetError { code, op, detail }))
    }

    /// A fixed sentence, as a `Log`.
    pub(crate) fn log(&mut self, text: &str) -> Result<(), WireError> {
        self.send(&Message::Log(text))
    }

    /// A sentence as values (a `Note`): the host writes the words. A body
    /// that does not fit is sent cut, and the host says it could not read it.
    pub(crate) fn note(&mut self, note: &Note) -> Result<(), WireError> {
        // With `defmt`, the firmware's own log says it too (the host
        // decodes it beside the session).
        #[cfg(feature = "defmt")]
        match note {
            Note::Start {
                board,
                model,
                model_bytes,
                arena_bytes,
                cycles_from,
            } => defmt::info!(
                "hilt-agent up on {=str}: model {=str} ({=u32} bytes), arena {=u32} bytes, cycles from {=str}",
                board,
                model,
                model_bytes,
                arena_bytes,
                cycles_from
            ),
            other => defmt::error!("hilt-agent: {}", other),
        }
        let mut body = [0u8; NOTE_BYTES];
        let mut w = FormWriter::new(&mut body);
        note.put(&mut w);
        let body = w.written();
        self.send(&Message::Note {
            kind: note.kind(),
            body,
        })
    }
}

/// Room for a note's body: the longest is a kernel's refusal whose
/// parameter text is at the wire form's longest (255 bytes), with a cut
/// custom code (about 300 bytes; `the_longest_notes_fit_the_body`).
const NOTE_BYTES: usize = 400;

fn write_frame<W: Write>(wire: &mut W, frame: &[u8]) -> Result<(), WireError> {
    wire.write_all(frame)
        .map_err(|e| WireError::Write(e.kind()))?;
    wire.flush().map_err(|e| WireError::Write(e.kind()))
}

/// Sends `line` as one `Log` frame on `wire`: for a panic handler, which
/// has no session left to ask (the host prints it with the run's error).
pub fn send_log<W: Write>(wire: &mut W, line: &str) -> Result<(), WireError> {
    let mut frame = [0u8; MAX_FRAME];
    let n = encode_frame(&Message::Log(line), &mut frame).map_err(WireError::Frame)?;
    write_frame(wire, &frame[..n])
}

/// A fixed-size text line for panic reports and a firmware's own lines
/// (`push` texts and numbers, or `write!`; text past 160 bytes is cut,
/// never an error).
#[derive(Debug, Clone)]
pub struct Line {
    buf: [u8; 160],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            buf: [0; 160],
            len: 0,
        }
    }
}

impl Line {
    /// Appends `text` (cut where the line is full).
    pub fn push(&mut self, text: &str) -> &mut Self {
        let n = text.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&text.as_bytes()[..n]);
        self.len += n;
        self
    }

    /// Appends `value` in decimal, without `core::fmt` (whose machinery a
    /// firmware built for size leaves out).
    pub fn push_decimal(&mut self, value: u32) -> &mut Self {
        let mut digits = [0u8; 10];
        let mut at = digits.len();
        let mut rest = value;
        loop {
            at -= 1;
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        // ASCII digits only.
        self.push(core::str::from_utf8(&digits[at..]).unwrap_or(""))
    }

    /// Appends `value` as `0x` and eight hex digits, without `core::fmt`.
    pub fn push_hex(&mut self, value: u32) -> &mut Self {
        let mut digits = *b"0x00000000";
        for (i, digit) in digits[2..].iter_mut().enumerate() {
            let nibble = (value >> (28 - 4 * i)) & 0xF;
            *digit = b"0123456789abcdef"[nibble as usize];
        }
        // ASCII digits only.
        self.push(core::str::from_utf8(&digits).unwrap_or(""))
    }

    /// The text so far (cut at a character boundary).
    pub fn as_str(&self) -> &str {
        match core::str::from_utf8(&self.buf[..self.len]) {
            Ok(s) => s,
            // A multi-byte character cut at the end: keep what is whole.
            Err(e) => core::str::from_utf8(&self.buf[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use hilt_runtime::interpreter::{CustomCode, InterpreterError, OpName};

    #[test]
    fn hex_is_eight_digits() {
        let mut line = super::Line::default();
        line.push("pc ")
            .push_hex(0x1234)
            .push(" ")
            .push_hex(0xF000_00AB);
        assert_eq!(line.as_str(), "pc 0x00001234 0xf00000ab");
    }
    use hilt_runtime::kernels::KernelError;
    use hilt_runtime::model::{ModelError, Site};

    use super::*;

    /// The longest notes the agent sends fit its body buffer whole: a
    /// kernel's refusal with a cut custom code and a parameter text at the
    /// wire form's longest (255 bytes), and a model's error naming a field.
    #[test]
    fn the_longest_notes_fit_the_body() {
        let what: &'static str = Box::leak("w".repeat(300).into_boxed_str());
        let code = OpName::Custom(CustomCode::new(&"c".repeat(40)));
        let notes = [
            Note::Interpreter(InterpreterError::Kernel {
                op: u32::MAX,
                code,
                error: KernelError::UnsupportedParameter { what },
            }),
            Note::Model(ModelError::IndexOutOfRange {
                site: Site::Operator {
                    subgraph: u32::MAX,
                    op: u32::MAX,
                },
                field: what,
                entry: u32::MAX,
                value: i64::MIN,
                len: u32::MAX,
            }),
        ];
        for note in notes {
            let mut body = [0u8; NOTE_BYTES];
            let mut w = FormWriter::new(&mut body);
            note.put(&mut w);
            assert!(!w.overflowed(), "{note:?}");
        }
    }

    #[test]
    fn a_line_cuts_and_writes_decimals_without_fmt() {
        let mut line = Line::default();
        line.push("at ")
            .push_decimal(0)
            .push(":")
            .push_decimal(u32::MAX);
        assert_eq!(line.as_str(), "at 0:4294967295");
        line.push(&"x".repeat(200));
        assert_eq!(line.as_str().len(), 160);
    }
}
