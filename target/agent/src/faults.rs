//! Fault injection for hilt's failure tests (cargo feature
//! `fault-injection`, never in a release build): every fault of
//! [`Fault`] is compiled in, and those the host armed in the firmware's
//! [`SYMBOL`](hilt_proto::armed_faults::SYMBOL) word act. Each must be
//! caught by the host or by the canaries, and reported as the right fault.

use hilt_proto::Message;
pub(crate) use hilt_proto::armed_faults::Fault;
use hilt_runtime::planner::{MemoryPlanner, PlanError};
use hilt_runtime::request::BufferRequest;

/// The armed-faults word, in flash. Built as zero (nothing armed); the
/// host writes the faults a test arms into a copy of the ELF.
#[unsafe(no_mangle)]
#[used]
static HILT_ARMED_FAULTS: u32 = 0;

/// Whether the host armed `fault` in this firmware.
pub(crate) fn armed(fault: Fault) -> bool {
    // The word is rewritten after the build: the compiler must not fold
    // the zero it was built with, so it is read as memory.
    // SAFETY: a valid, aligned `u32` static that nothing writes while the
    // firmware runs.
    let word = unsafe { core::ptr::read_volatile(&raw const HILT_ARMED_FAULTS) };
    hilt_proto::armed_faults::ArmedFaults(word).contains(fault)
}

/// Flips one byte in the middle of the first `OutputChunk` frame, after its
/// CRC was computed and keeping its delimiter: the host must see a CRC error.
pub(crate) fn corrupt_first_output(message: &Message<'_>, frame: &mut [u8], done: &mut bool) {
    if !*done && matches!(message, Message::OutputChunk { .. }) {
        let i = frame.len() / 2;
        frame[i] = if frame[i] == 0x55 { 0x56 } else { 0x55 };
        *done = true;
    }
}

/// Never answers again, as a firmware stuck in a kernel would. (Typed as
/// returning, so the code after the call stays as it is in a real build;
/// out of line, so a stopped run's pc names this function wherever the
/// session was inlined.)
#[inline(never)]
pub(crate) fn hang() {
    loop {
        core::hint::spin_loop();
    }
}

/// Hides a canary failure of the invoke, as a firmware that does not check
/// its own guards would: the host's read-back must still find the damage.
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
pub(crate) fn grow_stack_into_arena(arena_end: usize) {
    core::hint::black_box(dig(arena_end));
}

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

/// An address no memory answers on hilt's boards (above the Private
/// Peripheral Bus, in the vendor system region, which none of them maps).
pub(crate) const BAD_POINTER: usize = 0xF000_0000;

/// A load through a bad pointer, from inside an op, as a kernel with a
/// wild pointer does: a precise bus fault, escalated to a HardFault (no
/// firmware enables the BusFault handler). Out of line, so a backtrace
/// names it.
#[inline(never)]
pub(crate) fn load_through_bad_pointer() {
    // SAFETY: none: the injected fault is this read.
    let word =
        unsafe { core::ptr::read_volatile(core::hint::black_box(BAD_POINTER) as *const u32) };
    core::hint::black_box(word);
}

/// One push just below the stack's end (`__sheap`, where cortex-m-rt's
/// RAM sections end and the stack may not go), from inside an op: a stack
/// overflow by one word. The word already there is pushed back, so nothing
/// is damaged and only the QEMU plugin's stack check can see it.
/// Interrupts are masked meanwhile: an exception frame would land further
/// below.
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

/// The session's planner with one fault: its plan, then one buffer moved
/// onto a neighbour that is live at the same time (a planner port's bug;
/// the allocator's plan check must refuse it, or with
/// [`Fault::UncheckedPlan`] the QEMU plugin must name the first store into
/// the shared bytes).
pub(crate) struct Misplanned<'p>(pub(crate) &'p dyn MemoryPlanner);

impl MemoryPlanner for Misplanned<'_> {
    fn name(&self) -> &'static str {
        "misplan"
    }

    fn workspace_words(&self, count: usize) -> usize {
        self.0.workspace_words(count)
    }

    fn plan(
        &self,
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PlanError> {
        let head = self.0.plan(requests, workspace, offsets)?;
        for i in 0..requests.len() {
            for j in i + 1..requests.len() {
                if requests[i].overlaps_in_time(&requests[j]) && offsets[i] != offsets[j] {
                    offsets[j] = offsets[i];
                    return Ok(head);
                }
            }
        }
        Ok(head)
    }
}
