//! SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND: trade spatial resolution for
//! batch — 3-D (NHC) and 4-D (NHWC) int8 and float32 (TFLM's micro
//! kernels' types), bit-exact with TFLM.
//!
//! Both relate a "space" tensor to a "batch" tensor `block_h × block_w`
//! times its batch: batch pixel `(i, y, x)`, with
//! `i = (dy * block_w + dx) * space_batch + b`, is space pixel
//! `(b, y * block_h + dy - top, x * block_w + dx - left)`. SPACE_TO_BATCH_ND
//! walks its output (the batch tensor), copying from the padded input and
//! writing the padding where the space pixel is outside the input — the
//! output zero point's byte for int8, as TFLM's `memset` writes it, zero for
//! float32. BATCH_TO_SPACE_ND walks its input, dropping the pixels that fall
//! in the crops. The block shape and paddings/crops are int32 vectors; TFLM
//! reads them at every invoke and trusts them. hilt checks them — a
//! positive block, no negative padding, and a padded space tensor that
//! tiles exactly into the model's batch tensor — once in prepare when they
//! are constant (as converters write them), and at invoke otherwise, so a
//! bad one is a typed error rather than a read or write out of bounds.

use bytemuck::{Pod, Zeroable};

use super::tensor::{Dims, element_size, expect_type, quant, same_type_and_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The SPACE_TO_BATCH_ND kernel.
pub const SPACE_TO_BATCH_ND: Registration = Registration {
    name: "SPACE_TO_BATCH_ND",
    prepare: prepare_space_to_batch,
    invoke,
};

/// The BATCH_TO_SPACE_ND kernel.
pub const BATCH_TO_SPACE_ND: Registration = Registration {
    name: "BATCH_TO_SPACE_ND",
    prepare: prepare_batch_to_space,
    invoke,
};

/// Op data (60 bytes): both tensors as NHWC (W = 1 for 3-D), the block,
/// the top and left padding (or crop), and the direction.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct BatchPlan {
    /// Space tensor batch, height, width.
    space: [u32; 3],
    /// Batch tensor batch, height, width.
    batched: [u32; 3],
    /// Bytes of one pixel (depth × element size).
    pixel: u32,
    block: [u32; 2],
    /// Top and left padding (SPACE_TO_BATCH_ND) or crop (BATCH_TO_SPACE_ND).
    offset: [u32; 2],
    /// 1 for SPACE_TO_BATCH_ND (input is the space tensor).
    to_batch: u32,
    /// The padding byte.
    fill: u32,
    /// Spatial dimensions: 1 for 3-D tensors, 2 for 4-D.
    spatial: u32,
    /// 1 when the block shape and paddings are read at invoke.
    dynamic: u32,
}

// The op data's size, as its documentation gives it.
const _: () = assert!(size_of::<BatchPlan>() == 60);

const BAD_GEOMETRY: KernelError = KernelError::UnsupportedParameter {
    what: "SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND need a positive block, paddings/crops of at least 0, and a padded space tensor that tiles into the batch tensor",
};

/// `len` int32 values from `bytes` (little-endian).
fn i32s(bytes: &[u8], len: usize) -> Result<[i128; 4], KernelError> {
    if bytes.len() != 4 * len {
        return Err(BAD_GEOMETRY);
    }
    let mut out = [0; 4];
    for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *v = i128::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    }
    Ok(out)
}

impl BatchPlan {
    /// Sets the block and the top and left offsets from the block shape's
    /// and paddings' bytes, checking them against the shapes.
    fn set_geometry(&mut self, block: &[u8], edges: &[u8]) -> Result<(), KernelError> {
        let spatial = self.spatial as usize;
        let block = i32s(block, spatial)?;
        let edges = i32s(edges, 2 * spatial)?;
        let two_d = spatial == 2;
        let (bh, bw) = (block[0], if two_d { block[1] } else { 1 });
        let (top, bottom) = (edges[0], edges[1]);
        let (left, right) = if two_d { (edges[2], edges[3]) } else { (0, 0) };
        let [s0, s1, s2] = self.space.map(i128::from);
        let [b0, b1, b2] = self.batched.map(i128::from);
        let fits = bh >= 1
            && bw >= 1
            && [top, bottom, left, right].iter().all(|&v| v >= 0)
            && b0 == s0 * bh * bw
            && b1 * bh == s1 + top + bottom
            && b2 * bw == s2 + left + right;
        if !fits {
            return Err(BAD_GEOMETRY);
        }
        // All four fit: each is at most a dimension of a planned tensor.
        self.block = [bh as u32, bw as u32];
        self.offset = [top as u32, left as u32];
        Ok(())
    }
}

