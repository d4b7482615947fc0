//! CONCATENATION: inputs joined along one axis — int8, int16, float32 and
//! int32, bit-exact with TFLM.
//!
//! TFLM's micro kernel copies every input's values as they are, for int8
//! too: it records the input scales and zero points but its int8 path is the
//! plain `Concatenation` copy (the requantising `ConcatenationWithScaling`
//! is uint8 only). The converter gives concatenated tensors one
//! quantisation, so the copy is right for converted models, and hilt copies
//! too so its outputs stay TFLM's. Like TFLM it refuses a fused activation.
//!
//! Prepare checks the shapes (every dimension but the axis equal to the
//! output's, the axis sizes summing to the output's) and stores, per input,
//! the bytes it contributes to each outer slice; invoke is one slice copy
//! per input per outer index.

use super::tensor::Dims;
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::{ActivationFunctionType, TensorType};

/// The CONCATENATION kernel.
pub const REGISTRATION: Registration = Registration {
    name: "CONCATENATION",
    prepare,
    invoke,
};

fn element_bytes(t: &TensorInfo<'_>) -> Result<u32, KernelError> {
    match t.dtype {
        TensorType::INT8 => Ok(1),
        TensorType::INT16 => Ok(2),
        TensorType::FLOAT32 | TensorType::INT32 => Ok(4),
        other => Err(KernelError::UnsupportedType {
            tensor: t.index,
            dtype: other.0,
        }),
    }
}

/// The positive axis of `axis` for `rank` dimensions.
pub(crate) fn positive_axis(axis: i32, rank: usize) -> Option<usize> {
    let axis = if axis < 0 { axis + rank as i32 } else { axis };
    usize::try_from(axis).ok().filter(|&a| a < rank)
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_concatenation_options()
        .ok_or(KernelError::MissingOptions)?;
    if options.fused_activation_function() != ActivationFunctionType::NONE {
        return Err(KernelError::UnsupportedParameter {
            what: "CONCATENATION with a fused activation",
        });
    }
    let output = ctx.output(0)?;
    element_bytes(&output)?;
    let out_dims = Dims::of(&output)?;
    let rank = out_dims.rank();
    let axis = positive_axis(options.axis(), rank).ok_or(KernelError::UnsupportedParameter {
        what: "CONCATENATION axis out of range",
    })?;
    let n = ctx.input_count();
    let mut sum = 0i64;
    for i in 0..n {
        let input = ctx.input(i)?;
        if input.dtype != output.dtype {
            return Err(KernelError::UnsupportedType {
                tensor: input.index,
                dtype: input.dtype.0,
            });
        }
        let dims = Dims::of(&input)?;
        let fits =
            dims.rank() == rank && (0..rank).all(|d| d == axis || dims.get(d) == out_dims.get(d));
        if !fits {
            return Err(KernelError::ShapeMismatch {
                tensor: input.index,
            });
        }
        sum += i64::from(dims.get(axis));
    }
    if sum != i64::from(out_dims.get(axis)) || n == 0 {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let outer: usize = out_dims.as_slice()[..axis]
        .iter()
        .map(|&d| d as usize)
        .product();
    let outer = u32::try_from(outer).map_err(|_| KernelError::ShapeMismatch {
        tensor: output.index,
    })?;
    // Outer slices and the number of inputs (invoke's context has no count).
    ctx.store(&[outer, n as u32])
}

/// Joins `inputs` (each `outer` slices, one after another) into `output`:
/// slice `k` of every input in turn, for each `k`.
pub(crate) fn concatenate<'a>(
    outer: usize,
    inputs: impl Iterator<Item = Result<&'a [u8], KernelError>> + Clone,
    output: &mut [u8],
) -> Result<(), KernelError> {
    let mut at = 0;
    for k in 0..outer {
        for input in inputs.clone() {
            let input = input?;
            let slice = input.len() / outer;
            let to = output
                .get_mut(at..at + slice)
                .ok_or(KernelError::Internal)?;
            to.copy_from_slice(&input[k * slice..(k + 1) * slice]);
            at += slice;
        }
    }
    if at == output.len() {
        Ok(())
    } else {
        Err(KernelError::Internal)
    }
}

/// Copies each input's slices into the output in turn (op data
/// `[outer, inputs]`); PACK runs the same walk.
pub(crate) fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let &[outer, n] = ctx.op_data::<[u32; 2]>()?;
    let outer = outer as usize;
    let output = ctx.output(0)?;
    if outer == 0 {
        return Ok(());
    }
    let inputs = (0..n as usize).map(|i| ctx.input(i).map(|t| t.data));
    concatenate(outer, inputs, output.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_along_the_middle_axis() {
        // [2,1,2] and [2,2,2] along axis 1 → [2,3,2].
        let a = [1u8, 2, 3, 4];
        let b = [5u8, 6, 7, 8, 9, 10, 11, 12];
        let mut out = [0u8; 12];
        let inputs = [&a[..], &b[..]].into_iter().map(Ok);
        concatenate(2, inputs, &mut out).unwrap();
        assert_eq!(out, [1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12]);
    }

    #[test]
    fn axes_resolve_from_the_end() {
        assert_eq!(positive_axis(-1, 4), Some(3));
        assert_eq!(positive_axis(3, 4), Some(3));
        assert_eq!(positive_axis(4, 4), None);
        assert_eq!(positive_axis(-5, 4), None);
    }
}
