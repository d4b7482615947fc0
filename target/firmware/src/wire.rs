//! The byte pipe to the host: a hardware seam with two implementations,
//! picked by the board's `transport` at build time. RTT (a debug probe or
//! QEMU's gdbstub reads and writes ring buffers in RAM) and a UART (for
//! boards reached over a serial line, and a check that nothing in the
//! protocol depends on RTT).

/// Bytes both ways. Neither call blocks: `write` takes what fits now,
/// `read` hands over what has arrived.
pub(crate) trait Wire {
    /// Queues as many of `bytes` as fit now; returns how many.
    fn write(&mut self, bytes: &[u8]) -> usize;
    /// Moves bytes that have arrived into `buf`; returns how many (0: none).
    fn read(&mut self, buf: &mut [u8]) -> usize;
}

#[cfg(not(hilt_uart))]
pub(crate) use rtt::{open, report_panic_line};

#[cfg(hilt_uart)]
pub(crate) use crate::uart::{open, report_panic_line};

#[cfg(not(hilt_uart))]
mod rtt {
    use rtt_target::{ChannelMode, DownChannel, UpChannel, rtt_init};

    use super::Wire;

    /// Up channel 1, where a panic's message goes (raw text, no framing:
    /// the host reads it even when the protocol is in pieces).
    static mut PANIC_LOG: Option<UpChannel> = None;

    /// Up channel 0 (results) and down channel 0 (commands, inputs).
    pub(crate) struct Rtt {
        up: UpChannel,
        down: DownChannel,
    }

    /// Sets up the RTT control block: up 0 "hilt", up 1 "log", down 0 "hilt".
    pub(crate) fn open() -> Rtt {
        let channels = rtt_init! {
            up: {
                0: { size: 4096, mode: ChannelMode::BlockIfFull, name: "hilt" }
                1: { size: 1024, mode: ChannelMode::NoBlockSkip, name: "log" }
            }
            down: {
                0: { size: 4096, name: "hilt" }
            }
        };
        // SAFETY: set once, before anything runs that could panic and read it.
        unsafe { *(&raw mut PANIC_LOG) = Some(channels.up.1) };
        Rtt {
            up: channels.up.0,
            down: channels.down.0,
        }
    }

    /// Writes a panic message to the log channel.
    pub(crate) fn report_panic_line(line: &str) {
        // SAFETY: single core; the panic handler runs once and nothing runs after it.
        if let Some(log) = unsafe { (*(&raw mut PANIC_LOG)).as_mut() } {
            log.write(line.as_bytes());
        }
    }

    impl Wire for Rtt {
        fn write(&mut self, bytes: &[u8]) -> usize {
            self.up.write(bytes)
        }

        fn read(&mut self, buf: &mut [u8]) -> usize {
            self.down.read(buf)
        }
    }
}
