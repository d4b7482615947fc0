//! Fused chains, the lean schedule's ([`crate::schedule::fused`]): two
//! int8 convolutions, the first one's output never whole but a ring of the
//! rows the second one's next band of output rows reads; and, when an ADD
//! of the chain's input and the second convolution's output ends the
//! chain, each row of the ADD's output written over the input row it read.
//!
//! The chain's last op runs the whole chain at invoke and the ops before
//! it do nothing (`invoke`). Each band is an ordinary call of the
//! convolution's own kernel over the rows it reads (`conv_rows::RowConv`), each
//! sum the ADD's own (`add_rows::RowAdd`): the outputs are the unfused ops'
//! bits.

use super::KernelError;
use super::context::PrepareContext;
use crate::schedule::Fused;

/// Asks for the chain's scratch, after the last op's own: the ring, then
/// (with an ADD) one band of the second convolution's output rows.
pub(crate) fn prepare(
    ctx: &mut PrepareContext<'_, '_, '_>,
    chain: &Fused,
) -> Result<(), KernelError> {
    ctx.request_scratch(chain.ring_bytes, 16)?;
    if chain.sum.is_some() {
        ctx.request_scratch(chain.row_bytes, 16)?;
    }
    Ok(())
}

#[cfg(not(feature = "no-lean"))]
pub(crate) use chain::invoke;

/// The invoke side: not in a `no-lean` build, whose interpreter calls the
/// kernels themselves.
#[cfg(not(feature = "no-lean"))]
mod chain {
    use core::ops::Range;

    use crate::kernels::add_rows::RowAdd;
    use crate::kernels::context::{InvokeContext, OpRecord};
    use crate::kernels::conv_rows::RowConv;
    use crate::kernels::{KernelError, Registration};

    /// Runs the op of `ctx`: its kernel, nothing for a fused chain's op before
    /// its last, the whole chain for its last.
    #[inline(always)]
    pub(crate) fn invoke(
        kernel: &Registration,
        ctx: &InvokeContext<'_, '_>,
        records: &[OpRecord],
    ) -> Result<(), KernelError> {
        // One test on the common path: the kernel runs the op.
        if ctx.record.lean_runs() {
            return chain_op(ctx, records);
        }
        (kernel.invoke)(ctx)
    }

    /// An op the lean schedule runs: nothing for a fused chain's op before
    /// its last, the chain at its last, an ADD over its operand.
    #[inline(never)]
    fn chain_op(ctx: &InvokeContext<'_, '_>, records: &[OpRecord]) -> Result<(), KernelError> {
        if ctx.record.runs_chain() {
            return run(ctx, records);
        }
        if ctx.record.scratch_count & OpRecord::ADD_IN_PLACE != 0 {
            return crate::kernels::add_rows::add_in_place(ctx);
        }
        Ok(())
    }

    /// The chain whose last op is `ctx`'s: the ops right before it that
    /// allocate marked fused (in `records`) are its first ones.
    fn run(ctx: &InvokeContext<'_, '_>, records: &[OpRecord]) -> Result<(), KernelError> {
        let last = ctx.op_index;
        let mut head = last;
        while head > 0 && records.get(head as usize - 1).is_some_and(|r| r.fused()) {
            head -= 1;
        }
        let scratch = ctx.record.scratch_buffers();
        match last - head {
            // CONV_2D → CONV_2D.
            1 => {
                let first = ctx.op_context(records, head)?;
                let (c1, c2) = (RowConv::of(&first)?, RowConv::of(ctx)?);
                let x = first.input(0)?.values::<i8>()?;
                let ring = ctx.scratch(scratch.checked_sub(1).ok_or(KernelError::Internal)?)?;
                let out = ctx.output(0)?.values::<i8>()?;
                chain_rows(&c1, &c2, as_i8(ring), Io::Apart { x, out })
            }
            // CONV_2D → CONV_2D → ADD with the chain's input.
            2 => {
                let (first, second) = (
                    ctx.op_context(records, head)?,
                    ctx.op_context(records, head + 1)?,
                );
                let (c1, c2) = (RowConv::of(&first)?, RowConv::of(&second)?);
                let add = RowAdd::of(ctx)?;
                let x = first.inputs.get(0).ok_or(KernelError::Internal)?;
                let position = (0..2)
                    .find(|&p| ctx.inputs.get(p) == Some(x))
                    .ok_or(KernelError::Internal)?;
                let io = ctx.shared_io_at(position)?.ok_or(KernelError::Internal)?;
                let k = scratch.checked_sub(2).ok_or(KernelError::Internal)?;
                let (ring, row) = (ctx.scratch(k)?, ctx.scratch(k + 1)?);
                let io = Io::Over {
                    io: as_i8(io),
                    row: as_i8(row),
                    add: &add,
                    x_first: position == 0,
                };
                chain_rows(&c1, &c2, as_i8(ring), io)
            }
            _ => Err(KernelError::Internal),
        }
    }

    /// `bytes` as `i8`s.
    fn as_i8(bytes: &mut [u8]) -> &mut [i8] {
        bytemuck::cast_slice_mut(bytes)
    }

