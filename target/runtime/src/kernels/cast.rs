//! CAST: element-wise type conversion between the types TFLM's micro
//! kernel converts — bool, int8, int16, int32, uint32 and float32, in any
//! pair — bit-exact with TFLM.
//!
//! Integers wrap to a narrower type (C's `static_cast`) and round to the
//! nearest float; floats truncate toward zero and saturate at the target's
//! range, NaN giving 0 (TFLM's kernel clamps before converting — pinned by
//! the `cast_f32_*_edges` vectors, infinities included); anything non-zero
//! is `true`. Values are converted as stored: CAST ignores quantisation, as
//! TFLM does.

use bytemuck::{Pod, Zeroable};

use super::tensor::{Dims, TensorMut, expect_type};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The CAST kernel.
pub const REGISTRATION: Registration = Registration {
    name: "CAST",
    prepare,
    invoke,
};

const TYPES: &[TensorType] = &[
    TensorType::BOOL,
    TensorType::INT8,
    TensorType::INT16,
    TensorType::INT32,
    TensorType::UINT32,
    TensorType::FLOAT32,
];

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct CastData {
    from: i32,
    to: i32,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    expect_type(&input, TYPES)?;
    expect_type(&output, TYPES)?;
    if Dims::of(&input)?.elements() != Dims::of(&output)?.elements() {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    ctx.store(&CastData {
        from: i32::from(input.dtype.0),
        to: i32::from(output.dtype.0),
    })
}

/// An input element, exactly: every integer type fits an `i64`.
#[derive(Clone, Copy)]
enum Scalar {
    Int(i64),
    Float(f32),
}

/// An output element type and C's conversion into it.
trait CastTarget: Pod {
    fn from_scalar(value: Scalar) -> Self;
}

/// `bool`, one byte.
#[derive(Clone, Copy, Zeroable, Pod)]
#[repr(transparent)]
struct Bool(u8);

impl CastTarget for Bool {
    fn from_scalar(value: Scalar) -> Self {
        Bool(u8::from(match value {
            Scalar::Int(v) => v != 0,
            Scalar::Float(x) => x != 0.0,
        }))
    }
}

/// Integer targets: `as` wraps from integers and, from floats, truncates
/// and saturates (NaN to 0) — TFLM's two behaviours.
macro_rules! integer_target {
    ($t:ty) => {
        impl CastTarget for $t {
            fn from_scalar(value: Scalar) -> Self {
                match value {
                    Scalar::Int(v) => v as $t,
                    Scalar::Float(x) => x as $t,
                }
            }
        }
    };
}
integer_target!(i8);
integer_target!(i16);
integer_target!(i32);
integer_target!(u32);

impl CastTarget for f32 {
    fn from_scalar(value: Scalar) -> Self {
        match value {
            Scalar::Int(v) => v as f32,
            Scalar::Float(x) => x,
        }
    }
}

/// Writes `lift(input[i])` converted to `T` into `out`.
fn fill<F: Copy, T: CastTarget>(input: &[F], out: &mut [T], lift: impl Fn(F) -> Scalar) {
    for (o, &x) in out.iter_mut().zip(input) {
        *o = T::from_scalar(lift(x));
    }
}

/// Converts `input` into the output tensor's type.
fn cast_into<F: Copy>(
    input: &[F],
    output: TensorMut<'_, '_>,
    to: TensorType,
    lift: impl Fn(F) -> Scalar,
) -> Result<(), KernelError> {
    match to {
        TensorType::BOOL => fill::<F, Bool>(input, output.values()?, lift),
        TensorType::INT8 => fill::<F, i8>(input, output.values()?, lift),
        TensorType::INT16 => fill::<F, i16>(input, output.values()?, lift),
        TensorType::INT32 => fill::<F, i32>(input, output.values()?, lift),
        TensorType::UINT32 => fill::<F, u32>(input, output.values()?, lift),
        TensorType::FLOAT32 => fill::<F, f32>(input, output.values()?, lift),
        _ => return Err(KernelError::Internal),
    }
    Ok(())
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &CastData = ctx.op_data()?;
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    let to = TensorType(data.to as i8);
    match TensorType(data.from as i8) {
        TensorType::BOOL => cast_into(input.values::<u8>()?, output, to, |b| {
            Scalar::Int(i64::from(b != 0))
        }),
        TensorType::INT8 => cast_into(input.values::<i8>()?, output, to, |v| Scalar::Int(v.into())),
        TensorType::INT16 => cast_into(input.values::<i16>()?, output, to, |v| {
            Scalar::Int(v.into())
        }),
        TensorType::INT32 => cast_into(input.values::<i32>()?, output, to, |v| {
            Scalar::Int(v.into())
        }),
        TensorType::UINT32 => cast_into(input.values::<u32>()?, output, to, |v| {
            Scalar::Int(v.into())
        }),
        TensorType::FLOAT32 => cast_into(input.values::<f32>()?, output, to, Scalar::Float),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_are_cs() {
        assert_eq!(i8::from_scalar(Scalar::Int(300)), 44);
        assert_eq!(i8::from_scalar(Scalar::Float(-3.9)), -3);
        assert_eq!(i8::from_scalar(Scalar::Float(200.0)), 127);
        assert_eq!(i32::from_scalar(Scalar::Float(3e9)), i32::MAX);
        assert_eq!(i16::from_scalar(Scalar::Float(f32::NAN)), 0);
        assert_eq!(u32::from_scalar(Scalar::Float(-3.5)), 0);
        assert_eq!(u32::from_scalar(Scalar::Float(3e9)), 3_000_000_000);
        assert_eq!(f32::from_scalar(Scalar::Int(16_777_217)), 16_777_216.0);
        assert_eq!(Bool::from_scalar(Scalar::Float(f32::NAN)).0, 1);
        assert_eq!(Bool::from_scalar(Scalar::Float(-0.0)).0, 0);
    }
}
