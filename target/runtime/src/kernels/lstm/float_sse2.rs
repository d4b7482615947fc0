//! The float LSTM's gate dot products on x86-64 with SSE2: four cells side
//! by side, one per lane, so each lane adds its products in the order the
//! scalar loop does and rounds the same.

use core::arch::x86_64::{
    __m128, _mm_add_ps, _mm_movehl_ps, _mm_movelh_ps, _mm_mul_ps, _mm_set1_ps, _mm_setr_ps,
    _mm_setzero_ps, _mm_unpackhi_ps, _mm_unpacklo_ps,
};

use super::{CELLS, GATES};

/// Four rows' four consecutive values turned into four columns: column `d`
/// holds element `d` of rows 0..4, so one lane per row.
#[inline(always)]
fn transpose(r: [__m128; 4]) -> [__m128; 4] {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe {
        let lo01 = _mm_unpacklo_ps(r[0], r[1]);
        let lo23 = _mm_unpacklo_ps(r[2], r[3]);
        let hi01 = _mm_unpackhi_ps(r[0], r[1]);
        let hi23 = _mm_unpackhi_ps(r[2], r[3]);
        [
            _mm_movelh_ps(lo01, lo23),
            _mm_movehl_ps(lo23, lo01),
            _mm_movelh_ps(hi01, hi23),
            _mm_movehl_ps(hi23, hi01),
        ]
    }
}

/// `acc + v·col`, lane by lane: a product rounded, then a sum rounded (no
/// fused multiply-add), as the scalar `acc += v * w` does.
#[inline(always)]
fn mul_add(acc: __m128, v: __m128, col: __m128) -> __m128 {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_add_ps(acc, _mm_mul_ps(v, col)) }
}

/// [`super::float::dots_cells`].
#[inline(always)]
pub(super) fn dots_cells<'a>(w: &[&'a [f32]; GATES], j: usize, x: &[f32]) -> [[f32; CELLS]; GATES] {
    let n = x.len();
    let cells = |m: &'a [f32]| -> [&'a [f32]; CELLS] {
        [
            &m[j * n..][..n],
            &m[(j + 1) * n..][..n],
            &m[(j + 2) * n..][..n],
            &m[(j + 3) * n..][..n],
        ]
    };
    let rows = [cells(w[0]), cells(w[1]), cells(w[2]), cells(w[3])];
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    let mut acc = [unsafe { _mm_setzero_ps() }; GATES];
    let (x_chunks, _) = x.as_chunks::<4>();
    let m = x_chunks.len();
    // Each row as whole chunks of four, cut to `m` so indexing by a chunk
    // of `x` needs no bounds check.
    let chunked = |r: &[&'a [f32]; CELLS]| -> [&'a [[f32; 4]]; CELLS] {
        [
            &r[0].as_chunks::<4>().0[..m],
            &r[1].as_chunks::<4>().0[..m],
            &r[2].as_chunks::<4>().0[..m],
            &r[3].as_chunks::<4>().0[..m],
        ]
    };
    let blocks = [
        chunked(&rows[0]),
        chunked(&rows[1]),
        chunked(&rows[2]),
        chunked(&rows[3]),
    ];
    for (c, xs) in x_chunks.iter().enumerate() {
        // SAFETY: as above.
        let v = xs.map(|e| unsafe { _mm_set1_ps(e) });
        for (a, gate_rows) in acc.iter_mut().zip(&blocks) {
            let at = |k: usize| -> __m128 { bytemuck::cast(gate_rows[k][c]) };
            let cols = transpose([at(0), at(1), at(2), at(3)]);
            for (&vd, &col) in v.iter().zip(&cols) {
                *a = mul_add(*a, vd, col);
            }
        }
    }
    for d in x_chunks.len() * 4..n {
        // SAFETY: as above.
        let v = unsafe { _mm_set1_ps(x[d]) };
        for (a, r) in acc.iter_mut().zip(&rows) {
            // SAFETY: as above.
            let col = unsafe { _mm_setr_ps(r[0][d], r[1][d], r[2][d], r[3][d]) };
            *a = mul_add(*a, v, col);
        }
    }
    acc.map(bytemuck::cast)
}
