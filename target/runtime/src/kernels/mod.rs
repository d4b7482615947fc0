//! Kernels: one module per operator, each a [`Registration`] of a prepare
//! and an invoke function, as TFLM's kernels are `{init, prepare, invoke}`
//! records.
//!
//! A kernel is testable without a model file: build a one-op model with the
//! [`crate::writer`] and run it through the [`crate::interpreter`].

use core::fmt;

use crate::model::{Model, OpCode, OperatorInfo};
use crate::schema::BuiltinOperator;

/// Whether the firmware is built for size (`optimize = "size"`, see
/// `build.rs`): the kernels then keep one loop where a speed build has one
/// per requantisation form, and the DSP kernels skip the stack-widened
/// operands, all of which trade flash for instructions. The outputs are
/// the same bytes either way.
pub(crate) const COMPACT: bool = cfg!(hilt_compact);

pub mod add;
#[cfg(not(feature = "no-lean"))]
mod add_rows;
pub mod arg_min_max;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
pub(crate) mod arm_dsp;
pub mod batch_matmul;
pub mod cast;
pub mod comparisons;
pub mod concatenation;
pub mod context;
pub mod conv;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
pub(crate) mod conv_dsp;
#[cfg(test)]
mod conv_dsp_tests;
#[cfg(not(target_arch = "arm"))]
mod conv_f32_tiles;
mod conv_geometry;
mod conv_i16;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
mod conv_quads;
#[cfg(not(feature = "no-lean"))]
mod conv_rows;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
mod conv_widened;
pub mod cumsum;
pub mod depthwise_conv;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
mod depthwise_packed;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
mod depthwise_rows;
pub mod dequantize;
pub mod div;
pub mod elu;
pub mod fill;
pub mod fixed_point;
pub mod float_math;
pub mod fully_connected;
pub(crate) mod fused;
pub mod gather;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
pub(crate) mod gemm;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
pub(crate) mod gemm_quads;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
pub(crate) mod gemm_widened;
pub mod hard_swish;
mod in_place;
pub mod l2_normalization;
pub mod leaky_relu;
pub mod log_softmax;
pub mod logistic;
pub mod lstm;
pub mod maximum_minimum;
pub mod mirror_pad;
pub mod mul;
pub mod pack;
pub mod pad;
pub mod pooling;
pub mod prelu;
pub mod quant_math;
pub mod quantize;
pub mod reduce;
pub mod relu;
pub mod reshape;
pub mod resize_bilinear;
pub mod resize_nearest_neighbor;
pub mod rsqrt;
pub mod select;
pub mod shape;
pub mod slice;
pub mod softmax;
mod softmax_i16;
pub mod space_to_batch;
pub mod space_to_depth;
pub mod split;
pub mod squared_difference;
pub mod strided_slice;
pub mod sub;
pub mod svdf;
pub mod tanh;
pub mod tensor;
pub mod transpose;
pub mod transpose_conv;
pub mod unary_math;
pub mod window_axis;

pub use context::{InvokeContext, PrepareContext, Stored};

