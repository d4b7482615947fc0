//! The accelerator seam: what an NPU or DMA backend offers, the jobs the
//! interpreter hands it, and the tickets that make sure every job is waited.
//!
//! A backend ([`Accelerator`]) states its [`Capabilities`]: the ops and
//! tensor types it runs, the base-address alignment it needs, its cache-line
//! size, how many regions one job may name, and the address windows it can
//! reach (read-only or read-write). At allocate time the interpreter lets
//! it claim ops (those it supports *and* the caller lists in
//! [`Offload::ops`]); for each claimed op it builds a [`Job`] naming every
//! byte range the engine touches. At invoke it submits the job, keeps running
//! CPU ops that do not conflict, and waits before the first one that does.
//!
//! Real drivers have this shape: Arm's Ethos-U driver (`ethosu_invoke_async`
//! then `ethosu_wait`, 16-byte aligned base addresses, weak cache hooks), ST's
//! Neural-ART runtime, the MAX78000's start / interrupt flag / WFI.
//!
//! Misuse is made hard in the types: [`Ticket::submit`] returns a
//! `#[must_use]` [`Ticket`] that borrows the backend; dropping it without
//! waiting aborts the job and waits for the abort, so the engine never
//! outlives the memory it was given. The interpreter, not a kernel, owns the
//! tickets and decides when to wait (see [`crate::interpreter`]).
//!
//! ```
//! use hilt_runtime::accel::{Accelerator, Ticket, vnpu::{SteppedVnpu, Immediate, VnpuConfig}};
//! let engine = SteppedVnpu::new(VnpuConfig::default(), Immediate);
//! assert!(engine.capabilities().align >= 16);
//! ```

use core::fmt;

use crate::allocation::TensorSlot;
use crate::kernels::context::OpRecord;
use crate::kernels::{InvokeContext, InvokeFn, KernelError};
use crate::model::{Model, OpCode};
use crate::schema::{BuiltinOperator, TensorType};

/// Whether offloading is linked: off under the `no-offload` feature (a
/// firmware that never offloads), where the interpreter treats every
/// backend as absent and the compiler drops the code that drives one.
pub const OFFLOAD_LINKED: bool = !cfg!(feature = "no-offload");

pub mod cache;
pub mod event;
pub(crate) mod in_flight;
pub(crate) mod schedule;
pub mod vnpu;

pub use cache::{CacheMaintenance, Coherent};
pub use event::{EventWait, FlagEvent};

/// The most regions one job names (inputs, outputs, scratch, descriptor).
pub const MAX_JOB_REGIONS: usize = 12;

/// An absolute time in the backend's own clock ([`Accelerator::now`]).
pub type Deadline = u64;

/// No deadline.
pub const NEVER: Deadline = u64::MAX;

/// What the engine may do with a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Access {
    /// The engine only reads it.
    Read,
    /// The engine reads and writes it.
    ReadWrite,
}

/// What a region holds, so errors can name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RegionRole {
    /// An input tensor (by index).
    Input(u32),
    /// An output tensor (by index).
    Output(u32),
    /// The op's n-th scratch buffer.
    Scratch(u32),
    /// The job's descriptor: the op data its kernel prepared (multipliers,
    /// shapes), which the engine reads as a command stream.
    Descriptor,
}

/// One byte range a job touches, by absolute address (what a DMA engine sees).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct JobRegion {
    /// First byte's address.
    pub address: usize,
    /// Length in bytes (the data; the plan reserves whole cache lines).
    pub len: u32,
    /// Read only, or read and write.
    pub access: Access,
    /// What it holds.
    pub role: RegionRole,
}

impl JobRegion {
    const EMPTY: JobRegion = JobRegion {
        address: 0,
        len: 0,
        access: Access::Read,
        role: RegionRole::Descriptor,
    };
}

/// An address range the engine can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AddressWindow {
    /// First address.
    pub start: usize,
    /// Length in bytes.
    pub len: usize,
    /// Whether the engine may write there (flash, or a bus it only reads, is not).
    pub writable: bool,
}

