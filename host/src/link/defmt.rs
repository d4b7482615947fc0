//! A firmware's defmt log: frames its `defmt` global logger writes to the
//! RTT up channel named `defmt` (defmt-rtt's name, and the one a firmware
//! that sets up its own channels gives it), decoded on the host with the
//! table in the firmware's ELF (its `.defmt` section) by `defmt-decoder`.
//!
//! ```
//! # fn demo(elf: &std::path::Path, channel_bytes: &[u8]) -> Result<(), hilt::link::defmt::DefmtError> {
//! use hilt::link::defmt::{DefmtDecoder, DefmtTable};
//!
//! // None: the firmware does not log with defmt.
//! if let Some(table) = DefmtTable::load(elf)? {
//!     let mut decoder = DefmtDecoder::new(&table);
//!     decoder.push(channel_bytes);
//!     for line in decoder.finish().lines {
//!         println!("{line}"); // 0.001234 INFO  model loaded: 1234 bytes
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! A run reads the channel with a [`DefmtReader`] (the link looks every
//! [`LOOK_EVERY`], and once more at the end). Nothing here fails a run: a
//! damaged frame, a table of another defmt version or a firmware without
//! the channel each become one line of the log's `problems`, and the
//! frames around a damaged one are still decoded.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use defmt_decoder::{DecodeError, Encoding, Frame, Locations, StreamDecoder, Table};

use crate::elf::FirmwareImage;
use crate::link::rtt::Rtt;
use crate::memory::TargetMemory;
use crate::outcome::{DefmtLine, DefmtLog};

/// The RTT up channel a firmware's defmt frames are read from.
pub const CHANNEL: &str = "defmt";

/// How often a run looks at the channel: each look stops the core (QEMU's
/// gdbstub reads memory only while it is stopped), and a few KiB of ring
/// hold many lines.
pub const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Problem lines kept per run; past them, one line counts the rest.
const MAX_PROBLEMS: usize = 16;

/// Why a firmware's defmt table cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DefmtError {
    /// The ELF could not be read.
    #[error("{path}: cannot read it for its defmt table: {source}")]
    Read {
        /// The ELF.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The ELF has defmt data the decoder refuses: another defmt wire
    /// format version, a `.defmt` section without a version symbol, a
    /// symbol that is not defmt's JSON.
    #[error("{path}: its defmt table cannot be used ({reason}); its defmt log is not decoded")]
    Table {
        /// The ELF.
        path: PathBuf,
        /// What the decoder said, on one line.
        reason: String,
    },
}

/// A firmware's defmt table: its format strings by index, and where each
/// log statement is when the ELF's debug information says.
pub struct DefmtTable {
    table: Table,
    locations: Locations,
    elf: PathBuf,
}

impl std::fmt::Debug for DefmtTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefmtTable")
            .field("elf", &self.elf)
            .field("encoding", &self.table.encoding())
            .field("locations", &self.locations.len())
            .finish_non_exhaustive()
    }
}

impl DefmtTable {
    /// The table of the ELF at `path`; `None` when it has no `.defmt`
    /// section (the firmware does not log with defmt).
    pub fn load(path: &Path) -> Result<Option<Self>, DefmtError> {
        let bytes = std::fs::read(path).map_err(|source| DefmtError::Read {
            path: path.into(),
            source,
        })?;
        Self::parse(path, &bytes)
    }

    /// The table of the ELF `bytes` (read from `path`, which errors name).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Option<Self>, DefmtError> {
        let refused = |e: anyhow::Error| DefmtError::Table {
            path: path.into(),
            reason: one_line(&format!("{e:#}")),
        };
        let Some(table) = Table::parse(bytes).map_err(refused)? else {
            return Ok(None);
        };
        // Locations come from DWARF the firmware may not carry (its
        // release profile keeps line tables only): without them a line
        // simply has no `file:line`.
        let locations = table.get_locations(bytes).unwrap_or_default();
        Ok(Some(DefmtTable {
            table,
            locations,
            elf: path.into(),
        }))
    }

    /// Whether the firmware's frames carry a timestamp
    /// (`defmt::timestamp!`).
    pub fn has_timestamp(&self) -> bool {
        self.table.has_timestamp()
    }

    fn line(&self, frame: &Frame<'_>) -> DefmtLine {
        DefmtLine {
            timestamp: frame.display_timestamp().map(|t| t.to_string()),
            level: frame.level().map(|l| l.as_str()),
            message: frame.display_message().to_string(),
            location: self
                .locations
                .get(&frame.index())
                .map(|l| format!("{}:{}", l.file.display(), l.line)),
        }
    }
}

