//! A host-side RTT reader/writer over [`TargetMemory`], for targets where
//! probe-rs's own RTT cannot be used (QEMU's gdbstub has no probe-rs
//! `Core`).
//!
//! The SEGGER RTT control block: 16 bytes of id ("SEGGER RTT"), the number
//! of up and down channels (i32 each), then one 24-byte descriptor per
//! channel, up channels first: name pointer, buffer pointer, size, write
//! offset, read offset, flags. The target writes up buffers and advances
//! their write offset; the host reads and advances the read offset. Down
//! buffers are the other way round.

use std::time::{Duration, Instant};

use crate::memory::{MemoryError, TargetMemory};

const ID: &[u8; 10] = b"SEGGER RTT";
const HEADER: u32 = 24;
const DESCRIPTOR: u32 = 24;
/// Buffers larger than this mean the block is not what we think it is
/// (no microcontroller gives RTT 16 MiB).
const MAX_BUFFER: u32 = 16 << 20;
/// Channel counts beyond this mean the block is not what we think it is.
const MAX_CHANNELS: i32 = 16;
/// The longest channel name [`Rtt::up_names`] reads.
pub const MAX_NAME: usize = 32;

/// Why RTT could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RttError {
    /// Memory access failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The control block never appeared (firmware not started, hung or
    /// built without RTT).
    #[error("no RTT control block at {addr:#010x} after {waited:?}")]
    NotFound {
        /// Where it was expected (the `_SEGGER_RTT` symbol).
        addr: u32,
        /// How long we waited.
        waited: Duration,
    },
    /// The control block describes impossible channels.
    #[error("RTT control block is corrupt: {0}")]
    Corrupt(String),
    /// A channel the protocol needs does not exist.
    #[error("the firmware has no RTT {direction} channel {index}")]
    NoChannel {
        /// "up" or "down".
        direction: &'static str,
        /// Its index.
        index: usize,
    },
}

/// One channel's buffer as described in the control block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// Address of the channel's descriptor.
    pub descriptor: u32,
    /// Address of its ring buffer.
    pub buffer: u32,
    /// Buffer bytes.
    pub size: u32,
}

impl Channel {
    fn write_offset(&self) -> u32 {
        self.descriptor + 12
    }
    fn read_offset(&self) -> u32 {
        self.descriptor + 16
    }
    fn flags(&self) -> u32 {
        self.descriptor + 20
    }
}

/// A channel's mode, in the low two bits of its flags: block the writer
/// while the buffer is full (the others skip or trim what does not fit).
const MODE_MASK: u32 = 0b11;
const MODE_BLOCK_IF_FULL: u32 = 2;

/// An attached RTT control block.
#[derive(Debug, Clone)]
pub struct Rtt {
    /// Control block address.
    pub address: u32,
    /// Up (target → host) channels.
    pub up: Vec<Channel>,
    /// Down (host → target) channels.
    pub down: Vec<Channel>,
}

