//! Marks for an instruction-level observer: empty functions the runtime
//! calls at the boundaries of an invoke, of each op's kernel and of each
//! offloaded job, which hilt's QEMU plugin finds by symbol.
//!
//! The plugin cannot read registers (QEMU 7.2's plugin API has no such
//! call), so a mark carries no argument: what it means follows from where
//! it is called. An invoke runs its ops in order, so the n-th
//! [`op_start`] of an invoke is op n. At most one job is in flight, so a
//! [`job_start`] runs the job of the last [`job_submitted`].
//!
//! Each mark is a call to a function of its own that returns at once: two
//! instructions (`bl`, `bx lr`) per mark, on every Cortex-M build, so that
//! the firmware a virtual board runs is the one a real board runs. On other
//! targets (host tests) the marks are inlined away.
//!
//! Each body holds an empty `asm!` with its own comment, so no two marks
//! are one function to LLVM's function merging (the plugin refuses a
//! firmware whose marks share an address).

macro_rules! marks {
    ($($(#[$doc:meta])* $name:ident => $symbol:ident;)*) => {$(
        $(#[$doc])*
        #[cfg(all(target_arch = "arm", target_os = "none"))]
        #[inline(always)]
        pub fn $name() {
            #[unsafe(no_mangle)]
            #[inline(never)]
            extern "C" fn $symbol() {
                // SAFETY: an empty instruction sequence; it touches nothing.
                unsafe { core::arch::asm!(concat!("/* ", stringify!($symbol), " */"), options(nomem, nostack, preserves_flags)) }
            }
            $symbol();
        }

        $(#[$doc])*
        #[cfg(not(all(target_arch = "arm", target_os = "none")))]
        #[inline(always)]
        pub fn $name() {}
    )*};
}

marks! {
    /// An invoke starts (before its first op).
    invoke_start => hilt_mark_invoke_start;
    /// The next op of this invoke starts: its kernel (or its job's
    /// submission) runs from here to [`op_done`].
    op_start => hilt_mark_op_start;
    /// The op's kernel returned (or its job was submitted): what follows,
    /// up to the next [`op_start`], is the interpreter's own work.
    op_done => hilt_mark_op_done;
    /// The invoke ended (after its last op, or at its first error).
    invoke_end => hilt_mark_invoke_end;
    /// The current op's job was handed to an engine.
    job_submitted => hilt_mark_job_submitted;
    /// An engine starts computing the job in flight (on this core: an
    /// interrupt-driven engine). Job marks nest: an engine may mark all of
    /// its work on a job around [`OpWork::execute`](crate::accel::OpWork),
    /// which marks the kernel itself.
    job_start => hilt_mark_job_start;
    /// The engine finished computing the job in flight.
    job_end => hilt_mark_job_end;
    /// The job in flight was waited and retired: its buffers are the
    /// CPU's again.
    job_retired => hilt_mark_job_retired;
}

/// The op in progress, in a word a debugger reads (`HILT_OP_IN_PROGRESS`,
/// by symbol): its index + 1 from its [`op_start`] to the next op's or the
/// invoke's end, 0 outside an invoke. A backtrace of a core stopped in a
/// HardFault, a panic or a hang names the op with it; the plugin needs no
/// such word (it counts the marks).
#[cfg(all(target_arch = "arm", target_os = "none"))]
#[unsafe(no_mangle)]
static HILT_OP_IN_PROGRESS: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// Op `index` starts: the word above says so, then the [`op_start`] mark.
#[inline(always)]
pub fn op_starts(index: u32) {
    #[cfg(all(target_arch = "arm", target_os = "none"))]
    HILT_OP_IN_PROGRESS.store(index + 1, core::sync::atomic::Ordering::Relaxed);
    #[cfg(not(all(target_arch = "arm", target_os = "none")))]
    let _ = index;
    op_start();
}

/// Calls [`invoke_end`] when dropped: on every way out of an invoke.
#[derive(Debug)]
pub(crate) struct InvokeMarks;

impl InvokeMarks {
    pub(crate) fn start() -> Self {
        invoke_start();
        InvokeMarks
    }
}

impl Drop for InvokeMarks {
    fn drop(&mut self) {
        #[cfg(all(target_arch = "arm", target_os = "none"))]
        HILT_OP_IN_PROGRESS.store(0, core::sync::atomic::Ordering::Relaxed);
        invoke_end();
    }
}
