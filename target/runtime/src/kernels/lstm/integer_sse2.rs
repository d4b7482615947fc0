//! The integer LSTM's gate dot products on x86-64 with SSE2: one cell's four
//! gate rows against one int8 vector (the input or the hidden state), the
//! vector widened and offset once per chunk and shared by the four rows.
//!
//! The LSTM's rows are short (tflm_mnist_lstm's are 28 and 20 long), so the
//! tail matters as much as the body: chunks of 16, then 8, then 4 bytes go
//! through `pmaddwd`, and only the last 0–3 elements are scalar.

use core::arch::x86_64::{
    __m128i, _mm_add_epi16, _mm_add_epi32, _mm_cvtsi32_si128, _mm_cvtsi64_si128, _mm_madd_epi16,
    _mm_set1_epi16, _mm_setzero_si128, _mm_srai_epi16, _mm_unpackhi_epi8, _mm_unpackhi_epi32,
    _mm_unpackhi_epi64, _mm_unpacklo_epi8, _mm_unpacklo_epi32, _mm_unpacklo_epi64,
};

use core::arch::x86_64::{
    _mm_add_epi64, _mm_and_si128, _mm_cmpgt_epi32, _mm_max_epi16, _mm_min_epi16, _mm_mul_epu32,
    _mm_packs_epi16, _mm_packs_epi32, _mm_set_epi32, _mm_set1_epi32, _mm_set1_epi64x,
    _mm_shuffle_epi32, _mm_sll_epi32, _mm_slli_epi64, _mm_sra_epi32, _mm_srai_epi32,
    _mm_srli_epi32, _mm_srli_epi64, _mm_sub_epi32, _mm_sub_epi64, _mm_unpacklo_epi16,
};

use super::integer::Luts;
use super::params::LstmQuantParams;
use super::{GATE_CELL, GATE_FORGET, GATE_INPUT, GATE_OUTPUT, GATES};

/// The low eight bytes of `v` sign-extended to i16, plus `offset`.
#[inline(always)]
fn widen_lo(v: __m128i, offset: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg). Each byte
    // paired with itself and shifted down is its sign extension.
    unsafe { _mm_add_epi16(_mm_srai_epi16::<8>(_mm_unpacklo_epi8(v, v)), offset) }
}

/// The high eight bytes of `v`, as [`widen_lo`].
#[inline(always)]
fn widen_hi(v: __m128i, offset: __m128i) -> __m128i {
    // SAFETY: as in `widen_lo`.
    unsafe { _mm_add_epi16(_mm_srai_epi16::<8>(_mm_unpackhi_epi8(v, v)), offset) }
}

/// `acc + Σ pairs of a·b`: eight 16-bit products into four 32-bit lanes.
#[inline(always)]
fn madd(acc: __m128i, a: __m128i, b: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_add_epi32(acc, _mm_madd_epi16(a, b)) }
}

#[inline(always)]
fn load16(v: &[i8; 16]) -> __m128i {
    bytemuck::cast(*v)
}

#[inline(always)]
fn load8(v: &[i8; 8]) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_cvtsi64_si128(i64::from_le_bytes(v.map(|b| b as u8))) }
}

#[inline(always)]
fn load4(v: &[i8; 4]) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_cvtsi32_si128(i32::from_le_bytes(v.map(|b| b as u8))) }
}

/// Lane sums of four accumulators: `[Σ a0, Σ a1, Σ a2, Σ a3]`, wrapping.
#[inline(always)]
fn lane_sums(a: [__m128i; 4]) -> [i32; 4] {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe {
        let s01 = _mm_add_epi32(
            _mm_unpacklo_epi32(a[0], a[1]),
            _mm_unpackhi_epi32(a[0], a[1]),
        );
        let s23 = _mm_add_epi32(
            _mm_unpacklo_epi32(a[2], a[3]),
            _mm_unpackhi_epi32(a[2], a[3]),
        );
        bytemuck::cast(_mm_add_epi32(
            _mm_unpacklo_epi64(s01, s23),
            _mm_unpackhi_epi64(s01, s23),
        ))
    }
}

