//! Float convolution on the host: four output pixels side by side.
//!
//! TFLM sums each output's products in a fixed order (filter row, filter
//! column, input channel), and hilt's float results are bit-exact with it,
//! so a sum may not be split into partial sums the way a vector dot
//! product would. What may run side by side is *independent* sums: here
//! four output pixels of the same channel. Their four windows are copied
//! into one patch, transposed (`patch[d]` holds input `d` of each pixel),
//! so each step of the sum is one vector load, one broadcast weight, one
//! multiply and one add for four pixels, and eight channels share each
//! load of the patch. Each lane still adds its products one by one, in
//! TFLM's order, from zero; the bias comes after, as TFLM adds it.
//!
//! Only windows wholly inside the input are tiled (a clipped window skips
//! taps, and adding a zero in their place could turn a `-0.0` sum into
//! `+0.0`); the others, and a layer whose window is longer than
//! [`MAX_PATCH`], take the per-pixel path. A last tile short of four
//! pixels computes its empty lanes too and writes only its own. Cortex-M cores have no float
//! vectors, so the firmware keeps that path alone (the M4's figures are
//! its).

use super::conv_geometry::{Geometry, Window};
use super::fully_connected::{ROWS, activate};

/// Output pixels summed side by side.
pub(super) const PIXELS: usize = 4;

/// The longest window (filter height × width × input channels) the tiles
/// take: the transposed patch lives on the stack (16 KB).
pub(super) const MAX_PATCH: usize = 1024;

/// Up to [`PIXELS`] output pixels waiting for a tile: where each one's
/// input starts (its window's first tap), and where its outputs go.
pub(super) struct Pending {
    inputs: [usize; PIXELS],
    outputs: [usize; PIXELS],
    len: usize,
}

impl Pending {
    pub(super) fn new() -> Self {
        Pending {
            inputs: [0; PIXELS],
            outputs: [0; PIXELS],
            len: 0,
        }
    }

    /// Adds a pixel; true when the tile is full.
    pub(super) fn push(&mut self, input: usize, output: usize) -> bool {
        self.inputs[self.len] = input;
        self.outputs[self.len] = output;
        self.len += 1;
        self.len == PIXELS
    }

    /// Whether no pixel waits.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The waiting pixels' inputs.
    fn inputs(&self) -> &[usize] {
        &self.inputs[..self.len]
    }
}

/// Whether the window lies wholly inside the input.
pub(super) fn is_whole(g: &Geometry, win: &Window) -> bool {
    win.rows.start == 0
        && win.rows.end == g.y.filter
        && win.cols.start == 0
        && win.cols.end == g.x.filter
}

/// The transposed patch of a full tile of whole windows whose filter
/// position (0, 0) input starts at `tile.inputs`.
pub(super) fn pack_windows(
    g: &Geometry,
    x: &[f32],
    tile: &Pending,
    patch: &mut [[f32; PIXELS]; MAX_PATCH],
) -> usize {
    let (fh, fw, c) = (g.y.filter, g.x.filter, g.in_c as usize);
    let (dy, dx) = (g.y.dilation as usize, g.x.dilation as usize);
    let row = g.x.in_size as usize * c;
    let mut d = 0;
    for fy in 0..fh as usize {
        for fx in 0..fw as usize {
            let at = fy * dy * row + fx * dx * c;
            for (p, &start) in tile.inputs().iter().enumerate() {
                for (k, &v) in x[start + at..][..c].iter().enumerate() {
                    patch[d + k][p] = v;
                }
            }
            d += c;
        }
    }
    d
}

/// The transposed patch of a full tile of 1×1 windows (`len` channels at
/// each of `tile.inputs`).
pub(super) fn pack_pixels(
    x: &[f32],
    tile: &Pending,
    len: usize,
    patch: &mut [[f32; PIXELS]; MAX_PATCH],
) -> usize {
    for (p, &start) in tile.inputs().iter().enumerate() {
        for (k, &v) in x[start..][..len].iter().enumerate() {
            patch[k][p] = v;
        }
    }
    len
}

/// Every output channel of the tile's pixels from its patch
/// (`patch[..len]`): `out[pixel][c] = act(Σ_d patch[d][pixel] · w[c][d] +
/// bias[c])`, each sum from zero in `d` order; empties the tile.
pub(super) fn tile_outputs(
    patch: &[[f32; PIXELS]],
    w: &[f32],
    bias: Option<&[f32]>,
    range: (f32, f32),
    tile: &mut Pending,
    out_c: usize,
    out: &mut [f32],
) {
    let outputs = &tile.outputs[..core::mem::take(&mut tile.len)];
    let k = patch.len();
    let mut c = 0;
    while c < out_c {
        let n = ROWS.min(out_c - c);
        let mut acc = [[0.0f32; PIXELS]; ROWS];
        if n == ROWS {
            let rows: [&[f32]; ROWS] = core::array::from_fn(|r| &w[(c + r) * k..][..k]);
            for (d, xs) in patch.iter().enumerate() {
                for (a, row) in acc.iter_mut().zip(&rows) {
                    let wv = row[d];
                    for (s, &v) in a.iter_mut().zip(xs) {
                        *s += v * wv;
                    }
                }
            }
        } else {
            for (r, a) in acc.iter_mut().enumerate().take(n) {
                let row = &w[(c + r) * k..][..k];
                for (xs, &wv) in patch.iter().zip(row) {
                    for (s, &v) in a.iter_mut().zip(xs) {
                        *s += v * wv;
                    }
                }
            }
        }
        for (r, a) in acc.iter().enumerate().take(n) {
            let b = bias.map_or(0.0, |b| b[c + r]);
            for (&o, &s) in outputs.iter().zip(a) {
                out[o + c + r] = activate(s + b, range);
            }
        }
        c += n;
    }
}
