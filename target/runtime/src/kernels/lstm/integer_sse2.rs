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
    _mm_add_epi64, _mm_and_si128, _mm_cmpgt_epi32, _mm_mul_epu32, _mm_packs_epi16, _mm_packs_epi32,
    _mm_set_epi32, _mm_set1_epi32, _mm_set1_epi64x, _mm_shuffle_epi32, _mm_sll_epi32,
    _mm_slli_epi64, _mm_sra_epi32, _mm_srai_epi32, _mm_srli_epi32, _mm_srli_epi64, _mm_sub_epi32,
    _mm_sub_epi64, _mm_unpacklo_epi16,
};

use core::arch::x86_64::{_mm_andnot_si128, _mm_or_si128, _mm_slli_epi32, _mm_xor_si128};

use super::super::fixed_point::SIGMOID_TABLE_Q16;
use super::luts::Luts;
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

/// Four i32 lanes holding int16 values, their low halves only (upper
/// halves zero), so `pmaddwd` of two such vectors is the four exact
/// products.
#[inline(always)]
fn low_halves(v: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_and_si128(v, _mm_set1_epi32(0xFFFF)) }
}

/// `a·b` of four i32 lanes holding int16 values.
#[inline(always)]
fn lane_products(a: __m128i, b: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_madd_epi16(low_halves(a), low_halves(b)) }
}

/// The low 16 bits of each i32 lane, sign-extended (`as i16` then back).
#[inline(always)]
fn truncate16(v: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_srai_epi32::<16>(_mm_slli_epi32::<16>(v)) }
}

/// `mask ? a : b`, lane by lane.
#[inline(always)]
fn select(mask: __m128i, a: __m128i, b: __m128i) -> __m128i {
    // SAFETY: SSE2 is enabled for this build (the module's cfg).
    unsafe { _mm_or_si128(_mm_and_si128(mask, a), _mm_andnot_si128(mask, b)) }
}

/// Adjacent entries of the int16 LUT differ by less than 2¹⁵, so their
/// differences fit `pmaddwd`'s signed halves.
const fn lut_steps_fit_i16() -> bool {
    let mut i = 1;
    while i < SIGMOID_TABLE_Q16.len() {
        let step = SIGMOID_TABLE_Q16[i] as i32 - SIGMOID_TABLE_Q16[i - 1] as i32;
        if step < i16::MIN as i32 || step > i16::MAX as i32 {
            return false;
        }
        i += 1;
    }
    true
}
const _: () = assert!(lut_steps_fit_i16());

/// Entry `i` of the int16 LUT in the low half, entry `i + 1` (entry 255
/// for the last) in the high half: the two values each interpolation reads,
/// in one load.
static LUT_PAIRS: [u32; 256] = lut_pairs();

const fn lut_pairs() -> [u32; 256] {
    let t = &SIGMOID_TABLE_Q16;
    let mut pairs = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let next = if i + 1 < 256 { t[i + 1] } else { t[255] };
        pairs[i] = t[i] as u32 | (next as u32) << 16;
        i += 1;
    }
    pairs
}

/// TFLM's int16 sigmoid or tanh on four lanes: [`logistic_int16`] and
/// [`tanh_int16`] bit for bit, the table reads scalar (SSE2 has no
/// gather), the rest in lanes.
///
/// [`logistic_int16`]: super::super::fixed_point::logistic_int16
/// [`tanh_int16`]: super::super::fixed_point::tanh_int16
#[derive(Clone, Copy)]
struct LutLanes {
    /// The input multiplier in each lane's low half.
    multiplier: __m128i,
    round: __m128i,
    shift: __m128i,
}

impl LutLanes {
    /// For a multiplier that fits 16 bits (so `x·m` is one `pmaddwd`) and a
    /// shift in `0..=31`; `None` otherwise.
    fn new((multiplier, shift): (i32, i32)) -> Option<Self> {
        let fits = i32::from(i16::MIN) <= multiplier && multiplier <= i32::from(i16::MAX);
        if !fits || !(0..=31).contains(&shift) {
            return None;
        }
        let round = if shift > 0 { 1i32 << (shift - 1) } else { 0 };
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe {
            Some(LutLanes {
                multiplier: _mm_set1_epi32(multiplier & 0xFFFF),
                round: _mm_set1_epi32(round),
                shift: _mm_cvtsi32_si128(shift),
            })
        }
    }

    /// The two table entries around each lane's index (which is below
    /// 255): one read of [`LUT_PAIRS`] per lane, split in lanes.
    #[inline(always)]
    fn entries(index: __m128i) -> (__m128i, __m128i) {
        let i: [u32; 4] = bytemuck::cast(index);
        let pair = |k: usize| LUT_PAIRS[i[k] as usize & 0xFF];
        let pairs: __m128i = bytemuck::cast([pair(0), pair(1), pair(2), pair(3)]);
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe {
            (
                _mm_and_si128(pairs, _mm_set1_epi32(0xFFFF)),
                _mm_srli_epi32::<16>(pairs),
            )
        }
    }