/// `Σ (w + w_offset)·(x + x_offset)` for four rows of `x.len()` weights,
/// wrapping. Every offset must be in `-128..=128`, so each offset value
/// fits 16 bits and each `pmaddwd` pair sum fits 32.
#[inline(always)]
pub(super) fn gate_dots(
    rows: [&[i8]; GATES],
    x: &[i8],
    weights_offsets: [i32; GATES],
    x_offset: i32,
) -> [i32; GATES] {
    if weights_offsets == [0; GATES] {
        dots::<true>(rows, x, weights_offsets, x_offset)
    } else {
        dots::<false>(rows, x, weights_offsets, x_offset)
    }
}

/// [`gate_dots`]; `SYMMETRIC`: every weights offset is 0 (the main loop
/// then skips adding them).
#[inline(always)]
fn dots<const SYMMETRIC: bool>(
    rows: [&[i8]; GATES],
    x: &[i8],
    weights_offsets: [i32; GATES],
    x_offset: i32,
) -> [i32; GATES] {
    let n = x.len();
    let rows = [&rows[0][..n], &rows[1][..n], &rows[2][..n], &rows[3][..n]];
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    let (zero, x_off, w_off) = unsafe {
        let o = weights_offsets;
        (
            _mm_setzero_si128(),
            _mm_set1_epi16(x_offset as i16),
            [
                _mm_set1_epi16(o[0] as i16),
                _mm_set1_epi16(o[1] as i16),
                _mm_set1_epi16(o[2] as i16),
                _mm_set1_epi16(o[3] as i16),
            ],
        )
    };
    let mut acc = [zero; GATES];
    let (x16, _) = x.as_chunks::<16>();
    let (r0, r1, r2, r3) = (
        rows[0].as_chunks::<16>().0,
        rows[1].as_chunks::<16>().0,
        rows[2].as_chunks::<16>().0,
        rows[3].as_chunks::<16>().0,
    );
    for ((((xs, w0), w1), w2), w3) in x16.iter().zip(r0).zip(r1).zip(r2).zip(r3) {
        let xv = load16(xs);
        let (lo, hi) = (widen_lo(xv, x_off), widen_hi(xv, x_off));
        for (g, ws) in [w0, w1, w2, w3].into_iter().enumerate() {
            let wv = load16(ws);
            let (wl, wh) = if SYMMETRIC {
                (widen_lo(wv, zero), widen_hi(wv, zero))
            } else {
                (widen_lo(wv, w_off[g]), widen_hi(wv, w_off[g]))
            };
            acc[g] = madd(madd(acc[g], lo, wl), hi, wh);
        }
    }
    let mut done = x16.len() * 16;
    if let Some(xs) = x[done..].first_chunk::<8>() {
        let lo = widen_lo(load8(xs), x_off);
        for g in 0..GATES {
            if let Some(ws) = rows[g][done..].first_chunk::<8>() {
                acc[g] = madd(acc[g], lo, widen_lo(load8(ws), w_off[g]));
            }
        }
        done += 8;
    }
    if let Some(xs) = x[done..].first_chunk::<4>() {
        // The upper four i16 lanes are 0 + offset on both sides: their
        // products are not part of the sum, so those lanes are cleared.
        let lo = clear_upper(widen_lo(load4(xs), x_off));
        for g in 0..GATES {
            if let Some(ws) = rows[g][done..].first_chunk::<4>() {
                acc[g] = madd(acc[g], lo, widen_lo(load4(ws), w_off[g]));
            }
        }
        done += 4;
    }
    let mut sums = lane_sums(acc);
    for d in done..n {
        let v = i32::from(x[d]) + x_offset;
        for g in 0..GATES {
            let w = i32::from(rows[g][d]) + weights_offsets[g];
            sums[g] = sums[g].wrapping_add(w.wrapping_mul(v));
        }
    }
    sums
}

/// `v` with its upper four 16-bit lanes zeroed.
#[inline(always)]
fn clear_upper(v: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_unpacklo_epi64(v, _mm_setzero_si128()) }
}