/// Why a kernel refused an operator or failed to run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum KernelError {
    /// A required input is absent (position in the op's input list).
    MissingInput {
        /// Input position.
        position: u32,
    },
    /// A required output is absent.
    MissingOutput {
        /// Output position.
        position: u32,
    },
    /// The op's builtin options are missing or of the wrong kind.
    MissingOptions,
    /// A tensor type (or combination of types) this kernel does not implement.
    UnsupportedType {
        /// Tensor index.
        tensor: u32,
        /// Its `TensorType` code.
        dtype: i8,
    },
    /// A tensor's shape does not fit the operation.
    ShapeMismatch {
        /// Tensor index.
        tensor: u32,
    },
    /// More dimensions than kernels handle.
    UnsupportedRank {
        /// Tensor index.
        tensor: u32,
        /// Its rank.
        rank: u32,
    },
    /// A quantised tensor without quantisation parameters.
    MissingQuantization {
        /// Tensor index.
        tensor: u32,
    },
    /// Quantisation parameters no kernel can compute with (TFLM aborts the
    /// process on some of them; here prepare refuses the op).
    BadQuantization {
        /// Tensor index.
        tensor: u32,
        /// What is wrong.
        problem: QuantProblem,
    },
    /// An option or parameter value the kernel does not support.
    UnsupportedParameter {
        /// Which parameter.
        what: &'static str,
    },
    /// Tensor data not aligned for its element type (constant data in a
    /// model buffer that is not 16-aligned in memory).
    Misaligned {
        /// Tensor index.
        tensor: u32,
    },
    /// The arena's tail has no room for this op's data.
    OutOfMemory {
        /// Bytes asked for.
        bytes: u32,
    },
    /// An input expected to be a variable tensor is not one.
    NotVariable {
        /// Input position.
        position: u32,
    },
    /// An index read from a tensor at invoke (GATHER's positions) falls
    /// outside the axis it indexes.
    IndexOutOfRange {
        /// The tensor holding the index.
        tensor: u32,
        /// The index.
        index: i64,
        /// The size of the axis it indexes.
        size: u32,
    },
    /// The constant image ends before this op's constants do.
    ConstantImageShort {
        /// Image bytes this op's constants need (to their end).
        needed: u32,
        /// Bytes the image holds.
        image: u32,
    },
    /// A constant this op's prepare works out differs from the constant
    /// image's byte: the image was made for another model or kernel build.
    ConstantImageDiffers {
        /// The first differing byte, from the image's start.
        byte: u32,
    },
    /// A writable view was requested twice in one invoke.
    TakenTwice,
    /// An interpreter invariant did not hold (a bug, reported rather than a panic).
    Internal,
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KernelError::MissingInput { position } => write!(f, "input {position} is missing"),
            KernelError::MissingOutput { position } => write!(f, "output {position} is missing"),
            KernelError::MissingOptions => f.write_str("builtin options are missing"),
            KernelError::UnsupportedType { tensor, dtype } => {
                match crate::schema::TensorType(dtype).variant_name() {
                    Some(name) => write!(
                        f,
                        "tensor {tensor}: type {name} is not supported by this kernel"
                    ),
                    None => write!(
                        f,
                        "tensor {tensor}: type {dtype} (not a TFLite type) is not supported"
                    ),
                }
            }
            KernelError::ShapeMismatch { tensor } => {
                write!(f, "tensor {tensor}: shape does not fit the operation")
            }
            KernelError::UnsupportedRank { tensor, rank } => {
                write!(f, "tensor {tensor}: rank {rank} is not supported")
            }
            KernelError::MissingQuantization { tensor } => {
                write!(f, "tensor {tensor}: quantisation parameters are missing")
            }
            KernelError::BadQuantization { tensor, problem } => match problem {
                QuantProblem::ZeroPointForKernel {
                    zero_point,
                    min,
                    max,
                } if min == max => write!(
                    f,
                    "tensor {tensor}: zero point {zero_point}, where this kernel takes only {min}"
                ),
                QuantProblem::ZeroPointForKernel {
                    zero_point,
                    min,
                    max,
                } => write!(
                    f,
                    "tensor {tensor}: zero point {zero_point} is outside {min}..={max}, what this kernel takes"
                ),
                QuantProblem::Scale { channel, bits } => write!(
                    f,
                    "tensor {tensor}: quantisation scale {} (channel {channel}) is not a positive finite number",
                    crate::float_text::ShortFloat(f32::from_bits(bits))
                ),
                QuantProblem::ZeroPoint {
                    channel,
                    zero_point,
                    dtype,
                } => write!(
                    f,
                    "tensor {tensor}: zero point {zero_point} (channel {channel}) is outside the range of {}",
                    crate::schema::TensorType(dtype)
                        .variant_name()
                        .unwrap_or("its type")
                ),
            },
            KernelError::UnsupportedParameter { what } => {
                write!(f, "unsupported parameter: {what}")
            }
            KernelError::Misaligned { tensor } => {
                write!(f, "tensor {tensor}: data is not aligned for its type")
            }
            KernelError::OutOfMemory { bytes } => {
                write!(f, "no room in the arena for {bytes} bytes of op data")
            }
            KernelError::NotVariable { position } => {
                write!(f, "input {position} is not a variable tensor")
            }
            KernelError::IndexOutOfRange {
                tensor,
                index,
                size,
            } => write!(
                f,
                "tensor {tensor}: index {index} is outside an axis of size {size}"
            ),
            KernelError::ConstantImageShort { needed, image } => write!(
                f,
                "the constant image holds {image} bytes, this op's constants need {needed}"
            ),
            KernelError::ConstantImageDiffers { byte } => write!(
                f,
                "its constants differ from the constant image at byte {byte} (an image made for another model or kernel build)"
            ),
            KernelError::TakenTwice => f.write_str("a writable tensor view was taken twice"),
            KernelError::Internal => f.write_str("internal interpreter error"),
        }
    }
}