impl AddressWindow {
    /// Whether `[address, address + len)` lies inside the window.
    pub const fn contains(&self, address: usize, len: usize) -> bool {
        address >= self.start
            && match address.checked_add(len) {
                Some(end) => end <= self.start.saturating_add(self.len),
                None => false,
            }
    }
}

/// An operator a backend runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind<'c> {
    /// A builtin operator.
    Builtin(BuiltinOperator),
    /// A `CUSTOM` operator, by its custom-code name.
    Custom(&'c str),
}

impl OpKind<'_> {
    /// Whether `code` is this operator.
    pub fn matches(&self, code: OpCode<'_>) -> bool {
        match (*self, code) {
            (OpKind::Builtin(a), OpCode::Builtin(b)) => a == b,
            (OpKind::Custom(a), OpCode::Custom(b)) => a == b,
            _ => false,
        }
    }
}

/// The operators a caller lets a backend claim, as a value (a bit per
/// builtin code, and one for every `CUSTOM` op the backend registers), so a
/// firmware can change it at run time without a list to borrow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpSet {
    builtins: [u32; 8],
    custom: bool,
}

impl OpSet {
    /// No operator.
    pub const EMPTY: OpSet = OpSet {
        builtins: [0; 8],
        custom: false,
    };

    /// The set of `kinds` (a custom name lets the backend claim every
    /// custom op it registers).
    pub fn from_kinds(kinds: &[OpKind<'_>]) -> Self {
        let mut set = OpSet::EMPTY;
        for kind in kinds {
            match *kind {
                OpKind::Builtin(op) => set.insert_builtin(op.0),
                OpKind::Custom(_) => set.custom = true,
            }
        }
        set
    }

    /// Adds builtin operator `code` (codes past 255 are ignored: no
    /// builtin a backend offloads has one).
    pub fn insert_builtin(&mut self, code: i32) {
        if let Ok(code @ 0..=255) = u8::try_from(code) {
            self.builtins[usize::from(code / 32)] |= 1 << (code % 32);
        }
    }

    /// Lets the backend claim the custom ops it registers.
    pub fn insert_custom(&mut self) {
        self.custom = true;
    }

    /// Whether `code` is in the set.
    pub fn contains(&self, code: OpCode<'_>) -> bool {
        match code {
            OpCode::Builtin(op) => u8::try_from(op.0)
                .is_ok_and(|c| self.builtins[usize::from(c / 32)] & 1 << (c % 32) != 0),
            OpCode::Custom(_) => self.custom,
        }
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        !self.custom && self.builtins.iter().all(|&w| w == 0)
    }
}

/// An operator a backend runs, and the tensor types it runs it on.
#[derive(Debug, Clone, Copy)]
pub struct OpSupport<'c> {
    /// The operator.
    pub op: OpKind<'c>,
    /// Every activation (non-constant) input and output must have one of
    /// these types.
    pub types: &'c [TensorType],
}

/// What a backend can do; the interpreter plans and claims from it.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities<'c> {
    /// Operators and types it runs.
    pub ops: &'c [OpSupport<'c>],
    /// Alignment every region's base address needs (a power of two).
    pub align: u32,
    /// Cache-line size the CPU must maintain in whole units (a power of two).
    pub line_size: u32,
    /// The most regions one job may name.
    pub max_regions: u32,
    /// Addresses it reaches; empty means everywhere.
    pub windows: &'c [AddressWindow],
}

impl Capabilities<'_> {
    /// The alignment the plan gives every buffer this backend touches: its
    /// base alignment and whole cache lines.
    pub fn buffer_align(&self, cache_line: u32) -> u32 {
        self.align.max(self.line_size).max(cache_line).max(1)
    }
}

/// Identifies a submitted job to its backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct JobId(pub u32);

