//! The shape of a 2-D convolution and its windows, shared by every kernel
//! that slides a filter over an NHWC image: CONV_2D (`conv`, and its
//! `conv_dsp` and `conv_i16` variants) and DEPTHWISE_CONV_2D
//! (`depthwise_conv`, `depthwise_packed`).
//!
//! [`Geometry`] is validated once in prepare (TFLM's
//! `ComputePaddingHeightWidth`) and stored in each kernel's op data;
//! [`Window`] is one output pixel's view of the input, the valid filter
//! taps worked out per axis ([`Axis::taps`]) so inner loops need no bounds
//! tests. It imports no kernel, so the kernels and their variants all sit
//! above it.

use core::ops::Range;

use super::KernelError;
use super::tensor::Dims;
use super::window_axis::Axis;
use crate::model::TensorInfo;
use crate::schema::Padding;

/// The shape of a 2-D convolution (also DEPTHWISE_CONV_2D's).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Geometry {
    pub(crate) batches: u32,
    pub(crate) in_c: u32,
    pub(crate) out_c: u32,
    pub(crate) y: Axis,
    pub(crate) x: Axis,
}

impl Geometry {
    /// Validates NHWC `input` and `output` against a `filter_h × filter_w`
    /// window and the options, as TFLM's `ComputePaddingHeightWidth`.
    pub(crate) fn new(
        input: &TensorInfo<'_>,
        output: &TensorInfo<'_>,
        filter: (i32, i32),
        padding: Padding,
        stride: (i32, i32),
        dilation: (i32, i32),
    ) -> Result<Self, KernelError> {
        let in_dims = Dims::of(input)?;
        let out_dims = Dims::of(output)?;
        if in_dims.rank() != 4 {
            return Err(KernelError::ShapeMismatch {
                tensor: input.index,
            });
        }
        let bad = |what| {
            move |e| match e {
                super::window_axis::AxisError::UnknownPadding => {
                    KernelError::UnsupportedParameter { what: "padding" }
                }
                super::window_axis::AxisError::BadParameter => {
                    KernelError::UnsupportedParameter { what }
                }
            }
        };
        let y = Axis::new(padding, in_dims.get(1), filter.0, stride.0, dilation.0)
            .map_err(bad("stride, dilation or filter height"))?;
        let x = Axis::new(padding, in_dims.get(2), filter.1, stride.1, dilation.1)
            .map_err(bad("stride, dilation or filter width"))?;
        if out_dims.rank() != 4
            || out_dims.get(0) != in_dims.get(0)
            || out_dims.get(1) != y.out_size
            || out_dims.get(2) != x.out_size
        {
            return Err(KernelError::ShapeMismatch {
                tensor: output.index,
            });
        }
        Ok(Geometry {
            batches: in_dims.get(0).max(0) as u32,
            in_c: in_dims.get(3).max(0) as u32,
            out_c: out_dims.get(3).max(0) as u32,
            y,
            x,
        })
    }

    pub(crate) fn input_len(&self) -> usize {
        self.batches as usize
            * self.y.in_size as usize
            * self.x.in_size as usize
            * self.in_c as usize
    }

    pub(crate) fn output_len(&self) -> usize {
        self.batches as usize
            * self.y.out_size as usize
            * self.x.out_size as usize
            * self.out_c as usize
    }

    /// Calls `f` for every output pixel in memory order with the pixel's
    /// window and the offset of its first output element.
    #[inline(always)]
    pub(crate) fn for_each_pixel(&self, mut f: impl FnMut(&Window, usize)) {
        let (ih, iw, ic) = (
            self.y.in_size as usize,
            self.x.in_size as usize,
            self.in_c as usize,
        );
        let oc = self.out_c as usize;
        let mut out = 0;
        for b in 0..self.batches as usize {
            let image = b * ih * iw * ic;
            for oy in 0..self.y.out_size {
                let rows = self.y.taps(oy);
                let y0 = self.y.origin(oy);
                for ox in 0..self.x.out_size {
                    let window = Window {
                        image,
                        y0,
                        x0: self.x.origin(ox),
                        rows: rows.clone(),
                        cols: self.x.taps(ox),
                    };
                    f(&window, out);
                    out += oc;
                }
            }
        }
    }
}

#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
impl Geometry {
    /// Calls `f` for every output row in memory order with the row's
    /// windows and the offset of its first output element.
    #[inline(always)]
    pub(crate) fn for_each_row(&self, mut f: impl FnMut(&RowWindows<'_>, usize)) {
        let image_len = (self.y.in_size * self.x.in_size) as usize * self.in_c as usize;
        let row_len = self.x.out_size as usize * self.out_c as usize;
        let mut out = 0;
        for b in 0..self.batches as usize {
            for oy in 0..self.y.out_size {
                let row = RowWindows {
                    geometry: self,
                    image: b * image_len,
                    y0: self.y.origin(oy),
                    rows: self.y.taps(oy),
                };
                f(&row, out);
                out += row_len;
            }
        }
    }
}

/// The windows of one output row.
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
pub(crate) struct RowWindows<'g> {
    geometry: &'g Geometry,
    image: usize,
    y0: i32,
    rows: Range<i32>,
}

#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
impl RowWindows<'_> {
    /// Output pixels in the row.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.geometry.x.out_size as usize
    }

    /// The window of output column `ox`.
    #[inline(always)]
    pub(crate) fn at(&self, ox: usize) -> Window {
        let x = &self.geometry.x;
        Window {
            image: self.image,
            y0: self.y0,
            x0: x.origin(ox as i32),
            rows: self.rows.clone(),
            cols: x.taps(ox as i32),
        }
    }
}

/// One output pixel's view of the input.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// Offset of the pixel's input image.
    pub(crate) image: usize,
    /// Input row of filter row 0 (may be negative).
    pub(crate) y0: i32,
    /// Input column of filter column 0 (may be negative).
    pub(crate) x0: i32,
    /// Filter rows inside the input.
    pub(crate) rows: Range<i32>,
    /// Filter columns inside the input.
    pub(crate) cols: Range<i32>,
}

impl Window {
    /// Offset of input pixel (filter row `fy`, filter column `fx`).
    #[inline(always)]
    pub(crate) fn input_at(&self, g: &Geometry, fy: i32, fx: i32) -> usize {
        let iy = (self.y0 + fy * g.y.dilation) as usize;
        let ix = (self.x0 + fx * g.x.dilation) as usize;
        self.image + (iy * g.x.in_size as usize + ix) * g.in_c as usize
    }
}