    /// `x` (i32 lanes holding int16) through the sigmoid (`tanh` false) or
    /// tanh; Q0.15 results in i32 lanes.
    #[inline(always)]
    fn apply<const TANH: bool>(&self, x: __m128i) -> __m128i {
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe {
            let scaled = _mm_madd_epi16(low_halves(x), self.multiplier);
            let scaled = _mm_sra_epi32(_mm_add_epi32(scaled, self.round), self.shift);
            let negative = _mm_srai_epi32::<31>(scaled);
            let abs = _mm_sub_epi32(_mm_xor_si128(scaled, negative), negative);
            // The sigmoid's table steps are 1/24 in Q9 of the input times
            // 3; tanh's half that.
            let (index, frac) = if TANH {
                (
                    _mm_srli_epi32::<8>(abs),
                    _mm_and_si128(abs, _mm_set1_epi32(0xFF)),
                )
            } else {
                (
                    _mm_srli_epi32::<9>(abs),
                    _mm_and_si128(abs, _mm_set1_epi32(0x1FF)),
                )
            };
            let saturated = _mm_cmpgt_epi32(index, _mm_set1_epi32(254));
            let (a, b) = Self::entries(_mm_andnot_si128(saturated, index));
            let step = _mm_madd_epi16(frac, low_halves(_mm_sub_epi32(b, a)));
            if TANH {
                let result = _mm_add_epi32(_mm_slli_epi32::<8>(a), step);
                let result = select(saturated, _mm_set1_epi32(0xFFFF << 8), result);
                let above = _mm_add_epi32(result, _mm_set1_epi32(-(1 << 23) + (1 << 7)));
                let below = _mm_sub_epi32(_mm_set1_epi32((1 << 23) + (1 << 7) - 1), result);
                truncate16(_mm_srai_epi32::<8>(select(negative, below, above)))
            } else {
                let result = _mm_add_epi32(_mm_slli_epi32::<9>(a), step);
                let result = select(saturated, _mm_set1_epi32(0x7FFF << 10), result);
                let above = _mm_add_epi32(result, _mm_set1_epi32(1 << 9));
                let below = _mm_sub_epi32(_mm_set1_epi32((1 << 25) + (1 << 9) - 1), result);
                truncate16(_mm_srli_epi32::<10>(select(negative, below, above)))
            }
        }
    }
}

/// Four i16 values as sign-extended i32 lanes.
#[inline(always)]
fn widen16(v: [i16; 4]) -> __m128i {
    bytemuck::cast([
        i32::from(v[0]),
        i32::from(v[1]),
        i32::from(v[2]),
        i32::from(v[3]),
    ])
}

/// The integer LSTM's per-cell arithmetic after the dot products for four
/// cells at once, one per lane: the gate FCs' rescaling and saturation, the
/// LUT activations (table reads scalar), the cell update and the hidden
/// value.
pub(in crate::kernels) struct CellLanes {
    fc: [[Requant; 2]; GATES],
    forget_cell: Requant,
    input_cell: Requant,
    hidden: Requant,
    hidden_zero_point: __m128i,
    clip: Option<(__m128i, __m128i)>,
    gate_lut: LutLanes,
    cell_lut: LutLanes,
}

impl CellLanes {
    /// The lanes for these constants, or `None` if one is outside what
    /// [`Requant`] and [`LutLanes`] reproduce exactly.
    pub(super) fn new(quant: &LstmQuantParams, luts: &Luts) -> Option<Self> {
        let mut fc = [[None; 2]; GATES];
        for (g, q) in quant.gates.iter().enumerate() {
            fc[g] = [
                Requant::new(q.input_multiplier, q.input_shift),
                Requant::new(q.recurrent_multiplier, q.recurrent_shift),
            ];
        }
        let fc = fc.map(|[a, b]| Some([a?, b?]));
        let clip = quant.cell_clip;
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        let (zero_point, clip) = unsafe {
            (
                _mm_set1_epi32(quant.hidden_zero_point),
                (quant.clip_cell != 0)
                    .then(|| (_mm_set1_epi32(clip), _mm_set1_epi32(clip.wrapping_neg()))),
            )
        };
        Some(CellLanes {
            fc: [fc[0]?, fc[1]?, fc[2]?, fc[3]?],
            forget_cell: Requant::new(quant.forget_cell_multiplier, quant.forget_cell_shift)?,
            input_cell: Requant::new(quant.input_cell_multiplier, quant.input_cell_shift)?,
            hidden: Requant::new(quant.hidden_multiplier, quant.hidden_shift)?,
            hidden_zero_point: zero_point,
            clip,
            gate_lut: LutLanes::new(luts.gate)?,
            cell_lut: LutLanes::new(luts.cell_tanh)?,
        })
    }

