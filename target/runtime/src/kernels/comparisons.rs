//! EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER and GREATER_EQUAL: two
//! broadcast inputs of one type, a bool output — bit-exact with TFLM.
//!
//! float32, int32 and int64 compare the stored values. Quantised inputs are
//! brought to a common real scale first, as TFLM's `ComparisonWithScaling`
//! does, so that inputs with different quantisations compare by value:
//! each input less its zero point is shifted left by 8 bits and multiplied
//! by its own scale (a Q0.31 multiplier, so scales must be below 1); the
//! two results are compared. EQUAL and NOT_EQUAL also take bool inputs.
//! The types follow TFLM's micro kernel: int8 for all six, int16 only for
//! GREATER, int64, and bool for EQUAL and NOT_EQUAL. TFLM's int16 GREATER
//! compares the stored values without rescaling, so hilt requires the two
//! int16 inputs to share one quantisation (as MAXIMUM does) rather than
//! compare values on different scales.
//!
//! A bool is one byte, 0 or 1, as TFLM stores it. The broadcast walk is
//! ADD's [`Broadcast`].

use bytemuck::{Pod, Zeroable};

use super::add::Broadcast;
use super::fixed_point::{
    multiply_by_quantized_multiplier_smaller_than_one, quantize_multiplier_smaller_than_one_exp,
};
use super::tensor::{Dims, Quant, expect_type, quant, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// A comparison: its name, the types TFLM takes for it, and the test.
trait Relation {
    const NAME: &'static str;
    /// The input types TFLM's micro kernel takes for it.
    const TYPES: &'static [TensorType] = ORDERED;
    fn holds<T: PartialOrd>(a: T, b: T) -> bool;
}

const ORDERED: &[TensorType] = &[
    TensorType::FLOAT32,
    TensorType::INT32,
    TensorType::INT64,
    TensorType::INT8,
];
const ORDERED_AND_INT16: &[TensorType] = &[
    TensorType::FLOAT32,
    TensorType::INT32,
    TensorType::INT64,
    TensorType::INT8,
    TensorType::INT16,
];
const EQUALITY: &[TensorType] = &[
    TensorType::FLOAT32,
    TensorType::INT32,
    TensorType::INT64,
    TensorType::INT8,
    TensorType::BOOL,
];

struct Equal;
struct NotEqual;
struct Less;
struct LessEqual;
struct Greater;
struct GreaterEqual;

impl Relation for Equal {
    const NAME: &'static str = "EQUAL";
    const TYPES: &'static [TensorType] = EQUALITY;
    fn holds<T: PartialOrd>(a: T, b: T) -> bool {
        a == b
    }
}
impl Relation for NotEqual {
    const NAME: &'static str = "NOT_EQUAL";
    const TYPES: &'static [TensorType] = EQUALITY;
    fn holds<T: PartialOrd>(a: T, b: T) -> bool {
        a != b
    }
}
impl Relation for Less {
    const NAME: &'static str = "LESS";
    fn holds<T: PartialOrd>(a: T, b: T) -> bool {
        a < b
    }
}
impl Relation for LessEqual {
    const NAME: &'static str = "LESS_EQUAL";
    fn holds<T: PartialOrd>(a: T, b: T) -> bool {
        a <= b
    }
}
impl Relation for Greater {
    const NAME: &'static str = "GREATER";
    const TYPES: &'static [TensorType] = ORDERED_AND_INT16;
    fn holds<T: PartialOrd>(a: T, b: T) -> bool {
        a > b
    }
}
impl Relation for GreaterEqual {
    const NAME: &'static str = "GREATER_EQUAL";
    fn holds<T: PartialOrd>(a: T, b: T) -> bool {
        a >= b
    }
}

const fn registration<R: Relation>() -> Registration {
    Registration {
        name: R::NAME,
        prepare: prepare::<R>,
        invoke: invoke::<R>,
    }
}

/// The EQUAL kernel.
pub const EQUAL: Registration = registration::<Equal>();
/// The NOT_EQUAL kernel.
pub const NOT_EQUAL: Registration = registration::<NotEqual>();
/// The LESS kernel.
pub const LESS: Registration = registration::<Less>();
/// The LESS_EQUAL kernel.
pub const LESS_EQUAL: Registration = registration::<LessEqual>();
/// The GREATER kernel.
pub const GREATER: Registration = registration::<Greater>();
/// The GREATER_EQUAL kernel.
pub const GREATER_EQUAL: Registration = registration::<GreaterEqual>();

/// One input's rescaling: TFLM's `ComparisonParams` half for it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct Rescale {
    offset: i32,
    multiplier: i32,
    shift: i32,
}