/// `x · multiplier · 2^shift` on four lanes, as the scalar
/// `multiply_by_quantized_multiplier` rounds it: a left shift (wrapping),
/// the rounding doubling high multiply, the rounding right shift.
#[derive(Clone, Copy)]
struct Requant {
    multiplier: __m128i,
    left: __m128i,
    right: __m128i,
    mask: __m128i,
    half_mask: __m128i,
}

impl Requant {
    /// For multipliers `quantize_multiplier` makes (never negative, so never
    /// the `i32::MIN · i32::MIN` case) and shifts within ±31; `None`
    /// otherwise (the scalar path then runs).
    fn new(multiplier: i32, shift: i32) -> Option<Self> {
        if multiplier < 0 || !(-31..=31).contains(&shift) {
            return None;
        }
        let (left, right) = (shift.max(0), (-shift).max(0));
        let mask = (1i32 << right).wrapping_sub(1);
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe {
            Some(Requant {
                multiplier: _mm_set1_epi32(multiplier),
                left: _mm_cvtsi32_si128(left),
                right: _mm_cvtsi32_si128(right),
                mask: _mm_set1_epi32(mask),
                half_mask: _mm_set1_epi32(mask >> 1),
            })
        }
    }

    #[inline(always)]
    fn apply(&self, x: __m128i) -> __m128i {
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe {
            let x = _mm_sll_epi32(x, self.left);
            let m = self.multiplier;
            // a·b in 64 bits for lanes 0, 2 (even) and 1, 3 (odd): the
            // unsigned products, less b·2³² where a is negative (b ≥ 0).
            let negative_b = _mm_and_si128(_mm_srai_epi32::<31>(x), m);
            let even = _mm_sub_epi64(_mm_mul_epu32(x, m), _mm_slli_epi64::<32>(negative_b));
            let odd = _mm_sub_epi64(
                _mm_mul_epu32(_mm_srli_epi64::<32>(x), m),
                _mm_and_si128(negative_b, _mm_set_epi32(-1, 0, -1, 0)),
            );
            // (ab + nudge) / 2³¹ truncated is (ab + 2³⁰) >> 31 for either
            // sign of ab; the result fits 32 bits, so a logical 64-bit shift
            // leaves it in each low half.
            let round = _mm_set1_epi64x(1 << 30);
            let even = _mm_srli_epi64::<31>(_mm_add_epi64(even, round));
            let odd = _mm_srli_epi64::<31>(_mm_add_epi64(odd, round));
            let high = _mm_unpacklo_epi32(
                _mm_shuffle_epi32::<0b11_01_10_00>(even),
                _mm_shuffle_epi32::<0b11_01_10_00>(odd),
            );
            // Rounding right shift, ties away from zero.
            let remainder = _mm_and_si128(high, self.mask);
            let threshold = _mm_add_epi32(self.half_mask, _mm_srli_epi32::<31>(high));
            let shifted = _mm_sra_epi32(high, self.right);
            _mm_sub_epi32(shifted, _mm_cmpgt_epi32(remainder, threshold))
        }
    }
}

/// Four i32 lanes saturated to int16 and sign-extended back.
#[inline(always)]
fn saturate16(v: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe {
        let p = _mm_packs_epi32(v, v);
        _mm_srai_epi32::<16>(_mm_unpacklo_epi16(p, p))
    }
}

/// Four i16 lanes (the low half of `v`) as i32 lanes whose upper halves are
/// zero, so `pmaddwd` of two such vectors is the four exact products.
#[inline(always)]
fn zero_extend_pairs(v: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_unpacklo_epi16(v, _mm_setzero_si128()) }
}

/// `a·b` of four i16 lanes as four i32 lanes.
#[inline(always)]
fn products(a: __m128i, b: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_madd_epi16(zero_extend_pairs(a), zero_extend_pairs(b)) }
}

