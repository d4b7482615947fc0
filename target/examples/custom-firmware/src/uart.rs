//! The product's driver for the MPS2's UART0, an Arm CMSDK APB UART:
//! polled, 8N1, no FIFO. Registers (CMSDK technical reference):
//! DATA at 0x00, STATE at 0x04 (bit 0: transmit buffer full, bit 1: a byte
//! received, bit 3: receive overrun, write 1 to clear), CTRL at 0x08
//! (bit 0: transmit on, bit 1: receive on), BAUDDIV at 0x10.

use core::fmt;

const DATA: usize = 0x00;
const STATE: usize = 0x04;
const CTRL: usize = 0x08;
const BAUDDIV: usize = 0x10;

const TX_FULL: u32 = 1 << 0;
const RX_FULL: u32 = 1 << 1;
const RX_OVERRUN: u32 = 1 << 3;

/// A CMSDK APB UART, on.
pub struct CmsdkUart {
    base: usize,
}

/// A received byte was lost: the next one arrived before it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overrun;

impl fmt::Display for Overrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UART receive overrun")
    }
}

impl core::error::Error for Overrun {}

impl embedded_io::Error for Overrun {
    fn kind(&self) -> embedded_io::ErrorKind {
        embedded_io::ErrorKind::Other
    }
}

impl CmsdkUart {
    /// Turns the UART at `base` on at `baud`, from its `clock_hz` input.
    ///
    /// # Safety
    /// `base` is a CMSDK APB UART's register block, and nothing else uses it.
    pub unsafe fn new(base: usize, clock_hz: u32, baud: u32) -> Self {
        let uart = CmsdkUart { base };
        uart.write_reg(BAUDDIV, clock_hz / baud);
        uart.write_reg(CTRL, 0b11);
        uart
    }

    fn read_reg(&self, offset: usize) -> u32 {
        // SAFETY: a register of our UART (`new`'s contract).
        unsafe { core::ptr::read_volatile((self.base + offset) as *const u32) }
    }

    fn write_reg(&self, offset: usize, value: u32) {
        // SAFETY: a register of our UART (`new`'s contract).
        unsafe { core::ptr::write_volatile((self.base + offset) as *mut u32, value) }
    }
}

impl embedded_io::ErrorType for CmsdkUart {
    type Error = Overrun;
}

impl embedded_io::Read for CmsdkUart {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Overrun> {
        let mut n = 0;
        while n < buf.len() {
            let state = self.read_reg(STATE);
            if state & RX_OVERRUN != 0 {
                self.write_reg(STATE, RX_OVERRUN);
                return Err(Overrun);
            }
            if state & RX_FULL != 0 {
                buf[n] = self.read_reg(DATA) as u8;
                n += 1;
            } else if n > 0 {
                break; // what has arrived so far; the rest can wait
            }
        }
        Ok(n)
    }
}

impl embedded_io::ReadReady for CmsdkUart {
    fn read_ready(&mut self) -> Result<bool, Overrun> {
        Ok(self.read_reg(STATE) & RX_FULL != 0)
    }
}

impl embedded_io::Write for CmsdkUart {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Overrun> {
        for &byte in buf {
            while self.read_reg(STATE) & TX_FULL != 0 {}
            self.write_reg(DATA, u32::from(byte));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Overrun> {
        Ok(())
    }
}
