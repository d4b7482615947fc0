//! int16 sigmoid and tanh by table lookup (LSTM gates, int16 LOGISTIC/TANH).
//!
//! TFLM's `reference_integer_ops::Logistic` and `Tanh` on int16 both read one
//! 256-entry table of sigmoid, using tanh(x) = 2·sigmoid(2x) − 1, and
//! interpolate linearly between neighbouring entries. The input is first
//! scaled by `multiplier / 2^shift`; the power-of-two case (`multiplier ==
//! 0`) scales by 3 instead, so that a Q3.12 input spans the table's range of
//! about ±10.7.

/// sigmoid(i / 24) in Q0.16 for i = 0..=255 (the last entry is clamped to
/// 65535), exactly as TFLM and CMSIS-NN ship it. It is not
/// `round(65536 · sigmoid(i / 24))` (44 entries differ by one), so it is
/// kept as data rather than computed.
pub const SIGMOID_TABLE_Q16: [u16; 256] = [
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
];

/// The input scaling of TFLM's int16 Logistic/Tanh as `(multiplier,
/// shift)` with the power-of-two case resolved: `multiplier == 0` means
/// "×3, then shift left by `left_shift`", which is `(3 << left_shift, 0)`.
#[inline]
pub fn int16_lut_input_scale(input_multiplier: i32, input_left_shift: i32) -> (i32, i32) {
    if input_multiplier == 0 {
        (3i32.wrapping_shl(input_left_shift as u32), 0)
    } else {
        (input_multiplier, input_left_shift)
    }
}

/// `(x · multiplier + round) >> shift`, TFLM's pre-scaling of the LUT input.
#[inline(always)]
fn int16_lut_scale(x: i16, multiplier: i32, shift: i32) -> i32 {
    let round = if shift > 0 { 1i32 << (shift - 1) } else { 0 };
    i32::from(x).wrapping_mul(multiplier).wrapping_add(round) >> shift
}

/// Sigmoid of one int16 value, TFLM's `reference_integer_ops::Logistic`
/// (int16): `(multiplier, shift)` from [`int16_lut_input_scale`]; the output
/// is Q0.15 (0..=32767).
#[inline(always)]
pub fn logistic_int16(x: i16, multiplier: i32, shift: i32) -> i16 {
    let scaled = int16_lut_scale(x, multiplier, shift);
    let abs = scaled.unsigned_abs();
    // Table steps are 1/24: the Q3.12 input times 3 is 24·x in Q9.
    let index = abs >> 9;
    let mut result: u32 = if index >= 255 {
        0x7FFF << 10
    } else {
        let a = u32::from(SIGMOID_TABLE_Q16[index as usize]);
        let b = u32::from(SIGMOID_TABLE_Q16[index as usize + 1]);
        let frac = abs & 0x1FF;
        (a << 9).wrapping_add(frac.wrapping_mul(b.wrapping_sub(a)))
    };
    result = if scaled >= 0 {
        result.wrapping_add(1 << 9)
    } else {
        (1u32 << 25)
            .wrapping_sub(result)
            .wrapping_add(1 << 9)
            .wrapping_sub(1)
    };
    (result >> 10) as i16
}

