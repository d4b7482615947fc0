//! Access to a target's memory: the seam between the RTT/protocol logic and
//! whatever reaches the hardware (probe-rs on real boards, QEMU's gdbstub on
//! virtual ones, a fake in tests).

/// Why a memory access failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The connection to the target (probe, gdbstub) is gone: the target
    /// crashed, exited or was killed.
    #[error("connection to the target lost: {0}")]
    Disconnected(String),
    /// The target did not answer in time.
    #[error("the target did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The target refused the access (unmapped address, ...).
    #[error("the target refused access to {len} bytes at {addr:#010x}: {reason}")]
    Refused {
        /// Address.
        addr: u32,
        /// Length.
        len: usize,
        /// What it said.
        reason: String,
    },
    /// The target sent something that is not valid for the protocol in use.
    #[error("garbled reply from the target: {0}")]
    Garbled(String),
}

/// Reads and writes target memory. Memory accesses may need the core
/// stopped (QEMU's gdbstub does): callers bracket a batch of accesses with
/// [`pause`](TargetMemory::pause) and [`resume`](TargetMemory::resume).
pub trait TargetMemory {
    /// Reads `buf.len()` bytes at `addr`.
    fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<(), MemoryError>;
    /// Writes `data` at `addr`.
    fn write(&mut self, addr: u32, data: &[u8]) -> Result<(), MemoryError>;
    /// Stops the core for a batch of accesses (no-op where not needed).
    fn pause(&mut self) -> Result<(), MemoryError> {
        Ok(())
    }
    /// Lets the core run again.
    fn resume(&mut self) -> Result<(), MemoryError> {
        Ok(())
    }

    /// Reads a little-endian `u32`.
    fn read_u32(&mut self, addr: u32) -> Result<u32, MemoryError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Writes a little-endian `u32`.
    fn write_u32(&mut self, addr: u32, value: u32) -> Result<(), MemoryError> {
        self.write(addr, &value.to_le_bytes())
    }
}

/// Target memory as a plain byte array at a base address: the host fake.
#[derive(Debug, Clone)]
pub struct FakeMemory {
    /// First address.
    pub base: u32,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Pause/resume calls seen (pauses minus resumes must end at 0).
    pub paused: i32,
}

impl FakeMemory {
    /// `len` zero bytes at `base`.
    pub fn new(base: u32, len: usize) -> Self {
        FakeMemory {
            base,
            bytes: vec![0; len],
            paused: 0,
        }
    }

    fn range(&self, addr: u32, len: usize) -> Result<std::ops::Range<usize>, MemoryError> {
        let start = addr.checked_sub(self.base).map(|s| s as usize);
        match start {
            Some(s) if s + len <= self.bytes.len() => Ok(s..s + len),
            _ => Err(MemoryError::Refused {
                addr,
                len,
                reason: "outside the fake's memory".into(),
            }),
        }
    }
}

impl TargetMemory for FakeMemory {
    fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<(), MemoryError> {
        let r = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, addr: u32, data: &[u8]) -> Result<(), MemoryError> {
        let r = self.range(addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }

    fn pause(&mut self) -> Result<(), MemoryError> {
        self.paused += 1;
        Ok(())
    }

    fn resume(&mut self) -> Result<(), MemoryError> {
        self.paused -= 1;
        Ok(())
    }
}
