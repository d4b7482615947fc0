//! STRIDED_SLICE: every `stride`-th element from `begin` to `end` along each
//! axis (negative indices count from the end, negative strides walk
//! backwards), with the begin, end and shrink-axis masks — int8, int16,
//! float32 and int32, bit-exact with TFLM.
//!
//! TFLM's micro kernel takes constant begin/end/strides, up to four input
//! dimensions, and sets the ellipsis and new-axis masks and `offset` aside;
//! hilt refuses models that set those (rather than ignoring them) and
//! accepts up to five dimensions. Start and stop per axis follow TFLM's
//! `StridedSliceStartForAxis`/`StridedSliceEndForAxis`: a negative index
//! adds the axis size, the result is clamped (to `[0, size]` going forward,
//! `[-1, size - 1]` backward), then a mask bit replaces it by the axis end;
//! a shrunk axis takes one element. Prepare checks the output shape against
//! the element counts these give, so invoke can never write out of bounds.

use bytemuck::{Pod, Zeroable};

use super::tensor::{Dims, quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The STRIDED_SLICE kernel.
pub const REGISTRATION: Registration = Registration {
    name: "STRIDED_SLICE",
    prepare,
    invoke,
};

/// Dimensions the walk is padded to (as TFLM's reference loops).
const RANK: usize = 5;

/// The masks of `StridedSliceOptions` hilt applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Masks {
    pub(crate) begin: i32,
    pub(crate) end: i32,
    pub(crate) shrink: i32,
}

/// The walk: per padded axis, its input size, start, stop and stride.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct SlicePlan {
    pub(crate) element: u32,
    pub(crate) size: [i32; RANK],
    pub(crate) start: [i32; RANK],
    pub(crate) stop: [i32; RANK],
    pub(crate) stride: [i32; RANK],
}

fn clamp(v: i32, lo: i32, hi: i32) -> i32 {
    if hi < v {
        hi
    } else if v < lo {
        lo
    } else {
        v
    }
}

/// Elements a walk from `start` to `stop` by `stride` visits.
fn count(start: i32, stop: i32, stride: i32) -> i64 {
    let (start, stop, stride) = (i64::from(start), i64::from(stop), i64::from(stride));
    let n = if stride > 0 {
        (stop - start + stride - 1).div_euclid(stride)
    } else {
        (start - stop - stride - 1).div_euclid(-stride)
    };
    n.max(0)
}

impl SlicePlan {
    /// The walk over an input of shape `input` (`begin`, `end` and `strides`
    /// as long), or `None` for a zero stride or mismatched lengths.
    pub(crate) fn new(
        input: &[i32],
        begin: &[i32],
        end: &[i32],
        strides: &[i32],
        masks: Masks,
        element: u32,
    ) -> Option<Self> {
        let n = input.len();
        if n > RANK || begin.len() != n || end.len() != n || strides.len() != n {
            return None;
        }
        let pad = RANK - n;
        let mut plan = SlicePlan {
            element,
            size: [1; RANK],
            start: [0; RANK],
            stop: [1; RANK],
            stride: [1; RANK],
        };
        for d in 0..n {
            let (size, stride) = (input[d], strides[d]);
            if stride == 0 || size < 0 {
                return None;
            }
            let bit = |mask: i32| mask & (1 << d) != 0;
            let mut start = begin[d];
            if start < 0 {
                start = start.wrapping_add(size);
            }
            start = if stride > 0 {
                clamp(start, 0, size)
            } else {
                clamp(start, -1, size - 1)
            };
            if bit(masks.begin) {
                start = if stride > 0 { 0 } else { size - 1 };
            }
            let stop = if bit(masks.shrink) {
                if start >= size { start } else { start + 1 }
            } else {
                let mut stop = end[d];
                if stop < 0 {
                    stop = stop.wrapping_add(size);
                }
                stop = if stride > 0 {
                    clamp(stop, 0, size)
                } else {
                    clamp(stop, -1, size - 1)
                };
                if bit(masks.end) {
                    stop = if stride > 0 { size } else { -1 };
                }
                stop
            };
            plan.size[pad + d] = size;
            plan.start[pad + d] = start;
            plan.stop[pad + d] = stop;
            plan.stride[pad + d] = stride;
        }
        Some(plan)
    }

