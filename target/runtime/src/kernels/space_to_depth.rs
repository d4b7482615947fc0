//! SPACE_TO_DEPTH and DEPTH_TO_SPACE: move `block × block` pixel tiles of
//! an NHWC image into the channels and back — int8 and float32 (TFLM's
//! micro kernels' types), bit-exact with TFLM.
//!
//! Both are one walk over the spatial ("space") tensor: pixel `(b, y, x)`
//! and its `c` channels sit in the depth tensor at pixel
//! `(b, y / block, x / block)`, channels from
//! `((y % block) * block + x % block) * c`. SPACE_TO_DEPTH copies space to
//! depth along that walk, DEPTH_TO_SPACE depth to space.

use bytemuck::{Pod, Zeroable};

use super::tensor::{Dims, element_size, same_type_and_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The SPACE_TO_DEPTH kernel.
pub const SPACE_TO_DEPTH: Registration = Registration {
    name: "SPACE_TO_DEPTH",
    prepare: prepare_space_to_depth,
    invoke,
};

/// The DEPTH_TO_SPACE kernel.
pub const DEPTH_TO_SPACE: Registration = Registration {
    name: "DEPTH_TO_SPACE",
    prepare: prepare_depth_to_space,
    invoke,
};

/// Op data (28 bytes): the space tensor's shape, the block and direction.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct BlockPlan {
    batch: u32,
    height: u32,
    width: u32,
    /// Channels of the space tensor.
    channels: u32,
    block: u32,
    element: u32,
    /// 1 when the input is the space tensor (SPACE_TO_DEPTH).
    to_depth: u32,
}

// The op data's size, as its documentation gives it.
const _: () = assert!(size_of::<BlockPlan>() == 28);

fn prepare_space_to_depth(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let block = ctx
        .op()
        .raw()
        .builtin_options_as_space_to_depth_options()
        .ok_or(KernelError::MissingOptions)?
        .block_size();
    prepare(ctx, block, true)
}

fn prepare_depth_to_space(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let block = ctx
        .op()
        .raw()
        .builtin_options_as_depth_to_space_options()
        .ok_or(KernelError::MissingOptions)?
        .block_size();
    prepare(ctx, block, false)
}

fn prepare(
    ctx: &mut PrepareContext<'_, '_, '_>,
    block: i32,
    to_depth: bool,
) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    let element = element_size(&input, &[TensorType::INT8, TensorType::FLOAT32])?;
    same_type_and_quant(
        &input,
        &output,
        "SPACE_TO_DEPTH and DEPTH_TO_SPACE input and output quantisation must match",
    )?;
    let (space, depth) = if to_depth {
        (&input, &output)
    } else {
        (&output, &input)
    };
    let (s, d) = (Dims::of(space)?, Dims::of(depth)?);
    for t in [space, depth] {
        let rank = Dims::of(t)?.rank();
        if rank != 4 {
            return Err(KernelError::UnsupportedRank {
                tensor: t.index,
                rank: rank as u32,
            });
        }
    }
    let b =
        u32::try_from(block)
            .ok()
            .filter(|&b| b >= 1)
            .ok_or(KernelError::UnsupportedParameter {
                what: "SPACE_TO_DEPTH and DEPTH_TO_SPACE block_size must be positive",
            })? as i32;
    // Wide enough that no product of dimensions and blocks overflows.
    let g = |t: &Dims, i: usize| i128::from(t.get(i));
    let b = i128::from(b);
    let fits = (0..4).all(|i| g(&s, i) >= 0)
        && g(&s, 1) % b == 0
        && g(&s, 2) % b == 0
        && [g(&d, 0), g(&d, 1), g(&d, 2), g(&d, 3)]
            == [g(&s, 0), g(&s, 1) / b, g(&s, 2) / b, g(&s, 3) * b * b];
    if !fits {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let [batch, height, width, channels] = [0, 1, 2, 3].map(|i| s.get(i) as u32);
    ctx.store(&BlockPlan {
        batch,
        height,
        width,
        channels,
        block: b as u32,
        element,
        to_depth: u32::from(to_depth),
    })
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let p: &BlockPlan = ctx.op_data()?;
    let input = ctx.input(0)?.data;
    let output = ctx.output(0)?.data;
    let (h, w, bs) = (p.height as usize, p.width as usize, p.block as usize);
    let run = p.channels as usize * p.element as usize;
    let (dh, dw) = (h / bs, w / bs);
    let mut space_at = 0;
    for b in 0..p.batch as usize {
        for y in 0..h {
            for x in 0..w {
                let pixel = (b * dh + y / bs) * dw + x / bs;
                let depth_at = (pixel * bs * bs + (y % bs) * bs + x % bs) * run;
                let (from, to) = if p.to_depth == 1 {
                    (space_at, depth_at)
                } else {
                    (depth_at, space_at)
                };
                let src = input.get(from..from + run).ok_or(KernelError::Internal)?;
                output
                    .get_mut(to..to + run)
                    .ok_or(KernelError::Internal)?
                    .copy_from_slice(src);
                space_at += run;
            }
        }
    }
    Ok(())
}
