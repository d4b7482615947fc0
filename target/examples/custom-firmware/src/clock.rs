//! The product's time base for its log's timestamps: the MPS2's CMSDK APB
//! timer 0, a 32-bit down-counter on the 25 MHz peripheral clock, counted
//! up from boot and extended to 64 bits in software. Under QEMU's
//! `-icount` it runs on virtual time, so timestamps repeat run to run.
//!
//! The 32-bit count wraps every 171.8 s: the high word counts a wrap when
//! a reading is lower than the last, so the count must be read at least
//! that often — every log line reads it, and so does the main loop while
//! it waits for the host ([`keep`]).

use core::cell::Cell;

use critical_section::Mutex;

/// TIMER0's registers (CMSDK technical reference): CTRL (bit 0: enable),
/// VALUE (counts down), RELOAD.
const TIMER0: usize = 0x4000_0000;
const CTRL: usize = 0x00;
const VALUE: usize = 0x04;
const RELOAD: usize = 0x08;

/// Timer ticks per microsecond (the 25 MHz peripheral clock).
const TICKS_PER_US: u64 = 25;

/// The last 32-bit reading and the wraps counted so far.
static EXTENDED: Mutex<Cell<(u32, u32)>> = Mutex::new(Cell::new((0, 0)));

fn write(offset: usize, value: u32) {
    // SAFETY: a register of TIMER0, which only this module touches.
    unsafe { core::ptr::write_volatile((TIMER0 + offset) as *mut u32, value) }
}

fn read(offset: usize) -> u32 {
    // SAFETY: as in `write`.
    unsafe { core::ptr::read_volatile((TIMER0 + offset) as *const u32) }
}

/// Starts the count at 0: reload at the full 32 bits, enabled, no
/// interrupt.
pub fn start() {
    write(CTRL, 0);
    write(RELOAD, u32::MAX);
    write(VALUE, u32::MAX);
    write(CTRL, 1);
}

/// Ticks since [`start`], 64 bits.
fn ticks() -> u64 {
    critical_section::with(|cs| {
        let cell = EXTENDED.borrow(cs);
        let (last, wraps) = cell.get();
        let now = u32::MAX - read(VALUE);
        let wraps = if now < last { wraps + 1 } else { wraps };
        cell.set((now, wraps));
        (u64::from(wraps) << 32) | u64::from(now)
    })
}

/// Microseconds since [`start`]: the log's timestamp.
pub fn micros() -> u64 {
    ticks() / TICKS_PER_US
}

/// Reads the timer so that no wrap goes uncounted between log lines.
pub fn keep() {
    ticks();
}