impl core::error::Error for KernelError {}

/// What is wrong with a tensor's quantisation parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum QuantProblem {
    /// A scale that is zero, negative, infinite or NaN.
    Scale {
        /// Which scale (0 for per-tensor quantisation).
        channel: u32,
        /// Its bits (`f32::to_bits`, so that the error stays `Eq`).
        bits: u32,
    },
    /// A zero point the kernel does not take (TFLM's int16 paths are
    /// symmetric: zero only).
    ZeroPointForKernel {
        /// Its value.
        zero_point: i32,
        /// The least the kernel takes.
        min: i32,
        /// The most.
        max: i32,
    },
    /// A zero point the tensor's type cannot hold.
    ZeroPoint {
        /// Which zero point.
        channel: u32,
        /// Its value.
        zero_point: i32,
        /// The tensor's `TensorType` code.
        dtype: i8,
    },
}

/// A kernel's prepare step.
pub type PrepareFn = fn(&mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError>;
/// A kernel's invoke step.
pub type InvokeFn = fn(&InvokeContext<'_, '_>) -> Result<(), KernelError>;

/// A kernel: its name, prepare and invoke.
#[derive(Clone, Copy)]
pub struct Registration {
    /// Name for reports and profiles.
    pub name: &'static str,
    /// Validates, computes op data, requests scratch.
    pub prepare: PrepareFn,
    /// Computes.
    pub invoke: InvokeFn,
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.name)
            .finish()
    }
}

/// Finds the kernel for an operator code.
pub trait Resolver {
    /// Index of the kernel for `code`, if there is one.
    fn find(&self, code: OpCode<'_>) -> Option<u32>;
    /// The kernel at `index` (as returned by `find`).
    fn get(&self, index: u32) -> Option<&Registration>;
}

/// The operators of `model` that `resolver` has no kernel for, in
/// execution order. The interpreter stops at the first; a tool that tells a
/// user whether a model will load lists them all at once.
pub fn unsupported_ops<'m, 'r>(
    model: &'r Model<'m>,
    resolver: &'r dyn Resolver,
) -> impl Iterator<Item = OperatorInfo<'m>> + 'r {
    model.operators().filter(move |op| {
        resolver
            .find(op.code)
            .and_then(|i| resolver.get(i))
            .is_none()
    })
}

/// The schema's `BuiltinOperator::CUSTOM` (not in hilt's schema subset).
const CUSTOM_CODE: i32 = 32;

/// A fixed-capacity table of kernels (no heap): builtins keyed by operator
/// code, `CUSTOM` operators keyed by their custom-code name (how a model
/// names a vendor op; a backend registers the names it runs).
#[derive(Debug, Clone)]
pub struct OpResolver<const N: usize> {
    codes: [i32; N],
    /// The custom-code name of each entry; `None` for builtins.
    names: [Option<&'static str>; N],
    kernels: [Option<Registration>; N],
    len: usize,
}

/// The resolver has no room for another kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolverFull;

impl<const N: usize> Default for OpResolver<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> OpResolver<N> {
    /// An empty resolver.
    pub const fn new() -> Self {
        OpResolver {
            codes: [0; N],
            names: [None; N],
            kernels: [None; N],
            len: 0,
        }
    }

    /// Registers `kernel` for `op` (a later registration for the same op wins).
    pub fn add(
        &mut self,
        op: BuiltinOperator,
        kernel: Registration,
    ) -> Result<&mut Self, ResolverFull> {
        let existing = (0..self.len).find(|&i| self.codes[i] == op.0 && self.names[i].is_none());
        self.put(existing, op.0, None, kernel)
    }

    /// Registers `kernel` for `CUSTOM` operators whose custom code is `name`
    /// (a later registration for the same name wins).
    pub fn add_custom(
        &mut self,
        name: &'static str,
        kernel: Registration,
    ) -> Result<&mut Self, ResolverFull> {
        let existing = (0..self.len).find(|&i| self.names[i] == Some(name));
        self.put(existing, CUSTOM_CODE, Some(name), kernel)
    }