/// Tanh of one int16 value, TFLM's `reference_integer_ops::Tanh` (int16):
/// `(multiplier, shift)` from [`int16_lut_input_scale`]; the output is Q0.15.
#[inline(always)]
pub fn tanh_int16(x: i16, multiplier: i32, shift: i32) -> i16 {
    let scaled = int16_lut_scale(x, multiplier, shift);
    let abs = scaled.unsigned_abs();
    // Half the sigmoid's step: tanh(x) = 2·sigmoid(2x) − 1.
    let index = abs >> 8;
    let mut result: i32 = if index >= 255 {
        0xFFFF << 8
    } else {
        let a = u32::from(SIGMOID_TABLE_Q16[index as usize]);
        let b = u32::from(SIGMOID_TABLE_Q16[index as usize + 1]);
        let frac = abs & 0xFF;
        (a << 8).wrapping_add(frac.wrapping_mul(b.wrapping_sub(a))) as i32
    };
    result = if scaled >= 0 {
        result - (1 << 23) + (1 << 7)
    } else {
        -result + (1 << 23) + (1 << 7) - 1
    };
    (result >> 8) as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sigmoid(x: f64) -> f64 {
        1.0 / (1.0 + libm::exp(-x))
    }

    #[test]
    fn table_is_sigmoid_of_i_over_24() {
        let mut previous = 0u16;
        for (i, &entry) in SIGMOID_TABLE_Q16.iter().enumerate() {
            let exact = (65536.0 * sigmoid(i as f64 / 24.0)).min(65535.0);
            assert!(
                (f64::from(entry) - exact).abs() <= 1.2,
                "{i}: {entry} vs {exact}"
            );
            assert!(entry >= previous);
            previous = entry;
        }
    }

    #[test]
    fn power_of_two_scale_is_times_three() {
        assert_eq!(int16_lut_input_scale(0, 0), (3, 0));
        assert_eq!(int16_lut_input_scale(0, 2), (12, 0));
        assert_eq!(int16_lut_input_scale(3, 3), (3, 3));
    }

    #[test]
    fn hand_values() {
        let (m, s) = int16_lut_input_scale(0, 0);
        // sigmoid(0) = 0.5, tanh(0) = 0 in Q0.15.
        assert_eq!(logistic_int16(0, m, s), 16384);
        assert_eq!(tanh_int16(0, m, s), 0);
        // Q3.12 spans ±8, inside the table's ±10.7: the extremes do not
        // saturate...
        assert_eq!(logistic_int16(i16::MAX, m, s), 32757);
        assert_eq!(logistic_int16(i16::MIN, m, s), 11);
        // ...but a larger scale does.
        let (m4, s4) = int16_lut_input_scale(0, 2);
        assert_eq!(logistic_int16(i16::MAX, m4, s4), 32767);
        assert_eq!(logistic_int16(i16::MIN, m4, s4), 1);
        assert_eq!(tanh_int16(i16::MAX, m, s), 32767);
        assert_eq!(tanh_int16(i16::MIN, m, s), -32767);
        // x = 1.0 (4096 in Q3.12) lands exactly on table entry 24 for the
        // sigmoid: (47911 · 2^9 + 2^9) >> 10 = 23956 ≈ 0.7311 · 2^15...
        assert_eq!(logistic_int16(4096, m, s), 23956);
        // ...and on entry 48 for tanh: (57724 · 2^8 − 2^23 + 2^7) >> 8 =
        // 24956 ≈ 0.7616 · 2^15.
        assert_eq!(tanh_int16(4096, m, s), 24956);
        // A right shift rounds: (−1 · 3 + 4) >> 3 = 0, the middle.
        assert_eq!(tanh_int16(-1, 3, 3), 0);
    }

    #[test]
    fn close_to_the_real_functions_everywhere() {
        let (m, s) = int16_lut_input_scale(0, 0);
        for x in (i16::MIN..=i16::MAX).step_by(7) {
            let real = f64::from(x) / 4096.0;
            let sig = f64::from(logistic_int16(x, m, s)) / 32768.0;
            let th = f64::from(tanh_int16(x, m, s)) / 32768.0;
            assert!((sig - sigmoid(real)).abs() < 2e-4, "sigmoid {x}");
            assert!((th - libm::tanh(real)).abs() < 4e-4, "tanh {x}");
        }
    }

    #[test]
    fn odd_and_complementary_symmetry() {
        let (m, s) = int16_lut_input_scale(0, 0);
        for x in -32767..=32767i16 {
            let (p, n) = (tanh_int16(x, m, s), tanh_int16(-x, m, s));
            assert!((i32::from(p) + i32::from(n)).abs() <= 1, "tanh {x}");
            let (p, n) = (logistic_int16(x, m, s), logistic_int16(-x, m, s));
            assert!(
                (i32::from(p) + i32::from(n) - 32768).abs() <= 1,
                "sigmoid {x}"
            );
        }
    }
}
