//! Running a kernel over its own input's buffer, for the lean schedule
//! ([`crate::schedule`]): the output is worked out a band at a time into a
//! small temporary and copied over input that no later band reads.
//!
//! The kernel itself is unchanged: each band is an ordinary call over a
//! slice of the input and the temporary, with the geometry of that band
//! (a pixel run for a pointwise convolution, [`Axis::band`] for rows), so
//! the results are the kernel's bits. The input and the output are never
//! two views at once: a band borrows the buffer to read, then to copy.

use core::ops::Range;

use super::KernelError;
use super::window_axis::Axis;

/// Temporary bytes a band may take: small against the activations worth
/// running in place, large enough that a kernel's per-call set-up is paid
/// over several rows. A band also takes at most a quarter of the output,
/// so that a small tensor's temporary does not undo what it saves.
const BAND_BYTES: usize = 2048;

/// Bytes of a band of units (pixels, rows) of `unit` bytes, `units` in all:
/// at least one unit.
fn band_units(budget: usize, unit: usize, units: usize) -> usize {
    let bytes = budget.min(units * unit / 4);
    (bytes / unit.max(1)).clamp(1, units.max(1))
}

/// Pixels per band of a pointwise op over `pixels` pixels whose output
/// pixels are `out_px` bytes (its temporary is that many pixels). Each
/// band is a kernel call that widens the op's weights again: bands as
/// large as the budget allows.
pub(crate) fn pixel_band(out_px: usize, pixels: usize) -> usize {
    band_units(BAND_BYTES, out_px, pixels)
}

/// Works `pixels` pixels of `in_px` bytes each into `out_px`-byte output
/// pixels in `buffer` (input and output both from its start), a band of
/// `temp.len() / out_px` pixels at a time: `compute(pixels, input, out)`
/// computes one band. Bands go forward when an output pixel is no wider
/// than an input one (each band lands on input already read), backward
/// when it is wider (each lands past the input still to read).
pub(crate) fn pixels(
    buffer: &mut [u8],
    temp: &mut [u8],
    (pixels, in_px, out_px): (usize, usize, usize),
    mut compute: impl FnMut(Range<usize>, &[i8], &mut [i8]) -> Result<(), KernelError>,
) -> Result<(), KernelError> {
    let band = temp.len() / out_px.max(1);
    if band == 0 || buffer.len() < pixels * in_px.max(out_px) {
        return Err(KernelError::Internal);
    }
    let count = pixels.div_ceil(band);
    for k in 0..count {
        let k = if out_px <= in_px { k } else { count - 1 - k };
        let run = k * band..((k + 1) * band).min(pixels);
        let out = &mut temp[..run.len() * out_px];
        compute(
            run.clone(),
            as_i8(&buffer[run.start * in_px..run.end * in_px]),
            as_i8_mut(out),
        )?;
        buffer[run.start * out_px..run.end * out_px].copy_from_slice(out);
    }
    Ok(())
}

/// Works a strided pointwise op's `rows × cols` output pixels (`out_px`
/// bytes each) into `buffer` over its input pixels (`in_px` bytes), a run
/// of at most `temp.len() / out_px` pixels of one output row at a time,
/// forward: the schedule checked that no pixel's output reaches input a
/// later pixel reads. Output row `r`'s pixel `c` reads the input pixel at
/// `r · row_step + c · col_step` bytes; `compute(n, input, out)` computes
/// a run of `n` pixels whose input starts at the run's first pixel.
pub(crate) fn strided_pixels(
    buffer: &mut [u8],
    temp: &mut [u8],
    (rows, cols): (usize, usize),
    (row_step, col_step): (usize, usize),
    (in_px, out_px): (usize, usize),
    mut compute: impl FnMut(usize, &[i8], &mut [i8]) -> Result<(), KernelError>,
) -> Result<(), KernelError> {
    let band = temp.len() / out_px.max(1);
    if band == 0 || cols == 0 {
        return if rows == 0 || cols == 0 {
            Ok(())
        } else {
            Err(KernelError::Internal)
        };
    }
    for r in 0..rows {
        let mut c = 0;
        while c < cols {
            let n = band.min(cols - c);
            let start = r * row_step + c * col_step;
            let input = start..start + (n - 1) * col_step + in_px;
            let at = (r * cols + c) * out_px;
            if input.end > buffer.len() || at + n * out_px > buffer.len() {
                return Err(KernelError::Internal);
            }
            let out = &mut temp[..n * out_px];
            compute(n, as_i8(&buffer[input]), as_i8_mut(out))?;
            buffer[at..at + n * out_px].copy_from_slice(out);
            c += n;
        }
    }
    Ok(())
}

/// How a row-banded op uses its temporary: `band` rows computed per call,
/// up to `lag` rows held back because the input under them is still to
/// be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowBands {
    pub(crate) band: usize,
    pub(crate) lag: usize,
}

impl RowBands {
    /// The bands of an op over `y` whose input rows are `in_row` bytes and
    /// output rows `out_row` (no wider).
    pub(crate) fn of(y: &Axis, in_row: usize, out_row: usize) -> Self {
        let rows = y.out_size.max(0) as usize;
        let band = band_units(BAND_BYTES, out_row, rows);
        let mut lag = 0;
        let mut r1 = 0;
        while r1 < rows {
            r1 = (r1 + band).min(rows);
            let held = (0..r1)
                .rev()
                .take_while(|&j| !flushable(y, in_row, out_row, j, r1));
            lag = lag.max(held.count());
        }
        RowBands { band, lag }
    }

    /// Temporary bytes for rows of `out_row` bytes.
    pub(crate) fn temp_bytes(&self, out_row: usize) -> usize {
        (self.band + self.lag) * out_row
    }
}

