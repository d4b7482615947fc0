//! hilt-proto over RTT: frames written to down channel 0, frames read from
//! up channel 0, log lines collected from up channel 1.

use std::time::{Duration, Instant};

use hilt_proto::{FrameAccumulator, MAX_FRAME, Message, ProtoError, decode_frame, encode_frame};

use crate::memory::TargetMemory;
use crate::rtt::{Rtt, RttError};

/// Why talking to the firmware failed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// RTT or memory access failed (includes a lost connection).
    #[error(transparent)]
    Rtt(#[from] RttError),
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
}

/// A protocol session with one target.
pub struct Link<'m> {
    mem: &'m mut dyn TargetMemory,
    rtt: Rtt,
    accumulator: FrameAccumulator,
    frames: std::collections::VecDeque<Vec<u8>>,
    log_partial: Vec<u8>,
    /// Log lines the firmware wrote on up channel 1 (and `Log` messages).
    pub logs: Vec<String>,
    /// How often to look at the buffers.
    pub poll_interval: Duration,
}

impl std::fmt::Debug for Link<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("rtt", &self.rtt)
            .field("logs", &self.logs.len())
            .finish()
    }
}

impl<'m> Link<'m> {
    /// A session over an attached RTT control block.
    pub fn new(mem: &'m mut dyn TargetMemory, rtt: Rtt) -> Self {
        Link {
            mem,
            rtt,
            accumulator: FrameAccumulator::default(),
            frames: Default::default(),
            log_partial: Vec::new(),
            logs: Vec::new(),
            poll_interval: Duration::from_millis(1),
        }
    }

    /// Sends one message (waits while the down buffer is full).
    pub fn send(&mut self, message: &Message<'_>, timeout: Duration) -> Result<(), LinkError> {
        let mut frame = vec![0u8; MAX_FRAME];
        let n = encode_frame(message, &mut frame).map_err(LinkError::Frame)?;
        let mut sent = 0;
        let deadline = Instant::now() + timeout;
        while sent < n {
            self.mem.pause().map_err(RttError::from)?;
            let written = self.rtt.write_down(self.mem, 0, &frame[sent..n]);
            let pumped = self.pump_locked();
            self.mem.resume().map_err(RttError::from)?;
            sent += written?;
            pumped?;
            if sent < n {
                if Instant::now() > deadline {
                    return Err(LinkError::Timeout {
                        waiting_for: "room in the down buffer".into(),
                        timeout,
                    });
                }
                std::thread::sleep(self.poll_interval);
            }
        }
        Ok(())
    }

    /// Drains the up channels into the frame queue and log (core paused).
    fn pump_locked(&mut self) -> Result<(), LinkError> {
        let data = self.rtt.read_up(self.mem, 0)?;
        for byte in data {
            if let Some(frame) = self.accumulator.push(byte) {
                self.frames
                    .push_back(frame.map_err(LinkError::Frame)?.to_vec());
            }
        }
        if self.rtt.up.len() > 1 {
            let log = self.rtt.read_up(self.mem, 1)?;
            self.log_partial.extend_from_slice(&log);
            // Log lines are written whole; anything pending is one line.
            if !self.log_partial.is_empty() {
                self.logs.push(
                    String::from_utf8_lossy(&std::mem::take(&mut self.log_partial)).into_owned(),
                );
            }
        }
        Ok(())
    }

    fn pump(&mut self) -> Result<(), LinkError> {
        self.mem.pause().map_err(RttError::from)?;
        let result = self.pump_locked();
        self.mem.resume().map_err(RttError::from)?;
        result
    }

    /// Reads target memory (the core is paused for it if need be).
    pub fn read_memory(&mut self, addr: u32, len: usize) -> Result<Vec<u8>, LinkError> {
        let mut buf = vec![0u8; len];
        self.mem.pause().map_err(RttError::from)?;
        let read = self.mem.read(addr, &mut buf);
        self.mem.resume().map_err(RttError::from)?;
        read.map_err(RttError::from)?;
        Ok(buf)
    }

    /// Waits for the next message and hands it to `f`; `Log` messages are
    /// collected, not returned.
    pub fn recv<T>(
        &mut self,
        timeout: Duration,
        waiting_for: &str,
        mut f: impl FnMut(&Message<'_>) -> T,
    ) -> Result<T, LinkError> {
        let deadline = Instant::now() + timeout;
        let mut scratch = vec![0u8; MAX_FRAME];
        loop {
            while let Some(frame) = self.frames.pop_front() {
                let message = decode_frame(&frame, &mut scratch).map_err(LinkError::Frame)?;
                if let Message::Log(text) = message {
                    self.logs.push(text.to_string());
                    continue;
                }
                return Ok(f(&message));
            }
            if Instant::now() > deadline {
                return Err(LinkError::Timeout {
                    waiting_for: waiting_for.to_string(),
                    timeout,
                });
            }
            self.pump()?;
            if self.frames.is_empty() {
                std::thread::sleep(self.poll_interval);
            }
        }
    }
}
