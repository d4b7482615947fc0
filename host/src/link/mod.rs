//! The links between host and firmware: hilt-proto over a byte pipe
//! ([`Wire`]), so the session above is the same whatever carries the bytes —
//! RTT buffers in target memory ([`RttWire`] over [`rtt`]: frames to down
//! channel 0, frames from up channel 0, a panic's text from up channel 1),
//! reached through a probe or QEMU's [`gdbstub`], or a serial line
//! ([`serial::SerialWire`]). Beside the session, a firmware's defmt log is
//! read from its RTT channel `defmt` wherever the wire reaches the target's
//! memory ([`defmt`]).

pub mod defmt;
pub mod gdbstub;
pub mod notes;
pub mod rtt;
pub mod serial;

use std::time::{Duration, Instant};

use hilt_proto::{FrameAccumulator, MAX_FRAME, Message, ProtoError, decode_frame, encode_frame};

use self::defmt::DefmtReader;
use self::rtt::{Rtt, RttError};
use crate::memory::{MemoryError, TargetMemory};

/// Why talking to the firmware failed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// RTT or memory access failed (includes a lost connection).
    #[error(transparent)]
    Rtt(#[from] RttError),
    /// The serial port failed (unplugged, QEMU gone, no such device).
    #[error("serial port {port}: {message}")]
    Serial {
        /// The device.
        port: String,
        /// What failed.
        message: String,
    },
    /// A frame arrived damaged.
    #[error("garbled frame from the target: {0}")]
    Frame(ProtoError),
    /// Nothing (or not the expected answer) arrived in time.
    #[error("the target did not answer {waiting_for} within {timeout:?}")]
    Timeout {
        /// What we waited for.
        waiting_for: String,
        /// How long.
        timeout: Duration,
    },
    /// The run was cancelled from outside (its time limit passed).
    #[error("cancelled while waiting for {0}")]
    Cancelled(String),
    /// The firmware sent its last words (a panic's message, its HardFault
    /// handler's line) and stopped.
    #[error("the firmware stopped: {0}")]
    FirmwareStopped(String),
}

impl From<MemoryError> for LinkError {
    fn from(e: MemoryError) -> Self {
        LinkError::Rtt(RttError::Memory(e))
    }
}

/// The host's end of the byte pipe to a firmware.
pub trait Wire {
    /// Writes what fits now of `out` (may be empty), appends what has
    /// arrived on the message stream to `incoming` and raw log text (RTT's
    /// up channel 1) to `log`; returns how many bytes of `out` were taken.
    fn transfer(
        &mut self,
        out: &[u8],
        incoming: &mut Vec<u8>,
        log: &mut Vec<u8>,
    ) -> Result<usize, LinkError>;

    /// The target's memory, where this wire can reach it (the host's own
    /// canary checks read it); `None` over a bare serial line.
    fn memory(&mut self) -> Option<&mut dyn TargetMemory>;
}

/// A borrowed wire is a wire (a session over a wire its owner keeps).
impl<W: Wire + ?Sized> Wire for &mut W {
    fn transfer(
        &mut self,
        out: &[u8],
        incoming: &mut Vec<u8>,
        log: &mut Vec<u8>,
    ) -> Result<usize, LinkError> {
        (**self).transfer(out, incoming, log)
    }

    fn memory(&mut self) -> Option<&mut dyn TargetMemory> {
        (**self).memory()
    }
}

/// RTT through a [`TargetMemory`]: each transfer is one pause of the core.
pub struct RttWire<'m> {
    mem: &'m mut dyn TargetMemory,
    rtt: Rtt,
}

impl std::fmt::Debug for RttWire<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RttWire").field("rtt", &self.rtt).finish()
    }
}

impl<'m> RttWire<'m> {
    /// RTT over an attached control block.
    pub fn new(mem: &'m mut dyn TargetMemory, rtt: Rtt) -> Self {
        RttWire { mem, rtt }
    }

