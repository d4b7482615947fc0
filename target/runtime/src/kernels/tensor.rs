//! Tensor views for kernels: data plus the model's description of it.

use bytemuck::Pod;

use super::{KernelError, QuantProblem};
use crate::model::{Model, TensorInfo};
use crate::schema::TensorType;

/// Most dimensions a kernel handles.
pub const MAX_RANK: usize = 6;

/// A tensor's shape, copied out of the model (no heap, `Copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dims {
    dims: [i32; MAX_RANK],
    rank: u8,
}

impl Dims {
    /// The shape of `info` (an error past [`MAX_RANK`] dimensions).
    pub fn of(info: &TensorInfo<'_>) -> Result<Self, KernelError> {
        let mut dims = Dims::default();
        for (i, d) in info.shape().enumerate() {
            if i >= MAX_RANK {
                return Err(KernelError::UnsupportedRank {
                    tensor: info.index,
                    rank: info.shape().len() as u32,
                });
            }
            dims.dims[i] = d;
            dims.rank += 1;
        }
        Ok(dims)
    }

    /// A shape from a slice (at most [`MAX_RANK`] entries).
    pub fn from_slice(values: &[i32]) -> Self {
        let mut dims = Dims::default();
        for (i, &v) in values.iter().take(MAX_RANK).enumerate() {
            dims.dims[i] = v;
        }
        dims.rank = values.len().min(MAX_RANK) as u8;
        dims
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Dimension `i` (0 past the rank).
    pub fn get(&self, i: usize) -> i32 {
        if i < self.rank() { self.dims[i] } else { 0 }
    }

    /// The dimensions as a slice.
    pub fn as_slice(&self) -> &[i32] {
        &self.dims[..self.rank()]
    }

    /// Product of all dimensions.
    pub fn elements(&self) -> usize {
        self.as_slice().iter().map(|&d| d.max(0) as usize).product()
    }

    /// Product of the dimensions except the last.
    pub fn outer(&self) -> usize {
        self.as_slice()[..self.rank().saturating_sub(1)]
            .iter()
            .map(|&d| d.max(0) as usize)
            .product()
    }

    /// The last dimension (1 for scalars).
    pub fn last(&self) -> usize {
        if self.rank == 0 {
            1
        } else {
            self.dims[self.rank() - 1].max(0) as usize
        }
    }
}

/// Per-tensor (or first-channel) quantisation of a tensor: `real = scale * (q - zero_point)`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Quant {
    /// Scale.
    pub scale: f32,
    /// Zero point.
    pub zero_point: i32,
}

/// Quantisation parameters of `info`, if it has any.
pub fn quant(info: &TensorInfo<'_>) -> Option<Quant> {
    let q = info.raw().quantization()?;
    let scale = q.scale()?;
    if scale.is_empty() {
        return None;
    }
    let zero_point = q
        .zero_point()
        .filter(|z| !z.is_empty())
        .map_or(0, |z| z.get(0) as i32);
    Some(Quant {
        scale: scale.get(0),
        zero_point,
    })
}

/// Refuses a zero point outside `zero_points`, the range a kernel takes
/// for `tensor` (narrower than its type's for TFLM's symmetric int16
/// paths: zero only). Scales were checked by [`require_quant`].
pub(crate) fn check_zero_point(
    tensor: u32,
    q: Quant,
    zero_points: core::ops::RangeInclusive<i32>,
) -> Result<(), KernelError> {
    if zero_points.contains(&q.zero_point) {
        return Ok(());
    }
    Err(KernelError::BadQuantization {
        tensor,
        problem: QuantProblem::ZeroPointForKernel {
            zero_point: q.zero_point,
            min: *zero_points.start(),
            max: *zero_points.end(),
        },
    })
}

/// Quantisation of `info`, checked ([`check_quant`]), or an error naming
/// the tensor.
pub fn require_quant(info: &TensorInfo<'_>) -> Result<Quant, KernelError> {
    let q = quant(info).ok_or(KernelError::MissingQuantization { tensor: info.index })?;
    check_quant(info)?;
    Ok(q)
}