/// Why a job could not be submitted, ran badly, or was not waited in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum AccelError {
    /// A region's base address is not aligned as the backend needs.
    Misaligned {
        /// Region position in the job.
        region: u8,
        /// What the region holds.
        role: RegionRole,
    },
    /// A region lies outside every window the engine reaches.
    OutsideWindow {
        /// Region position in the job.
        region: u8,
        /// What the region holds.
        role: RegionRole,
    },
    /// The engine would write a region the job marks read-only, or one in a
    /// read-only window.
    WriteToReadOnly {
        /// Region position in the job.
        region: u8,
        /// What the region holds.
        role: RegionRole,
    },
    /// More regions than the backend takes.
    TooManyRegions {
        /// Regions named.
        count: u8,
    },
    /// The engine runs one job at a time and is busy.
    Busy,
    /// The backend cannot run this job's operator.
    Unsupported,
    /// The deadline passed before the job completed.
    Timeout,
    /// The job was aborted.
    Aborted,
    /// The ticket names no job the backend knows.
    UnknownJob,
    /// The engine's kernel failed.
    Kernel(KernelError),
    /// Memory the engine still used was written by someone else while the
    /// job held it (a fence or hold is missing).
    LeaseViolation {
        /// Region position in the job.
        region: u8,
        /// What the region holds.
        role: RegionRole,
    },
    /// The plan gives a buffer the job touches no whole aligned lines of
    /// its own (checked at allocate).
    NotWholeLines {
        /// The buffer.
        role: RegionRole,
    },
    /// The plan frees a buffer the job touches before the job's wait
    /// (checked at allocate).
    NotHeld {
        /// The buffer.
        role: RegionRole,
    },
    /// The engine reported a failure of its own.
    Engine {
        /// Backend-specific code.
        code: u32,
    },
    /// A CPU op touched the job's memory before the job was waited (the
    /// interpreter's own audit of the schedule: a skipped fence).
    NotWaited {
        /// The CPU op that touched it.
        by_op: u32,
    },
    /// The engine read a region whose bytes in memory differ from what the
    /// CPU cleaned to it: a clean is missing (non-coherent memory).
    NotCleaned {
        /// Region position in the job.
        region: u8,
        /// What the region holds.
        role: RegionRole,
    },
    /// The CPU went on without invalidating a region the engine wrote, so
    /// it may read stale lines (non-coherent memory).
    NotInvalidated {
        /// Region position in the job.
        region: u8,
        /// What the region holds.
        role: RegionRole,
    },
}

impl fmt::Display for AccelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AccelError::Misaligned { region, role } => {
                write!(f, "region {region} ({role:?}) is misaligned for the engine")
            }
            AccelError::OutsideWindow { region, role } => write!(
                f,
                "region {region} ({role:?}) is outside every window the engine reaches"
            ),
            AccelError::WriteToReadOnly { region, role } => {
                write!(
                    f,
                    "region {region} ({role:?}) would be written but is read-only"
                )
            }
            AccelError::TooManyRegions { count } => {
                write!(
                    f,
                    "the job names {count} regions, more than the engine takes"
                )
            }
            AccelError::Busy => f.write_str("the engine is busy"),
            AccelError::Unsupported => f.write_str("the engine cannot run this operator"),
            AccelError::Timeout => f.write_str("the job missed its deadline"),
            AccelError::Aborted => f.write_str("the job was aborted"),
            AccelError::UnknownJob => f.write_str("no such job"),
            AccelError::Kernel(e) => write!(f, "engine kernel: {e}"),
            AccelError::LeaseViolation { region, role } => write!(
                f,
                "region {region} ({role:?}) was written by someone else while the engine held it"
            ),
            AccelError::NotWholeLines { role } => write!(
                f,
                "{role:?} does not get whole aligned cache lines of its own in the plan"
            ),
            AccelError::NotHeld { role } => {
                write!(f, "{role:?} is freed in the plan before the job's wait")
            }
            AccelError::Engine { code } => write!(f, "engine error {code}"),
            AccelError::NotWaited { by_op } => write!(
                f,
                "op {by_op} touched the job's memory before the job was waited"
            ),
            AccelError::NotCleaned { region, role } => write!(
                f,
                "region {region} ({role:?}) was read by the engine without the CPU cleaning it"
            ),
            AccelError::NotInvalidated { region, role } => write!(
                f,
                "region {region} ({role:?}) was written by the engine and never invalidated by the CPU"
            ),
        }
    }
}