    fn transfer_paused(
        &mut self,
        out: &[u8],
        incoming: &mut Vec<u8>,
        log: &mut Vec<u8>,
    ) -> Result<usize, LinkError> {
        let written = if out.is_empty() {
            0
        } else {
            self.rtt.write_down(self.mem, 0, out)?
        };
        incoming.extend(self.rtt.read_up(self.mem, 0)?);
        if self.rtt.up.len() > 1 {
            log.extend(self.rtt.read_up(self.mem, 1)?);
        }
        Ok(written)
    }
}

impl Wire for RttWire<'_> {
    fn transfer(
        &mut self,
        out: &[u8],
        incoming: &mut Vec<u8>,
        log: &mut Vec<u8>,
    ) -> Result<usize, LinkError> {
        self.mem.pause()?;
        let result = self.transfer_paused(out, incoming, log);
        self.mem.resume()?;
        result
    }

    fn memory(&mut self) -> Option<&mut dyn TargetMemory> {
        Some(&mut *self.mem)
    }
}

/// A protocol session with one target.
pub struct Link<'m> {
    wire: Box<dyn Wire + 'm>,
    accumulator: FrameAccumulator,
    frames: std::collections::VecDeque<Vec<u8>>,
    incoming: Vec<u8>,
    log_partial: Vec<u8>,
    /// Whether a whole valid frame has arrived yet. Before it, bytes that
    /// do not form a frame are line noise (a serial line opened mid-frame,
    /// a board's boot chatter) and are dropped; after it, a bad frame is an
    /// error.
    synced: bool,
    /// Bytes dropped before the first frame.
    pub noise: usize,
    cancel: Option<crate::cancel::KillSwitch>,
    /// Log lines the firmware wrote on up channel 1 (and `Log` messages).
    pub logs: Vec<String>,
    /// How often to look at the buffers while bytes arrive; while none
    /// do, the wait between looks doubles up to [`MAX_IDLE_POLL`].
    pub poll_interval: Duration,
    /// Bytes received so far (to tell an idle look from a busy one).
    received: usize,
    /// The firmware's defmt log, read beside the session.
    defmt: Option<DefmtReader<'m>>,
    /// A transfer failed: the wire is gone (no last look at the defmt log).
    wire_failed: bool,
}

/// The longest wait between two looks at an idle wire. Each look at an RTT
/// wire halts the core (QEMU's gdbstub reads memory only while it is
/// stopped), so looking every millisecond through a long invoke stops it
/// a thousand times a second, costing the guest and the host's CPU alike;
/// backing off to this bounds what an answer waits at 16 ms.
pub const MAX_IDLE_POLL: Duration = Duration::from_millis(16);

impl std::fmt::Debug for Link<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("synced", &self.synced)
            .field("logs", &self.logs.len())
            .finish()
    }
}

impl<'m> Link<'m> {
    /// A session over an attached RTT control block.
    pub fn new(mem: &'m mut dyn TargetMemory, rtt: Rtt) -> Self {
        Self::over(Box::new(RttWire::new(mem, rtt)))
    }

    /// A session over any wire.
    pub fn over(wire: Box<dyn Wire + 'm>) -> Self {
        Link {
            wire,
            accumulator: FrameAccumulator::default(),
            frames: Default::default(),
            incoming: Vec::new(),
            log_partial: Vec::new(),
            synced: false,
            noise: 0,
            cancel: None,
            logs: Vec::new(),
            poll_interval: Duration::from_millis(1),
            received: 0,
            defmt: None,
            wire_failed: false,
        }
    }

    /// Reads the firmware's defmt log with `reader` (none: the firmware
    /// has no defmt table), every [`defmt::LOOK_EVERY`] while the session
    /// waits, until [`take_defmt`](Self::take_defmt).
    pub fn read_defmt(&mut self, reader: Option<DefmtReader<'m>>) {
        self.defmt = reader;
    }

