//! RESIZE_NEAREST_NEIGHBOR: each output pixel of an NHWC image copies the
//! input pixel nearest to it — int8, int16 and float32, bit-exact with TFLM
//! (the source row and column are computed in `f32` exactly as TFLM's
//! reference does, so `align_corners` and `half_pixel_centers` pick the
//! same pixels). Values are copied, never requantised, as in TFLM.

use bytemuck::{Pod, Zeroable};

use super::tensor::Dims;
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The RESIZE_NEAREST_NEIGHBOR kernel.
pub const REGISTRATION: Registration = Registration {
    name: "RESIZE_NEAREST_NEIGHBOR",
    prepare,
    invoke,
};

/// The resize: input and output extents, bytes per element and the options.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct ResizePlan {
    pub(crate) batches: u32,
    pub(crate) in_h: u32,
    pub(crate) in_w: u32,
    pub(crate) out_h: u32,
    pub(crate) out_w: u32,
    /// Bytes of one pixel (channels × element size).
    pub(crate) pixel: u32,
    pub(crate) align_corners: u32,
    pub(crate) half_pixel_centers: u32,
}

/// The input coordinate output coordinate `at` reads along an axis of
/// `input` pixels resized to `output` (TFLM's `GetNearestNeighbor`: the
/// product is taken in `f32`, rounded half away from zero with
/// `align_corners`, floored otherwise, then clamped to the input).
pub(crate) fn nearest(at: u32, input: u32, output: u32, align: bool, half: bool) -> u32 {
    let scale = if align && output > 1 {
        (input as f32 - 1.0) / (output - 1) as f32
    } else {
        input as f32 / output as f32
    };
    let offset = if half { 0.5f32 } else { 0.0 };
    // `x` is never negative, so truncation is `floor`, and the fraction
    // `x - trunc(x)` is exact in f32, so `round` (half away from zero) is
    // one comparison — no libm in no_std.
    let x = (at as f32 + offset) * scale;
    let whole = x as i64;
    let v = if align && x - whole as f32 >= 0.5 {
        whole + 1
    } else {
        whole
    };
    let v = v.min(i64::from(input) - 1);
    // TFLM clamps below only with half-pixel centres; the value cannot be
    // negative otherwise (all terms are non-negative).
    v.max(0) as u32
}

impl ResizePlan {
    /// Writes the resized `input` into `output`.
    pub(crate) fn run(&self, input: &[u8], output: &mut [u8]) -> Result<(), KernelError> {
        let (align, half) = (self.align_corners != 0, self.half_pixel_centers != 0);
        let pixel = self.pixel as usize;
        let in_row = self.in_w as usize * pixel;
        let in_image = self.in_h as usize * in_row;
        let mut out = output.chunks_exact_mut(pixel);
        for b in 0..self.batches as usize {
            for y in 0..self.out_h {
                let iy = nearest(y, self.in_h, self.out_h, align, half) as usize;
                for x in 0..self.out_w {
                    let ix = nearest(x, self.in_w, self.out_w, align, half) as usize;
                    let at = b * in_image + iy * in_row + ix * pixel;
                    let src = input.get(at..at + pixel).ok_or(KernelError::Internal)?;
                    out.next()
                        .ok_or(KernelError::Internal)?
                        .copy_from_slice(src);
                }
            }
        }
        Ok(())
    }
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let size = ctx.input(1)?;
    let output = ctx.output(0)?;
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_resize_nearest_neighbor_options()
        .ok_or(KernelError::MissingOptions)?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    let element = match output.dtype {
        TensorType::INT8 => 1,
        TensorType::INT16 => 2,
        TensorType::FLOAT32 => 4,
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    };
    let (id, od) = resize_shapes(
        &input,
        &size,
        &output,
        "RESIZE_NEAREST_NEIGHBOR size must be a constant tensor",
    )?;
    let plan = ResizePlan {
        batches: id.get(0) as u32,
        in_h: id.get(1) as u32,
        in_w: id.get(2) as u32,
        out_h: od.get(1) as u32,
        out_w: od.get(2) as u32,
        pixel: id.get(3) as u32 * element,
        align_corners: u32::from(options.align_corners()),
        half_pixel_centers: u32::from(options.half_pixel_centers()),
    };
    ctx.store(&plan)
}

