//! A polled UART as the wire (`embedded_io` Read + Write): no interrupts, no DMA, nothing to set up
//! but the registers the board's `[uart]` table names. Three register
//! layouts cover the virtual boards, most STM32 parts and Nordic's:
//!
//! - `cmsdk-apb`: Arm's CMSDK APB UART (MPS2/MPS3 boards): DATA 0x00,
//!   STATE 0x04 (bit 0 TX full, bit 1 RX full), CTRL 0x08 (bit 0 TX enable,
//!   bit 1 RX enable), BAUDDIV 0x10.
//! - `stm32-usart`: the STM32F1/F2/F4 USART: SR 0x00 (bit 5 RXNE, bit 7
//!   TXE), DR 0x04, BRR 0x08, CR1 0x0C (bit 13 UE, bit 3 TE, bit 2 RE).
//! - `nrf-uart`: Nordic's UART (nRF51; UART0 of the nRF52 series): tasks
//!   STARTRX 0x000 and STARTTX 0x008, events RXDRDY 0x108 and TXDRDY
//!   0x11C, ENABLE 0x500 (4), RXD 0x518, TXD 0x51C, BAUDRATE 0x524. A byte
//!   is sent by writing TXD and waiting for TXDRDY; one is taken by
//!   clearing RXDRDY, then reading RXD (a byte behind it raises RXDRDY
//!   again).
//!
//! The host's requests are strictly one at a time (it waits for each
//! answer), so a one-byte receive register cannot overrun: nothing arrives
//! while the firmware is busy answering.

use core::convert::Infallible;
use core::ptr::{read_volatile, write_volatile};

/// The board's `[uart]` table, as constants (`build.rs`).
mod board {
    use super::{Kind, RegisterWrite};
    include!(concat!(env!("OUT_DIR"), "/uart.rs"));
}

/// Register layout of the board's UART.
#[derive(Clone, Copy)]
#[allow(dead_code)] // a board uses one of them
pub(crate) enum Kind {
    /// Arm CMSDK APB UART.
    CmsdkApb,
    /// STM32F1/F2/F4 USART.
    Stm32Usart,
    /// Nordic UART (events, not a status register).
    NrfUart,
}

/// One read-modify-write from the board's `[uart] init` list (clock
/// enables, pin functions): `*address = (*address & !clear) | set`.
pub(crate) struct RegisterWrite {
    pub(crate) address: usize,
    pub(crate) clear: u32,
    pub(crate) set: u32,
}

/// The board's UART, enabled.
pub(crate) struct Uart {
    base: usize,
    kind: Kind,
}

/// Nordic's registers (the event registers read 1 once the event happened).
mod nrf {
    pub(super) const STARTRX: usize = 0x000;
    pub(super) const STARTTX: usize = 0x008;
    pub(super) const RXDRDY: usize = 0x108;
    pub(super) const TXDRDY: usize = 0x11C;
    pub(super) const ENABLE: usize = 0x500;
    pub(super) const RXD: usize = 0x518;
    pub(super) const TXD: usize = 0x51C;
    pub(super) const BAUDRATE: usize = 0x524;
}

impl Uart {
    fn reg(&self, offset: usize) -> *mut u32 {
        (self.base + offset) as *mut u32
    }

    fn read_reg(&self, offset: usize) -> u32 {
        // SAFETY: a register of the block the board file names; the ones
        // read here (status, events, received data) are meant to be read.
        unsafe { read_volatile(self.reg(offset)) }
    }

    fn write_reg(&mut self, offset: usize, value: u32) {
        // SAFETY: a register of our UART's block.
        unsafe { write_volatile(self.reg(offset), value) }
    }

    /// Whether a received byte waits.
    fn rx_ready(&self) -> bool {
        match self.kind {
            Kind::CmsdkApb => self.read_reg(0x04) & (1 << 1) != 0,
            Kind::Stm32Usart => self.read_reg(0x00) & (1 << 5) != 0,
            Kind::NrfUart => self.read_reg(nrf::RXDRDY) != 0,
        }
    }

