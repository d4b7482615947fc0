//! Fault injection for hilt's failure tests (cargo features `fault-*`,
//! never in a release build): each fault must be caught by the host or by
//! the canaries, and reported as the right fault. Also the calibration
//! loop (`calibration-loop`), which is not a fault but, like them, exists
//! only for hilt's own tests.

#[cfg(feature = "fault-corrupt-frame")]
use hilt_proto::Message;

/// Flips one byte in the middle of the first `OutputChunk` frame, after its
/// CRC was computed and keeping its delimiter: the host must see a CRC error.
#[cfg(feature = "fault-corrupt-frame")]
pub(crate) fn corrupt_first_output(message: &Message<'_>, frame: &mut [u8], done: &mut bool) {
    if !*done && matches!(message, Message::OutputChunk { .. }) {
        let i = frame.len() / 2;
        frame[i] = if frame[i] == 0x55 { 0x56 } else { 0x55 };
        *done = true;
    }
}

/// Never answers again, as a firmware stuck in a kernel would. (Typed as
/// returning, so the code after the call stays as it is in a real build.)
#[cfg(feature = "fault-hang-on-invoke")]
pub(crate) fn hang() {
    loop {
        core::hint::spin_loop();
    }
}

/// Hides a canary failure of the invoke, as a firmware that does not check
/// its own guards would: the host's read-back must still find the damage.
#[cfg(feature = "fault-blind-checker")]
pub(crate) fn blind(
    result: Result<(), hilt_runtime::interpreter::InterpreterError>,
) -> Result<(), hilt_runtime::interpreter::InterpreterError> {
    match result {
        Err(hilt_runtime::interpreter::InterpreterError::Canary(_)) => Ok(()),
        other => other,
    }
}

/// Recurses until the stack reaches the arena's end (`arena_end`, the
/// address after its last byte; the stack sits above the arena), then lets
/// the deepest frame spill 8 bytes into the arena's last bytes, as a stack
/// overflow would (deeper spills would also wreck the tail's records, and
/// the point is to see the guard catch the first bytes).
#[cfg(feature = "fault-stack-overflow")]
pub(crate) fn grow_stack_into_arena(arena_end: usize) {
    core::hint::black_box(dig(arena_end));
}

#[cfg(feature = "fault-stack-overflow")]
#[inline(never)]
fn dig(arena_end: usize) -> u32 {
    let mut frame = [0x5Au8; 64];
    core::hint::black_box(&mut frame);
    let here = frame.as_ptr() as usize;
    if here > arena_end + 128 {
        dig(arena_end).wrapping_add(u32::from(frame[1]))
    } else {
        // SAFETY: the injected fault: 8 bytes just below the arena's end,
        // inside the arena this session owns.
        unsafe { core::ptr::write_volatile((arena_end - 8) as *mut u64, 0x5A5A_5A5A_5A5A_5A5A) };
        u32::from(frame[0])
    }
}

/// One push just below the stack's end (`__sheap`, where cortex-m-rt's
/// RAM sections end and the stack may not go), from inside an op: a stack
/// overflow by one word. The word already there is pushed back, so nothing
/// is damaged and only the QEMU plugin's stack check can see it.
/// Interrupts are masked meanwhile: an exception frame would land further
/// below.
#[cfg(feature = "fault-stack-in-op")]
pub(crate) fn push_below_stack() {
    #[cfg(target_arch = "arm")]
    {
        unsafe extern "C" {
            static __sheap: u8;
        }
        let word_below = (&raw const __sheap) as usize - 4;
        // SAFETY: reads and rewrites, unchanged, the word just below the
        // stack's end; SP is put back before interrupts are unmasked.
        unsafe {
            core::arch::asm!(
                "mrs r1, primask",
                "cpsid i",
                "mov r3, sp",
                "ldr r2, [r0]",
                "adds r0, r0, #4",
                "mov sp, r0",
                "push {{r2}}",
                "mov sp, r3",
                "msr primask, r1",
                inout("r0") word_below => _,
                out("r1") _,
                out("r2") _,
                out("r3") _,
            );
        }
    }
}

/// Passes of [`calibration_loop`]: two instructions each.
#[cfg(feature = "calibration-loop")]
pub(crate) const CALIBRATION_PASSES: u32 = 50_000;

/// Runs exactly `2 × CALIBRATION_PASSES` instructions (a `subs` and a
/// taken `bne` per pass, the last `bne` falling through), plus the one
/// that loads the count: under QEMU's `-icount` that many nanoseconds of
/// virtual time, so the figures the host reads for it say how many
/// instructions one count of the board's counter is.
#[cfg(feature = "calibration-loop")]
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
