//! The committed tail as an invoke sees it: tensor and scratch slots, op
//! records, per-buffer guards and job records, read in place from the
//! arena, plus the arena's base and length the kernels' views are cut from.

use crate::accel::schedule::JobRecord;
use crate::allocation::TensorSlot;
use crate::canary::{BufferGuard, GUARD_BYTES};
use crate::kernels::context::OpRecord;

use super::{Committed, bytemuck_slice};

/// Views of the tail regions allocate carved, for one invoke.
pub(super) struct Views<'v> {
    pub(super) slots: &'v [TensorSlot],
    pub(super) records: &'v [OpRecord],
    pub(super) scratch: &'v [TensorSlot],
    /// The per-buffer guard bands (empty unless canaries watch buffers).
    pub(super) guards: &'v [BufferGuard],
    /// One [`JobRecord`] per op when offloading; empty otherwise.
    pub(super) jobs: &'v [JobRecord],
    pub(super) base: *mut u8,
    pub(super) len: usize,
    /// The constant image prepare checked or wrote (empty: the tail).
    pub(super) constants: &'v [u8],
}

impl<'v> Views<'v> {
    /// The views of `committed` in the arena at `base` of `len` bytes.
    ///
    /// # Safety
    /// `base` and `len` are the arena `committed` was carved in. The tail
    /// regions (tensor slots, op records, scratch slots, guards, job
    /// records) are never written after commit; kernels only get views of
    /// the head, of variable tensors and of their own op data, all disjoint
    /// from them.
    #[inline(always)]
    pub(super) unsafe fn of(
        base: *mut u8,
        len: usize,
        committed: &Committed,
        constants: &'v [u8],
    ) -> Self {
        // SAFETY: as the caller guarantees, each region lies in the arena.
        let view = |r: crate::arena::Region| unsafe {
            core::slice::from_raw_parts(base.add(r.offset as usize), r.len as usize)
        };
        Views {
            slots: bytemuck_slice::<TensorSlot>(view(committed.allocation.slots)),
            records: bytemuck_slice::<OpRecord>(view(committed.records)),
            scratch: bytemuck_slice::<TensorSlot>(view(committed.allocation.scratch)),
            guards: bytemuck_slice::<BufferGuard>(view(committed.allocation.guards.buffer_table)),
            jobs: bytemuck_slice::<JobRecord>(view(committed.jobs)),
            base,
            len,
            constants,
        }
    }

    /// The guard band at `offset`.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(super) fn guard_bytes(&self, offset: u32) -> &mut [u8] {
        // SAFETY: guard bands lie inside the arena (planned with their
        // buffers) and no kernel view exists between two ops.
        unsafe {
            core::slice::from_raw_parts_mut(self.base.add(offset as usize), GUARD_BYTES as usize)
        }
    }
}