    /// Elements along padded axis `d`.
    pub(crate) fn extent(&self, d: usize) -> i64 {
        count(self.start[d], self.stop[d], self.stride[d])
    }

    /// The output shape: each axis's element count, shrunk axes dropped
    /// (`rank` is the input's, `shrink` its mask).
    pub(crate) fn output_shape(&self, rank: usize, shrink: i32) -> Dims {
        let pad = RANK - rank;
        let mut dims = [0i32; RANK];
        let mut k = 0;
        for d in 0..rank {
            if shrink & (1 << d) == 0 {
                dims[k] = i32::try_from(self.extent(pad + d)).unwrap_or(i32::MAX);
                k += 1;
            }
        }
        Dims::from_slice(&dims[..k])
    }

    /// Copies the selected elements of `input` to `output`, in order.
    pub(crate) fn run(&self, input: &[u8], output: &mut [u8]) -> Result<(), KernelError> {
        let e = self.element as usize;
        let total: i64 = (0..RANK).map(|d| self.extent(d)).product();
        let in_len: i64 = self.size.iter().map(|&s| i64::from(s)).product();
        if output.len() as i64 != total * e as i64 || input.len() as i64 != in_len * e as i64 {
            return Err(KernelError::Internal);
        }
        if total == 0 {
            return Ok(());
        }
        // Input strides in elements, outermost first.
        let mut pitch = [1i64; RANK];
        for d in (0..RANK - 1).rev() {
            pitch[d] = pitch[d + 1] * i64::from(self.size[d + 1]);
        }
        // One innermost line per outer index: a block copy when its stride
        // is 1, element by element otherwise.
        let inner = RANK - 1;
        let line = self.extent(inner) as usize;
        let mut at = [0i32; RANK];
        at.copy_from_slice(&self.start);
        for out_line in output.chunks_exact_mut(line * e) {
            let base: i64 = (0..inner).map(|d| i64::from(at[d]) * pitch[d]).sum();
            let first = base + i64::from(self.start[inner]);
            if self.stride[inner] == 1 {
                let from = usize::try_from(first).map_err(|_| KernelError::Internal)? * e;
                let block = input
                    .get(from..from + line * e)
                    .ok_or(KernelError::Internal)?;
                out_line.copy_from_slice(block);
            } else {
                for (k, chunk) in out_line.chunks_exact_mut(e).enumerate() {
                    let index = first + k as i64 * i64::from(self.stride[inner]);
                    let from = usize::try_from(index).map_err(|_| KernelError::Internal)? * e;
                    chunk.copy_from_slice(input.get(from..from + e).ok_or(KernelError::Internal)?);
                }
            }
            // Odometer over the outer padded axes, innermost fastest.
            for d in (0..inner).rev() {
                at[d] += self.stride[d];
                let more = if self.stride[d] > 0 {
                    at[d] < self.stop[d]
                } else {
                    at[d] > self.stop[d]
                };
                if more {
                    break;
                }
                at[d] = self.start[d];
            }
        }
        Ok(())
    }
}

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