/// `[n, h, w, c]` of a 3-D (NHC, w = 1) or 4-D tensor, wide enough that
/// no product of dimensions and blocks overflows.
fn nhwc(t: &TensorInfo<'_>) -> Result<[i128; 4], KernelError> {
    let d = Dims::of(t)?;
    let g = |i: usize| i128::from(d.get(i));
    match d.rank() {
        3 => Ok([g(0), g(1), 1, g(2)]),
        4 => Ok([g(0), g(1), g(2), g(3)]),
        rank => Err(KernelError::UnsupportedRank {
            tensor: t.index,
            rank: rank as u32,
        }),
    }
}

fn prepare_space_to_batch(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    prepare(ctx, true)
}

fn prepare_batch_to_space(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    prepare(ctx, false)
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>, to_batch: bool) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    let element = element_size(&input, &[TensorType::INT8, TensorType::FLOAT32])?;
    same_type_and_quant(
        &input,
        &output,
        "SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND input and output quantisation must match",
    )?;
    let rank = Dims::of(&input)?.rank();
    if Dims::of(&output)?.rank() != rank {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let (space_t, batch_t) = if to_batch {
        (&input, &output)
    } else {
        (&output, &input)
    };
    let (s, b) = (nhwc(space_t)?, nhwc(batch_t)?);
    if b[3] != s[3] {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let (block, edges) = (ctx.input(1)?, ctx.input(2)?);
    expect_type(&block, &[TensorType::INT32])?;
    expect_type(&edges, &[TensorType::INT32])?;
    let fill = match quant(&output) {
        Some(q) if output.dtype == TensorType::INT8 => q.zero_point as u8,
        _ => 0,
    };
    let u = |v: i128| {
        u32::try_from(v).map_err(|_| KernelError::ShapeMismatch {
            tensor: output.index,
        })
    };
    let mut plan = BatchPlan {
        space: [u(s[0])?, u(s[1])?, u(s[2])?],
        batched: [u(b[0])?, u(b[1])?, u(b[2])?],
        pixel: u(s[3] * i128::from(element))?,
        to_batch: u32::from(to_batch),
        fill: u32::from(fill),
        spatial: (rank - 2) as u32,
        ..BatchPlan::default()
    };
    match (block.constant, edges.constant) {
        (Some(k), Some(e)) => plan.set_geometry(k, e)?,
        _ => plan.dynamic = 1,
    }
    ctx.store(&plan)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let stored: &BatchPlan = ctx.op_data()?;
    let mut plan = *stored;
    if plan.dynamic == 1 {
        plan.set_geometry(ctx.input(1)?.data, ctx.input(2)?.data)?;
    }
    let p = &plan;
    let input = ctx.input(0)?.data;
    let output = ctx.output(0)?.data;
    let [sn, sh, sw] = p.space.map(|v| v as usize);
    let [bn, bh, bw] = p.batched.map(|v| v as usize);
    let [kh, kw] = p.block.map(|v| v as usize);
    let [top, left] = p.offset.map(|v| v as usize);
    let run = p.pixel as usize;
    let mut batch_at = 0;
    for i in 0..bn {
        let (b, tile) = (i % sn, i / sn);
        let (dy, dx) = (tile / kw, tile % kw);
        for y in 0..bh {
            for x in 0..bw {
                // Space coordinates, shifted by the padding so that they
                // are never negative.
                let (py, px) = (y * kh + dy, x * kw + dx);
                let inside = (top..top + sh).contains(&py) && (left..left + sw).contains(&px);
                let space_at = || ((b * sh + py - top) * sw + px - left) * run;
                match (p.to_batch == 1, inside) {
                    (true, true) => copy(input, space_at(), output, batch_at, run)?,
                    (true, false) => output
                        .get_mut(batch_at..batch_at + run)
                        .ok_or(KernelError::Internal)?
                        .fill(p.fill as u8),
                    (false, true) => copy(input, batch_at, output, space_at(), run)?,
                    (false, false) => {}
                }
                batch_at += run;
            }
        }
    }
    Ok(())
}

fn copy(
    input: &[u8],
    from: usize,
    output: &mut [u8],
    to: usize,
    run: usize,
) -> Result<(), KernelError> {
    let src = input.get(from..from + run).ok_or(KernelError::Internal)?;
    output
        .get_mut(to..to + run)
        .ok_or(KernelError::Internal)?
        .copy_from_slice(src);
    Ok(())
}
