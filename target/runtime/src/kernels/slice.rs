//! SLICE: a box of `size` elements from `begin` along each axis (up to five
//! dimensions) — int8, int16, float32, int32 and bool, bit-exact with TFLM.
//!
//! `begin` and `size` are int32 or int64 vectors (both the same type); a
//! size of -1 takes the rest of the axis. TFLM reads them at every invoke
//! and checks that `0 <= begin <= dim`, that the size fits what remains,
//! and that the box holds as many elements as the model's output (its
//! shape is the model's, fixed when the arena is planned). hilt does the
//! same checks once in prepare when both are constant, as converters write
//! them, and at invoke otherwise (a typed error, not an out-of-bounds
//! read). The walk is STRIDED_SLICE's with unit strides.

use bytemuck::{Pod, Zeroable};

use super::strided_slice::{Masks, SlicePlan};
use super::tensor::{
    Dims, constant_data, element_size, expect_type, index_at, same_type_and_quant,
};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The SLICE kernel.
pub const REGISTRATION: Registration = Registration {
    name: "SLICE",
    prepare,
    invoke,
};

/// TFLM's `kMaxDim` for SLICE.
const MAX_SLICE_RANK: usize = 5;

/// Op data (100 bytes): the walk when begin and size are constant, else
/// what invoke needs to build it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct SliceData {
    plan: SlicePlan,
    /// 1 when begin and size are read at invoke.
    dynamic: u32,
    /// `TensorType` code of begin and size.
    index_type: u32,
    /// Input rank and output elements.
    rank: u32,
    output_elements: u32,
}

// The op data's size, as its documentation gives it.
const _: () = assert!(size_of::<SliceData>() == 100);

const BAD_BOX: KernelError = KernelError::UnsupportedParameter {
    what: "SLICE begin and size must select a box inside the input as large as the output",
};

/// The walk for `begin` and `size` (their bytes, `dtype` int32 or int64)
/// over `shape`, checked as TFLM checks it.
fn walk(
    shape: &[i32],
    dtype: TensorType,
    begin: &[u8],
    size: &[u8],
    output_elements: u32,
    element: u32,
) -> Result<SlicePlan, KernelError> {
    let n = shape.len();
    let (mut start, mut stop) = ([0i32; MAX_SLICE_RANK], [0i32; MAX_SLICE_RANK]);
    let mut elements = 1i64;
    for d in 0..n {
        let dim = i64::from(shape[d]);
        let b = index_at(dtype, begin, d).ok_or(BAD_BOX)?;
        let s = index_at(dtype, size, d).ok_or(BAD_BOX)?;
        if !(0..=dim).contains(&b) {
            return Err(BAD_BOX);
        }
        let s = if s == -1 { dim - b } else { s };
        if !(0..=dim - b).contains(&s) {
            return Err(BAD_BOX);
        }
        elements *= s;
        // Both fit in i32: 0 <= b <= b + s <= dim.
        (start[d], stop[d]) = (b as i32, (b + s) as i32);
    }
    if elements != i64::from(output_elements) {
        return Err(BAD_BOX);
    }
    let unit = [1i32; MAX_SLICE_RANK];
    SlicePlan::new(
        shape,
        &start[..n],
        &stop[..n],
        &unit[..n],
        Masks::default(),
        element,
    )
    .ok_or(KernelError::Internal)
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let begin = ctx.input(1)?;
    let size = ctx.input(2)?;
    let output = ctx.output(0)?;
    same_type_and_quant(
        &input,
        &output,
        "SLICE input and output quantisation must match",
    )?;
    let element = element_size(
        &input,
        &[
            TensorType::FLOAT32,
            TensorType::INT32,
            TensorType::INT8,
            TensorType::INT16,
            TensorType::BOOL,
        ],
    )?;
    let dims = Dims::of(&input)?;
    let n = dims.rank();
    if n > MAX_SLICE_RANK {
        return Err(KernelError::UnsupportedRank {
            tensor: input.index,
            rank: n as u32,
        });
    }
    expect_type(&begin, &[TensorType::INT32, TensorType::INT64])?;
    if size.dtype != begin.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: size.index,
            dtype: size.dtype.0,
        });
    }
    for t in [&begin, &size] {
        if Dims::of(t)?.as_slice() != [n as i32] {
            return Err(KernelError::ShapeMismatch { tensor: t.index });
        }
    }
    let output_elements =
        u32::try_from(Dims::of(&output)?.elements()).map_err(|_| KernelError::ShapeMismatch {
            tensor: output.index,
        })?;
    let mut data = SliceData {
        index_type: begin.dtype.0 as u32,
        rank: n as u32,
        output_elements,
        ..SliceData::default()
    };
    match (constant_data(&begin)?, constant_data(&size)?) {
        (Some(b), Some(s)) => {
            data.plan = walk(dims.as_slice(), begin.dtype, b, s, output_elements, element)?;
        }
        _ => {
            data.dynamic = 1;
            // Only the input's shape and the element size, for invoke.
            data.plan = SlicePlan::new(
                dims.as_slice(),
                &[0; MAX_SLICE_RANK][..n],
                dims.as_slice(),
                &[1; MAX_SLICE_RANK][..n],
                Masks::default(),
                element,
            )
            .ok_or(KernelError::Internal)?;
        }
    }
    ctx.store(&data)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &SliceData = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    if data.dynamic == 0 {
        return data.plan.run(input.data, output.data);
    }
    let rank = data.rank as usize;
    let shape = data
        .plan
        .size
        .get(MAX_SLICE_RANK - rank..)
        .ok_or(KernelError::Internal)?;
    let plan = walk(
        shape,
        TensorType(data.index_type as i8),
        ctx.input(1)?.data,
        ctx.input(2)?.data,
        data.output_elements,
        data.plan.element,
    )?;
    plan.run(input.data, output.data)
}