/// The shapes of a 4-D resize: input and output NHWC with the same batch
/// and channels, and a size input that is a constant int32 pair equal to
/// the output's height and width (TFLM refuses a size that is not
/// constant: it cannot resize tensors at run time, and neither can hilt's
/// planned arena; `not_constant` says so for the op).
pub(crate) fn resize_shapes(
    input: &TensorInfo<'_>,
    size: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    not_constant: &'static str,
) -> Result<(Dims, Dims), KernelError> {
    let (id, od) = (Dims::of(input)?, Dims::of(output)?);
    for (d, index) in [(&id, input.index), (&od, output.index)] {
        if d.rank() != 4 {
            return Err(KernelError::UnsupportedRank {
                tensor: index,
                rank: d.rank() as u32,
            });
        }
    }
    if od.get(0) != id.get(0) || od.get(3) != id.get(3) || (1..3).any(|k| od.get(k) <= 0) {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    if size.dtype != TensorType::INT32 {
        return Err(KernelError::UnsupportedType {
            tensor: size.index,
            dtype: size.dtype.0,
        });
    }
    let bytes = size
        .constant
        .ok_or(KernelError::UnsupportedParameter { what: not_constant })?;
    let value = |k: usize| {
        bytes
            .get(k * 4..k * 4 + 4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if bytes.len() != 8 || value(0) != Some(od.get(1)) || value(1) != Some(od.get(2)) {
        return Err(KernelError::ShapeMismatch { tensor: size.index });
    }
    Ok((id, od))
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let plan: &ResizePlan = ctx.op_data()?;
    plan.run(ctx.input(0)?.data, ctx.output(0)?.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(in_hw: (u32, u32), out_hw: (u32, u32), align: bool, half: bool) -> ResizePlan {
        ResizePlan {
            batches: 1,
            in_h: in_hw.0,
            in_w: in_hw.1,
            out_h: out_hw.0,
            out_w: out_hw.1,
            pixel: 1,
            align_corners: u32::from(align),
            half_pixel_centers: u32::from(half),
        }
    }

    #[test]
    fn doubles_a_2x2_image() {
        // TFLM's test: [[3,6],[9,12]] resized to 3x3 → rows 3 3 6 / 3 3 6 / 9 9 12.
        let mut out = [0u8; 9];
        plan((2, 2), (3, 3), false, false)
            .run(&[3, 6, 9, 12], &mut out)
            .unwrap();
        assert_eq!(out, [3, 3, 6, 3, 3, 6, 9, 9, 12]);
    }

    #[test]
    fn align_corners_and_half_pixel_centres() {
        // align_corners, 2→3: scale 0.5, round(0), round(0.5)=1, round(1)=1.
        let mut out = [0u8; 9];
        plan((2, 2), (3, 3), true, false)
            .run(&[3, 6, 9, 12], &mut out)
            .unwrap();
        assert_eq!(out, [3, 6, 6, 9, 12, 12, 9, 12, 12]);
        // half-pixel centres, 2→3: scale 2/3, floor(1/3)=0, floor(1)=1, floor(5/3)=1.
        plan((2, 2), (3, 3), false, true)
            .run(&[3, 6, 9, 12], &mut out)
            .unwrap();
        assert_eq!(out, [3, 6, 6, 9, 12, 12, 9, 12, 12]);
        // Downscaling 4→2 with half-pixel centres picks 1 and 3.
        assert_eq!(nearest(0, 4, 2, false, true), 1);
        assert_eq!(nearest(1, 4, 2, false, true), 3);
    }

    #[test]
    fn a_short_input_is_an_error() {
        let mut out = [0u8; 9];
        assert_eq!(
            plan((2, 2), (3, 3), false, false).run(&[1, 2], &mut out),
            Err(KernelError::Internal)
        );
    }
}