    /// The defmt log: a last look at the channel, then every line decoded
    /// and every problem met. `None` when there was no log to read.
    /// Over a wire that failed or a cancelled run (a target gone or
    /// stopped at its time limit), the log ends at the last look.
    pub fn take_defmt(&mut self) -> Option<crate::outcome::DefmtLog> {
        let cancelled = self.cancel.as_ref().is_some_and(|c| c.fired());
        if !self.wire_failed
            && !cancelled
            && let Err(e) = self.look_defmt(true)
            && let Some(reader) = &mut self.defmt
        {
            reader.stop(format!(
                "the target did not run again after the last look at its defmt log: {e}"
            ));
        }
        self.defmt.take().map(DefmtReader::finish)
    }

    /// Takes what the firmware wrote to its defmt channel, when it is time
    /// to (or `force`). The core is stopped for it where that is needed;
    /// only failing to let it run again is an error (the session could not
    /// go on): a look that fails otherwise stops the reader, not the run.
    fn look_defmt(&mut self, force: bool) -> Result<(), LinkError> {
        let Some(reader) = self.defmt.as_mut().filter(|r| r.wants_look(force)) else {
            return Ok(());
        };
        let Some(mem) = self.wire.memory() else {
            reader.stop(
                "the host does not reach this board's memory (a bare serial line): its defmt log over RTT is not read"
                    .to_string(),
            );
            return Ok(());
        };
        if let Err(e) = mem.pause() {
            reader.stop(format!(
                "the target could not be stopped to read its defmt log: {e}"
            ));
            return Ok(());
        }
        reader.look(mem);
        mem.resume()?;
        Ok(())
    }

    /// Ends every wait early, with [`LinkError::Cancelled`], once `switch`
    /// fires.
    pub fn cancel_with(&mut self, switch: crate::cancel::KillSwitch) {
        self.cancel = Some(switch);
    }

    fn check_cancelled(&self, waiting_for: &str) -> Result<(), LinkError> {
        // A firmware that sent its last words answers nothing more.
        if let Some(last) = self
            .logs
            .iter()
            .find(|l| hilt_proto::last_words::is_last_words(l))
        {
            let last = last.trim_end();
            return Err(LinkError::FirmwareStopped(
                match crate::backtrace::fault_status::describe(last) {
                    Some(words) => format!("{words}; its last words: {last}"),
                    None => last.to_string(),
                },
            ));
        }
        match &self.cancel {
            Some(c) if c.fired() => Err(LinkError::Cancelled(waiting_for.to_string())),
            _ => Ok(()),
        }
    }

    /// Sends one message (waits while the target's side is full).
    pub fn send(&mut self, message: &Message<'_>, timeout: Duration) -> Result<(), LinkError> {
        let mut frame = vec![0u8; MAX_FRAME];
        let n = encode_frame(message, &mut frame).map_err(LinkError::Frame)?;
        self.send_bytes(&frame[..n], timeout)
    }

    /// Sends raw bytes: a frame, or a lone delimiter that ends whatever
    /// partial frame the target holds (resynchronising a serial line).
    pub fn send_bytes(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), LinkError> {
        let mut sent = 0;
        let deadline = Instant::now() + timeout;
        while sent < bytes.len() {
            sent += self.pump(&bytes[sent..])?;
            if sent < bytes.len() {
                self.check_cancelled("room to send")?;
                if Instant::now() > deadline {
                    return Err(LinkError::Timeout {
                        waiting_for: "room to send".into(),
                        timeout,
                    });
                }
                std::thread::sleep(self.poll_interval);
            }
        }
        Ok(())
    }