impl Rtt {
    /// Waits (up to `timeout`) for the firmware to initialise the control
    /// block at `address`, letting the core run between looks.
    pub fn attach(
        mem: &mut dyn TargetMemory,
        address: u32,
        timeout: Duration,
    ) -> Result<Self, RttError> {
        let start = Instant::now();
        loop {
            mem.pause()?;
            let found = Self::read_block(mem, address);
            mem.resume()?;
            match found {
                Ok(Some(rtt)) => return Ok(rtt),
                Ok(None) if start.elapsed() < timeout => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Ok(None) => {
                    return Err(RttError::NotFound {
                        addr: address,
                        waited: start.elapsed(),
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The control block at `address` as it is now: `None` while the
    /// firmware has not initialised it. Memory must be accessible (call
    /// between `pause` and `resume`).
    pub fn find(mem: &mut dyn TargetMemory, address: u32) -> Result<Option<Self>, RttError> {
        Self::read_block(mem, address)
    }

    /// The index of the up channel the firmware named `name` (each
    /// descriptor's first word points to a C string), if it has one; a
    /// channel whose name cannot be read is not it. Memory must be
    /// accessible.
    pub fn up_named(
        &self,
        mem: &mut dyn TargetMemory,
        name: &str,
    ) -> Result<Option<usize>, RttError> {
        for (index, channel) in self.up.iter().enumerate() {
            let pointer = mem.read_u32(channel.descriptor)?;
            if pointer == 0 {
                continue;
            }
            let mut text = vec![0u8; name.len() + 1];
            if mem.read(pointer, &mut text).is_err() {
                continue;
            }
            if text[..name.len()] == *name.as_bytes() && text[name.len()] == 0 {
                return Ok(Some(index));
            }
        }
        Ok(None)
    }

    /// The names of the up channels, for saying which there are (an
    /// unreadable or missing name is `?`). Memory must be accessible.
    pub fn up_names(&self, mem: &mut dyn TargetMemory) -> Vec<String> {
        self.up
            .iter()
            .map(|channel| {
                let mut text = [0u8; MAX_NAME];
                let read = mem
                    .read_u32(channel.descriptor)
                    .ok()
                    .filter(|&p| p != 0)
                    .and_then(|p| mem.read(p, &mut text).ok());
                match read {
                    Some(()) => {
                        let end = text.iter().position(|&b| b == 0).unwrap_or(MAX_NAME);
                        String::from_utf8_lossy(&text[..end]).into_owned()
                    }
                    None => "?".to_string(),
                }
            })
            .collect()
    }

    fn read_block(mem: &mut dyn TargetMemory, address: u32) -> Result<Option<Self>, RttError> {
        let mut header = [0u8; HEADER as usize];
        mem.read(address, &mut header)?;
        if &header[..ID.len()] != ID {
            return Ok(None);
        }
        let count =
            |i: usize| i32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        let (ups, downs) = (count(16), count(20));
        if !(0..=MAX_CHANNELS).contains(&ups) || !(0..=MAX_CHANNELS).contains(&downs) {
            return Err(RttError::Corrupt(format!(
                "{ups} up and {downs} down channels"
            )));
        }
        let mut channel = |i: u32| -> Result<Channel, RttError> {
            let descriptor = address
                .checked_add(HEADER + i * DESCRIPTOR)
                .ok_or_else(|| {
                    RttError::Corrupt(format!(
                        "control block at {address:#010x} runs past the address space"
                    ))
                })?;
            let mut d = [0u8; DESCRIPTOR as usize];
            mem.read(descriptor, &mut d)?;
            let word = |j: usize| u32::from_le_bytes([d[j], d[j + 1], d[j + 2], d[j + 3]]);
            let (buffer, size) = (word(4), word(8));
            if size == 0 && buffer != 0 {
                return Err(RttError::Corrupt(format!(
                    "channel {i} has a buffer but no size"
                )));
            }
            // Offsets are computed in u32 from here on: the buffer must lie
            // inside the address space (a crashed firmware's garbage may not).
            if buffer.checked_add(size).is_none() || size > MAX_BUFFER {
                return Err(RttError::Corrupt(format!(
                    "channel {i}: buffer {buffer:#010x} of {size} bytes is not in target memory"
                )));
            }
            Ok(Channel {
                descriptor,
                buffer,
                size,
            })
        };
        let up = (0..ups as u32)
            .map(&mut channel)
            .collect::<Result<Vec<_>, _>>()?;
        let down = (ups as u32..(ups + downs) as u32)
            .map(&mut channel)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Rtt { address, up, down }))
    }

    fn channel<'a>(
        list: &'a [Channel],
        index: usize,
        direction: &'static str,
    ) -> Result<&'a Channel, RttError> {
        list.get(index)
            .filter(|c| c.size > 0)
            .ok_or(RttError::NoChannel { direction, index })
    }

    /// Takes everything the target has written to up channel `index`.
    /// Memory must be accessible (call between `pause` and `resume`).
    pub fn read_up(&self, mem: &mut dyn TargetMemory, index: usize) -> Result<Vec<u8>, RttError> {
        let c = Self::channel(&self.up, index, "up")?;
        let write = mem.read_u32(c.write_offset())?;
        let read = mem.read_u32(c.read_offset())?;
        if write >= c.size || read >= c.size {
            return Err(RttError::Corrupt(format!(
                "up channel {index} offsets {write}/{read} past size {}",
                c.size
            )));
        }
        let mut out = Vec::new();
        if write == read {
            return Ok(out);
        }
        let (first_end, wraps) = if write > read {
            (write, false)
        } else {
            (c.size, true)
        };
        let mut part = vec![0u8; (first_end - read) as usize];
        mem.read(c.buffer + read, &mut part)?;
        out.extend_from_slice(&part);
        if wraps && write > 0 {
            let mut rest = vec![0u8; write as usize];
            mem.read(c.buffer, &mut rest)?;
            out.extend_from_slice(&rest);
        }
        mem.write_u32(c.read_offset(), write)?;
        Ok(out)
    }

    /// Makes the firmware wait while up channel `index` is full instead of
    /// dropping what does not fit (what a log reader that must lose
    /// nothing asks; probe-rs does the same). Memory must be accessible.
    pub fn block_when_full(
        &self,
        mem: &mut dyn TargetMemory,
        index: usize,
    ) -> Result<(), RttError> {
        let c = Self::channel(&self.up, index, "up")?;
        let flags = mem.read_u32(c.flags())?;
        mem.write_u32(c.flags(), (flags & !MODE_MASK) | MODE_BLOCK_IF_FULL)?;
        Ok(())
    }

    /// Writes as much of `data` as fits into down channel `index`; returns
    /// the bytes written. Memory must be accessible.
    pub fn write_down(
        &self,
        mem: &mut dyn TargetMemory,
        index: usize,
        data: &[u8],
    ) -> Result<usize, RttError> {
        let c = Self::channel(&self.down, index, "down")?;
        let write = mem.read_u32(c.write_offset())?;
        let read = mem.read_u32(c.read_offset())?;
        if write >= c.size || read >= c.size {
            return Err(RttError::Corrupt(format!(
                "down channel {index} offsets {write}/{read} past size {}",
                c.size
            )));
        }
        // One byte stays free so that full and empty differ.
        let free = (read + c.size - write - 1) % c.size;
        let n = (free as usize).min(data.len());
        if n == 0 {
            return Ok(0);
        }
        let first = n.min((c.size - write) as usize);
        mem.write(c.buffer + write, &data[..first])?;
        if n > first {
            mem.write(c.buffer, &data[first..n])?;
        }
        mem.write_u32(c.write_offset(), (write + n as u32) % c.size)?;
        Ok(n)
    }
}
