//! The dot products with SSE2 (x86-64's baseline): LLVM does not find the
//! dense 16-bit multiply-add (`pmaddwd`) for these sums on its own. Each
//! ends on the portable sum for the values after its last full vector.

use core::arch::x86_64::{
    __m128i, _mm_add_epi16, _mm_add_epi32, _mm_cvtsi64_si128, _mm_madd_epi16, _mm_set1_epi16,
    _mm_setzero_si128, _mm_srai_epi16, _mm_unpackhi_epi8, _mm_unpacklo_epi8,
};

/// Sixteen int8 values sign-extended to two vectors of eight i16.
#[inline(always)]
fn widen(v: &[i8; 16]) -> [__m128i; 2] {
    let v: __m128i = bytemuck::cast(*v);
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    // Each byte paired with itself, shifted down: its sign extension.
    unsafe {
        [
            _mm_srai_epi16::<8>(_mm_unpacklo_epi8(v, v)),
            _mm_srai_epi16::<8>(_mm_unpackhi_epi8(v, v)),
        ]
    }
}

/// Eight int8 values sign-extended to one vector of eight i16.
#[inline(always)]
fn widen8(v: &[i8; 8]) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe {
        let v = _mm_cvtsi64_si128(i64::from_le_bytes(v.map(|b| b as u8)));
        _mm_srai_epi16::<8>(_mm_unpacklo_epi8(v, v))
    }
}

/// `acc + a·b` in pairs: eight 16-bit products summed into four lanes.
#[inline(always)]
fn madd(acc: __m128i, a: __m128i, b: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_add_epi32(acc, _mm_madd_epi16(a, b)) }
}

#[inline(always)]
fn add16(a: __m128i, b: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_add_epi16(a, b) }
}

/// [`super::dot4_i16`].
#[inline(always)]
pub(super) fn dot4_i16(x: &[i16], w: [&[i8]; 4]) -> [i32; 4] {
    let n = x.len();
    let w = [&w[0][..n], &w[1][..n], &w[2][..n], &w[3][..n]];
    let (xc, _) = x.as_chunks::<16>();
    let [w0, w1, w2, w3] = w.map(|r| r.as_chunks::<16>().0);
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    let mut acc = [unsafe { _mm_setzero_si128() }; 4];
    for ((((xs, r0), r1), r2), r3) in xc.iter().zip(w0).zip(w1).zip(w2).zip(w3) {
        let [lo, hi]: [__m128i; 2] = bytemuck::cast(*xs);
        for (a, ws) in acc.iter_mut().zip([r0, r1, r2, r3]) {
            let [wl, wh] = widen(ws);
            *a = madd(madd(*a, lo, wl), hi, wh);
        }
    }
    let mut done = xc.len() * 16;
    if let Some(xs) = x[done..].first_chunk::<8>() {
        let lo: __m128i = bytemuck::cast(*xs);
        for (a, r) in acc.iter_mut().zip(w) {
            if let Some(ws) = r[done..].first_chunk::<8>() {
                *a = madd(*a, lo, widen8(ws));
            }
        }
        done += 8;
    }
    core::array::from_fn(|r| {
        let lanes: [i32; 4] = bytemuck::cast(acc[r]);
        let head = lanes.iter().fold(0i32, |s, &v| s.wrapping_add(v));
        head.wrapping_add(super::portable::dot_i16(&x[done..], &w[r][done..]))
    })
}

/// [`super::dot4`] for rows long enough that a call costs nothing.
#[inline(never)]
pub(super) fn dot4_long(x: &[i8], x_offset: i32, w: [&[i8]; 4]) -> [i32; 4] {
    dot4(x, x_offset, w)
}

#[inline(always)]
pub(super) fn dot4(x: &[i8], x_offset: i32, w: [&[i8]; 4]) -> [i32; 4] {
    let n = x.len();
    let w = [&w[0][..n], &w[1][..n], &w[2][..n], &w[3][..n]];
    let (xc, _) = x.as_chunks::<16>();
    let [w0, w1, w2, w3] = w.map(|r| r.as_chunks::<16>().0);
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    let (off, zero) = unsafe { (_mm_set1_epi16(x_offset as i16), _mm_setzero_si128()) };
    let mut acc = [zero; 4];
    let rows = xc.iter().zip(w0).zip(w1).zip(w2).zip(w3);
    for ((((xs, r0), r1), r2), r3) in rows {
        let [lo, hi] = widen(xs);
        let (lo, hi) = (add16(lo, off), add16(hi, off));
        for (a, ws) in acc.iter_mut().zip([r0, r1, r2, r3]) {
            let [wl, wh] = widen(ws);
            *a = madd(madd(*a, lo, wl), hi, wh);
        }
    }
    let mut done = xc.len() * 16;
    if let Some(xs) = x[done..].first_chunk::<8>() {
        let lo = add16(widen8(xs), off);
        for (a, r) in acc.iter_mut().zip(w) {
            if let Some(ws) = r[done..].first_chunk::<8>() {
                *a = madd(*a, lo, widen8(ws));
            }
        }
        done += 8;
    }
    core::array::from_fn(|r| {
        let lanes: [i32; 4] = bytemuck::cast(acc[r]);
        let head = lanes.iter().fold(0i32, |s, &v| s.wrapping_add(v));
        head.wrapping_add(super::portable::dot_offset(
            &w[r][done..],
            &x[done..],
            x_offset,
        ))
    })
}