/// Decodes one stream of defmt bytes, as they arrive.
pub struct DefmtDecoder<'t> {
    table: &'t DefmtTable,
    stream: Box<dyn StreamDecoder + Send + Sync + 't>,
    /// rzCOBS: the bytes of the frame not finished yet (frames end at a
    /// zero byte, so the host cuts them itself and can name a bad one).
    pending: Vec<u8>,
    /// Frames seen, decoded or not.
    frames: u64,
    /// Raw encoding after a bad frame: nothing says where the next one
    /// starts, so the rest is not decoded (bytes counted).
    lost_sync: Option<usize>,
    /// Bad frames past [`MAX_PROBLEMS`].
    unsaid: usize,
    log: DefmtLog,
}

impl std::fmt::Debug for DefmtDecoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefmtDecoder")
            .field("table", &self.table)
            .field("frames", &self.frames)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl<'t> DefmtDecoder<'t> {
    /// A decoder for a stream that starts now.
    pub fn new(table: &'t DefmtTable) -> Self {
        DefmtDecoder {
            table,
            stream: table.table.new_stream_decoder(),
            pending: Vec::new(),
            frames: 0,
            lost_sync: None,
            unsaid: 0,
            log: DefmtLog::default(),
        }
    }

    /// Decodes every frame `bytes` completes.
    pub fn push(&mut self, bytes: &[u8]) {
        if let Some(lost) = &mut self.lost_sync {
            *lost += bytes.len();
            return;
        }
        match self.table.table.encoding() {
            Encoding::Rzcobs => self.push_rzcobs(bytes),
            _ => self.push_raw(bytes),
        }
    }

    fn push_rzcobs(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte != 0 {
                self.pending.push(byte);
                continue;
            }
            // Zeros between frames (defmt writes one before its first).
            if self.pending.is_empty() {
                continue;
            }
            let frame = std::mem::take(&mut self.pending);
            self.stream.received(&frame);
            self.stream.received(&[0]);
            self.frames += 1;
            let decoded = self.stream.decode().map(|f| self.table.line(&f));
            match decoded {
                Ok(line) => self.log.lines.push(line),
                Err(e) => self.bad_frame(&frame, &e),
            }
        }
    }

    fn push_raw(&mut self, bytes: &[u8]) {
        self.stream.received(bytes);
        loop {
            let decoded = self.stream.decode().map(|f| self.table.line(&f));
            match decoded {
                Ok(line) => {
                    self.frames += 1;
                    self.log.lines.push(line);
                }
                Err(DecodeError::UnexpectedEof) => return,
                Err(e @ DecodeError::Malformed) => {
                    self.frames += 1;
                    self.bad_frame(&[], &e);
                    self.lost_sync = Some(0);
                    return;
                }
            }
        }
    }

    fn bad_frame(&mut self, frame: &[u8], e: &DecodeError) {
        if self.log.problems.len() >= MAX_PROBLEMS {
            self.unsaid += 1;
            return;
        }
        let bytes = if frame.is_empty() {
            String::new()
        } else {
            format!(" ({})", hex_preview(frame))
        };
        let after = match self.table.table.encoding() {
            Encoding::Rzcobs => "skipped; decoding goes on with the next frame".to_string(),
            _ => "the firmware's defmt encoding is raw, which cannot find the next frame: the rest of the log is not decoded".to_string(),
        };
        self.say(format!(
            "defmt frame {}{bytes} could not be decoded with {}'s table ({e}): {after}",
            self.frames,
            self.table.elf.display()
        ));
    }

    /// Adds a problem line (hilt's words about the log).
    fn say(&mut self, problem: String) {
        self.log.problems.push(problem);
    }

    /// The log: every decoded line, and a problem line for a frame left
    /// unfinished or bytes left undecoded.
    pub fn finish(mut self) -> DefmtLog {
        if self.unsaid > 0 {
            let n = self.unsaid;
            self.say(format!(
                "{n} more defmt frame{} could not be decoded",
                if n == 1 { "" } else { "s" }
            ));
        }
        if !self.pending.is_empty() {
            let n = self.pending.len();
            self.say(format!(
                "the defmt log ends inside a frame ({n} byte{} after the last whole one, not decoded)",
                if n == 1 { "" } else { "s" }
            ));
        }
        if let Some(lost) = self.lost_sync.filter(|&n| n > 0) {
            self.say(format!(
                "{lost} more bytes of defmt log arrived after it, not decoded"
            ));
        }
        self.log
    }
}