impl core::error::Error for AccelError {}

impl RegionRole {
    fn code(self) -> u32 {
        match self {
            RegionRole::Input(i) => i.min(0x3FF),
            RegionRole::Output(i) => 1 << 10 | i.min(0x3FF),
            RegionRole::Scratch(i) => 2 << 10 | i.min(0x3FF),
            RegionRole::Descriptor => 3 << 10,
        }
    }

    fn from_code(code: u32) -> Self {
        let index = code & 0x3FF;
        match code >> 10 & 3 {
            0 => RegionRole::Input(index),
            1 => RegionRole::Output(index),
            2 => RegionRole::Scratch(index),
            _ => RegionRole::Descriptor,
        }
    }
}

impl AccelError {
    /// The error and the low 8 bits of its job id as one word, for a wire
    /// that has a 32-bit detail field (hilt's `Error` frame): kind in bits
    /// 0..8, region in 8..12, role in 12..24 (kind 2 bits, index 10 bits),
    /// job in 24..32. An engine error carries its own code in 8..24; a
    /// kernel error only its kind (the firmware logs its text).
    /// [`from_code`](Self::from_code) reverses it.
    pub fn code(&self, job: u32) -> u32 {
        let (kind, rest): (u32, u32) = match *self {
            AccelError::Misaligned { region, role } => (1, region_role(region, role)),
            AccelError::OutsideWindow { region, role } => (2, region_role(region, role)),
            AccelError::WriteToReadOnly { region, role } => (3, region_role(region, role)),
            AccelError::TooManyRegions { count } => (4, u32::from(count)),
            AccelError::Busy => (5, 0),
            AccelError::Unsupported => (6, 0),
            AccelError::Timeout => (7, 0),
            AccelError::Aborted => (8, 0),
            AccelError::UnknownJob => (9, 0),
            AccelError::Kernel(_) => (10, 0),
            AccelError::LeaseViolation { region, role } => (11, region_role(region, role)),
            AccelError::NotWholeLines { role } => (12, role.code() << 4),
            AccelError::NotHeld { role } => (13, role.code() << 4),
            AccelError::Engine { code } => (14, code & 0xFFFF),
            AccelError::NotWaited { by_op } => (15, by_op & 0xFFFF),
            AccelError::NotCleaned { region, role } => (16, region_role(region, role)),
            AccelError::NotInvalidated { region, role } => (17, region_role(region, role)),
        };
        kind | (rest & 0xFFFF) << 8 | (job & 0xFF) << 24
    }

    /// Reads [`code`](Self::code)'s word back: the error and the job id's
    /// low 8 bits (a kernel error reads as [`KernelError::Internal`]).
    pub fn from_code(word: u32) -> Option<(AccelError, u32)> {
        let rest = word >> 8 & 0xFFFF;
        let region = (rest & 0xF) as u8;
        let role = RegionRole::from_code(rest >> 4);
        let error = match word & 0xFF {
            1 => AccelError::Misaligned { region, role },
            2 => AccelError::OutsideWindow { region, role },
            3 => AccelError::WriteToReadOnly { region, role },
            4 => AccelError::TooManyRegions { count: rest as u8 },
            5 => AccelError::Busy,
            6 => AccelError::Unsupported,
            7 => AccelError::Timeout,
            8 => AccelError::Aborted,
            9 => AccelError::UnknownJob,
            10 => AccelError::Kernel(KernelError::Internal),
            11 => AccelError::LeaseViolation { region, role },
            12 => AccelError::NotWholeLines { role },
            13 => AccelError::NotHeld { role },
            14 => AccelError::Engine { code: rest },
            15 => AccelError::NotWaited { by_op: rest },
            16 => AccelError::NotCleaned { region, role },
            17 => AccelError::NotInvalidated { region, role },
            _ => return None,
        };
        Some((error, word >> 24))
    }
}