    fn put(
        &mut self,
        existing: Option<usize>,
        code: i32,
        name: Option<&'static str>,
        kernel: Registration,
    ) -> Result<&mut Self, ResolverFull> {
        if let Some(i) = existing {
            self.kernels[i] = Some(kernel);
            return Ok(self);
        }
        if self.len == N {
            return Err(ResolverFull);
        }
        self.codes[self.len] = code;
        self.names[self.len] = name;
        self.kernels[self.len] = Some(kernel);
        self.len += 1;
        Ok(self)
    }
}

impl<const N: usize> Resolver for OpResolver<N> {
    fn find(&self, code: OpCode<'_>) -> Option<u32> {
        match code {
            OpCode::Builtin(op) => (0..self.len)
                .find(|&i| self.codes[i] == op.0 && self.names[i].is_none())
                .map(|i| i as u32),
            OpCode::Custom(name) => (0..self.len)
                .find(|&i| self.names[i] == Some(name))
                .map(|i| i as u32),
        }
    }

    fn get(&self, index: u32) -> Option<&Registration> {
        self.kernels.get(index as usize)?.as_ref()
    }
}

/// Entries [`all_builtins`]' resolver holds: every builtin and room for a
/// few custom kernels a backend adds.
pub const BUILTINS_CAPACITY: usize = 96;

/// The kernels every firmware carries: the operators of the conformance
/// models (TFLM's examples, MLPerf Tiny and the converted architectures of
/// the second set).
const CORE_KERNELS: &[(BuiltinOperator, Registration)] = &[
    (BuiltinOperator::RESHAPE, reshape::REGISTRATION),
    (
        BuiltinOperator::FULLY_CONNECTED,
        fully_connected::REGISTRATION,
    ),
    (BuiltinOperator::CONV_2D, conv::REGISTRATION),
    (
        BuiltinOperator::DEPTHWISE_CONV_2D,
        depthwise_conv::REGISTRATION,
    ),
    (BuiltinOperator::ADD, add::REGISTRATION),
    (BuiltinOperator::AVERAGE_POOL_2D, pooling::AVERAGE_POOL_2D),
    (BuiltinOperator::MAX_POOL_2D, pooling::MAX_POOL_2D),
    (BuiltinOperator::SOFTMAX, softmax::REGISTRATION),
    (BuiltinOperator::LOGISTIC, logistic::REGISTRATION),
    (BuiltinOperator::QUANTIZE, quantize::REGISTRATION),
    (BuiltinOperator::DEQUANTIZE, dequantize::REGISTRATION),
    (BuiltinOperator::SVDF, svdf::REGISTRATION),
    (
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM,
        lstm::REGISTRATION,
    ),
    (BuiltinOperator::SUB, sub::REGISTRATION),
    (BuiltinOperator::MUL, mul::REGISTRATION),
    (BuiltinOperator::MEAN, reduce::MEAN),
    (BuiltinOperator::CONCATENATION, concatenation::REGISTRATION),
    (BuiltinOperator::PRELU, prelu::REGISTRATION),
    (BuiltinOperator::SPLIT, split::SPLIT),
    (BuiltinOperator::SPLIT_V, split::SPLIT_V),
    (BuiltinOperator::MAXIMUM, maximum_minimum::MAXIMUM),
    (BuiltinOperator::MINIMUM, maximum_minimum::MINIMUM),
    (
        BuiltinOperator::SQUARED_DIFFERENCE,
        squared_difference::REGISTRATION,
    ),
    (BuiltinOperator::TANH, tanh::REGISTRATION),
    (
        BuiltinOperator::RESIZE_NEAREST_NEIGHBOR,
        resize_nearest_neighbor::REGISTRATION,
    ),
    (BuiltinOperator::TRANSPOSE, transpose::REGISTRATION),
    (
        BuiltinOperator::TRANSPOSE_CONV,
        transpose_conv::REGISTRATION,
    ),
    (BuiltinOperator::RSQRT, rsqrt::REGISTRATION),
    (BuiltinOperator::BATCH_MATMUL, batch_matmul::REGISTRATION),
    (BuiltinOperator::LEAKY_RELU, leaky_relu::REGISTRATION),
    (BuiltinOperator::PAD, pad::PAD),
    (BuiltinOperator::PADV2, pad::PADV2),
    (BuiltinOperator::STRIDED_SLICE, strided_slice::REGISTRATION),
];

/// The rest of TFLM's TinyML operators (element-wise maths, comparisons,
/// data movement, reductions). A firmware built with the runtime's
/// `core-kernels-only` feature leaves them out, for flash that cannot hold
/// them beside a large model (the STM32F405's 1 MiB with person_detect).
const EXTENDED_KERNELS: &[(BuiltinOperator, Registration)] = &[
    (BuiltinOperator::SUM, reduce::SUM),
    (BuiltinOperator::REDUCE_MAX, reduce::REDUCE_MAX),
    (BuiltinOperator::ARG_MAX, arg_min_max::ARG_MAX),
    (BuiltinOperator::ARG_MIN, arg_min_max::ARG_MIN),
    (BuiltinOperator::CUMSUM, cumsum::REGISTRATION),
    (BuiltinOperator::SQUEEZE, reshape::SQUEEZE),
    (BuiltinOperator::EXPAND_DIMS, reshape::EXPAND_DIMS),
    (BuiltinOperator::SHAPE, shape::REGISTRATION),
    (BuiltinOperator::FILL, fill::FILL),
    (BuiltinOperator::ZEROS_LIKE, fill::ZEROS_LIKE),
    (BuiltinOperator::SLICE, slice::REGISTRATION),
    (BuiltinOperator::MIRROR_PAD, mirror_pad::REGISTRATION),
    (BuiltinOperator::PACK, pack::PACK),
    (BuiltinOperator::UNPACK, pack::UNPACK),
    (BuiltinOperator::GATHER, gather::REGISTRATION),
    (
        BuiltinOperator::SPACE_TO_DEPTH,
        space_to_depth::SPACE_TO_DEPTH,
    ),
    (
        BuiltinOperator::DEPTH_TO_SPACE,
        space_to_depth::DEPTH_TO_SPACE,
    ),
    (
        BuiltinOperator::SPACE_TO_BATCH_ND,
        space_to_batch::SPACE_TO_BATCH_ND,
    ),
    (
        BuiltinOperator::BATCH_TO_SPACE_ND,
        space_to_batch::BATCH_TO_SPACE_ND,
    ),
    (
        BuiltinOperator::RESIZE_BILINEAR,
        resize_bilinear::REGISTRATION,
    ),
    (BuiltinOperator::L2_POOL_2D, pooling::L2_POOL_2D),
    (BuiltinOperator::DIV, div::REGISTRATION),
    (BuiltinOperator::ABS, unary_math::ABS),
    (BuiltinOperator::NEG, unary_math::NEG),
    (BuiltinOperator::SQRT, unary_math::SQRT),
    (BuiltinOperator::EXP, unary_math::EXP),
    (BuiltinOperator::LOG, unary_math::LOG),
    (BuiltinOperator::RELU, relu::RELU),
    (BuiltinOperator::RELU6, relu::RELU6),
    (BuiltinOperator::HARD_SWISH, hard_swish::REGISTRATION),
    (BuiltinOperator::ELU, elu::REGISTRATION),
    (BuiltinOperator::LOG_SOFTMAX, log_softmax::REGISTRATION),
    (BuiltinOperator::EQUAL, comparisons::EQUAL),
    (BuiltinOperator::NOT_EQUAL, comparisons::NOT_EQUAL),
    (BuiltinOperator::LESS, comparisons::LESS),
    (BuiltinOperator::LESS_EQUAL, comparisons::LESS_EQUAL),
    (BuiltinOperator::GREATER, comparisons::GREATER),
    (BuiltinOperator::GREATER_EQUAL, comparisons::GREATER_EQUAL),
    (BuiltinOperator::SELECT_V2, select::REGISTRATION),
    (BuiltinOperator::CAST, cast::REGISTRATION),
    (
        BuiltinOperator::L2_NORMALIZATION,
        l2_normalization::REGISTRATION,
    ),
];

/// The kernel tables this build carries.
#[cfg(not(feature = "core-kernels-only"))]
const TABLES: [&[(BuiltinOperator, Registration)]; 2] = [CORE_KERNELS, EXTENDED_KERNELS];
#[cfg(feature = "core-kernels-only")]
const TABLES: [&[(BuiltinOperator, Registration)]; 1] = [CORE_KERNELS];

/// Every builtin kernel hilt has. Every one is linked into a firmware that
/// calls this, whatever its model runs (a firmware for many models).
pub fn all_builtins() -> OpResolver<BUILTINS_CAPACITY> {
    let mut r = OpResolver::new();
    for &(op, kernel) in TABLES.iter().flat_map(|t| t.iter()) {
        // BUILTINS_CAPACITY entries hold every builtin above.
        let _ = r.add(op, kernel);
    }
    r
}

/// Which tensor types a kernel's variants cover, as bits (of the input the
/// kernel dispatches on). A firmware for one model registers the kernels
/// that have a variant per type through [`builtin_typed`], with only the
/// types its model gives them: the other variants are not linked, and their
/// prepare refuses those types as it refuses any type it has no variant for
/// ([`KernelError::UnsupportedType`], naming the tensor).
pub mod types {
    use crate::schema::TensorType;