/// A constant int32 vector of `n` values (begin, end or strides).
fn constant_vector(t: &TensorInfo<'_>, n: usize) -> Result<[i32; RANK], KernelError> {
    if t.dtype != TensorType::INT32 {
        return Err(KernelError::UnsupportedType {
            tensor: t.index,
            dtype: t.dtype.0,
        });
    }
    let bytes = t.constant.ok_or(KernelError::UnsupportedParameter {
        what: "STRIDED_SLICE begin, end and strides must be constant",
    })?;
    if bytes.len() != n * 4 {
        return Err(KernelError::ShapeMismatch { tensor: t.index });
    }
    let mut out = [0i32; RANK];
    for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    Ok(out)
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_strided_slice_options()
        .ok_or(KernelError::MissingOptions)?;
    if options.ellipsis_mask() != 0 || options.new_axis_mask() != 0 || options.offset() {
        return Err(KernelError::UnsupportedParameter {
            what: "STRIDED_SLICE ellipsis_mask, new_axis_mask and offset are not supported",
        });
    }
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    if quant(&input) != quant(&output) {
        return Err(KernelError::UnsupportedParameter {
            what: "STRIDED_SLICE input and output quantisation must match",
        });
    }
    let element = element_bytes(&output)?;
    let dims = Dims::of(&input)?;
    let n = dims.rank();
    if n > RANK {
        return Err(KernelError::UnsupportedRank {
            tensor: input.index,
            rank: n as u32,
        });
    }
    let begin = constant_vector(&ctx.input(1)?, n)?;
    let end = constant_vector(&ctx.input(2)?, n)?;
    let strides_tensor = ctx.input(3)?;
    let strides = constant_vector(&strides_tensor, n)?;
    let masks = Masks {
        begin: options.begin_mask(),
        end: options.end_mask(),
        shrink: options.shrink_axis_mask(),
    };
    let plan = SlicePlan::new(
        dims.as_slice(),
        &begin[..n],
        &end[..n],
        &strides[..n],
        masks,
        element,
    )
    .ok_or(KernelError::UnsupportedParameter {
        what: "STRIDED_SLICE strides must be non-zero",
    })?;
    if plan.output_shape(n, masks.shrink).as_slice() != Dims::of(&output)?.as_slice() {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    ctx.store(&plan)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let plan: &SlicePlan = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    plan.run(input.data, output.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(
        shape: &[i32],
        begin: &[i32],
        end: &[i32],
        strides: &[i32],
        masks: Masks,
    ) -> (Vec<i32>, Vec<i32>) {
        let plan = SlicePlan::new(shape, begin, end, strides, masks, 4).unwrap();
        let n: i32 = shape.iter().product();
        let input: Vec<u8> = (1..=n).flat_map(|v| v.to_le_bytes()).collect();
        let out_shape = plan.output_shape(shape.len(), masks.shrink);
        let mut out = vec![0u8; out_shape.elements() * 4];
        plan.run(&input, &mut out).unwrap();
        let values = out
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        (out_shape.as_slice().to_vec(), values)
    }

    const NO_MASKS: Masks = Masks {
        begin: 0,
        end: 0,
        shrink: 0,
    };

    #[test]
    fn tflm_test_vectors() {
        // strided_slice_test: In1D [1,2,3,4], begin 1, end 3, stride 1 → [2,3].
        assert_eq!(
            slice(&[4], &[1], &[3], &[1], NO_MASKS),
            (vec![2], vec![2, 3])
        );
        // Negative begin and end: begin -3, end 3 → [2,3].
        assert_eq!(
            slice(&[4], &[-3], &[3], &[1], NO_MASKS),
            (vec![2], vec![2, 3])
        );
        // Negative stride: begin -1, end -4, stride -1 → [4,3,2].
        assert_eq!(
            slice(&[4], &[-1], &[-4], &[-1], NO_MASKS),
            (vec![3], vec![4, 3, 2])
        );
        // Out-of-range indices clamp: begin -5, end 5 → everything.
        assert_eq!(
            slice(&[4], &[-5], &[5], &[1], NO_MASKS),
            (vec![4], vec![1, 2, 3, 4])
        );
        // 2-D with begin mask on axis 0, end mask on axis 1:
        // [[1,2,3],[4,5,6]] begin [1,0] end [2,2] → rows 0..2, cols 0..3.
        let masks = Masks {
            begin: 1,
            end: 2,
            shrink: 0,
        };
        assert_eq!(
            slice(&[2, 3], &[1, 0], &[2, 2], &[1, 1], masks),
            (vec![2, 3], vec![1, 2, 3, 4, 5, 6])
        );
        // Shrink axis 0 of [[1,2,3],[4,5,6]], begin [0,0], end [1,3] → [1,2,3].
        let shrink = Masks {
            shrink: 1,
            ..NO_MASKS
        };
        assert_eq!(
            slice(&[2, 3], &[0, 0], &[1, 3], &[1, 1], shrink),
            (vec![3], vec![1, 2, 3])
        );
        // Strides 2 on 3-D [2,3,2]: begin 0s, end [2,3,2], strides [2,2,2].
        assert_eq!(
            slice(&[2, 3, 2], &[0, 0, 0], &[2, 3, 2], &[2, 2, 2], NO_MASKS),
            (vec![1, 2, 1], vec![1, 5])
        );
    }

    #[test]
    fn zero_strides_are_refused() {
        assert!(SlicePlan::new(&[4], &[0], &[4], &[0], NO_MASKS, 1).is_none());
        assert!(SlicePlan::new(&[1; 6], &[0; 6], &[1; 6], &[1; 6], NO_MASKS, 1).is_none());
    }
}
