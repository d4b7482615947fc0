//! The serial-line [`Wire`]: hilt-proto frames both ways over a UART, for
//! boards the host reaches through a USB-serial adapter (the `uart` runner)
//! and for virtual boards whose UART QEMU connects to a pty.

use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

use crate::link::{LinkError, Wire};
use crate::memory::TargetMemory;

/// An open serial port, and the target's memory when something else (QEMU's
/// gdbstub) reaches it.
pub struct SerialWire<'m> {
    port: Box<dyn serialport::SerialPort>,
    name: String,
    memory: Option<&'m mut dyn TargetMemory>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for SerialWire<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SerialWire")
            .field("port", &self.name)
            .field("memory", &self.memory.is_some())
            .finish()
    }
}

fn serial_error(port: &str, message: impl std::fmt::Display) -> LinkError {
    LinkError::Serial {
        port: port.to_string(),
        message: message.to_string(),
    }
}

impl<'m> SerialWire<'m> {
    /// Opens `path` at `baud`, 8N1, raw, no flow control. Reads wait at
    /// most a millisecond: the link polls.
    pub fn open(
        path: &str,
        baud: u32,
        memory: Option<&'m mut dyn TargetMemory>,
    ) -> Result<Self, LinkError> {
        let port = serialport::new(path, baud)
            .data_bits(serialport::DataBits::Eight)
            .parity(serialport::Parity::None)
            .stop_bits(serialport::StopBits::One)
            .flow_control(serialport::FlowControl::None)
            .timeout(Duration::from_millis(1))
            .open()
            .map_err(|e| serial_error(path, format!("cannot open it: {e}")))?;
        // Whatever a previous user left unread is not ours.
        let _ = port.clear(serialport::ClearBuffer::All);
        Ok(SerialWire {
            port,
            name: path.to_string(),
            memory,
            buf: vec![0; 4096],
        })
    }
}

impl Wire for SerialWire<'_> {
    fn transfer(
        &mut self,
        out: &[u8],
        incoming: &mut Vec<u8>,
        _log: &mut Vec<u8>,
    ) -> Result<usize, LinkError> {
        let written = if out.is_empty() {
            0
        } else {
            match self.port.write(out) {
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => 0,
                Err(e) => return Err(serial_error(&self.name, format!("write failed: {e}"))),
            }
        };
        loop {
            match self.port.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    incoming.extend_from_slice(&self.buf[..n]);
                    if n < self.buf.len() {
                        break;
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(serial_error(&self.name, format!("read failed: {e}"))),
            }
        }
        Ok(written)
    }

    fn memory(&mut self) -> Option<&mut dyn TargetMemory> {
        match &mut self.memory {
            Some(m) => Some(&mut **m),
            None => None,
        }
    }
}
