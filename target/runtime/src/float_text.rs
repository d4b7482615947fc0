//! A float's short decimal text for error messages, without `core`'s
//! float formatting: `{}` of an `f32` links about 13 KB of exact
//! shortest-decimal code into every firmware, for a figure an error
//! message shows once. Six significant digits are plenty there.

use core::fmt;

/// Displays an `f32` with at most six significant digits: `0.5`, `-0.5`,
/// `1234.5`, `1.5e-7`, `NaN`, `inf`, `-inf`, `0`, `-0`. Plain notation
/// from 1e-5 up to 1e7, an exponent outside it.
#[derive(Debug, Clone, Copy)]
pub struct ShortFloat(pub f32);

impl fmt::Display for ShortFloat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v.is_nan() {
            return f.write_str("NaN");
        }
        if v.is_sign_negative() {
            f.write_str("-")?;
        }
        let mut x = if v.is_sign_negative() { -v } else { v };
        if x.is_infinite() {
            return f.write_str("inf");
        }
        if x == 0.0 {
            return f.write_str("0");
        }
        // x = d.ddddd × 10^exp, d ≠ 0.
        let mut exp: i32 = 0;
        while x >= 10.0 {
            x /= 10.0;
            exp += 1;
        }
        while x < 1.0 {
            x *= 10.0;
            exp -= 1;
        }
        let mut digits = (x * 100_000.0 + 0.5) as u32;
        if digits >= 1_000_000 {
            digits /= 10;
            exp += 1;
        }
        let mut text = [b'0'; 6];
        for slot in text.iter_mut().rev() {
            *slot = b'0' + (digits % 10) as u8;
            digits /= 10;
        }
        let len = text.iter().rposition(|&d| d != b'0').map_or(1, |i| i + 1);
        let text = &text[..len];
        if (-5..7).contains(&exp) {
            plain(f, text, exp)
        } else {
            let (first, rest) = text.split_at(1);
            write_digits(f, first)?;
            if !rest.is_empty() {
                f.write_str(".")?;
                write_digits(f, rest)?;
            }
            write!(f, "e{exp}")
        }
    }
}

/// `digits` (the first one before the point) × 10^`exp`, written out.
fn plain(f: &mut fmt::Formatter<'_>, digits: &[u8], exp: i32) -> fmt::Result {
    if exp < 0 {
        f.write_str("0.")?;
        for _ in 0..(-exp - 1) {
            f.write_str("0")?;
        }
        return write_digits(f, digits);
    }
    let whole = exp as usize + 1;
    if digits.len() <= whole {
        write_digits(f, digits)?;
        for _ in digits.len()..whole {
            f.write_str("0")?;
        }
        Ok(())
    } else {
        let (int, frac) = digits.split_at(whole);
        write_digits(f, int)?;
        f.write_str(".")?;
        write_digits(f, frac)
    }
}

/// ASCII digits as text. Split as bytes, not as a `str`: a `str` split
/// checks for a character boundary, and its failure path formats the
/// character (`core`'s Unicode tables, about 3.7 KB of flash).
fn write_digits(f: &mut fmt::Formatter<'_>, digits: &[u8]) -> fmt::Result {
    f.write_str(core::str::from_utf8(digits).map_err(|_| fmt::Error)?)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::ShortFloat;
    use std::format;

    #[test]
    fn short_and_exact_where_six_digits_are() {
        for (v, text) in [
            (0.5f32, "0.5"),
            (-0.5, "-0.5"),
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (10.0, "10"),
            (1234.5, "1234.5"),
            (0.1, "0.1"),
            (0.003_921_569, "0.00392157"),
            (1_000_000.0, "1000000"),
            (12_345_678.0, "1.23457e7"),
            (1.5e-7, "1.5e-7"),
            (f32::MAX, "3.40282e38"),
            (f32::from_bits(1), "1.4013e-45"),
            (f32::NAN, "NaN"),
            (f32::INFINITY, "inf"),
            (f32::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(format!("{}", ShortFloat(v)), text, "{v:e}");
        }
    }
}