fn region_role(region: u8, role: RegionRole) -> u32 {
    u32::from(region & 0xF) | role.code() << 4
}

/// A backend: an NPU driver, a DMA engine, or the virtual NPU.
///
/// Methods take `&self`: a backend is shared between the code that submits
/// and the interrupt (or thread) that completes jobs, so it keeps its state
/// behind its own interior mutability (a critical section on a target).
pub trait Accelerator {
    /// What it runs and what memory it reaches.
    fn capabilities(&self) -> Capabilities<'_>;
    /// Its clock, in which deadlines are given.
    fn now(&self) -> u64;
    /// Checks and starts `job`. The memory the job names must stay valid and
    /// untouched by others until the job is waited or aborted; callers use
    /// [`Ticket::submit`], which enforces that.
    fn submit(&self, job: &Job) -> Result<JobId, AccelError>;
    /// Whether the job has completed (`Ok(true)`), without blocking.
    fn poll(&self, job: JobId) -> Result<bool, AccelError>;
    /// Blocks until the job completes (and retires it) or `deadline` passes
    /// (`Err(Timeout)`, the job still running).
    fn wait(&self, job: JobId, deadline: Deadline) -> Result<(), AccelError>;
    /// When the engine completed `job`, in [`now`](Self::now)'s clock, if
    /// the backend knows (for timelines). Asked right after the job's
    /// wait; a backend needs to remember only its last completed job.
    fn completed_at(&self, job: JobId) -> Option<u64> {
        let _ = job;
        None
    }
    /// Asks the engine to stop the job. A backend whose engine stops
    /// asynchronously lets a following [`wait`](Self::wait) block until it
    /// has; once that returns (with any result) the engine no longer
    /// touches the job's memory and has forgotten it.
    fn abort(&self, job: JobId);
}

/// A submitted job that must be waited.
///
/// Dropping a ticket without [`wait`](Self::wait) aborts the job and waits
/// (with no deadline) until the engine has let go of the job's memory: a
/// forgotten wait costs the job's result, never the memory's integrity.
/// `core::mem::forget` on a ticket would defeat this; the interpreter keeps
/// its tickets in a local array and never forgets one.
#[must_use = "a job must be waited; dropping the ticket aborts it"]
pub struct Ticket<'a> {
    accelerator: &'a dyn Accelerator,
    id: JobId,
    live: bool,
}

impl fmt::Debug for Ticket<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket").field("id", &self.id).finish()
    }
}

impl<'a> Ticket<'a> {
    /// Submits `job` to `accelerator`.
    pub fn submit(accelerator: &'a dyn Accelerator, job: &Job) -> Result<Self, AccelError> {
        let id = accelerator.submit(job)?;
        Ok(Ticket {
            accelerator,
            id,
            live: true,
        })
    }

    /// The backend's id of the job.
    pub fn id(&self) -> JobId {
        self.id
    }

    /// Whether the job has completed; lets a polled engine make progress.
    pub fn poll(&self) -> Result<bool, AccelError> {
        self.accelerator.poll(self.id)
    }

    /// Waits for the job until `deadline`. On any error (a missed deadline
    /// included) the job is aborted before this returns, so its memory is
    /// free either way.
    pub fn wait(mut self, deadline: Deadline) -> Result<(), AccelError> {
        self.live = false;
        let result = self.accelerator.wait(self.id, deadline);
        if result.is_err() {
            self.stop();
        }
        result
    }

    /// Aborts the job; returns once the engine has let go of its memory.
    pub fn abort(mut self) {
        self.live = false;
        self.stop();
    }

    /// Abort, then wait for the abort to take effect. No deadline: an engine
    /// that never lets go would otherwise keep writing memory the caller
    /// reuses, and a hang is the safer failure.
    fn stop(&self) {
        self.accelerator.abort(self.id);
        let _ = self.accelerator.wait(self.id, NEVER);
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.live {
            self.stop();
        }
    }
}