/// The first bytes of a frame, in hex, and how many there are.
fn hex_preview(frame: &[u8]) -> String {
    const SHOWN: usize = 12;
    let shown: Vec<String> = frame
        .iter()
        .take(SHOWN)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{} byte{}: {}{}",
        frame.len(),
        if frame.len() == 1 { "" } else { "s" },
        shown.join(" "),
        if frame.len() > SHOWN { " …" } else { "" }
    )
}

/// A multi-line message (the decoder's version mismatch says what to
/// install on a second line) as one line.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a run needs to read a firmware's defmt log, read from its ELF
/// before the run starts.
#[derive(Debug)]
pub enum DefmtSource {
    /// The firmware does not log with defmt (no `.defmt` section).
    None,
    /// Its table, and its RTT control block (`_SEGGER_RTT`).
    Rtt {
        /// The table.
        table: DefmtTable,
        /// The control block's address.
        block: u32,
    },
    /// It logs with defmt, but the log cannot be read: why, in one line.
    Unreadable(String),
}

impl DefmtSource {
    /// The defmt source of `image`.
    pub fn of(image: &FirmwareImage) -> Self {
        match DefmtTable::load(&image.path) {
            Ok(None) => DefmtSource::None,
            Err(e) => DefmtSource::Unreadable(e.to_string()),
            Ok(Some(table)) => match image.rtt_address {
                Some(block) => DefmtSource::Rtt { table, block },
                None => DefmtSource::Unreadable(format!(
                    "{} logs with defmt but has no RTT control block (`_SEGGER_RTT`): hilt reads defmt logs over RTT only",
                    image.path.display()
                )),
            },
        }
    }

    /// A reader for one run (`None`: nothing to read).
    pub fn reader(&self) -> Option<DefmtReader<'_>> {
        match self {
            DefmtSource::None => None,
            DefmtSource::Rtt { table, block } => Some(DefmtReader::new(table, *block)),
            DefmtSource::Unreadable(why) => Some(DefmtReader::stopped(why.clone())),
        }
    }
}

/// Where a reader is with the firmware's control block.
#[derive(Debug)]
enum Channel {
    /// The control block has not been seen initialised yet.
    Searching {
        /// Its address.
        block: u32,
    },
    /// Reading up channel `index`.
    Reading {
        /// The control block.
        rtt: Rtt,
        /// The channel.
        index: usize,
    },
    /// Nothing more is read (why is in the log's problems).
    Stopped,
}

/// Reads a firmware's defmt channel from its memory during a run. Once it
/// finds the channel it sets it to block the firmware while full (defmt-rtt
/// trims what does not fit otherwise, and a trimmed frame is lost): a
/// firmware that logs faster than the host looks waits for the next look.
#[derive(Debug)]
pub struct DefmtReader<'t> {
    decoder: Option<DefmtDecoder<'t>>,
    channel: Channel,
    last_look: Option<Instant>,
    /// Problems found before or without a decoder.
    problems: Vec<String>,
}