/// Refuses quantisation parameters no kernel can compute with: a scale
/// (any channel's) that is not a positive finite number, or a zero point
/// outside the range of the tensor's integer type. A tensor without
/// parameters passes (whether it needs them is the kernel's question).
pub fn check_quant(info: &TensorInfo<'_>) -> Result<(), KernelError> {
    let Some(q) = info.raw().quantization() else {
        return Ok(());
    };
    let bad = |problem| KernelError::BadQuantization {
        tensor: info.index,
        problem,
    };
    for (channel, scale) in q.scale().into_iter().flatten().enumerate() {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(bad(QuantProblem::Scale {
                channel: channel as u32,
                bits: scale.to_bits(),
            }));
        }
    }
    let range = match info.dtype {
        TensorType::INT8 => i64::from(i8::MIN)..=i64::from(i8::MAX),
        TensorType::UINT8 => 0..=i64::from(u8::MAX),
        TensorType::INT16 => i64::from(i16::MIN)..=i64::from(i16::MAX),
        TensorType::INT4 => -8..=7,
        TensorType::INT32 => i64::from(i32::MIN)..=i64::from(i32::MAX),
        _ => return Ok(()),
    };
    for (channel, zero_point) in q.zero_point().into_iter().flatten().enumerate() {
        if !range.contains(&zero_point) {
            return Err(bad(QuantProblem::ZeroPoint {
                channel: channel as u32,
                zero_point: zero_point.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
                dtype: info.dtype.0,
            }));
        }
    }
    Ok(())
}

/// Per-channel scales of `info` (one for per-tensor quantisation).
pub fn channel_scales<'a>(info: &TensorInfo<'a>) -> Option<flatbuffers::Vector<'a, f32>> {
    info.raw().quantization()?.scale()
}

/// Checks a tensor's element type.
pub fn expect_type(info: &TensorInfo<'_>, types: &[TensorType]) -> Result<(), KernelError> {
    if types.contains(&info.dtype) {
        Ok(())
    } else {
        Err(KernelError::UnsupportedType {
            tensor: info.index,
            dtype: info.dtype.0,
        })
    }
}

/// Checks a float layer's weights: the filter float32, and the bias, if
/// any, float32 with one value per output channel (CONV_2D and
/// DEPTHWISE_CONV_2D).
pub(crate) fn expect_float_weights(
    filter: &TensorInfo<'_>,
    bias: Option<&TensorInfo<'_>>,
    channels: usize,
) -> Result<(), KernelError> {
    expect_type(filter, &[TensorType::FLOAT32])?;
    if let Some(bias) = bias {
        expect_type(bias, &[TensorType::FLOAT32])?;
        if Dims::of(bias)?.elements() != channels {
            return Err(KernelError::ShapeMismatch { tensor: bias.index });
        }
    }
    Ok(())
}

/// Checks an axis operand that holds one int32 (ARG_MAX, ARG_MIN, CUMSUM):
/// another type is `UnsupportedType`, more or fewer elements
/// `ShapeMismatch`, both naming the axis tensor.
pub(crate) fn expect_scalar_axis(axis: &TensorInfo<'_>) -> Result<(), KernelError> {
    expect_type(axis, &[TensorType::INT32])?;
    if Dims::of(axis)?.elements() != 1 {
        return Err(KernelError::ShapeMismatch { tensor: axis.index });
    }
    Ok(())
}

/// The checks of an element-wise unary op: `input` of one of `types`, the
/// output of the input's type and with as many elements.
pub(crate) fn same_type_and_size(
    input: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    types: &[TensorType],
) -> Result<(), KernelError> {
    expect_type(input, types)?;
    if output.dtype != input.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    if Dims::of(input)?.elements() != Dims::of(output)?.elements() {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    Ok(())
}

/// Writes `f(x)` for every element `x` of `input` into `output`: the loop
/// of every one-input element-wise kernel. Lengths that differ (prepare
/// checked them) are an `Internal` error.
pub(crate) fn map_elements<T: Pod, U: Pod>(
    input: &Tensor<'_, '_>,
    output: TensorMut<'_, '_>,
    f: impl Fn(T) -> U,
) -> Result<(), KernelError> {
    let (x, out) = (input.values::<T>()?, output.values::<U>()?);
    if x.len() != out.len() {
        return Err(KernelError::Internal);
    }
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
    Ok(())
}

fn cast<T: Pod>(index: u32, data: &[u8]) -> Result<&[T], KernelError> {
    if data.is_empty() {
        return Ok(&[]);
    }
    bytemuck::try_cast_slice(data).map_err(|_| KernelError::Misaligned { tensor: index })
}

fn cast_mut<T: Pod>(index: u32, data: &mut [u8]) -> Result<&mut [T], KernelError> {
    if data.is_empty() {
        return Ok(&mut []);
    }
    bytemuck::try_cast_slice_mut(data).map_err(|_| KernelError::Misaligned { tensor: index })
}

/// A read-only tensor during invoke.
#[derive(Clone, Copy)]
pub struct Tensor<'i, 'm> {
    /// Tensor index in subgraph 0.
    pub index: u32,
    /// The bytes.
    pub data: &'i [u8],
    pub(crate) model: &'i Model<'m>,
}

impl core::fmt::Debug for Tensor<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tensor")
            .field("index", &self.index)
            .field("bytes", &self.data.len())
            .finish()
    }
}