/// TFLM's fixed left shift before scaling.
const LEFT_SHIFT: i32 = 8;

impl Rescale {
    fn of(q: Quant) -> Result<Self, KernelError> {
        let (multiplier, shift) = quantize_multiplier_smaller_than_one_exp(f64::from(q.scale))
            .ok_or(KernelError::UnsupportedParameter {
                what: "comparison of quantised inputs with a scale of 1 or more",
            })?;
        Ok(Rescale {
            offset: -q.zero_point,
            multiplier,
            shift,
        })
    }

    /// The input on the common scale.
    #[inline(always)]
    fn apply(&self, x: i32) -> i32 {
        multiply_by_quantized_multiplier_smaller_than_one(
            (self.offset + x) * (1 << LEFT_SHIFT),
            self.multiplier,
            self.shift,
        )
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct ComparisonData {
    dtype: i32,
    input1: Rescale,
    input2: Rescale,
    walk: Broadcast,
}

fn prepare<R: Relation>(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input1, input2, output) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
    expect_type(&input1, R::TYPES)?;
    if input2.dtype != input1.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: input2.index,
            dtype: input2.dtype.0,
        });
    }
    expect_type(&output, &[TensorType::BOOL])?;
    let walk = Broadcast::new(
        &Dims::of(&input1)?,
        &Dims::of(&input2)?,
        &Dims::of(&output)?,
    )
    .ok_or(KernelError::ShapeMismatch {
        tensor: output.index,
    })?;
    let mut data = ComparisonData {
        dtype: i32::from(input1.dtype.0),
        input1: Rescale::default(),
        input2: Rescale::default(),
        walk,
    };
    if input1.dtype == TensorType::INT16 && quant(&input1) != quant(&input2) {
        return Err(KernelError::UnsupportedParameter {
            what: "int16 comparison inputs must share one quantisation",
        });
    }
    if input1.dtype == TensorType::INT8 {
        data.input1 = Rescale::of(require_quant(&input1)?)?;
        data.input2 = Rescale::of(require_quant(&input2)?)?;
    }
    ctx.store(&data)
}

fn invoke<R: Relation>(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &ComparisonData = ctx.op_data()?;
    let (a, b, out) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
    let (w, out) = (&data.walk, out.values::<u8>()?);
    let (p1, p2) = (data.input1, data.input2);
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => w.run(a.values::<f32>()?, b.values::<f32>()?, out, |x, y| {
            u8::from(R::holds(x, y))
        }),
        TensorType::INT32 => w.run(a.values::<i32>()?, b.values::<i32>()?, out, |x, y| {
            u8::from(R::holds(x, y))
        }),
        TensorType::INT64 => w.run(a.values::<i64>()?, b.values::<i64>()?, out, |x, y| {
            u8::from(R::holds(x, y))
        }),
        // Any non-zero byte is true, as C++ reads a bool.
        TensorType::BOOL => w.run(a.values::<u8>()?, b.values::<u8>()?, out, |x, y| {
            u8::from(R::holds(x != 0, y != 0))
        }),
        TensorType::INT8 => w.run(a.values::<i8>()?, b.values::<i8>()?, out, |x, y| {
            u8::from(R::holds(p1.apply(i32::from(x)), p2.apply(i32::from(y))))
        }),
        TensorType::INT16 => w.run(a.values::<i16>()?, b.values::<i16>()?, out, |x, y| {
            u8::from(R::holds(x, y))
        }),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescaling_compares_real_values() {
        let a = Rescale::of(Quant {
            scale: 0.5,
            zero_point: 0,
        })
        .unwrap();
        let b = Rescale::of(Quant {
            scale: 0.25,
            zero_point: 2,
        })
        .unwrap();
        // 3 · 0.5 = 1.5 and (8 - 2) · 0.25 = 1.5.
        assert_eq!(a.apply(3), b.apply(8));
        assert!(a.apply(3) > b.apply(7));
        assert!(
            Rescale::of(Quant {
                scale: 1.0,
                zero_point: 0
            })
            .is_err()
        );
    }

    #[test]
    fn relations_are_the_c_operators() {
        assert!(Less::holds(1, 2) && !Less::holds(2, 2));
        assert!(LessEqual::holds(2, 2) && GreaterEqual::holds(2, 2));
        assert!(Greater::holds(3.0, 2.0) && !Greater::holds(f32::NAN, 2.0));
        assert!(NotEqual::holds(f32::NAN, f32::NAN) && !Equal::holds(f32::NAN, f32::NAN));
    }
}