/// How the engine computes a claimed op: hilt's own kernel, over whatever
/// memory the engine reads (the arena itself, or vnpu's shadow copy of it).
/// A real NPU ignores this and runs its command stream (the descriptor).
///
/// It holds raw pointers to the model, the tensor and scratch slot tables
/// (read-only after commit) and the arena: valid for as long as the job is,
/// which the interpreter guarantees by waiting every job before `invoke`
/// returns.
#[derive(Clone, Copy)]
pub struct OpWork {
    invoke: InvokeFn,
    model: *const Model<'static>,
    op: u32,
    slots: *const [TensorSlot],
    scratch: *const [TensorSlot],
    record: OpRecord,
    arena: *mut u8,
    arena_len: usize,
}

impl fmt::Debug for OpWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpWork").field("op", &self.op).finish()
    }
}

// SAFETY: the pointers name data that is read-only while a job exists
// (model bytes, slot tables) and arena bytes the plan reserves for this job
// alone until it is waited; moving the description to an engine thread
// creates no shared mutable access beyond what the plan already isolates.
unsafe impl Send for OpWork {}

impl OpWork {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        invoke: InvokeFn,
        model: &Model<'_>,
        op: u32,
        slots: &[TensorSlot],
        scratch: &[TensorSlot],
        record: OpRecord,
        arena: *mut u8,
        arena_len: usize,
    ) -> Self {
        OpWork {
            invoke,
            // Lifetime erased: see the type's documentation.
            model: (model as *const Model<'_>).cast::<Model<'static>>(),
            op,
            slots: slots as *const [TensorSlot],
            scratch: scratch as *const [TensorSlot],
            record,
            arena,
            arena_len,
        }
    }

    /// The arena the job's tensors live in: `(first byte, length)`.
    pub fn arena(&self) -> (usize, usize) {
        (self.arena as usize, self.arena_len)
    }

    /// Runs the op's kernel over the arena image at `base` (the arena itself,
    /// or a copy of it of the same length).
    ///
    /// # Safety
    /// `base` must point to `self.arena().1` bytes valid for reads and
    /// writes; the job must not have been waited or aborted yet (the
    /// pointers it holds are valid only until then); and no one else may
    /// touch the job's regions in that image while this runs.
    pub unsafe fn execute(&self, base: *mut u8) -> Result<(), KernelError> {
        // SAFETY: the caller guarantees the job is live, so the interpreter
        // that built it still holds the model and slot tables.
        let (model, slots, scratch) = unsafe { (&*self.model, &*self.slots, &*self.scratch) };
        let ctx = InvokeContext {
            base,
            len: self.arena_len,
            model,
            op_index: self.op,
            inputs: self.record.inputs(model),
            outputs: self.record.outputs(model),
            slots,
            record: self.record,
            scratch,
            taken: core::cell::Cell::new(0),
            // A claimed op's op data stays in the arena (its descriptor).
            constants: &[],
        };
        crate::marks::job_start();
        let done = (self.invoke)(&ctx);
        crate::marks::job_end();
        done
    }
}

/// One unit of work for an engine: an op and every byte range it touches.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// The operator (execution step) it computes.
    pub op: u32,
    /// Multiply-accumulates it does (for latency models).
    pub macs: u64,
    regions: [JobRegion; MAX_JOB_REGIONS],
    count: u8,
    work: Option<OpWork>,
}

impl Job {
    /// A job for op `op` with no regions yet.
    pub const fn new(op: u32) -> Self {
        Job {
            op,
            macs: 0,
            regions: [JobRegion::EMPTY; MAX_JOB_REGIONS],
            count: 0,
            work: None,
        }
    }

    /// Adds a region; `false` when the job already names [`MAX_JOB_REGIONS`].
    ///
    /// # Safety
    /// `[region.address, region.address + region.len)` must be memory valid
    /// for reads (and writes, for `ReadWrite`) from submit until the job is
    /// waited or aborted: the engine reads and writes it by address.
    pub unsafe fn push(&mut self, region: JobRegion) -> bool {
        match self.regions.get_mut(self.count as usize) {
            Some(slot) => {
                *slot = region;
                self.count += 1;
                true
            }
            None => false,
        }
    }