impl<'i, 'm> Tensor<'i, 'm> {
    /// The data as elements of `T` (an error if misaligned).
    pub fn values<T: Pod>(&self) -> Result<&'i [T], KernelError> {
        cast(self.index, self.data)
    }

    /// The model's description (re-read from the flatbuffer: prepare-time
    /// use, not for inner loops).
    pub fn info(&self) -> Option<TensorInfo<'m>> {
        self.model.tensor(self.index)
    }
}

/// Maps each innermost row of `depth` elements of `input` to the same row
/// of `output` with `row` (the row-wise ops: LOG_SOFTMAX, L2_NORMALIZATION).
/// A zero depth has no rows.
pub(crate) fn map_rows<T: Pod>(
    input: &Tensor<'_, '_>,
    output: TensorMut<'_, '_>,
    depth: usize,
    mut row: impl FnMut(&[T], &mut [T]),
) -> Result<(), KernelError> {
    if depth == 0 {
        return Ok(());
    }
    let (x, out) = (input.values::<T>()?, output.values::<T>()?);
    for (r, o) in x.chunks_exact(depth).zip(out.chunks_exact_mut(depth)) {
        row(r, o);
    }
    Ok(())
}

/// A writable tensor during invoke.
pub struct TensorMut<'i, 'm> {
    /// Tensor index in subgraph 0.
    pub index: u32,
    /// The bytes.
    pub data: &'i mut [u8],
    pub(crate) model: &'i Model<'m>,
}

impl core::fmt::Debug for TensorMut<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TensorMut")
            .field("index", &self.index)
            .field("bytes", &self.data.len())
            .finish()
    }
}

impl<'i, 'm> TensorMut<'i, 'm> {
    /// The data as elements of `T` (an error if misaligned).
    pub fn values<T: Pod>(self) -> Result<&'i mut [T], KernelError> {
        cast_mut(self.index, self.data)
    }

    /// The model's description (see [`Tensor::info`]).
    pub fn info(&self) -> Option<TensorInfo<'m>> {
        self.model.tensor(self.index)
    }
}

/// Bytes per element of `info`, which must be one of `types` (a copying
/// kernel's list: the bytes matter, not what they mean).
pub(crate) fn element_size(
    info: &TensorInfo<'_>,
    types: &[TensorType],
) -> Result<u32, KernelError> {
    expect_type(info, types)?;
    match info.dtype {
        TensorType::INT8 | TensorType::UINT8 | TensorType::BOOL => Ok(1),
        TensorType::INT16 | TensorType::FLOAT16 => Ok(2),
        TensorType::FLOAT32 | TensorType::INT32 => Ok(4),
        TensorType::INT64 | TensorType::FLOAT64 => Ok(8),
        other => Err(KernelError::UnsupportedType {
            tensor: info.index,
            dtype: other.0,
        }),
    }
}

/// Element `i` of an int32 or int64 vector's bytes, widened (`None` past
/// the end).
pub(crate) fn index_at(dtype: TensorType, bytes: &[u8], i: usize) -> Option<i64> {
    if dtype == TensorType::INT64 {
        let b: [u8; 8] = bytes.get(8 * i..8 * i + 8)?.try_into().ok()?;
        Some(i64::from_le_bytes(b))
    } else {
        let b: [u8; 4] = bytes.get(4 * i..4 * i + 4)?.try_into().ok()?;
        Some(i64::from(i32::from_le_bytes(b)))
    }
}

/// Refuses `output` unless it has `input`'s type and quantisation (a
/// kernel that moves values without requantising them); `what` names the
/// op's quantisation rule in the error.
pub(crate) fn same_type_and_quant(
    input: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    what: &'static str,
) -> Result<(), KernelError> {
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    if quant(input) != quant(output) {
        return Err(KernelError::UnsupportedParameter { what });
    }
    Ok(())
}

/// The constant data of `info`, counting a tensor with no elements as an
/// (empty) constant: the model stores no buffer for it and the arena plans
/// none, so there would be nothing to read at invoke (the begin vector of
/// a scalar's SLICE, say).
pub(crate) fn constant_data<'a>(info: &TensorInfo<'a>) -> Result<Option<&'a [u8]>, KernelError> {
    if info.constant.is_none() && Dims::of(info)?.elements() == 0 {
        return Ok(Some(&[]));
    }
    Ok(info.constant)
}
