//! MIRROR_PAD: pad a tensor with its own mirror image — int8 and float32
//! (TFLM's micro kernel's types), bit-exact with TFLM.
//!
//! REFLECT leaves the edge element out of the mirror (`[1 2 3]` padded by
//! two on the left is `[3 2 1 2 3]`), SYMMETRIC repeats it (`[2 1 1 2 3]`).
//! The paddings are a `[rank, 2]` int32 or int64 tensor. TFLM reads them at
//! every invoke and trusts them; hilt checks them — each pad at most the
//! axis size (less one for REFLECT) and the padded shape the model's
//! output — once in prepare when they are constant, and at invoke
//! otherwise, so a bad padding is a typed error rather than a read outside
//! the input. Output element `o` of an axis with left pad `l` and size `n`
//! reads input element `l - o - 1 + k` left of the input (k = 1 for
//! REFLECT, 0 for SYMMETRIC), `o - l` inside it, and `2n - 1 - k - (o - l)`
//! right of it.

use bytemuck::{Pod, Zeroable};

use super::tensor::{
    Dims, MAX_RANK, constant_data, element_size, expect_type, index_at, same_type_and_quant,
};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::{MirrorPadMode, TensorType};

/// The MIRROR_PAD kernel.
pub const REGISTRATION: Registration = Registration {
    name: "MIRROR_PAD",
    prepare,
    invoke,
};

/// Op data (92 bytes): shapes and left pads per axis.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct MirrorPlan {
    element: u32,
    rank: u32,
    /// 1 for REFLECT (the edge is not repeated), 0 for SYMMETRIC.
    reflect: u32,
    /// 1 when the paddings are read at invoke.
    dynamic: u32,
    /// `TensorType` code of the paddings.
    padding_type: u32,
    input: [u32; MAX_RANK],
    output: [u32; MAX_RANK],
    left: [u32; MAX_RANK],
}

// The op data's size, as its documentation gives it.
const _: () = assert!(size_of::<MirrorPlan>() == 92);

const BAD_PADDING: KernelError = KernelError::UnsupportedParameter {
    what: "MIRROR_PAD paddings must be at most the axis size (less one for REFLECT) and give the output's shape",
};

impl MirrorPlan {
    /// Fills `left` from the paddings' bytes, checking them against the
    /// input and output shapes.
    fn set_paddings(&mut self, bytes: &[u8]) -> Result<(), KernelError> {
        let dtype = TensorType(self.padding_type as i8);
        for d in 0..self.rank as usize {
            let n = i64::from(self.input[d]);
            let most = n - i64::from(self.reflect);
            let l = index_at(dtype, bytes, 2 * d).ok_or(BAD_PADDING)?;
            let r = index_at(dtype, bytes, 2 * d + 1).ok_or(BAD_PADDING)?;
            let fits = (0..=most).contains(&l)
                && (0..=most).contains(&r)
                && l + n + r == i64::from(self.output[d]);
            if !fits {
                return Err(BAD_PADDING);
            }
            self.left[d] = l as u32;
        }
        Ok(())
    }

    /// Input index along axis `d` for output index `o`.
    fn source(&self, d: usize, o: u32) -> u32 {
        let (l, n, k) = (self.left[d], self.input[d], self.reflect);
        if o < l {
            l - o - 1 + k
        } else if o - l < n {
            o - l
        } else {
            2 * n - 1 - k - (o - l)
        }
    }

    fn run(&self, input: &[u8], output: &mut [u8]) -> Result<(), KernelError> {
        let (e, rank) = (self.element as usize, self.rank as usize);
        let mut pitch = [0usize; MAX_RANK];
        let mut p = 1;
        for d in (0..rank).rev() {
            pitch[d] = p;
            p *= self.input[d] as usize;
        }
        if input.len() != p * e {
            return Err(KernelError::Internal);
        }
        let mut at = [0u32; MAX_RANK];
        for chunk in output.chunks_exact_mut(e) {
            let from: usize = (0..rank)
                .map(|d| self.source(d, at[d]) as usize * pitch[d])
                .sum::<usize>()
                * e;
            chunk.copy_from_slice(input.get(from..from + e).ok_or(KernelError::Internal)?);
            for d in (0..rank).rev() {
                at[d] += 1;
                if at[d] < self.output[d] {
                    break;
                }
                at[d] = 0;
            }
        }
        Ok(())
    }
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let paddings = ctx.input(1)?;
    let output = ctx.output(0)?;
    let mode = ctx
        .op()
        .raw()
        .builtin_options_as_mirror_pad_options()
        .ok_or(KernelError::MissingOptions)?
        .mode();
    same_type_and_quant(
        &input,
        &output,
        "MIRROR_PAD input and output quantisation must match",
    )?;
    let element = element_size(&input, &[TensorType::FLOAT32, TensorType::INT8])?;
    expect_type(&paddings, &[TensorType::INT32, TensorType::INT64])?;
    let (dims, out) = (Dims::of(&input)?, Dims::of(&output)?);
    let rank = dims.rank();
    if out.rank() != rank || Dims::of(&paddings)?.as_slice() != [rank as i32, 2] {
        return Err(KernelError::ShapeMismatch {
            tensor: paddings.index,
        });
    }
    let mut plan = MirrorPlan {
        element,
        rank: rank as u32,
        reflect: u32::from(mode == MirrorPadMode::REFLECT),
        padding_type: paddings.dtype.0 as u32,
        ..MirrorPlan::default()
    };
    for d in 0..rank {
        plan.input[d] = dims.get(d).max(0) as u32;
        plan.output[d] = out.get(d).max(0) as u32;
    }
    match constant_data(&paddings)? {
        Some(bytes) => plan.set_paddings(bytes)?,
        None => plan.dynamic = 1,
    }
    ctx.store(&plan)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let stored: &MirrorPlan = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    if stored.dynamic == 0 {
        return stored.run(input.data, output.data);
    }
    let mut plan = *stored;
    plan.set_paddings(ctx.input(1)?.data)?;
    plan.run(input.data, output.data)
}