    /// Changes every region (an injected fault in a job builder).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn map_regions(&mut self, f: impl Fn(&mut JobRegion)) {
        self.regions[..self.count as usize].iter_mut().for_each(f);
    }

    /// The regions it names.
    pub fn regions(&self) -> &[JobRegion] {
        &self.regions[..self.count as usize]
    }

    /// How to compute it with hilt's kernels, when the interpreter built it.
    pub fn work(&self) -> Option<&OpWork> {
        self.work.as_ref()
    }

    pub(crate) fn set_work(&mut self, work: OpWork) {
        self.work = Some(work);
    }

    /// Whether the job touches any byte of `[address, address + len)`.
    pub fn touches(&self, address: usize, len: usize) -> bool {
        self.regions()
            .iter()
            .any(|r| address < r.address + r.len as usize && r.address < address + len)
    }
}

/// What the caller hands the interpreter to offload ops: the backend, the
/// CPU's cache operations, which ops to offload, and how long a wait may take.
#[derive(Clone, Copy)]
pub struct Offload<'o> {
    /// The backend.
    pub accelerator: &'o dyn Accelerator,
    /// The CPU's cache maintenance towards that backend.
    pub cache: &'o dyn CacheMaintenance,
    /// Ops the caller lets the backend claim; the backend claims only
    /// those it also supports.
    pub ops: OpSet,
    /// How long one wait may take, in the backend's clock.
    pub timeout: u64,
}

impl fmt::Debug for Offload<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Offload")
            .field("ops", &self.ops)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The ops offloaded by default: the convolution family, ADD and pooling.
pub const DEFAULT_OFFLOAD: &[OpKind<'static>] = &[
    OpKind::Builtin(BuiltinOperator::CONV_2D),
    OpKind::Builtin(BuiltinOperator::DEPTHWISE_CONV_2D),
    OpKind::Builtin(BuiltinOperator::FULLY_CONNECTED),
    OpKind::Builtin(BuiltinOperator::ADD),
    OpKind::Builtin(BuiltinOperator::AVERAGE_POOL_2D),
    OpKind::Builtin(BuiltinOperator::MAX_POOL_2D),
];

/// Faults an offload path can be given, for the tests that must catch
/// them (feature `fault-injection`): each is a bug a real NPU
/// integration has.
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadFault {
    /// The schedule never waits a job before a CPU op that needs it.
    SkipWait,
    /// A job's output region is given 4 bytes off its aligned address.
    Misaligned,
    /// A job marks its output read-only.
    WriteReadOnly,
    /// The CPU does not clean a job's regions before submitting it.
    MissingClean,
    /// The CPU does not invalidate what a job wrote after its wait.
    MissingInvalidate,
}

/// Per-invoke figures of the offload schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadStats {
    /// Jobs submitted.
    pub jobs: u32,
    /// CPU ops started while a job was in flight and not yet complete: the
    /// overlap the schedule achieved.
    pub cpu_ops_overlapped: u32,
    /// Waits that found their job still running.
    pub waits_blocked: u32,
    /// Clock units the CPU spent in waits (profiled invokes only).
    pub waited: u64,
}

/// One job's times in a profiled invoke, in the profile clock from the
/// invoke's start, saturating at `u32::MAX` (20 bytes a job: a firmware
/// keeps a few dozen; see [`Interpreter::invoke_traced`]).
///
/// [`Interpreter::invoke_traced`]: crate::interpreter::Interpreter::invoke_traced
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobTrace {
    /// The operator.
    pub op: u32,
    /// When it was submitted.
    pub submitted: u32,
    /// When the engine completed it (its own report; else when the wait
    /// saw it complete).
    pub completed: u32,
    /// When the CPU started its wait.
    pub wait_started: u32,
    /// When the wait returned.
    pub retired: u32,
}
