//! The calibration loop (feature `calibration-loop`): not a fault but,
//! like the faults, only for hilt's own tests. Each invoke runs a loop of
//! a known count of instructions instead of the model, so the figures the
//! host reads say how many instructions one count of the board's counter
//! is.

/// Passes of [`calibration_loop`]: two instructions each.
pub(crate) const CALIBRATION_PASSES: u32 = 50_000;

/// Runs exactly `2 × CALIBRATION_PASSES` instructions (a `subs` and a
/// taken `bne` per pass, the last `bne` falling through), plus the one
/// that loads the count: under QEMU's `-icount` that many nanoseconds of
/// virtual time, so the figures the host reads for it say how many
/// instructions one count of the board's counter is.
#[inline(never)]
pub(crate) fn calibration_loop() {
    #[cfg(target_arch = "arm")]
    // SAFETY: touches only r0 (declared), no memory, no stack.
    unsafe {
        core::arch::asm!(
            "2:",
            "subs r0, #1",
            "bne 2b",
            inout("r0") CALIBRATION_PASSES => _,
            options(nomem, nostack),
        );
    }
    #[cfg(not(target_arch = "arm"))]
    for pass in 0..CALIBRATION_PASSES {
        core::hint::black_box(pass);
    }
}
