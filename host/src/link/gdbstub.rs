//! A client for QEMU's gdbstub (GDB remote serial protocol over TCP), just
//! enough to stop the core, read and write memory and let it run again.
//!
//! Packets are `$data#cc` (cc = modulo-256 sum of the data, in hex), each
//! acknowledged with `+`; a lone 0x03 byte interrupts a running target,
//! which answers with a stop reply (`S05`/`T05…`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::memory::{MemoryError, TargetMemory};

/// Largest memory transfer per packet (QEMU accepts more; this keeps
/// packets small).
const CHUNK: usize = 1024;

/// A connected gdbstub.
#[derive(Debug)]
pub struct GdbClient {
    stream: TcpStream,
    running: bool,
    timeout: Duration,
    pending: Vec<u8>,
}

fn io_error(e: &std::io::Error, timeout: Duration) -> MemoryError {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            MemoryError::Timeout(timeout)
        }
        _ => MemoryError::Disconnected(e.to_string()),
    }
}

fn checksum(data: &[u8]) -> u8 {
    data.iter().fold(0u8, |a, &b| a.wrapping_add(b))
}

impl GdbClient {
    /// Connects (retrying until `timeout`, as QEMU may still be starting).
    /// QEMU stops the guest while a debugger attaches; the client starts
    /// in the stopped state. A connection dropped before the stub answers
    /// (seen when QEMU is still setting its stub up) is tried again too.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Self, MemoryError> {
        let deadline = Instant::now() + timeout;
        loop {
            let stream = match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => s,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Err(e) => {
                    return Err(MemoryError::Disconnected(format!(
                        "cannot connect to gdbstub at {addr}: {e}"
                    )));
                }
            };
            match Self::handshake(stream, timeout) {
                Err(MemoryError::Disconnected(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    /// Asks why the target stopped: confirms the protocol works.
    fn handshake(stream: TcpStream, timeout: Duration) -> Result<Self, MemoryError> {
        stream
            .set_nodelay(true)
            .map_err(|e| io_error(&e, timeout))?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| io_error(&e, timeout))?;
        let mut client = GdbClient {
            stream,
            running: false,
            timeout,
            pending: Vec::new(),
        };
        client.send_packet(b"?")?;
        let reply = client.read_packet()?;
        if !(reply.starts_with(b"S") || reply.starts_with(b"T")) {
            return Err(MemoryError::Garbled(format!(
                "unexpected stop reply {:?}",
                String::from_utf8_lossy(&reply)
            )));
        }
        Ok(client)
    }

    fn read_byte(&mut self) -> Result<u8, MemoryError> {
        if !self.pending.is_empty() {
            return Ok(self.pending.remove(0));
        }
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => Err(MemoryError::Disconnected(
                "gdbstub closed the connection (target exited?)".into(),
            )),
            Ok(_) => Ok(b[0]),
            Err(e) => Err(io_error(&e, self.timeout)),
        }
    }

    fn send_packet(&mut self, data: &[u8]) -> Result<(), MemoryError> {
        let mut packet = Vec::with_capacity(data.len() + 4);
        packet.push(b'$');
        packet.extend_from_slice(data);
        packet.extend_from_slice(format!("#{:02x}", checksum(data)).as_bytes());
        for _attempt in 0..3 {
            self.stream
                .write_all(&packet)
                .map_err(|e| io_error(&e, self.timeout))?;
            match self.read_byte()? {
                b'+' => return Ok(()),
                b'-' => continue,
                other => {
                    // A packet arrived where an ack was expected: keep it.
                    self.pending.push(other);
                    return Ok(());
                }
            }
        }
        Err(MemoryError::Garbled(
            "gdbstub rejected a packet three times".into(),
        ))
    }

    /// Reads one packet's data, acknowledging it.
    fn read_packet(&mut self) -> Result<Vec<u8>, MemoryError> {
        loop {
            match self.read_byte()? {
                b'$' => break,
                b'+' | b'-' => continue,
                other => {
                    return Err(MemoryError::Garbled(format!(
                        "unexpected byte {other:#04x} outside a packet"
                    )));
                }
            }
        }
        let mut data = Vec::new();
        // The checksum covers the bytes as sent, escapes included.
        let mut sent = Vec::new();
        loop {
            match self.read_byte()? {
                b'#' => break,
                b'}' => {
                    let escaped = self.read_byte()?;
                    sent.extend_from_slice(&[b'}', escaped]);
                    data.push(escaped ^ 0x20);
                }
                b => {
                    sent.push(b);
                    data.push(b);
                }
            }
        }
        let hi = self.read_byte()?;
        let lo = self.read_byte()?;
        let want = u8::from_str_radix(std::str::from_utf8(&[hi, lo]).unwrap_or("zz"), 16)
            .map_err(|_| MemoryError::Garbled("bad packet checksum digits".into()))?;
        if want != checksum(&sent) {
            self.stream
                .write_all(b"-")
                .map_err(|e| io_error(&e, self.timeout))?;
            return Err(MemoryError::Garbled("packet checksum mismatch".into()));
        }
        self.stream
            .write_all(b"+")
            .map_err(|e| io_error(&e, self.timeout))?;
        Ok(data)
    }

    fn expect_ok(&mut self, what: &str, addr: u32, len: usize) -> Result<Vec<u8>, MemoryError> {
        let reply = self.read_packet()?;
        if reply.first() == Some(&b'E') {
            return Err(MemoryError::Refused {
                addr,
                len,
                reason: format!("{what}: {}", String::from_utf8_lossy(&reply)),
            });
        }
        Ok(reply)
    }

    /// Whether the core is running.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Stops the core (interrupt, then wait for the stop reply).
    pub fn halt(&mut self) -> Result<(), MemoryError> {
        if !self.running {
            return Ok(());
        }
        self.stream
            .write_all(&[0x03])
            .map_err(|e| io_error(&e, self.timeout))?;
        let reply = self.read_packet()?;
        if reply.starts_with(b"W") || reply.starts_with(b"X") {
            return Err(MemoryError::Disconnected(format!(
                "the target exited ({})",
                String::from_utf8_lossy(&reply)
            )));
        }
        self.running = false;
        Ok(())
    }

    /// Reads core register `number` (GDB's Arm numbering: r0..r12, sp 13,
    /// lr 14, pc 15) of the core, stopping it.
    pub fn read_register(&mut self, number: u8) -> Result<u32, MemoryError> {
        let words = self.read_registers()?;
        words
            .get(usize::from(number))
            .copied()
            .ok_or_else(|| MemoryError::Garbled(format!("register {number}: not in the `g` reply")))
    }

    /// Reads r0..r15 and xPSR, stopping the core. Through `g` (all general
    /// registers, 32-bit little-endian each): QEMU's stub for M-profile
    /// cores answers `p` with nothing. Without a target description asked
    /// for, QEMU's reply carries the legacy FPA registers (eight of 12
    /// bytes, then a status word) between r15 and xPSR; with one, xPSR
    /// follows r15. xPSR is the 17th word returned (0 when absent).
    pub fn read_registers(&mut self) -> Result<[u32; 17], MemoryError> {
        self.halt()?;
        self.send_packet(b"g")?;
        let reply = self.expect_ok("read registers", 0, 4)?;
        let garbled = || {
            MemoryError::Garbled(format!(
                "register read: unexpected reply {:?}",
                String::from_utf8_lossy(&reply)
            ))
        };
        let bytes = unhex(&reply)
            .filter(|b| b.len() >= 64)
            .ok_or_else(garbled)?;
        let word = |at: usize| {
            bytes
                .get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let mut words = [0u32; 17];
        for (n, w) in words.iter_mut().take(16).enumerate() {
            *w = word(n * 4).ok_or_else(garbled)?;
        }
        const XPSR_AFTER_FPA: usize = 16 * 4 + 8 * 12 + 4;
        words[16] = word(XPSR_AFTER_FPA).or_else(|| word(64)).unwrap_or(0);
        Ok(words)
    }

    /// Lets the core run.
    pub fn cont(&mut self) -> Result<(), MemoryError> {
        if self.running {
            return Ok(());
        }
        self.send_packet(b"c")?;
        self.running = true;
        Ok(())
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks_exact(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

/// The address of chunk `i` of an access of `len` bytes at `addr`; an
/// access that would run past the 32-bit address space is refused whole.
fn chunk_address(addr: u32, i: usize, len: usize) -> Result<u32, MemoryError> {
    let past_end = || MemoryError::Refused {
        addr,
        len,
        reason: "runs past the end of the 32-bit address space".into(),
    };
    if u64::from(addr) + len as u64 > 1 << 32 {
        return Err(past_end());
    }
    u32::try_from(i * CHUNK)
        .ok()
        .and_then(|off| addr.checked_add(off))
        .ok_or_else(past_end)
}

impl crate::backtrace::Core for GdbClient {
    fn registers(&mut self) -> Result<[u32; 17], MemoryError> {
        self.read_registers()
    }
}

impl TargetMemory for GdbClient {
    fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<(), MemoryError> {
        let was_running = self.running;
        self.halt()?;
        let len = buf.len();
        for (i, chunk) in buf.chunks_mut(CHUNK).enumerate() {
            let at = chunk_address(addr, i, len)?;
            self.send_packet(format!("m{at:x},{:x}", chunk.len()).as_bytes())?;
            let reply = self.expect_ok("read", at, chunk.len())?;
            let bytes = unhex(&reply)
                .filter(|b| b.len() == chunk.len())
                .ok_or_else(|| {
                    MemoryError::Garbled(format!(
                        "memory read reply {:?}",
                        String::from_utf8_lossy(&reply)
                    ))
                })?;
            chunk.copy_from_slice(&bytes);
        }
        if was_running {
            self.cont()?;
        }
        Ok(())
    }

    fn write(&mut self, addr: u32, data: &[u8]) -> Result<(), MemoryError> {
        let was_running = self.running;
        self.halt()?;
        for (i, chunk) in data.chunks(CHUNK).enumerate() {
            let at = chunk_address(addr, i, data.len())?;
            self.send_packet(format!("M{at:x},{:x}:{}", chunk.len(), hex(chunk)).as_bytes())?;
            let reply = self.expect_ok("write", at, chunk.len())?;
            if reply != b"OK" {
                return Err(MemoryError::Garbled(format!(
                    "memory write reply {:?}",
                    String::from_utf8_lossy(&reply)
                )));
            }
        }
        if was_running {
            self.cont()?;
        }
        Ok(())
    }

    fn pause(&mut self) -> Result<(), MemoryError> {
        self.halt()
    }

    fn resume(&mut self) -> Result<(), MemoryError> {
        self.cont()
    }
}
