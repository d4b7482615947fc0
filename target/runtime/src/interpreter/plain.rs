//! The common invoke: no offload, no profile, no per-buffer guards.

use core::cell::Cell;

use crate::allocation::TensorSlot;
use crate::kernels::context::OpRecord;
use crate::kernels::{InvokeContext, Resolver};
use crate::model::Model;

use super::error::{InterpreterError, op_name};

/// The common invoke (no offload, no profile, no per-buffer guards): each
/// op is its record, its kernel and its tensor lists, and nothing else. A
/// loop of its own, chosen once per invoke, so that small models do not
/// pay per op for the checks only offloading and profiling need.
pub(super) struct PlainRun<'p, 'm> {
    pub(super) model: &'p Model<'m>,
    pub(super) resolver: &'p dyn Resolver,
    pub(super) records: &'p [OpRecord],
    pub(super) slots: &'p [TensorSlot],
    pub(super) scratch: &'p [TensorSlot],
    pub(super) base: *mut u8,
    pub(super) len: usize,
    pub(super) constants: &'p [u8],
}

impl PlainRun<'_, '_> {
    #[inline(always)]
    pub(super) fn run(&self) -> Result<(), InterpreterError> {
        let model = self.model;
        // One record per op (allocate wrote them): checked once, so the
        // loop below cannot stop short.
        if self.records.len() < model.operator_count() as usize {
            return Err(InterpreterError::NotAllocated);
        }
        for (index, record) in (0..model.operator_count()).zip(self.records) {
            let kernel = self.resolver.get(u32::from(record.kernel)).ok_or_else(|| {
                InterpreterError::UnsupportedOperator {
                    op: index,
                    code: op_name(model, index),
                }
            })?;
            let ctx = InvokeContext {
                base: self.base,
                len: self.len,
                model,
                op_index: index,
                inputs: record.inputs(model),
                outputs: record.outputs(model),
                slots: self.slots,
                record: *record,
                scratch: self.scratch,
                taken: Cell::new(0),
                constants: self.constants,
            };
            crate::marks::op_starts(index);
            // (A `no-lean` build runs no fused chain: the kernel itself.)
            #[cfg(not(feature = "no-lean"))]
            let done = crate::kernels::fused::invoke(kernel, &ctx, self.records);
            #[cfg(feature = "no-lean")]
            let done = (kernel.invoke)(&ctx);
            crate::marks::op_done();
            done.map_err(|error| InterpreterError::Kernel {
                op: index,
                code: op_name(model, index),
                error,
            })?;
        }
        Ok(())
    }
}
