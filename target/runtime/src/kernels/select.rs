//! SELECT_V2: `condition ? x : y` element by element, the three inputs
//! broadcast to the output — float32, int8 and int16, as TFLM's micro
//! kernel takes them.
//!
//! Values are copied, not requantised (TFLM does the same), so hilt
//! requires `x`, `y` and the output to share one quantisation rather than
//! mix scales silently. The walk is a three-operand version of ADD's
//! broadcast: per output dimension, each operand's stride (0 where it is
//! broadcast), visited in output order like TFLM's `BroadcastSelect5DSlow`.

use bytemuck::{Pod, Zeroable};

use super::tensor::{Dims, MAX_RANK, expect_type, quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The SELECT_V2 kernel.
pub const REGISTRATION: Registration = Registration {
    name: "SELECT_V2",
    prepare,
    invoke,
};

/// Output dimensions and the stride of each of the three operands along
/// them (elements; 0 where the operand is broadcast).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct Walk3 {
    rank: u32,
    extent: [u32; MAX_RANK],
    strides: [[u32; MAX_RANK]; 3],
    /// Elements of each operand, and of the output.
    lens: [u32; 4],
}

impl Walk3 {
    /// The walk for `operands` broadcast to `out`, or `None` if they do not.
    fn new(operands: [&Dims; 3], out: &Dims) -> Option<Self> {
        let rank = out.rank();
        let mut walk = Walk3 {
            rank: rank as u32,
            ..Walk3::default()
        };
        for d in 0..rank {
            walk.extent[d] = u32::try_from(out.get(d)).ok()?;
        }
        for (k, shape) in operands.iter().enumerate() {
            let pad = rank.checked_sub(shape.rank())?;
            let mut stride = 1u64;
            for d in (0..rank).rev() {
                let dim = if d < pad { 1 } else { shape.get(d - pad) };
                let o = out.get(d);
                if dim == o {
                    walk.strides[k][d] = u32::try_from(stride).ok()?;
                } else if dim != 1 {
                    return None;
                }
                stride *= dim.max(0) as u64;
            }
            walk.lens[k] = u32::try_from(shape.elements()).ok()?;
        }
        // The output is the broadcast shape: each dimension some operand's.
        for d in 0..rank {
            let sizes = operands.map(|s| {
                let pad = rank - s.rank();
                if d < pad { 1 } else { s.get(d - pad) }
            });
            if sizes.iter().copied().max() != Some(out.get(d)) && out.get(d) != 0 {
                return None;
            }
        }
        walk.lens[3] = u32::try_from(out.elements()).ok()?;
        Some(walk)
    }

    /// `out[i] = if cond { x } else { y }` over the walk.
    fn run<T: Copy>(
        &self,
        cond: &[u8],
        x: &[T],
        y: &[T],
        out: &mut [T],
    ) -> Result<(), KernelError> {
        let lens = [cond.len(), x.len(), y.len(), out.len()];
        if lens.iter().zip(self.lens).any(|(&a, b)| a != b as usize) {
            return Err(KernelError::Internal);
        }
        if out.is_empty() {
            return Ok(());
        }
        let rank = self.rank as usize;
        let mut index = [0u32; MAX_RANK];
        let mut at = [0usize; 3];
        for o in out.iter_mut() {
            *o = if cond[at[0]] != 0 { x[at[1]] } else { y[at[2]] };
            // Advance the output index like an odometer.
            let mut d = rank;
            while d > 0 {
                d -= 1;
                index[d] += 1;
                for (k, a) in at.iter_mut().enumerate() {
                    *a += self.strides[k][d] as usize;
                }
                if index[d] < self.extent[d] {
                    break;
                }
                for (k, a) in at.iter_mut().enumerate() {
                    *a -= (self.strides[k][d] * self.extent[d]) as usize;
                }
                index[d] = 0;
            }
        }
        Ok(())
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct SelectData {
    dtype: i32,
    walk: Walk3,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (condition, x, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let output = ctx.output(0)?;
    expect_type(&condition, &[TensorType::BOOL])?;
    expect_type(
        &x,
        &[TensorType::FLOAT32, TensorType::INT8, TensorType::INT16],
    )?;
    for t in [&y, &output] {
        if t.dtype != x.dtype {
            return Err(KernelError::UnsupportedType {
                tensor: t.index,
                dtype: t.dtype.0,
            });
        }
        if quant(t) != quant(&x) {
            return Err(KernelError::UnsupportedParameter {
                what: "SELECT_V2 x, y and output must share one quantisation",
            });
        }
    }
    let shapes = [Dims::of(&condition)?, Dims::of(&x)?, Dims::of(&y)?];
    let walk = Walk3::new([&shapes[0], &shapes[1], &shapes[2]], &Dims::of(&output)?).ok_or(
        KernelError::ShapeMismatch {
            tensor: output.index,
        },
    )?;
    ctx.store(&SelectData {
        dtype: i32::from(x.dtype.0),
        walk,
    })
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &SelectData = ctx.op_data()?;
    let (c, x, y, out) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.output(0)?);
    let cond = c.values::<u8>()?;
    let w = &data.walk;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => w.run(cond, x.values::<f32>()?, y.values::<f32>()?, out.values()?),
        TensorType::INT8 => w.run(cond, x.values::<i8>()?, y.values::<i8>()?, out.values()?),
        TensorType::INT16 => w.run(cond, x.values::<i16>()?, y.values::<i16>()?, out.values()?),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_condition_picks_columns() {
        let (c, x, y, out) = (
            Dims::from_slice(&[3]),
            Dims::from_slice(&[2, 3]),
            Dims::from_slice(&[1]),
            Dims::from_slice(&[2, 3]),
        );
        let walk = Walk3::new([&c, &x, &y], &out).unwrap();
        let mut got = [0i8; 6];
        walk.run(&[1, 0, 1], &[1, 2, 3, 4, 5, 6], &[-1], &mut got)
            .unwrap();
        assert_eq!(got, [1, -1, 3, 4, -1, 6]);
    }

    #[test]
    fn shapes_that_do_not_broadcast_are_refused() {
        let (a, b, out) = (
            Dims::from_slice(&[2]),
            Dims::from_slice(&[3]),
            Dims::from_slice(&[3]),
        );
        assert!(Walk3::new([&a, &b, &b], &out).is_none());
        // An output larger than the broadcast shape.
        let (one, big) = (Dims::from_slice(&[1]), Dims::from_slice(&[4]));
        assert!(Walk3::new([&one, &one, &one], &big).is_none());
    }
}