    /// Takes the waiting byte (`rx_ready` said there is one).
    fn take(&mut self) -> u8 {
        match self.kind {
            Kind::CmsdkApb => self.read_reg(0x00) as u8,
            Kind::Stm32Usart => self.read_reg(0x04) as u8,
            Kind::NrfUart => {
                // The event first: a byte behind this one raises it again.
                self.write_reg(nrf::RXDRDY, 0);
                self.read_reg(nrf::RXD) as u8
            }
        }
    }

    /// Sends one byte, waiting for room (or, on Nordic's, for it to go).
    fn put(&mut self, byte: u8) {
        match self.kind {
            Kind::CmsdkApb => {
                while self.read_reg(0x04) & (1 << 0) != 0 {}
                self.write_reg(0x00, u32::from(byte));
            }
            Kind::Stm32Usart => {
                while self.read_reg(0x00) & (1 << 7) == 0 {}
                self.write_reg(0x04, u32::from(byte));
            }
            Kind::NrfUart => {
                self.write_reg(nrf::TXD, u32::from(byte));
                while self.read_reg(nrf::TXDRDY) == 0 {}
                self.write_reg(nrf::TXDRDY, 0);
            }
        }
    }
}

/// Runs the board's set-up writes and enables the UART at its baud rate.
pub(crate) fn open() -> Uart {
    for w in board::INIT {
        let r = w.address as *mut u32;
        // SAFETY: addresses from the board file (clock and pin registers),
        // 4-aligned (checked by the host), written once at start-up.
        unsafe { write_volatile(r, (read_volatile(r) & !w.clear) | w.set) };
    }
    let mut uart = Uart {
        base: board::BASE,
        kind: board::KIND,
    };
    match uart.kind {
        Kind::CmsdkApb => {
            uart.write_reg(0x10, board::DIVISOR);
            uart.write_reg(0x08, 0b11);
        }
        Kind::Stm32Usart => {
            uart.write_reg(0x08, board::DIVISOR);
            uart.write_reg(0x0C, (1 << 13) | (1 << 3) | (1 << 2));
        }
        Kind::NrfUart => {
            uart.write_reg(nrf::BAUDRATE, board::DIVISOR);
            uart.write_reg(nrf::ENABLE, 4);
            uart.write_reg(nrf::STARTTX, 1);
            uart.write_reg(nrf::STARTRX, 1);
        }
    }
    OPENED.store(true, core::sync::atomic::Ordering::Relaxed);
    uart
}

/// Whether the UART was set up ([`open`] ran): before, a panic has no
/// way to the host.
static OPENED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Sends a panic's message as a `Log` frame: the UART carries nothing
/// else, and the host reads frames even after it has given up on a run.
/// Whether it was sent (not before the UART is set up).
pub(crate) fn report_panic_line(line: &str) -> bool {
    if !OPENED.load(core::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    let mut uart = Uart {
        base: board::BASE,
        kind: board::KIND,
    };
    hilt_agent::send_log(&mut uart, line).is_ok()
}

impl embedded_io::ErrorType for Uart {
    type Error = Infallible;
}

impl embedded_io::Write for Uart {
    fn write(&mut self, bytes: &[u8]) -> Result<usize, Infallible> {
        for &b in bytes {
            self.put(b);
        }
        Ok(bytes.len())
    }

    /// Each byte is in the transmit register (Nordic's: sent) before
    /// `write` returns.
    fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

impl embedded_io::Read for Uart {
    /// Waits for a first byte, then takes the ones that follow while they
    /// keep arriving.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
        if buf.is_empty() {
            return Ok(0);
        }
        while !self.rx_ready() {}
        let mut n = 0;
        while n < buf.len() && self.rx_ready() {
            buf[n] = self.take();
            n += 1;
        }
        Ok(n)
    }
}