    /// Four cells' gate activations (per gate in tensor order, one lane per
    /// cell, Q0.15) from their FC sums (`[cell][input, hidden][gate]`) and
    /// biases (`[gate][cell]`): the two FCs rescaled and saturated to
    /// int16, added with saturation, through σ (tanh for the cell gate).
    #[inline(always)]
    pub(super) fn activations(
        &self,
        dots: [[[i32; GATES]; 2]; 4],
        bias: [&[i32; 4]; GATES],
    ) -> [__m128i; GATES] {
        let from_input = transpose32([dots[0][0], dots[1][0], dots[2][0], dots[3][0]]);
        let from_hidden = transpose32([dots[0][1], dots[1][1], dots[2][1], dots[3][1]]);
        let pre = |g: usize| {
            let b: __m128i = bytemuck::cast(*bias[g]);
            // SAFETY: SSE2 is enabled for this build (the module's cfg).
            unsafe {
                let a = saturate16(self.fc[g][0].apply(_mm_add_epi32(from_input[g], b)));
                let h = saturate16(self.fc[g][1].apply(from_hidden[g]));
                saturate16(_mm_add_epi32(a, h))
            }
        };
        let lut = &self.gate_lut;
        [
            lut.apply::<false>(pre(GATE_INPUT)),
            lut.apply::<false>(pre(GATE_FORGET)),
            lut.apply::<true>(pre(GATE_CELL)),
            lut.apply::<false>(pre(GATE_OUTPUT)),
        ]
    }

    /// Four cells' state update from their gate activations (as
    /// [`activations`](Self::activations) gives them): the new cell states
    /// into `c`, the new hidden values into `out`.
    #[inline(always)]
    pub(super) fn update(&self, gates: [__m128i; GATES], c: &mut [i16; 4], out: &mut [i8; 4]) {
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe {
            let zero = _mm_setzero_si128();
            let old = widen16(*c);
            let kept = saturate16(
                self.forget_cell
                    .apply(lane_products(gates[GATE_FORGET], old)),
            );
            let added = saturate16(
                self.input_cell
                    .apply(lane_products(gates[GATE_INPUT], gates[GATE_CELL])),
            );
            let mut new_cell = saturate16(_mm_add_epi32(kept, added));
            if let Some((hi, lo)) = self.clip {
                // min(clip) then max(-clip), as the scalar path.
                new_cell = select(_mm_cmpgt_epi32(new_cell, hi), hi, new_cell);
                new_cell = select(_mm_cmpgt_epi32(lo, new_cell), lo, new_cell);
            }
            let packed: [i16; 8] = bytemuck::cast(_mm_packs_epi32(new_cell, zero));
            *c = [packed[0], packed[1], packed[2], packed[3]];
            let squashed = self.cell_lut.apply::<true>(widen16(*c));
            let h = _mm_add_epi32(
                self.hidden
                    .apply(lane_products(squashed, gates[GATE_OUTPUT])),
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
    use super::super::super::fixed_point::{
        int16_lut_input_scale, logistic_int16, multiply_by_quantized_multiplier, tanh_int16,
    };
    use super::*;

    /// Both LUT functions in lanes against the scalar ones for every int16
    /// input, at the gates' scale and at the cell-state scales prepare
    /// makes (Q3.12 to Q0.15 and a coarser one), plus large multipliers
    /// that saturate the table.
    #[test]
    fn lut_lanes_match_the_scalar_functions() {
        let scales = [
            int16_lut_input_scale(0, 0),
            int16_lut_input_scale(0, 1),
            int16_lut_input_scale(3, 3),
            int16_lut_input_scale(3, 1),
            (3000, 0),
            (-7, 2),
            (i32::from(i16::MAX), 31),
        ];
        for (m, s) in scales {
            let lanes = LutLanes::new((m, s)).expect("in range");
            let mut x = i32::from(i16::MIN);
            while x <= i32::from(i16::MAX) {
                let v = [x, (x + 1).min(32767), (x + 2).min(32767), -(x.max(-32767))];
                let got_sigmoid: [i32; 4] = bytemuck::cast(lanes.apply::<false>(bytemuck::cast(v)));
                let got_tanh: [i32; 4] = bytemuck::cast(lanes.apply::<true>(bytemuck::cast(v)));
                for k in 0..4 {
                    let value = v[k] as i16;
                    assert_eq!(
                        got_sigmoid[k],
                        i32::from(logistic_int16(value, m, s)),
                        "σ {value} ({m}, {s})"
                    );
                    assert_eq!(
                        got_tanh[k],
                        i32::from(tanh_int16(value, m, s)),
                        "tanh {value} ({m}, {s})"
                    );
                }
                x += 3;
            }
        }
        assert!(LutLanes::new((40_000, 0)).is_none());
        assert!(LutLanes::new((3, 32)).is_none());
    }

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
