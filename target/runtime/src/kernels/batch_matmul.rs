//! BATCH_MATMUL: `out[b] = lhs[b] · rhs[b]` over broadcast batch dimensions
//! (up to three, five dimensions in all), either operand optionally
//! transposed (`adj_x`, `adj_y`) — int8, int16 (zero points 0, 64-bit
//! accumulators) and float32, bit-exact with TFLM's reference kernel.
//!
//! Each output element is a dot product over the depth in ascending order
//! from zero (TFLM's loop order, which matters for float). Quantised, the
//! operands less their zero points are multiplied and summed (int32 for
//! int8, int64 for int16), the sum scaled by `s_lhs · s_rhs / s_out` with
//! TFLM's 32-bit or 64-bit `MultiplyByQuantizedMultiplier`, offset and
//! clamped to the type (TFLM applies no activation here).

use bytemuck::{Pod, Zeroable};

use super::fixed_point::{
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_i64, quantize_multiplier,
};
use super::tensor::{Dims, check_zero_point, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The BATCH_MATMUL kernel.
pub const REGISTRATION: Registration = Registration {
    name: "BATCH_MATMUL",
    prepare,
    invoke,
};

/// Batch dimensions (the leading three of the shapes extended to five).
const BATCH: usize = 3;

/// What prepare computes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct MatMulPlan {
    pub(crate) dtype: i32,
    pub(crate) lhs_batch: [u32; BATCH],
    pub(crate) rhs_batch: [u32; BATCH],
    pub(crate) out_batch: [u32; BATCH],
    pub(crate) rows: u32,
    pub(crate) depth: u32,
    pub(crate) cols: u32,
    pub(crate) adj_x: u32,
    pub(crate) adj_y: u32,
    pub(crate) lhs_offset: i32,
    pub(crate) rhs_offset: i32,
    pub(crate) output_offset: i32,
    pub(crate) multiplier: i32,
    pub(crate) shift: i32,
}

impl MatMulPlan {
    /// The plan for `lhs · rhs`, or `None` for ranks outside 2..=5, depths
    /// that differ or batch dimensions that do not broadcast.
    pub(crate) fn new(lhs: &[i32], rhs: &[i32], adj_x: bool, adj_y: bool) -> Option<Self> {
        let ok = |s: &[i32]| (2..=5).contains(&s.len()) && s.iter().all(|&d| d >= 0);
        if !ok(lhs) || !ok(rhs) {
            return None;
        }
        let last2 = |s: &[i32]| (s[s.len() - 2] as u32, s[s.len() - 1] as u32);
        let (l0, l1) = last2(lhs);
        let (r0, r1) = last2(rhs);
        let (rows, depth) = if adj_x { (l1, l0) } else { (l0, l1) };
        let (depth_r, cols) = if adj_y { (r1, r0) } else { (r0, r1) };
        if depth != depth_r {
            return None;
        }
        let batch = |s: &[i32]| {
            let mut b = [1u32; BATCH];
            let n = s.len() - 2;
            for (i, &d) in s[..n].iter().enumerate() {
                b[BATCH - n + i] = d as u32;
            }
            b
        };
        let (lb, rb) = (batch(lhs), batch(rhs));
        let mut out_batch = [1u32; BATCH];
        for d in 0..BATCH {
            out_batch[d] = match (lb[d], rb[d]) {
                (a, b) if a == b => a,
                (1, b) => b,
                (a, 1) => a,
                _ => return None,
            };
        }
        Some(MatMulPlan {
            lhs_batch: lb,
            rhs_batch: rb,
            out_batch,
            rows,
            depth,
            cols,
            adj_x: u32::from(adj_x),
            adj_y: u32::from(adj_y),
            ..MatMulPlan::default()
        })
    }

    /// The output shape for an output of `rank` dimensions.
    pub(crate) fn output_shape(&self, rank: usize) -> Option<Dims> {
        let mut dims = [0i32; 5];
        let n = rank.checked_sub(2).filter(|&n| n <= BATCH)?;
        for (d, &b) in dims.iter_mut().zip(&self.out_batch[BATCH - n..]) {
            *d = b as i32;
        }
        dims[n] = self.rows as i32;
        dims[n + 1] = self.cols as i32;
        Some(Dims::from_slice(&dims[..rank]))
    }