impl<'t> DefmtReader<'t> {
    /// A reader of the channel named [`CHANNEL`] in the control block at
    /// `block`, decoding with `table`.
    pub fn new(table: &'t DefmtTable, block: u32) -> Self {
        DefmtReader {
            decoder: Some(DefmtDecoder::new(table)),
            channel: Channel::Searching { block },
            last_look: None,
            problems: Vec::new(),
        }
    }

    /// A reader that reads nothing, for a log that cannot be read: its log
    /// says `why`.
    pub fn stopped(why: String) -> Self {
        DefmtReader {
            decoder: None,
            channel: Channel::Stopped,
            last_look: None,
            problems: vec![why],
        }
    }

    /// Whether it is time for another look (always for the first one and
    /// with `force`; never once stopped).
    pub fn wants_look(&self, force: bool) -> bool {
        !matches!(self.channel, Channel::Stopped)
            && (force || self.last_look.is_none_or(|t| t.elapsed() >= LOOK_EVERY))
    }

    /// Reading stops: the log says `why`.
    pub fn stop(&mut self, why: String) {
        self.problems.push(why);
        self.channel = Channel::Stopped;
    }

    /// Takes what the firmware wrote since the last look and decodes it.
    /// Memory must be accessible (between `pause` and `resume`); a failed
    /// access stops the reader (the log says where), never the run.
    pub fn look(&mut self, mem: &mut dyn TargetMemory) {
        self.last_look = Some(Instant::now());
        if let Channel::Searching { block } = self.channel {
            match find_channel(mem, block) {
                Ok(Some(found)) => self.channel = found,
                Ok(None) => return,
                Err(why) => return self.stop(why),
            }
        }
        let Channel::Reading { rtt, index } = &self.channel else {
            return;
        };
        match rtt.read_up(mem, *index) {
            Ok(bytes) => {
                if let Some(decoder) = &mut self.decoder {
                    decoder.push(&bytes);
                }
            }
            Err(e) => {
                let block = rtt.address;
                self.stop(format!(
                    "the defmt channel (RTT up channel {index} of the control block at {block:#010x}) could not be read: {e}; the log stops there"
                ));
            }
        }
    }

    /// The log read so far, with a line for a control block never seen.
    pub fn finish(self) -> DefmtLog {
        let mut log = self.decoder.map(DefmtDecoder::finish).unwrap_or_default();
        let mut problems = self.problems;
        if let Channel::Searching { block } = self.channel {
            problems.push(format!(
                "the firmware's RTT control block at {block:#010x} was never set up: no defmt log was read"
            ));
        }
        problems.append(&mut log.problems);
        log.problems = problems;
        log
    }
}

/// The defmt channel of the control block at `block`: `Ok(None)` while the
/// block is not set up; `Err` (one line) when it is corrupt or has no such
/// channel.
fn find_channel(mem: &mut dyn TargetMemory, block: u32) -> Result<Option<Channel>, String> {
    let rtt = match Rtt::find(mem, block) {
        Ok(Some(rtt)) => rtt,
        Ok(None) => return Ok(None),
        Err(e) => {
            return Err(format!(
                "the RTT control block at {block:#010x} cannot be read for the defmt log: {e}"
            ));
        }
    };
    match rtt.up_named(mem, CHANNEL) {
        Ok(Some(index)) => match rtt.block_when_full(mem, index) {
            Ok(()) => Ok(Some(Channel::Reading { rtt, index })),
            Err(e) => Err(format!(
                "the defmt channel (RTT up channel {index} at {block:#010x}) cannot be set to block when full: {e}"
            )),
        },
        Ok(None) => Err(format!(
            "the firmware's RTT control block at {block:#010x} has no up channel named \"{CHANNEL}\" (its up channels: {}): no defmt log was read",
            rtt.up_names(mem).join(", ")
        )),
        Err(e) => Err(format!(
            "the RTT channel names at {block:#010x} cannot be read for the defmt log: {e}"
        )),
    }
}

#[cfg(test)]
mod tests;
