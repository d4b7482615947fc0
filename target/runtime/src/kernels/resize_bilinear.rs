//! RESIZE_BILINEAR: each output pixel a weighted mean of the four input
//! pixels around where it falls — int8 and float32 (TFLM's micro kernel's
//! types), `align_corners` and `half_pixel_centers`, bit-exact with TFLM.
//!
//! float32 follows TFLM's `ResizeBilinear` operation for operation (the
//! source coordinate `(o + 0.5) * scale - 0.5` or `o * scale`, its floor and
//! ceiling clamped to the input, the four weights multiplied in TFLM's
//! order). int8 follows `ResizeBilinearInteger`, which uses no floating
//! point: scales and coordinates in 1/1024ths of a pixel, products in 64
//! bits, and the sum divided by 2^20 rounding half away from zero (TFLM's
//! default double rounding).

use bytemuck::{Pod, Zeroable};

use super::resize_nearest_neighbor::resize_shapes;
use super::tensor::{element_size, same_type_and_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The RESIZE_BILINEAR kernel.
pub const REGISTRATION: Registration = Registration {
    name: "RESIZE_BILINEAR",
    prepare,
    invoke,
};

/// Op data (48 bytes): shapes, the centre rule and both forms of the scales.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
struct BilinearPlan {
    batches: u32,
    in_h: u32,
    in_w: u32,
    depth: u32,
    out_h: u32,
    out_w: u32,
    half_pixel_centers: u32,
    /// 1 for int8, 0 for float32.
    int8: u32,
    /// Input pixels per output pixel, in 1/1024ths (the int8 path).
    scale_10: [i32; 2],
    /// The same as floats (the float32 path).
    scale: [f32; 2],
}

// The op data's size, as its documentation gives it.
const _: () = assert!(size_of::<BilinearPlan>() == 48);

/// TFLM's float scale of one axis.
fn float_scale(input: u32, output: u32, align_corners: bool) -> f32 {
    if align_corners && output > 1 {
        (input - 1) as f32 / (output - 1) as f32
    } else {
        input as f32 / output as f32
    }
}

/// TFLM's integer scale of one axis (1/1024ths, rounded).
fn integer_scale(input: u32, output: u32, align_corners: bool) -> i32 {
    let (i, o) = if align_corners && output > 1 {
        (input as i32 - 1, output as i32 - 1)
    } else {
        (input as i32, output as i32)
    };
    ((1 << 10) * i + o / 2) / o
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let size = ctx.input(1)?;
    let output = ctx.output(0)?;
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_resize_bilinear_options()
        .ok_or(KernelError::MissingOptions)?;
    let (align, half) = (options.align_corners(), options.half_pixel_centers());
    if align && half {
        return Err(KernelError::UnsupportedParameter {
            what: "RESIZE_BILINEAR takes align_corners or half_pixel_centers, not both",
        });
    }
    element_size(&input, &[TensorType::INT8, TensorType::FLOAT32])?;
    same_type_and_quant(
        &input,
        &output,
        "RESIZE_BILINEAR input and output quantisation must match",
    )?;
    let (id, od) = resize_shapes(
        &input,
        &size,
        &output,
        "RESIZE_BILINEAR size must be a constant tensor",
    )?;
    let [batches, in_h, in_w, depth] = [0, 1, 2, 3].map(|k| id.get(k) as u32);
    let (out_h, out_w) = (od.get(1) as u32, od.get(2) as u32);
    // 1024 × the largest side must fit the integer path's i32 arithmetic.
    if in_h.max(in_w).max(out_h).max(out_w) >= 1 << 20 {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    // An empty image has no pixel to sample (and its scale would count
    // from -1): refused, where the invoke fuzzer found it overflowing.
    if in_h == 0 || in_w == 0 {
        return Err(KernelError::ShapeMismatch {
            tensor: input.index,
        });
    }
    // Nor is there a scale to an empty one (it would divide by zero).
    if out_h == 0 || out_w == 0 {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    ctx.store(&BilinearPlan {
        batches,
        in_h,
        in_w,
        depth,
        out_h,
        out_w,
        half_pixel_centers: u32::from(half),
        int8: u32::from(input.dtype == TensorType::INT8),
        scale_10: [
            integer_scale(in_h, out_h, align),
            integer_scale(in_w, out_w, align),
        ],
        scale: [
            float_scale(in_h, out_h, align),
            float_scale(in_w, out_w, align),
        ],
    })
}

/// A source coordinate and the two input rows (or columns) around it.
#[derive(Clone, Copy)]
struct Taps<T> {
    at: T,
    lo: usize,
    hi: usize,
}

fn float_taps(o: u32, scale: f32, half: bool, size: u32) -> Taps<f32> {
    let at = if half {
        (o as f32 + 0.5) * scale - 0.5
    } else {
        o as f32 * scale
    };
    let lo = (libm::floorf(at) as i32).max(0) as usize;
    let hi = (libm::ceilf(at) as i32).min(size as i32 - 1).max(0) as usize;
    Taps { at, lo, hi }
}

fn integer_taps(o: u32, scale_10: i32, half: bool, size: u32) -> Taps<i32> {
    let o = o as i32;
    let at = if half {
        o * scale_10 + scale_10 / 2 - (1 << 9)
    } else {
        o * scale_10
    };
    let lo = (at / (1 << 10)).max(0) as usize;
    let hi = ((at + (1 << 10) - 1) / (1 << 10))
        .min(size as i32 - 1)
        .max(0) as usize;
    Taps { at, lo, hi }
}

impl BilinearPlan {
    /// Flat index of channel 0 of input pixel `(b, y, x)`.
    fn pixel(&self, b: usize, y: usize, x: usize) -> usize {
        ((b * self.in_h as usize + y) * self.in_w as usize + x) * self.depth as usize
    }

    fn run_float(&self, input: &[f32], output: &mut [f32]) -> Result<(), KernelError> {
        let half = self.half_pixel_centers == 1;
        let mut out = output.iter_mut();
        for b in 0..self.batches as usize {
            for y in 0..self.out_h {
                let ty = float_taps(y, self.scale[0], half, self.in_h);
                let (wy1, wy0) = (ty.at - ty.lo as f32, 1.0 - (ty.at - ty.lo as f32));
                for x in 0..self.out_w {
                    let tx = float_taps(x, self.scale[1], half, self.in_w);
                    let (wx1, wx0) = (tx.at - tx.lo as f32, 1.0 - (tx.at - tx.lo as f32));
                    let corners = [
                        self.pixel(b, ty.lo, tx.lo),
                        self.pixel(b, ty.hi, tx.lo),
                        self.pixel(b, ty.lo, tx.hi),
                        self.pixel(b, ty.hi, tx.hi),
                    ];
                    for c in 0..self.depth as usize {
                        let v = |k: usize| {
                            input
                                .get(corners[k] + c)
                                .copied()
                                .ok_or(KernelError::Internal)
                        };
                        // TFLM's order, and its `+ 0` rounding offset (which turns
                        // -0.0 into 0.0).
                        let value = v(0)? * wy0 * wx0
                            + v(1)? * wy1 * wx0
                            + v(2)? * wy0 * wx1
                            + v(3)? * wy1 * wx1
                            + 0.0;
                        *out.next().ok_or(KernelError::Internal)? = value;
                    }
                }
            }
        }
        Ok(())
    }

    fn run_int8(&self, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
        let half = self.half_pixel_centers == 1;
        let one = 1i64 << 10;
        let mut out = output.iter_mut();
        for b in 0..self.batches as usize {
            for y in 0..self.out_h {
                let ty = integer_taps(y, self.scale_10[0], half, self.in_h);
                let wy1 = i64::from(ty.at) - one * ty.lo as i64;
                for x in 0..self.out_w {
                    let tx = integer_taps(x, self.scale_10[1], half, self.in_w);
                    let wx1 = i64::from(tx.at) - one * tx.lo as i64;
                    let corners = [
                        (self.pixel(b, ty.lo, tx.lo), (one - wy1) * (one - wx1)),
                        (self.pixel(b, ty.hi, tx.lo), wy1 * (one - wx1)),
                        (self.pixel(b, ty.lo, tx.hi), (one - wy1) * wx1),
                        (self.pixel(b, ty.hi, tx.hi), wy1 * wx1),
                    ];
                    for c in 0..self.depth as usize {
                        let mut sum = 0i64;
                        for &(at, weight) in &corners {
                            let v = input.get(at + c).ok_or(KernelError::Internal)?;
                            sum += i64::from(*v) * weight;
                        }
                        let round = if sum > 0 { 1 << 19 } else { -(1 << 19) };
                        // Truncating division, as C++'s.
                        *out.next().ok_or(KernelError::Internal)? =
                            ((sum + round) / (1 << 20)) as i8;
                    }
                }
            }
        }
        Ok(())
    }
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let plan: &BilinearPlan = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    if plan.int8 == 1 {
        plan.run_int8(input.values::<i8>()?, output.values::<i8>()?)
    } else {
        plan.run_float(input.values::<f32>()?, output.values::<f32>()?)
    }
}