    /// `FLOAT32`.
    pub const FLOAT32: u8 = 1;
    /// `INT8`.
    pub const INT8: u8 = 2;
    /// `INT16`.
    pub const INT16: u8 = 4;
    /// Every variant: what [`builtin`](super::builtin) registers.
    pub const ALL: u8 = FLOAT32 | INT8 | INT16;

    /// The bit of `dtype`; `None` for a type with no bit of its own (a
    /// firmware whose model has one registers every variant).
    pub const fn bit(dtype: TensorType) -> Option<u8> {
        match dtype.0 {
            x if x == TensorType::FLOAT32.0 => Some(FLOAT32),
            x if x == TensorType::INT8.0 => Some(INT8),
            x if x == TensorType::INT16.0 => Some(INT16),
            _ => None,
        }
    }

    /// Whether the variants `set` cover `dtype`.
    pub const fn covers(set: u8, dtype: TensorType) -> bool {
        match bit(dtype) {
            Some(b) => set & b != 0,
            None => set == ALL,
        }
    }

    /// The first statement of a typed kernel's prepare arm for the type
    /// `bit`: `UnsupportedType` naming `tensor` when `T` leaves that type
    /// out (the arm's code is then not linked); nothing at all for
    /// [`ALL`], so the full kernel compiles as it did without types.
    #[inline(always)]
    pub(crate) fn need<const T: u8>(
        bit: u8,
        tensor: &crate::model::TensorInfo<'_>,
    ) -> Result<(), super::KernelError> {
        if T & bit == 0 {
            return Err(super::KernelError::UnsupportedType {
                tensor: tensor.index,
                dtype: tensor.dtype.0,
            });
        }
        Ok(())
    }

