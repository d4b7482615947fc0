//! The byte pipe to the host, picked by the board's `transport` at build
//! time: RTT (a debug probe or QEMU's gdbstub reads and writes ring buffers
//! in RAM) or a UART (for boards reached over a serial line, and a check
//! that nothing in the protocol depends on RTT). Both are `embedded_io`
//! Read + Write, which is all the agent asks of a wire.

#[cfg(not(hilt_uart))]
pub(crate) use rtt::{open, report_panic_line};

#[cfg(hilt_uart)]
pub(crate) use crate::uart::{open, report_panic_line};

#[cfg(not(hilt_uart))]
mod rtt {
    use core::convert::Infallible;

    use rtt_target::{ChannelMode, DownChannel, UpChannel, rtt_init};

    /// Up channel 1, where a panic's message goes (raw text, no framing:
    /// the host reads it even when the protocol is in pieces).
    static mut PANIC_LOG: Option<UpChannel> = None;

    /// Up channel 0 (results) and down channel 0 (commands, inputs).
    pub(crate) struct Rtt {
        up: UpChannel,
        down: DownChannel,
    }

    /// Bytes of each RTT ring: up 0 and down 0 (frames), and up 1 (a
    /// panic's message). A frame larger than a ring passes in pieces, the
    /// host draining up 0 and filling down 0 as they empty; bigger rings
    /// only mean fewer round trips, which a part with 64 KiB of RAM
    /// (`small-ram`) gives up.
    #[cfg(not(feature = "small-ram"))]
    const RINGS: (usize, usize) = (4096, 1024);
    #[cfg(feature = "small-ram")]
    const RINGS: (usize, usize) = (768, 256);

    /// Sets up the RTT control block: up 0 "hilt", up 1 "log", down 0 "hilt".
    pub(crate) fn open() -> Rtt {
        let channels = rtt_init! {
            up: {
                0: { size: RINGS.0, mode: ChannelMode::BlockIfFull, name: "hilt" }
                1: { size: RINGS.1, mode: ChannelMode::NoBlockSkip, name: "log" }
            }
            down: {
                0: { size: RINGS.0, name: "hilt" }
            }
        };
        let log = &raw mut PANIC_LOG;
        // SAFETY: set once, before anything runs that could panic and read it.
        unsafe { *log = Some(channels.up.1) };
        Rtt {
            up: channels.up.0,
            down: channels.down.0,
        }
    }

    /// Writes a panic message to the log channel.
    /// Whether the channel was open to take it.
    pub(crate) fn report_panic_line(line: &str) -> bool {
        let log = &raw mut PANIC_LOG;
        // SAFETY: single core; the panic handler runs once and nothing runs after it.
        match unsafe { (*log).as_mut() } {
            Some(log) => {
                log.write(line.as_bytes());
                true
            }
            None => false,
        }
    }

    impl embedded_io::ErrorType for Rtt {
        type Error = Infallible;
    }

    impl embedded_io::Read for Rtt {
        /// Waits until the host has written something, then takes what is there.
        fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
            if buf.is_empty() {
                return Ok(0);
            }
            loop {
                let n = self.down.read(buf);
                if n > 0 {
                    return Ok(n);
                }
            }
        }
    }

    impl embedded_io::Write for Rtt {
        /// The up channel blocks while full (the host drains it), so this
        /// takes every byte.
        fn write(&mut self, bytes: &[u8]) -> Result<usize, Infallible> {
            let mut sent = 0;
            while sent < bytes.len() {
                sent += self.up.write(&bytes[sent..]);
            }
            Ok(sent)
        }

        /// The bytes are in the ring buffer the host reads: nothing is held.
        fn flush(&mut self) -> Result<(), Infallible> {
            Ok(())
        }
    }
}