/// Whether output row `j` may be copied over the input once rows below
/// `done` are computed: the input rows its bytes cover are read by no
/// later output row.
fn flushable(y: &Axis, in_row: usize, out_row: usize, j: usize, done: usize) -> bool {
    if done >= y.out_size.max(0) as usize {
        return true;
    }
    let last_covered = ((j + 1) * out_row - 1) / in_row.max(1);
    let first_read = y.origin(done as i32).max(0) as usize;
    last_covered < first_read
}

/// Works an op's output rows into `buffer` over its input rows (both from
/// its start; input rows `in_row` bytes, output rows `out_row`, no wider),
/// `bands.band` rows at a time through `temp`: `compute(band axis, input
/// rows, out)` computes one band from the input rows it reads.
pub(crate) fn rows(
    buffer: &mut [u8],
    temp: &mut [u8],
    y: &Axis,
    (in_row, out_row): (usize, usize),
    bands: RowBands,
    mut compute: impl FnMut(&Axis, &[i8], &mut [i8]) -> Result<(), KernelError>,
) -> Result<(), KernelError> {
    let rows = y.out_size.max(0) as usize;
    let in_rows = y.in_size.max(0) as usize;
    if out_row > in_row
        || temp.len() < bands.temp_bytes(out_row)
        || buffer.len() < in_rows * in_row
        || rows * out_row > buffer.len()
    {
        return Err(KernelError::Internal);
    }
    // Rows `held` (computed, not yet copied) sit at the temporary's start.
    let mut held = 0..0;
    let mut r0 = 0;
    while r0 < rows {
        let r1 = (r0 + bands.band).min(rows);
        let (axis, first) = y.band(r0 as i32, r1 as i32);
        let input = first as usize * in_row..(first + axis.in_size) as usize * in_row;
        let at = held.len() * out_row;
        compute(
            &axis,
            as_i8(&buffer[input]),
            as_i8_mut(&mut temp[at..at + (r1 - r0) * out_row]),
        )?;
        // Rows `held.start..r1` now sit in order from the temporary's start.
        let start = held.start;
        let mut next = start;
        while next < r1 && flushable(y, in_row, out_row, next, r1) {
            let t = (next - start) * out_row;
            buffer[next * out_row..(next + 1) * out_row].copy_from_slice(&temp[t..t + out_row]);
            next += 1;
        }
        let keep = (next - start) * out_row..(r1 - start) * out_row;
        if keep.len() > bands.lag * out_row {
            return Err(KernelError::Internal);
        }
        temp.copy_within(keep, 0);
        held = next..r1;
        r0 = r1;
    }
    Ok(())
}

fn as_i8(bytes: &[u8]) -> &[i8] {
    // SAFETY: `i8` and `u8` have one layout.
    unsafe { core::slice::from_raw_parts(bytes.as_ptr().cast(), bytes.len()) }
}

/// `bytes` as `i8`s.
pub(crate) fn as_i8_mut(bytes: &mut [u8]) -> &mut [i8] {
    // SAFETY: as above, and the borrow is the caller's one.
    unsafe { core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast(), bytes.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for a pointwise kernel: each output byte a function of
    /// its input pixel's bytes and its channel.
    fn pixel(input: &[i8], out: &mut [i8]) {
        let sum = input.iter().fold(0i8, |s, &v| s.wrapping_add(v));
        for (k, o) in out.iter_mut().enumerate() {
            *o = sum.wrapping_mul(3).wrapping_add(k as i8);
        }
    }

    #[test]
    fn strided_pixels_forward_equal_the_op_out_of_place() {
        // (height, width, in channels, out channels, stride, band pixels)
        for (h, w, cin, cout, s, band) in [
            (32usize, 32usize, 16, 32, 2usize, 16),
            (9, 7, 8, 8, 2, 3),
            (8, 8, 4, 12, 3, 2),
            (5, 6, 6, 4, 2, 1),
        ] {
            let (ho, wo) = (h.div_ceil(s), w.div_ceil(s));
            let input: Vec<u8> = (0..h * w * cin).map(|i| (i * 37 % 251) as u8).collect();
            let mut want = vec![0i8; ho * wo * cout];
            for oy in 0..ho {
                for ox in 0..wo {
                    let at = ((oy * s) * w + ox * s) * cin;
                    let x: Vec<i8> = input[at..at + cin].iter().map(|&v| v as i8).collect();
                    let o = (oy * wo + ox) * cout;
                    pixel(&x, &mut want[o..o + cout]);
                }
            }
            let mut buffer = input.clone();
            let mut temp = vec![0u8; band * cout];
            strided_pixels(
                &mut buffer,
                &mut temp,
                (ho, wo),
                (s * w * cin, s * cin),
                (cin, cout),
                |n, x, out| {
                    for p in 0..n {
                        pixel(&x[p * s * cin..][..cin], &mut out[p * cout..][..cout]);
                    }
                    Ok(())
                },
            )
            .unwrap();
            let got: Vec<i8> = buffer[..want.len()].iter().map(|&v| v as i8).collect();
            assert_eq!(got, want, "{h}×{w}×{cin} → {cout}, stride {s}");
        }
    }

    #[test]
    fn strided_pixels_refuse_a_buffer_too_short() {
        let mut buffer = vec![0u8; 10];
        let mut temp = vec![0u8; 8];
        let done = strided_pixels(&mut buffer, &mut temp, (2, 2), (8, 4), (4, 4), |_, _, _| {
            Ok(())
        });
        assert_eq!(done, Err(KernelError::Internal));
    }
}
