//! The seams an allocator port replaces, and the checks it must pass.
//!
//! TFLM users who swap in their own allocator find out it is wrong when a
//! model gives wrong numbers, or never: nothing tells them which rule they
//! broke. hilt splits what a port may replace the way TFLM does
//! (`IPersistentBufferAllocator` / `INonPersistentBufferAllocator`, plus the
//! `MicroMemoryPlanner`), as three small traits, and ships the rules as code:
//!
//! - [`MemoryPlanner`](crate::planner::MemoryPlanner): where each planned
//!   buffer goes in the head. **Replaceable today**: the interpreter plans
//!   with any `&dyn MemoryPlanner` ([`Interpreter::allocate`]), and the
//!   agent takes one through `Agent::custom_planner`. Every plan is checked
//!   ([`check_plan`]) before kernels see a byte of it.
//! - [`PersistentAllocator`]: memory that lives as long as the interpreter
//!   (tensor records, op data, variable tensors; TFLM's tail).
//! - [`NonPersistentAllocator`]: set-up scratch that is released at once
//!   (the request list, the planner's workspace), and the head the plan is
//!   committed into, over the space that scratch used.
//!
//! [`Arena`] implements both allocator traits and is the reference the
//! conformance kit is run against. The interpreter still owns an `Arena`
//! (it carves its records and views from one contiguous slice), so a user's
//! allocator is checked by the kit but does not yet replace the interpreter's;
//! the traits are the shape that replacement will take, and a port written
//! against them today keeps working when it does.
//!
//! [`check_plan`] and [`check_fixed`] need no heap and name the failing pair
//! in full ([`PlanFailure`]); they are cheap enough to run on the target.
//! The conformance kit that drives a port over many request sets lives in
//! [`kit`] (cargo feature `port-kit`).
//!
//! [`Interpreter::allocate`]: crate::interpreter::Interpreter::allocate
//!
//! ```
//! use hilt_runtime::planner::{Greedy, MemoryPlanner};
//! use hilt_runtime::port::check_plan;
//! use hilt_runtime::request::BufferRequest;
//!
//! let requests = [BufferRequest::tensor(0, 64, 0, 1), BufferRequest::tensor(1, 64, 1, 2)];
//! let (mut workspace, mut offsets) = ([0u32; 8], [0u32; 2]);
//! let head = Greedy.plan(&requests, &mut workspace, &mut offsets).unwrap();
//! assert_eq!(check_plan(&requests, &offsets, head), Ok(()));
//! // The same two buffers on one offset: both are live at step 1.
//! let failure = check_plan(&requests, &[0, 0], 64).unwrap_err();
//! assert_eq!(
//!     failure.to_string(),
//!     "buffers 0 (tensor 0, steps 0..1, [0,64)) and 1 (tensor 1, steps 1..2, [0,64)) \
//!      are live together at step 1 but share bytes [0,64)"
//! );
//! ```

mod arena_impl;
#[cfg(feature = "port-kit")]
pub mod kit;

pub use crate::planner::check::{PlacedBuffer, PlanFailure, check_fixed, check_plan};

use crate::arena::{ArenaError, Region};

/// The bytes an allocator hands out, seen from outside: what a checker
/// needs to tell whether two allocations overlap, lie inside the memory and
/// are aligned, and to read back what was written into them.
pub trait AllocatorMemory {
    /// Bytes under management; every [`Region`] lies below this offset.
    fn memory_len(&self) -> usize;

    /// Address of offset 0. Alignment is of addresses, not of offsets: a
    /// region is `align`-aligned when `memory_address() + offset` is.
    fn memory_address(&self) -> usize;

    /// The bytes of an allocation this allocator returned.
    fn region_bytes(&mut self, region: Region) -> &mut [u8];
}

/// Memory that lives as long as the interpreter: TFLM's
/// `IPersistentBufferAllocator`. Nothing allocated here is ever released
/// short of a new interpreter.
pub trait PersistentAllocator: AllocatorMemory {
    /// `size` bytes at an `align`-aligned address (`align` a power of two).
    /// Never overlaps another live allocation of either kind or the head;
    /// [`ArenaError::OutOfMemory`] (section `Tail`) when it does not fit.
    fn allocate_persistent(&mut self, size: usize, align: u32) -> Result<Region, ArenaError>;

    /// Bytes persistent allocations hold, with their alignment padding.
    fn persistent_used_bytes(&self) -> usize;
}

/// Set-up scratch and the planned head: TFLM's
/// `INonPersistentBufferAllocator`. Temp allocations are released all at
/// once, and the head is then committed over the space they used.
pub trait NonPersistentAllocator: AllocatorMemory {
    /// `size` bytes of temp memory at an `align`-aligned address, until the
    /// next [`reset_temp`](Self::reset_temp); [`ArenaError::OutOfMemory`]
    /// (section `Temp`) when it does not fit.
    fn allocate_temp(&mut self, size: usize, align: u32) -> Result<Region, ArenaError>;

    /// Releases every temp allocation (the head and persistent data stay).
    fn reset_temp(&mut self);

    /// Commits the planned head: `size` bytes at an `align`-aligned
    /// address. [`ArenaError::TempInUse`] while temp allocations are held
    /// (the head reuses their bytes), [`ArenaError::OutOfMemory`] (section
    /// `Head`) when it does not fit.
    fn commit_head(&mut self, size: usize, align: u32) -> Result<Region, ArenaError>;

    /// The committed head (empty before [`commit_head`](Self::commit_head)).
    fn head(&self) -> Region;
}
