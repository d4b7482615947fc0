//! An int8 ADD of operands of its output's shape, a run of elements at a
//! time, for the lean schedule: a fused chain's rows (`kernels::fused`),
//! and the op written over one of its operands. The sums are the ADD
//! kernel's ([`add`]'s tables and requantisation), so the bits are too.

use super::add::{AddData, KIND_INT8, QuantizedAdd, SmallAdd, finish, scaled_table};
use super::{InvokeContext, KernelError};

/// An int8 ADD of operands of its output's shape, set up once: sums of
/// runs of elements, the same bits as the whole op computes there (a
/// fused chain's rows, `kernels::fused`, or the op written over one of
/// its operands under the lean schedule).
pub(crate) struct RowAdd {
    p: QuantizedAdd,
    small: Option<SmallAdd>,
    /// Each input's 256 scaled values.
    tables: [[i32; 256]; 2],
}

impl RowAdd {
    /// The ADD whose context is `ctx`; `Internal` unless it is int8 over
    /// operands of its output's shape.
    pub(crate) fn of(ctx: &InvokeContext<'_, '_>) -> Result<Self, KernelError> {
        Self::from_data(ctx.op_data()?)
    }

    fn from_data(data: &AddData) -> Result<Self, KernelError> {
        if data.kind != KIND_INT8 || !data.walk.is_flat() {
            return Err(KernelError::Internal);
        }
        let p = data.quantized;
        let small = SmallAdd::new(&p).filter(|_| p.activation_min <= p.activation_max);
        let tables = match &small {
            Some(q) => [q.table(0), q.table(1)],
            None => [
                scaled_table(
                    p.input1_offset,
                    p.left_shift,
                    p.input1_multiplier,
                    p.input1_shift,
                ),
                scaled_table(
                    p.input2_offset,
                    p.left_shift,
                    p.input2_multiplier,
                    p.input2_shift,
                ),
            ],
        };
        Ok(RowAdd { p, small, tables })
    }

    /// `into[i] = other[i] + into[i]` (`other` input 1 when `other_first`,
    /// else input 2), over runs of one length.
    pub(crate) fn sum_into(
        &self,
        other: &[i8],
        into: &mut [i8],
        other_first: bool,
    ) -> Result<(), KernelError> {
        if other.len() != into.len() {
            return Err(KernelError::Internal);
        }
        let tables = (&self.tables[0], &self.tables[1]);
        match (&self.small, other_first) {
            (Some(q), true) => sum_runs::<true>(|s| q.finish(s), tables, other, into),
            (Some(q), false) => sum_runs::<false>(|s| q.finish(s), tables, other, into),
            (None, true) => sum_runs::<true>(|s| finish(s, &self.p) as i8, tables, other, into),
            (None, false) => sum_runs::<false>(|s| finish(s, &self.p) as i8, tables, other, into),
        }
        Ok(())
    }
}

/// `into[i] = finish(t1[a] + t2[b])` with `(a, b)` = `(other[i],
/// into[i])` when `OTHER_FIRST`, else the other way round: one loop per
/// order, as the ADD kernel's flat loop.
#[inline(always)]
fn sum_runs<const OTHER_FIRST: bool>(
    finish: impl Fn(i32) -> i8,
    (t1, t2): (&[i32; 256], &[i32; 256]),
    other: &[i8],
    into: &mut [i8],
) {
    for (o, &v) in into.iter_mut().zip(other) {
        let (a, b) = if OTHER_FIRST { (v, *o) } else { (*o, v) };
        *o = finish(t1[a as u8 as usize] + t2[b as u8 as usize]);
    }
}

/// An ADD the lean schedule runs over one of its operands' buffers (the
/// plan made that operand and the output one): each sum written over the
/// element it read. `Internal` for any other op.
pub(crate) fn add_in_place(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &AddData = ctx.op_data()?;
    for position in 0..2 {
        if let Some(shared) = ctx.shared_io_at(position)? {
            let other = ctx.input(1 - position)?.values::<i8>()?;
            let n = data.walk.len_out as usize;
            let into: &mut [i8] =
                bytemuck::cast_slice_mut(shared.get_mut(..n).ok_or(KernelError::Internal)?);
            return RowAdd::from_data(data)?.sum_into(other, into, position == 1);
        }
    }
    Err(KernelError::Internal)
}