/// The 4×4 transpose of four i16 quadruples (rows to columns).
#[inline(always)]
fn transpose16(rows: [[i16; 4]; 4]) -> [[i16; 4]; 4] {
    let v: [__m128i; 2] = bytemuck::cast(rows);
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe {
        let (r0, r1) = (v[0], _mm_unpackhi_epi64(v[0], v[0]));
        let (r2, r3) = (v[1], _mm_unpackhi_epi64(v[1], v[1]));
        let p01 = _mm_unpacklo_epi16(r0, r1);
        let p23 = _mm_unpacklo_epi16(r2, r3);
        bytemuck::cast([_mm_unpacklo_epi32(p01, p23), _mm_unpackhi_epi32(p01, p23)])
    }
}

/// The 4×4 transpose of four i32 quadruples.
#[inline(always)]
fn transpose32(rows: [[i32; 4]; 4]) -> [__m128i; 4] {
    let r: [__m128i; 4] = bytemuck::cast(rows);
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe {
        let lo01 = _mm_unpacklo_epi32(r[0], r[1]);
        let lo23 = _mm_unpacklo_epi32(r[2], r[3]);
        let hi01 = _mm_unpackhi_epi32(r[0], r[1]);
        let hi23 = _mm_unpackhi_epi32(r[2], r[3]);
        [
            _mm_unpacklo_epi64(lo01, lo23),
            _mm_unpackhi_epi64(lo01, lo23),
            _mm_unpacklo_epi64(hi01, hi23),
            _mm_unpackhi_epi64(hi01, hi23),
        ]
    }
}

/// Four i16 lanes from four values.
#[inline(always)]
fn lanes16(v: [i16; 4]) -> __m128i {
    let wide: [i16; 8] = [v[0], v[1], v[2], v[3], 0, 0, 0, 0];
    bytemuck::cast(wide)
}

/// The low four i16 lanes of `v`.
#[inline(always)]
fn low16(v: __m128i) -> [i16; 4] {
    let all: [i16; 8] = bytemuck::cast(v);
    [all[0], all[1], all[2], all[3]]
}

/// The integer LSTM's per-cell arithmetic after the dot products for four
/// cells at once, one per lane: the gate FCs' rescaling and saturation, the
/// cell update and the hidden value. The LUT activations stay scalar
/// (SSE2 has no gather).
pub(in crate::kernels) struct CellLanes {
    fc: [[Requant; 2]; GATES],
    forget_cell: Requant,
    input_cell: Requant,
    hidden: Requant,
    hidden_zero_point: __m128i,
    clip: Option<(__m128i, __m128i)>,
}

impl CellLanes {
    /// The lanes for these constants, or `None` if one is outside what
    /// [`Requant`] reproduces exactly.
    pub(super) fn new(quant: &LstmQuantParams) -> Option<Self> {
        let mut fc = [[None; 2]; GATES];
        for (g, q) in quant.gates.iter().enumerate() {
            fc[g] = [
                Requant::new(q.input_multiplier, q.input_shift),
                Requant::new(q.recurrent_multiplier, q.recurrent_shift),
            ];
        }
        let fc = fc.map(|[a, b]| Some([a?, b?]));
        let clip = quant.cell_clip as i16;
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        let (zero_point, clip) = unsafe {
            (
                _mm_set1_epi32(quant.hidden_zero_point),
                (quant.clip_cell != 0)
                    .then(|| (_mm_set1_epi16(clip), _mm_set1_epi16(clip.wrapping_neg()))),
            )
        };
        Some(CellLanes {
            fc: [fc[0]?, fc[1]?, fc[2]?, fc[3]?],
            forget_cell: Requant::new(quant.forget_cell_multiplier, quant.forget_cell_shift)?,
            input_cell: Requant::new(quant.input_cell_multiplier, quant.input_cell_shift)?,
            hidden: Requant::new(quant.hidden_multiplier, quant.hidden_shift)?,
            hidden_zero_point: zero_point,
            clip,
        })
    }