    /// Where a chain reads its input rows and puts its output rows.
    enum Io<'a> {
        /// The input, and the second convolution's output in a buffer of its
        /// own.
        Apart { x: &'a [i8], out: &'a mut [i8] },
        /// The ADD's output over its input: each band of the second
        /// convolution's output rows goes to `row`, is summed with the input
        /// rows (input 1 of the ADD when `x_first`) and copied over them.
        Over {
            io: &'a mut [i8],
            row: &'a mut [i8],
            add: &'a RowAdd,
            x_first: bool,
        },
    }

    impl Io<'_> {
        /// Input bytes `at`.
        fn input(&self, at: Range<usize>) -> Result<&[i8], KernelError> {
            let x: &[i8] = match self {
                Io::Apart { x, .. } => x,
                Io::Over { io, .. } => io,
            };
            x.get(at).ok_or(KernelError::Internal)
        }

        /// Where output rows `rows` (of `len` bytes each) of the second
        /// convolution go.
        fn output_rows(
            &mut self,
            rows: Range<usize>,
            len: usize,
        ) -> Result<&mut [i8], KernelError> {
            match self {
                Io::Apart { out, .. } => out.get_mut(rows.start * len..rows.end * len),
                Io::Over { row, .. } => row.get_mut(..rows.len() * len),
            }
            .ok_or(KernelError::Internal)
        }

        /// Rows `rows` done: with an ADD, their sums over the input rows.
        fn finish_rows(&mut self, rows: Range<usize>, len: usize) -> Result<(), KernelError> {
            if let Io::Over {
                io,
                row,
                add,
                x_first,
            } = self
            {
                let at = rows.start * len..rows.end * len;
                let (x, sum) = (
                    io.get(at.clone()).ok_or(KernelError::Internal)?,
                    row.get_mut(..at.len()).ok_or(KernelError::Internal)?,
                );
                add.sum_into(x, sum, *x_first)?;
                io[at].copy_from_slice(sum);
            }
            Ok(())
        }
    }

    /// The second convolution's output rows in order, a band at a time, each
    /// band from the rows of the first one's output it reads, computed once
    /// into `ring` (held from its start, dropped once no later band reads
    /// them). Bands are as tall as the ring (and, with an ADD, the operand
    /// rows) holds.
    fn chain_rows(
        c1: &RowConv<'_>,
        c2: &RowConv<'_>,
        ring: &mut [i8],
        mut io: Io<'_>,
    ) -> Result<(), KernelError> {
        let (g1, g2) = (c1.geometry(), c2.geometry());
        if g2.y.in_size != g1.y.out_size || g2.x.in_size != g1.x.out_size || g2.in_c != g1.out_c {
            return Err(KernelError::Internal);
        }
        let x_row = g1.x.in_size.max(0) as usize * g1.in_c as usize;
        let y_row = g1.x.out_size.max(0) as usize * g1.out_c as usize;
        let z_row = g2.x.out_size.max(0) as usize * g2.out_c as usize;
        let ring_rows = ring.len() / y_row.max(1);
        // A band of `b` rows reads `(b - 1) · stride + effective` rows.
        let effective = ((g2.y.filter - 1) * g2.y.dilation + 1).max(1) as usize;
        let stride = g2.y.stride.max(1) as usize;
        let mut band = (ring_rows.max(effective) - effective) / stride + 1;
        if let Io::Over { row, .. } = &io {
            band = band.min(row.len() / z_row.max(1));
        }
        let rows = g2.y.out_size.max(0) as usize;
        // Rows `held` of the first output sit from the ring's start.
        let mut held = 0..0;
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + band.max(1)).min(rows);
            let (axis2, first) = g2.y.band(r0 as i32, r1 as i32);
            let needed = first.max(0) as usize..(first + axis2.in_size).max(first) as usize;
            if needed.start < held.start {
                return Err(KernelError::Internal);
            }
            if needed.start >= held.end {
                held = needed.start..needed.start;
            } else if needed.start > held.start {
                let drop = (needed.start - held.start) * y_row;
                ring.copy_within(drop..held.len() * y_row, 0);
                held.start = needed.start;
            }
            if needed.end > held.end {
                if needed.end - held.start > ring_rows {
                    return Err(KernelError::Internal);
                }
                let (axis1, x_first) = g1.y.band(held.end as i32, needed.end as i32);
                let read = x_first.max(0) as usize..(x_first + axis1.in_size).max(x_first) as usize;
                // With an ADD, input rows below `r0` are output rows already.
                if matches!(io, Io::Over { .. }) && read.start < r0 && !read.is_empty() {
                    return Err(KernelError::Internal);
                }
                let x = io.input(read.start * x_row..read.end * x_row)?;
                let at = (held.end - held.start) * y_row..(needed.end - held.start) * y_row;
                c1.rows(&axis1, x, &mut ring[at])?;
                held.end = needed.end;
            }
            let read = &ring[..(needed.end - held.start) * y_row];
            c2.rows(&axis2, read, io.output_rows(r0..r1, z_row)?)?;
            io.finish_rows(r0..r1, z_row)?;
            r0 = r1;
        }
        Ok(())
    }
}
