//! The dot products in plain Rust: what every target without a SIMD
//! variant runs, the reference the variants are tested against, and the
//! tails the variants leave after their last full vector.

/// `Σ w·(x + offset)`: TFLM's formula, for windows that skip padded taps.
#[inline]
pub fn dot_offset(w: &[i8], x: &[i8], offset: i32) -> i32 {
    w.iter().zip(x).fold(0i32, |acc, (&w, &x)| {
        acc.wrapping_add(i32::from(w).wrapping_mul(i32::from(x) + offset))
    })
}

/// `Σ w` with wrapping arithmetic.
pub(super) fn sum(w: &[i8]) -> i32 {
    w.iter()
        .fold(0i32, |acc, &v| acc.wrapping_add(i32::from(v)))
}

/// [`dot4`](super::dot4) in plain Rust (every target; the reference for the SIMD one).
#[inline]
pub fn dot4_portable(x: &[i8], x_offset: i32, w: [&[i8]; 4]) -> [i32; 4] {
    let n = x.len();
    let (w0, w1, w2, w3) = (&w[0][..n], &w[1][..n], &w[2][..n], &w[3][..n]);
    let off = x_offset as i16;
    // Four plain reductions in one loop sharing the offset input.
    let (mut a0, mut a1, mut a2, mut a3) = (0i32, 0i32, 0i32, 0i32);
    for i in 0..n {
        let v = i32::from(i16::from(x[i]) + off);
        a0 = a0.wrapping_add(v * i32::from(w0[i]));
        a1 = a1.wrapping_add(v * i32::from(w1[i]));
        a2 = a2.wrapping_add(v * i32::from(w2[i]));
        a3 = a3.wrapping_add(v * i32::from(w3[i]));
    }
    [a0, a1, a2, a3]
}

/// [`dot4_i16`](super::dot4_i16) in plain Rust.
#[inline]
pub fn dot4_i16_portable(x: &[i16], w: [&[i8]; 4]) -> [i32; 4] {
    let n = x.len();
    let w = w.map(|r| &r[..n]);
    let mut acc = [0i32; 4];
    for i in 0..n {
        let v = i32::from(x[i]);
        for r in 0..4 {
            acc[r] = acc[r].wrapping_add(v * i32::from(w[r][i]));
        }
    }
    acc
}

/// `Σ w·x` for one row, `x` as in [`dot4_i16`](super::dot4_i16).
#[inline]
pub fn dot_i16(x: &[i16], w: &[i8]) -> i32 {
    x.iter().zip(w).fold(0i32, |acc, (&v, &wv)| {
        acc.wrapping_add(i32::from(v) * i32::from(wv))
    })
}
