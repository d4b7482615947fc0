//! Wrapping int32 dot products. On x86-64 the baseline SSE2 `pmaddwd`
//! (two i16 products summed into each i32 lane) does 8 or 16 products a
//! step, which LLVM does not find on its own for i8 weights; elsewhere the
//! plain loops, which LLVM vectorises or Arm's DSP pass pairs. Lane sums
//! wrap like the scalar ones, so the results are the same modulo 2³². The
//! SIMD loops and their plain references sit apart from the kernel, the
//! `unsafe` blocks in one small file.

/// `Σ a·b` over i8 × i16, plain loop.
#[inline(always)]
pub(super) fn i8_i16_portable(a: &[i8], b: &[i16]) -> i32 {
    a.iter().zip(b).fold(0i32, |acc, (&x, &y)| {
        acc.wrapping_add(i32::from(x) * i32::from(y))
    })
}

/// `Σ a·b` over i16 × i16, plain loop.
#[inline(always)]
pub(super) fn i16_i16_portable(a: &[i16], b: &[i16]) -> i32 {
    a.iter().zip(b).fold(0i32, |acc, (&x, &y)| {
        acc.wrapping_add(i32::from(x) * i32::from(y))
    })
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) use i8_i16_portable as i8_i16;
#[cfg(not(target_arch = "x86_64"))]
pub(super) use i16_i16_portable as i16_i16;

#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::{
    __m128i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_loadu_si128, _mm_madd_epi16, _mm_setzero_si128,
    _mm_shuffle_epi32, _mm_srai_epi16, _mm_unpackhi_epi8, _mm_unpacklo_epi8,
};

/// The four lanes of `v` added (wrapping, as `paddd` does).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lane_sum(v: __m128i) -> i32 {
    // SAFETY: SSE2 is part of the x86-64 baseline; no memory access.
    unsafe {
        let v = _mm_add_epi32(v, _mm_shuffle_epi32::<0b01_00_11_10>(v));
        let v = _mm_add_epi32(v, _mm_shuffle_epi32::<0b10_11_00_01>(v));
        _mm_cvtsi128_si32(v)
    }
}

/// `Σ a·b` over i8 × i16, 16 products a step.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn i8_i16(a: &[i8], b: &[i16]) -> i32 {
    let n = a.len().min(b.len());
    let blocks = n / 16;
    // SAFETY: SSE2 is part of the x86-64 baseline. Block `k` reads
    // a[16k..16k + 16] and b[16k..16k + 16], inside both slices since
    // 16k + 16 ≤ n; unaligned loads accept any address.
    let head = unsafe {
        let mut acc = _mm_setzero_si128();
        for k in 0..blocks {
            let w = _mm_loadu_si128(a.as_ptr().add(16 * k).cast::<__m128i>());
            // Bytes doubled into 16-bit lanes, shifted back down: sign-extended.
            let w_lo = _mm_srai_epi16::<8>(_mm_unpacklo_epi8(w, w));
            let w_hi = _mm_srai_epi16::<8>(_mm_unpackhi_epi8(w, w));
            let x_lo = _mm_loadu_si128(b.as_ptr().add(16 * k).cast::<__m128i>());
            let x_hi = _mm_loadu_si128(b.as_ptr().add(16 * k + 8).cast::<__m128i>());
            acc = _mm_add_epi32(acc, _mm_madd_epi16(w_lo, x_lo));
            acc = _mm_add_epi32(acc, _mm_madd_epi16(w_hi, x_hi));
        }
        lane_sum(acc)
    };
    head.wrapping_add(i8_i16_portable(&a[16 * blocks..n], &b[16 * blocks..n]))
}

/// `Σ a·b` over i16 × i16, 8 products a step.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn i16_i16(a: &[i16], b: &[i16]) -> i32 {
    let n = a.len().min(b.len());
    let blocks = n / 8;
    // SAFETY: SSE2 is part of the x86-64 baseline. Block `k` reads
    // a[8k..8k + 8] and b[8k..8k + 8], inside both slices. `pmaddwd`
    // overflows only for four −32768s, giving −2³¹: the wrapped sum.
    let head = unsafe {
        let mut acc = _mm_setzero_si128();
        for k in 0..blocks {
            let x = _mm_loadu_si128(a.as_ptr().add(8 * k).cast::<__m128i>());
            let y = _mm_loadu_si128(b.as_ptr().add(8 * k).cast::<__m128i>());
            acc = _mm_add_epi32(acc, _mm_madd_epi16(x, y));
        }
        lane_sum(acc)
    };
    head.wrapping_add(i16_i16_portable(&a[8 * blocks..n], &b[8 * blocks..n]))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn i8_i16_matches_plain_loop(
            pairs in prop::collection::vec((any::<i8>(), any::<i16>()), 0..80)
        ) {
            let (a, b): (Vec<i8>, Vec<i16>) = pairs.into_iter().unzip();
            prop_assert_eq!(super::i8_i16(&a, &b), super::i8_i16_portable(&a, &b));
        }

        #[test]
        fn i16_i16_matches_plain_loop(
            pairs in prop::collection::vec(
                (prop_oneof![any::<i16>(), Just(i16::MIN)], prop_oneof![any::<i16>(), Just(i16::MIN)]),
                0..80,
            )
        ) {
            let (a, b): (Vec<i16>, Vec<i16>) = pairs.into_iter().unzip();
            prop_assert_eq!(super::i16_i16(&a, &b), super::i16_i16_portable(&a, &b));
        }
    }

    #[test]
    fn i16_i16_wraps_like_the_plain_loop() {
        let a = [i16::MIN; 16];
        assert_eq!(super::i16_i16(&a, &a), super::i16_i16_portable(&a, &a));
    }
}
