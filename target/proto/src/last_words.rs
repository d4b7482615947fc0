//! How a firmware's last line begins: the text it sends (on RTT's up
//! channel 1, or as a `Log` frame over a UART) just before it stops for
//! good, so that the host ends the run at once, says why, and reads the
//! stopped core for a backtrace.

/// A panic's message: `panic: panicked at file:line:column:` and the text.
pub const PANIC: &str = "panic: ";

/// The HardFault handler's line: `hard fault: pc 0x… cfsr 0x… hfsr 0x…
/// mmfar 0x… bfar 0x…` (the fault status registers where the core has
/// them).
pub const HARD_FAULT: &str = "hard fault: ";

/// Whether `line` is a firmware's last line.
pub fn is_last_words(line: &str) -> bool {
    line.starts_with(PANIC) || line.starts_with(HARD_FAULT)
}
