//! An int8 CONV_2D a band of output rows at a time, for the lean
//! schedule's fused chains (`kernels::fused`): the convolution's own
//! kernel ([`conv`]'s) over the rows the band reads, so each band's
//! outputs are the bits the whole op computes there.

use super::conv::{self, KIND_INT8, OpData};
use super::conv_geometry::Geometry;
use super::quant_math::Requant;
use super::{InvokeContext, KernelError};

/// An int8 convolution's operands, read once from its op's context, for
/// a fused chain (`kernels::fused`): each call computes a band of output
/// rows ([`Axis::band`](crate::kernels::window_axis::Axis::band)) from
/// the input rows it reads, the same bits as the whole op computes there.
#[cfg(not(feature = "no-lean"))]
pub(crate) struct RowConv<'i> {
    data: &'i OpData,
    w: &'i [i8],
    bias: Option<&'i [i32]>,
    requant: Requant<'i>,
}

#[cfg(not(feature = "no-lean"))]
impl<'i> RowConv<'i> {
    /// The operands of the int8, one-group, one-batch convolution whose
    /// context is `ctx`; `Internal` for any other.
    pub(crate) fn of(ctx: &InvokeContext<'i, '_>) -> Result<Self, KernelError> {
        let data: &'i OpData = ctx.op_data()?;
        let g = &data.geometry;
        if data.kind != KIND_INT8 || data.groups != 1 || g.batches != 1 {
            return Err(KernelError::Internal);
        }
        let out_c = g.out_c as usize;
        let filter_len = (g.y.filter * g.x.filter).max(0) as usize * g.in_c as usize;
        let w = ctx.input(1)?.values::<i8>()?;
        let bias = match ctx.optional_input(2)? {
            Some(b) => Some(b.values::<i32>()?),
            None => None,
        };
        let p = &data.channels;
        let requant = Requant::new(ctx.stored(p.multiplier)?, ctx.stored(p.shift)?, p.stage)?;
        if w.len() < out_c * filter_len
            || bias.is_some_and(|b| b.len() < out_c)
            || !requant.covers(out_c)
        {
            return Err(KernelError::Internal);
        }
        Ok(RowConv {
            data,
            w: &w[..out_c * filter_len],
            bias: bias.map(|b| &b[..out_c]),
            requant,
        })
    }

    /// The convolution's geometry.
    pub(crate) fn geometry(&self) -> &Geometry {
        &self.data.geometry
    }

    /// The output rows of `y` (a band of the convolution's row axis) into
    /// `out`, from the input rows the band reads at the start of `x`.
    pub(crate) fn rows(
        &self,
        y: &crate::kernels::window_axis::Axis,
        x: &[i8],
        out: &mut [i8],
    ) -> Result<(), KernelError> {
        let mut band = *self.data;
        band.geometry.y = *y;
        let g = &band.geometry;
        let (x_len, out_len) = (g.input_len(), g.output_len());
        if x.len() < x_len || out.len() < out_len {
            return Err(KernelError::Internal);
        }
        conv::conv_i8(
            &band,
            &x[..x_len],
            self.w,
            self.bias,
            &self.requant,
            &mut out[..out_len],
        );
        Ok(())
    }
}
