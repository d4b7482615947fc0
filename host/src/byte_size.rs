//! Byte sizes as the command line takes them (`--arena`, `--capacity`,
//! `--align`): written as the board and scenario files write them, so a
//! figure copied from a TOML file works: decimal or `0x` hex, `_` between
//! digits, and an optional binary suffix (`K`/`KiB`, `M`/`MiB`).

use std::str::FromStr;

/// What is wrong with a byte size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ByteSizeError {
    /// Not a number in any accepted form.
    #[error("{0:?} is not a byte count (write 32768, 32_768, 0x8000, 32K or 32KiB)")]
    Syntax(String),
    /// Beyond what a size can hold.
    #[error("{0:?} is too large")]
    Overflow(String),
}

/// A byte count parsed from the forms the module describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

/// The suffixes and their multipliers, longest first so `KiB` is not read
/// as `K` followed by junk.
const SUFFIXES: [(&str, u64); 6] = [
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("K", 1 << 10),
    ("k", 1 << 10),
    ("M", 1 << 20),
    ("", 1),
];

impl FromStr for ByteSize {
    type Err = ByteSizeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let syntax = || ByteSizeError::Syntax(text.to_string());
        let trimmed = text.trim();
        let (number, scale) = SUFFIXES
            .iter()
            .find_map(|&(suffix, scale)| Some((trimmed.strip_suffix(suffix)?, scale)))
            .ok_or_else(syntax)?;
        let (digits, radix) = match number
            .strip_prefix("0x")
            .or_else(|| number.strip_prefix("0X"))
        {
            Some(hex) => (hex, 16),
            None => (number, 10),
        };
        // `_` only between digits, as in TOML.
        if digits.is_empty()
            || digits.starts_with('_')
            || digits.ends_with('_')
            || digits.contains("__")
        {
            return Err(syntax());
        }
        let clean: String = digits.chars().filter(|&c| c != '_').collect();
        if !clean.chars().all(|c| c.is_digit(radix)) {
            return Err(syntax());
        }
        let value = u64::from_str_radix(&clean, radix)
            .map_err(|_| ByteSizeError::Overflow(text.to_string()))?;
        value
            .checked_mul(scale)
            .map(ByteSize)
            .ok_or_else(|| ByteSizeError::Overflow(text.to_string()))
    }
}

/// `--arena` and the like as a `usize` (clap's `value_parser`).
pub fn parse_usize(text: &str) -> Result<usize, ByteSizeError> {
    let ByteSize(n) = text.parse()?;
    usize::try_from(n).map_err(|_| ByteSizeError::Overflow(text.to_string()))
}

/// `--align` as a `u32` (clap's `value_parser`).
pub fn parse_u32(text: &str) -> Result<u32, ByteSizeError> {
    let ByteSize(n) = text.parse()?;
    u32::try_from(n).map_err(|_| ByteSizeError::Overflow(text.to_string()))
}

/// `--capacity` and the like as a `u64` (clap's `value_parser`).
pub fn parse_u64(text: &str) -> Result<u64, ByteSizeError> {
    text.parse::<ByteSize>().map(|ByteSize(n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_a_toml_file_or_a_person_writes() {
        for (text, want) in [
            ("32768", 32768),
            ("32_768", 32768),
            ("0x8000", 0x8000),
            ("0X80_00", 0x8000),
            ("32K", 32768),
            ("32k", 32768),
            ("32KiB", 32768),
            ("2M", 2 << 20),
            ("2MiB", 2 << 20),
            ("0x10K", 16 << 10),
            ("0", 0),
        ] {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(want)), "{text}");
        }
    }

    #[test]
    fn junk_and_overflow_are_named() {
        for bad in [
            "", "K", "0x", "_1", "1_", "1__0", "12 KB", "-1", "0xg", "1.5K",
        ] {
            assert_eq!(
                bad.parse::<ByteSize>(),
                Err(ByteSizeError::Syntax(bad.to_string())),
                "{bad}"
            );
        }
        assert!(matches!(
            "0xffffffffffffffffK".parse::<ByteSize>(),
            Err(ByteSizeError::Overflow(_))
        ));
    }
}