    /// Four cells' gate pre-activations (`[cell][gate]`, Q3.12) from
    /// their FC sums (`[cell][input, hidden][gate]`) and biases (`[gate][cell]`).
    #[inline(always)]
    pub(super) fn pre_activations(
        &self,
        dots: [[[i32; GATES]; 2]; 4],
        bias: [&[i32; 4]; GATES],
    ) -> [[i16; GATES]; 4] {
        let from_input = transpose32([dots[0][0], dots[1][0], dots[2][0], dots[3][0]]);
        let from_hidden = transpose32([dots[0][1], dots[1][1], dots[2][1], dots[3][1]]);
        let mut pre = [[0i16; 4]; GATES];
        for g in 0..GATES {
            let b: __m128i = bytemuck::cast(*bias[g]);
            // SAFETY: SSE2 is enabled for this build (the module's cfg).
            unsafe {
                let a = saturate16(self.fc[g][0].apply(_mm_add_epi32(from_input[g], b)));
                let h = saturate16(self.fc[g][1].apply(from_hidden[g]));
                pre[g] = low16(_mm_packs_epi32(_mm_add_epi32(a, h), _mm_setzero_si128()));
            }
        }
        transpose16(pre)
    }

    /// Four cells' state update from their gate activations (`[cell][gate]`,
    /// Q0.15): the new cell states into `c`, the new hidden values into
    /// `out`.
    #[inline(always)]
    pub(super) fn update(
        &self,
        luts: &Luts,
        gates: [[i16; GATES]; 4],
        c: &mut [i16; 4],
        out: &mut [i8; 4],
    ) {
        let t = transpose16(gates);
        let by_gate = [lanes16(t[0]), lanes16(t[1]), lanes16(t[2]), lanes16(t[3])];
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe {
            let zero = _mm_setzero_si128();
            let kept = saturate16(
                self.forget_cell
                    .apply(products(by_gate[GATE_FORGET], lanes16(*c))),
            );
            let added = saturate16(
                self.input_cell
                    .apply(products(by_gate[GATE_INPUT], by_gate[GATE_CELL])),
            );
            let mut new_cell = _mm_packs_epi32(_mm_add_epi32(kept, added), zero);
            if let Some((hi, lo)) = self.clip {
                new_cell = _mm_max_epi16(_mm_min_epi16(new_cell, hi), lo);
            }
            *c = low16(new_cell);
            let squashed = lanes16([
                luts.tanh_cell(c[0]),
                luts.tanh_cell(c[1]),
                luts.tanh_cell(c[2]),
                luts.tanh_cell(c[3]),
            ]);
            let h = _mm_add_epi32(
                self.hidden.apply(products(squashed, by_gate[GATE_OUTPUT])),
                self.hidden_zero_point,
            );
            let h8 = _mm_packs_epi16(_mm_packs_epi32(h, zero), zero);
            let bytes: [i8; 16] = bytemuck::cast(h8);
            *out = [bytes[0], bytes[1], bytes[2], bytes[3]];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::fixed_point::multiply_by_quantized_multiplier;
    use super::*;

    /// The lane rescale against the scalar one over extreme and random
    /// values, every shift in ±31 and multipliers from 0 to `i32::MAX`.
    #[test]
    fn requant_lanes_match_the_scalar_rescale() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let extremes = [
            i32::MIN,
            i32::MIN + 1,
            -1 << 30,
            -65536,
            -1,
            0,
            1,
            65535,
            1 << 30,
            i32::MAX,
        ];
        for shift in -31..=31 {
            for multiplier in [
                0,
                1,
                1 << 30,
                (1 << 30) + 12345,
                i32::MAX,
                (next() >> 33) as i32,
            ] {
                let requant = Requant::new(multiplier, shift).expect("in range");
                let mut values: alloc::vec::Vec<i32> = extremes.to_vec();
                values.extend((0..64).map(|_| next() as i32));
                values.extend((0..64).map(|_| (next() as i32) >> 12));
                for lanes in values.chunks_exact(2) {
                    let x = [lanes[0], lanes[1], lanes[1].wrapping_neg(), lanes[0] >> 3];
                    let got: [i32; 4] = bytemuck::cast(requant.apply(bytemuck::cast(x)));
                    let want = x.map(|v| multiply_by_quantized_multiplier(v, multiplier, shift));
                    assert_eq!(got, want, "x {x:?} multiplier {multiplier} shift {shift}");
                }
            }
        }
        assert!(Requant::new(-5, 0).is_none());
        assert!(Requant::new(1 << 30, 32).is_none());
    }
}