    /// [`need`] in invoke, whose op data prepare wrote only for a type it
    /// took: another type there is an internal error.
    #[inline(always)]
    pub(crate) fn linked<const T: u8>(bit: u8) -> Result<(), super::KernelError> {
        if T & bit == 0 {
            return Err(super::KernelError::Internal);
        }
        Ok(())
    }
}

/// hilt's kernel for builtin `op` with only the variants of the types in
/// `T` ([`types`]) linked, for the kernels that have a variant per type
/// (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D,
/// MAX_POOL_2D and SOFTMAX); for any other operator, [`builtin`]. Evaluate it in a
/// constant, as [`builtin`].
pub const fn builtin_typed<const T: u8>(op: BuiltinOperator) -> Option<Registration> {
    match op.0 {
        x if x == BuiltinOperator::CONV_2D.0 => Some(conv::typed::<T>()),
        x if x == BuiltinOperator::DEPTHWISE_CONV_2D.0 => Some(depthwise_conv::typed::<T>()),
        x if x == BuiltinOperator::FULLY_CONNECTED.0 => Some(fully_connected::typed::<T>()),
        x if x == BuiltinOperator::AVERAGE_POOL_2D.0 => Some(pooling::average_typed::<T>()),
        x if x == BuiltinOperator::MAX_POOL_2D.0 => Some(pooling::max_typed::<T>()),
        x if x == BuiltinOperator::SOFTMAX.0 => Some(softmax::typed::<T>()),
        _ => builtin(op),
    }
}

/// hilt's kernel for builtin `op`, if it has one.
///
/// Evaluated in a constant (`const { builtin(BuiltinOperator::CONV_2D) }`)
/// the lookup happens at compile time and names only that kernel: a
/// firmware that registers its model's operators this way (TFLM's
/// `MicroMutableOpResolver`, written for the model) links only their
/// kernels, where [`all_builtins`] links all of them.
pub const fn builtin(op: BuiltinOperator) -> Option<Registration> {
    let mut t = 0;
    while t < TABLES.len() {
        let table = TABLES[t];
        let mut i = 0;
        while i < table.len() {
            if table[i].0.0 == op.0 {
                return Some(table[i].1);
            }
            i += 1;
        }
        t += 1;
    }
    None
}
