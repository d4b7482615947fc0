//! The board's linker script (`boards/NAME/memory.x`) against its TOML: the
//! firmware links with the script, the host plans with the TOML, so the two
//! must state the same regions.

use std::path::Path;

use super::MemoryRegion;
use crate::error::ConfigError;

fn invalid(path: &Path, field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::invalid(path, field, problem)
}

/// The linker script must exist and state the same regions as the TOML.
pub(super) fn check_memory_x(
    path: &Path,
    memory_x: &Path,
    regions: &[MemoryRegion],
) -> Result<(), ConfigError> {
    let text = std::fs::read_to_string(memory_x)
        .map_err(|e| invalid(path, "memory", format!("{}: {e}", memory_x.display())))?;
    for region in regions {
        let line = text
            .lines()
            .find(|l| {
                l.trim_start().starts_with(&format!("{} ", region.name))
                    || l.trim_start().starts_with(&format!("{}:", region.name))
                    || l.trim_start().starts_with(&format!("{} (", region.name))
            })
            .ok_or_else(|| {
                invalid(
                    path,
                    "memory",
                    format!("{} has no {} region", memory_x.display(), region.name),
                )
            })?;
        let number = |key: &str| -> Option<u64> {
            let at = line.find(key)? + key.len();
            let rest = line[at..].trim_start().trim_start_matches('=').trim_start();
            let token: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            parse_number(&token)
        };
        let (origin, length) = (number("ORIGIN"), number("LENGTH"));
        if origin != Some(region.origin) || length != Some(region.length) {
            return Err(invalid(
                path,
                "memory",
                format!(
                    "{} region {} is {:?}/{:?} there but {:#x}/{:#x} in the TOML",
                    memory_x.display(),
                    region.name,
                    origin,
                    length,
                    region.origin,
                    region.length
                ),
            ));
        }
    }
    Ok(())
}

/// `0x…`, decimal, or with a `K`/`M` suffix, as linker scripts write them.
fn parse_number(token: &str) -> Option<u64> {
    let (digits, scale) = match token.chars().last()? {
        'K' | 'k' => (&token[..token.len() - 1], 1024),
        'M' | 'm' => (&token[..token.len() - 1], 1024 * 1024),
        _ => (token, 1),
    };
    let value = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse().ok()?,
    };
    Some(value * scale)
}
