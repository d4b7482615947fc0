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
//! in the crops. TFLM reads the block shape and paddings/crops at every
//! invoke; they fix the output shape, which hilt plans statically, so hilt
//! requires them constant and checks them against the shapes in prepare.

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

/// Op data (52 bytes): both tensors as NHWC (W = 1 for 3-D), the block,
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
}

// The op data's size, as its documentation gives it.
const _: () = assert!(size_of::<BatchPlan>() == 52);

/// A constant int32 tensor of `len` values, or an error naming it.
fn constant_i32s(t: &TensorInfo<'_>, len: usize) -> Result<[i32; 4], KernelError> {
    expect_type(t, &[TensorType::INT32])?;
    let bytes = t.constant.ok_or(KernelError::UnsupportedParameter {
        what: "SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND block shape and paddings/crops must be constant",
    })?;
    if bytes.len() != 4 * len {
        return Err(KernelError::ShapeMismatch { tensor: t.index });
    }
    let mut out = [0; 4];
    for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    if out.iter().any(|&v| v < 0) {
        return Err(KernelError::UnsupportedParameter {
            what: "SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND paddings/crops must not be negative",
        });
    }
    Ok(out)
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
    let spatial = rank - 2;
    let block = constant_i32s(&ctx.input(1)?, spatial)?;
    let edges = constant_i32s(&ctx.input(2)?, 2 * spatial)?;
    let (bh, bw) = (
        i128::from(block[0]),
        if spatial == 2 {
            i128::from(block[1])
        } else {
            1
        },
    );
    let (top, bottom) = (i128::from(edges[0]), i128::from(edges[1]));
    let (left, right) = if spatial == 2 {
        (i128::from(edges[2]), i128::from(edges[3]))
    } else {
        (0, 0)
    };
    if bh < 1 || bw < 1 {
        return Err(KernelError::UnsupportedParameter {
            what: "SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND block shape must be positive",
        });
    }
    // The space tensor, padded (or before cropping), tiles exactly.
    let fits = b[0] == s[0] * bh * bw
        && b[1] * bh == s[1] + top + bottom
        && b[2] * bw == s[2] + left + right
        && b[3] == s[3];
    if !fits {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let fill = match quant(&output) {
        Some(q) if output.dtype == TensorType::INT8 => q.zero_point as u8,
        _ => 0,
    };
    let u = |v: i128| {
        u32::try_from(v).map_err(|_| KernelError::ShapeMismatch {
            tensor: output.index,
        })
    };
    ctx.store(&BatchPlan {
        space: [u(s[0])?, u(s[1])?, u(s[2])?],
        batched: [u(b[0])?, u(b[1])?, u(b[2])?],
        pixel: u(s[3] * i128::from(element))?,
        block: [u(bh)?, u(bw)?],
        offset: [u(top)?, u(left)?],
        to_batch: u32::from(to_batch),
        fill: u32::from(fill),
    })
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let p: &BatchPlan = ctx.op_data()?;
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