    /// Calls `f(out_index, dot)` for each output, `dot(g)` folding
    /// `g(lhs_index, rhs_index)` over the depth in order.
    fn walk(&self, mut f: impl FnMut(usize, &dyn Fn(&mut dyn FnMut(usize, usize)))) {
        let (m, k, n) = (self.rows as usize, self.depth as usize, self.cols as usize);
        // Batch index stride of axis `d` in an operand's batch space (0
        // where it is broadcast).
        let stride = |b: &[u32; BATCH], d: usize| -> usize {
            if b[d] == 1 {
                return 0;
            }
            b[d + 1..].iter().map(|&x| x as usize).product::<usize>()
        };
        let (lb, rb, ob) = (&self.lhs_batch, &self.rhs_batch, &self.out_batch);
        let mut out = 0;
        for b0 in 0..ob[0] as usize {
            for b1 in 0..ob[1] as usize {
                for b2 in 0..ob[2] as usize {
                    let at = |b: &[u32; BATCH]| {
                        [b0, b1, b2]
                            .iter()
                            .enumerate()
                            .map(|(d, &i)| i * stride(b, d))
                            .sum::<usize>()
                    };
                    let lhs_base = at(lb) * m * k;
                    let rhs_base = at(rb) * k * n;
                    for i in 0..m {
                        for j in 0..n {
                            let dot = |g: &mut dyn FnMut(usize, usize)| {
                                for d in 0..k {
                                    let l = if self.adj_x == 1 {
                                        d * m + i
                                    } else {
                                        i * k + d
                                    };
                                    let r = if self.adj_y == 1 {
                                        j * k + d
                                    } else {
                                        d * n + j
                                    };
                                    g(lhs_base + l, rhs_base + r);
                                }
                            };
                            f(out, &dot);
                            out += 1;
                        }
                    }
                }
            }
        }
    }
}

fn quantized(
    plan: &mut MatMulPlan,
    lhs: &TensorInfo<'_>,
    rhs: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
) -> Result<(), KernelError> {
    let int16 = output.dtype == TensorType::INT16;
    let zero_points = if int16 { 0..=0 } else { -128..=127 };
    let (ql, qr, qo) = (
        require_quant(lhs)?,
        require_quant(rhs)?,
        require_quant(output)?,
    );
    for (t, q) in [(lhs, ql), (rhs, qr), (output, qo)] {
        check_zero_point(t.index, q, zero_points.clone())?;
    }
    let real = f64::from(ql.scale) * f64::from(qr.scale) / f64::from(qo.scale);
    (plan.multiplier, plan.shift) = quantize_multiplier(real);
    plan.lhs_offset = -ql.zero_point;
    plan.rhs_offset = -qr.zero_point;
    plan.output_offset = qo.zero_point;
    Ok(())
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let lhs = ctx.input(0)?;
    let rhs = ctx.input(1)?;
    let output = ctx.output(0)?;
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_batch_mat_mul_options()
        .ok_or(KernelError::MissingOptions)?;
    for t in [&lhs, &rhs] {
        if t.dtype != output.dtype {
            return Err(KernelError::UnsupportedType {
                tensor: t.index,
                dtype: t.dtype.0,
            });
        }
    }
    let (ld, rd, od) = (Dims::of(&lhs)?, Dims::of(&rhs)?, Dims::of(&output)?);
    let mut plan = MatMulPlan::new(
        ld.as_slice(),
        rd.as_slice(),
        options.adj_x(),
        options.adj_y(),
    )
    .ok_or(KernelError::ShapeMismatch { tensor: rhs.index })?;
    if plan.output_shape(od.rank()).as_ref().map(Dims::as_slice) != Some(od.as_slice()) {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    plan.dtype = i32::from(output.dtype.0);
    match output.dtype {
        TensorType::FLOAT32 => {}
        TensorType::INT8 | TensorType::INT16 => quantized(&mut plan, &lhs, &rhs, &output)?,
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    }
    ctx.store(&plan)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let p: &MatMulPlan = ctx.op_data()?;
    let (lhs, rhs, output) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
    match TensorType(p.dtype as i8) {
        TensorType::FLOAT32 => {
            let (a, b, out) = (
                lhs.values::<f32>()?,
                rhs.values::<f32>()?,
                output.values::<f32>()?,
            );
            p.walk(|o, dot| {
                let mut total = 0.0f32;
                dot(&mut |l, r| total += a[l] * b[r]);
                out[o] = total;
            });
        }
        TensorType::INT8 => {
            let (a, b, out) = (
                lhs.values::<i8>()?,
                rhs.values::<i8>()?,
                output.values::<i8>()?,
            );
            p.walk(|o, dot| {
                let mut total = 0i32;
                dot(&mut |l, r| {
                    total += (i32::from(a[l]) + p.lhs_offset) * (i32::from(b[r]) + p.rhs_offset)
                });
                let v = multiply_by_quantized_multiplier(total, p.multiplier, p.shift)
                    + p.output_offset;
                out[o] = v.clamp(-128, 127) as i8;
            });
        }
        TensorType::INT16 => {
            let (a, b, out) = (
                lhs.values::<i16>()?,
                rhs.values::<i16>()?,
                output.values::<i16>()?,
            );
            p.walk(|o, dot| {
                let mut total = 0i64;
                dot(&mut |l, r| total += i64::from(a[l]) * i64::from(b[r]));
                let v = multiply_by_quantized_multiplier_i64(total, p.multiplier, p.shift)
                    + p.output_offset;
                out[o] = v.clamp(-32768, 32767) as i16;
            });
        }
        _ => return Err(KernelError::Internal),
    }
    Ok(())
}