    /// One transfer: writes what fits of `out`, splits what arrived into
    /// frames and log lines.
    fn pump(&mut self, out: &[u8]) -> Result<usize, LinkError> {
        let mut log = Vec::new();
        let written = match self.wire.transfer(out, &mut self.incoming, &mut log) {
            Ok(n) => n,
            Err(e) => {
                self.wire_failed = true;
                return Err(e);
            }
        };
        self.look_defmt(false)?;
        self.received += self.incoming.len() + log.len();
        for byte in std::mem::take(&mut self.incoming) {
            match self.accumulator.push(byte) {
                None => {}
                Some(Ok(frame)) => self.frames.push_back(frame.to_vec()),
                Some(Err(_)) if !self.synced => self.noise += 1,
                Some(Err(e)) => return Err(LinkError::Frame(e)),
            }
        }
        self.log_partial.extend_from_slice(&log);
        // Log lines are written whole; anything pending is one line.
        if !self.log_partial.is_empty() {
            self.logs
                .push(String::from_utf8_lossy(&std::mem::take(&mut self.log_partial)).into_owned());
        }
        Ok(written)
    }

    /// Lets the core run (it may be held at reset, as QEMU starts it), where
    /// the wire reaches the target's memory; RTT wires resume it anyway.
    pub fn resume_target(&mut self) -> Result<(), LinkError> {
        if let Some(mem) = self.wire.memory() {
            mem.resume()?;
        }
        Ok(())
    }

    /// Reads target memory, where the wire reaches it (the core is paused
    /// for it if need be); `None` when it does not.
    pub fn read_memory(&mut self, addr: u32, len: usize) -> Result<Option<Vec<u8>>, LinkError> {
        let Some(mem) = self.wire.memory() else {
            return Ok(None);
        };
        let mut buf = vec![0u8; len];
        mem.pause()?;
        let read = mem.read(addr, &mut buf);
        mem.resume()?;
        read?;
        Ok(Some(buf))
    }

    /// Waits for the next message and hands it to `f`; `Log` and `Note`
    /// messages are collected (as their words), not returned.
    pub fn recv<T>(
        &mut self,
        timeout: Duration,
        waiting_for: &str,
        mut f: impl FnMut(&Message<'_>) -> T,
    ) -> Result<T, LinkError> {
        self.recv_matching(timeout, waiting_for, |m| Some(f(m)))
    }

    /// Waits for the first message `f` picks (returns `Some` for), passing
    /// over the others (late answers to earlier requests), all within one
    /// `timeout`; `Log` and `Note` messages are collected, not handed to `f`.
    pub fn recv_matching<T>(
        &mut self,
        timeout: Duration,
        waiting_for: &str,
        mut f: impl FnMut(&Message<'_>) -> Option<T>,
    ) -> Result<T, LinkError> {
        let deadline = Instant::now() + timeout;
        let mut scratch = vec![0u8; MAX_FRAME];
        let mut idle = self.poll_interval;
        loop {
            while let Some(frame) = self.frames.pop_front() {
                let message = match decode_frame(&frame, &mut scratch) {
                    Ok(m) => m,
                    Err(_) if !self.synced => {
                        self.noise += frame.len() + 1;
                        continue;
                    }
                    Err(e) => return Err(LinkError::Frame(e)),
                };
                self.synced = true;
                match message {
                    Message::Log(text) => {
                        self.logs.push(text.to_string());
                        continue;
                    }
                    Message::Note { kind, body } => {
                        self.logs.push(notes::words(kind, body));
                        continue;
                    }
                    _ => {}
                }
                if let Some(picked) = f(&message) {
                    return Ok(picked);
                }
            }
            self.check_cancelled(waiting_for)?;
            if Instant::now() > deadline {
                return Err(LinkError::Timeout {
                    waiting_for: waiting_for.to_string(),
                    timeout,
                });
            }
            let before = self.received;
            self.pump(&[])?;
            if self.frames.is_empty() {
                std::thread::sleep(idle);
                idle = if self.received > before {
                    self.poll_interval
                } else {
                    (idle * 2).min(MAX_IDLE_POLL.max(self.poll_interval))
                };
            }
        }
    }
}
