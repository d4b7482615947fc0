//! A polled UART as the wire (`embedded_io` Read + Write): no interrupts, no DMA, nothing to set up
//! but the registers the board's `[uart]` table names. Two register layouts
//! cover the virtual boards and most STM32 parts:
//!
//! - `cmsdk-apb`: Arm's CMSDK APB UART (MPS2/MPS3 boards): DATA 0x00,
//!   STATE 0x04 (bit 0 TX full, bit 1 RX full), CTRL 0x08 (bit 0 TX enable,
//!   bit 1 RX enable), BAUDDIV 0x10.
//! - `stm32-usart`: the STM32F1/F2/F4 USART: SR 0x00 (bit 5 RXNE, bit 7
//!   TXE), DR 0x04, BRR 0x08, CR1 0x0C (bit 13 UE, bit 3 TE, bit 2 RE).
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

/// Register offsets and bits of one layout.
struct Layout {
    data: usize,
    status: usize,
    tx_busy: u32,
    rx_ready: u32,
}

const fn layout(kind: Kind) -> Layout {
    match kind {
        Kind::CmsdkApb => Layout {
            data: 0x00,
            status: 0x04,
            tx_busy: 1 << 0,
            rx_ready: 1 << 1,
        },
        Kind::Stm32Usart => Layout {
            data: 0x04,
            status: 0x00,
            // TXE set means "empty": busy is its absence (see `tx_free`).
            tx_busy: 1 << 7,
            rx_ready: 1 << 5,
        },
    }
}

impl Uart {
    fn reg(&self, offset: usize) -> *mut u32 {
        (self.base + offset) as *mut u32
    }

    fn status(&self) -> u32 {
        // SAFETY: the register block the board file names; reading status has no side effect.
        unsafe { read_volatile(self.reg(layout(self.kind).status)) }
    }

    fn tx_free(&self) -> bool {
        let bit = layout(self.kind).tx_busy;
        match self.kind {
            Kind::CmsdkApb => self.status() & bit == 0,
            Kind::Stm32Usart => self.status() & bit != 0,
        }
    }

    fn rx_ready(&self) -> bool {
        self.status() & layout(self.kind).rx_ready != 0
    }

    /// Sends one byte, waiting for room.
    fn put(&mut self, byte: u8) {
        while !self.tx_free() {}
        // SAFETY: the data register of our UART.
        unsafe { write_volatile(self.reg(layout(self.kind).data), u32::from(byte)) };
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
    let uart = Uart {
        base: board::BASE,
        kind: board::KIND,
    };
    // SAFETY: the UART's own configuration registers, written before use.
    unsafe {
        match uart.kind {
            Kind::CmsdkApb => {
                write_volatile(uart.reg(0x10), board::DIVISOR);
                write_volatile(uart.reg(0x08), 0b11);
            }
            Kind::Stm32Usart => {
                write_volatile(uart.reg(0x08), board::DIVISOR);
                write_volatile(uart.reg(0x0C), (1 << 13) | (1 << 3) | (1 << 2));
            }
        }
    }
    uart
}

/// Sends a panic's message as a `Log` frame: the UART carries nothing
/// else, and the host reads frames even after it has given up on a run.
pub(crate) fn report_panic_line(line: &str) {
    let mut uart = Uart {
        base: board::BASE,
        kind: board::KIND,
    };
    // Nothing is left to tell if even this fails.
    let _ = hilt_agent::send_log(&mut uart, line);
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

    /// Each byte is in the transmit register before `write` returns.
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
        let data = layout(self.kind).data;
        let mut n = 0;
        while n < buf.len() && self.rx_ready() {
            // SAFETY: reading the data register takes the received byte.
            buf[n] = unsafe { read_volatile(self.reg(data)) } as u8;
            n += 1;
        }
        Ok(n)
    }
}
