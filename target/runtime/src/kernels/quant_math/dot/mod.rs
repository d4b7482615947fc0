//! The int8 dot products of the conv-like kernels, and which one a build
//! runs: SSE2 on x86-64 (`sse2`), the DSP extension's blocks on Arm cores
//! that have it (`gemm`), plain Rust elsewhere (`portable`). Every variant
//! gives the portable one's bits; the tests hold them to it.

mod portable;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2;

pub use portable::{dot_i16, dot_offset, dot4_i16_portable, dot4_portable};

/// `Σ w` with wrapping arithmetic. Kernels that fold `input_offset · Σ w`
/// into a bias at invoke sum every weight row once per invoke (CONV_2D's
/// DSP paths), so on cores with the DSP extension it goes a word at a
/// time: each byte flipped to unsigned (`v ^ 0x80` is `v + 128`), four
/// added by one `USADA8` against zero, `128` per byte taken off at the end
/// (three instructions per four weights instead of about ten).
#[inline]
pub fn sum(w: &[i8]) -> i32 {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        sum_by_words(w)
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        portable::sum(w)
    }
}

/// [`sum`] a word at a time (the DSP form; tested on the host through the
/// instruction's emulation).
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
fn sum_by_words(w: &[i8]) -> i32 {
    use super::super::arm_dsp::usada8;
    let (words, rest) = w.as_chunks::<4>();
    let unsigned = words.iter().fold(0u32, |acc, b| {
        usada8(u32::from_le_bytes(b.map(|v| v as u8)) ^ 0x8080_8080, 0, acc)
    });
    let bias = (words.len() as u32).wrapping_mul(4 * 128);
    (unsigned.wrapping_sub(bias) as i32).wrapping_add(portable::sum(rest))
}

/// `Σ w_r·(x + x_offset)` for four weight rows of `x.len()` weights.
/// `x_offset` is in `-128..=128`, so `x + x_offset` fits 16 bits.
#[inline(always)]
pub fn dot4(x: &[i8], x_offset: i32, w: [&[i8]; 4]) -> [i32; 4] {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        if x.len() >= 64 {
            sse2::dot4_long(x, x_offset, w)
        } else {
            sse2::dot4(x, x_offset, w)
        }
    }
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        super::super::gemm::row_1x4(x, x_offset, w)
    }
    #[cfg(not(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        all(target_arch = "arm", feature = "arm-dsp")
    )))]
    {
        dot4_portable(x, x_offset, w)
    }
}

/// `Σ w_r·x` for four weight rows, `x` already offset into 16 bits (an
/// im2col patch: `x + input_offset`, padded taps 0).
#[inline(always)]
pub fn dot4_i16(x: &[i16], w: [&[i8]; 4]) -> [i32; 4] {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        sse2::dot4_i16(x, w)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        dot4_i16_portable(x, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[i8], b: &[i8]) -> i32 {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum()
    }

    #[test]
    fn sums_by_words_are_the_plain_sums() {
        let a: Vec<i8> = (0..300)
            .map(|i| ((i * 37 + 11) % 256) as u8 as i8)
            .collect();
        for n in 0..300 {
            assert_eq!(sum_by_words(&a[..n]), portable::sum(&a[..n]), "{n}");
        }
        assert_eq!(sum_by_words(&[-128; 9]), -128 * 9);
        assert_eq!(sum_by_words(&[127; 13]), 127 * 13);
    }

    #[test]
    fn dots_match_naive() {
        let a: Vec<i8> = (0..77).map(|i| ((i * 37 + 11) % 256) as u8 as i8).collect();
        let b: Vec<i8> = (0..77).map(|i| ((i * 91 + 5) % 256) as u8 as i8).collect();
        for n in 0..77 {
            let got = dot4(&a[..n], 0, [&b[..n], &a[..n], &b[..n], &b[..n]]);
            assert_eq!(got[0], naive(&a[..n], &b[..n]));
            assert_eq!(got[1], naive(&a[..n], &a[..n]));
            // Input offsets span -127..=128 (int8 zero points).
            let shifted: Vec<i16> = a[..n].iter().map(|&v| i16::from(v) - 7).collect();
            let rows = [&b[..n], &a[..n], &b[..n], &b[..n]];
            assert_eq!(dot4_i16(&shifted, rows), dot4_portable(&a[..n], -7, rows));
            assert_eq!(
                dot4_i16_portable(&shifted, rows),
                dot4_portable(&a[..n], -7, rows)
            );
            assert_eq!(dot_i16(&shifted, &b[..n]), dot_offset(&b[..n], &a[..n], -7));
            for offset in [128, -127, 0, 5] {
                let rows = [&b[..n], &a[..n], &b[..n], &b[..n]];
                assert_eq!(
                    crate::kernels::gemm::row_1x4(&a[..n], offset, rows),
                    dot4_portable(&a[..n], offset, rows)
                );
                let got = dot4(&a[..n], offset, rows);
                assert_eq!(got, dot4_portable(&a[..n], offset, rows));
                assert_eq!(got[2], dot_offset(&b[..n], &a[..n], offset));
            }
            assert_eq!(
                dot_offset(&a[..n], &b[..n], 128),
                a[..n]
                    .iter()
                    .zip(&b[..n])
                    .map(|(&w, &x)| i32::from(w) * (i32::from(x) + 128))
                    .sum::<i32>()
            );
        }
    }
}
