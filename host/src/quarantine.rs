//! Known-flaky (scenario, board) pairs (`--quarantine FILE`): they still
//! run and are reported, marked quarantined, but their failures do not
//! fail `hilt run` or `hilt gate`, so a board farm keeps gating merges
//! while someone looks at them. One `SCENARIO@BOARD` per line, either part
//! a glob; `#` starts a comment.

use std::path::{Path, PathBuf};

use crate::config::board::glob_match;

/// A quarantine file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum QuarantineError {
    /// Unreadable.
    #[error("quarantine file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line that is not `SCENARIO@BOARD`.
    #[error("quarantine file {path}, line {line}: {text:?} is not SCENARIO@BOARD")]
    Line {
        /// The file.
        path: PathBuf,
        /// From 1.
        line: usize,
        /// What it says.
        text: String,
    },
}

/// The quarantined pairs (none by default).
#[derive(Debug, Clone, Default)]
pub struct Quarantine {
    pairs: Vec<(String, String)>,
}

impl Quarantine {
    /// Reads `path`.
    pub fn load(path: &Path) -> Result<Quarantine, QuarantineError> {
        let text = std::fs::read_to_string(path).map_err(|source| QuarantineError::Read {
            path: path.into(),
            source,
        })?;
        Quarantine::parse(&text).map_err(|(line, text)| QuarantineError::Line {
            path: path.into(),
            line,
            text,
        })
    }

    /// The pairs of a file's text; else the first bad line (from 1) and
    /// what it says.
    pub fn parse(text: &str) -> Result<Quarantine, (usize, String)> {
        let mut pairs = Vec::new();
        for (k, line) in text.lines().enumerate() {
            let entry = line.split('#').next().unwrap_or_default().trim();
            if entry.is_empty() {
                continue;
            }
            match entry.split_once('@') {
                Some((scenario, board))
                    if !scenario.trim().is_empty() && !board.trim().is_empty() =>
                {
                    pairs.push((scenario.trim().to_string(), board.trim().to_string()));
                }
                _ => return Err((k + 1, entry.to_string())),
            }
        }
        Ok(Quarantine { pairs })
    }

    /// Whether (`scenario`, `board`) is quarantined.
    pub fn holds(&self, scenario: &str, board: &str) -> bool {
        self.pairs
            .iter()
            .any(|(s, b)| glob_match(s, scenario) && glob_match(b, board))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_globs_and_bad_lines_are_named() {
        let q =
            Quarantine::parse("# known flaky\nvww_*@nrf52840-dk  # USB drops\n\nkws@*\n").unwrap();
        assert!(q.holds("vww_mobilenetv1_int8", "nrf52840-dk"));
        assert!(q.holds("kws", "qemu-mps2-an386"));
        assert!(!q.holds("vww_mobilenetv1_int8", "qemu-mps2-an386"));
        assert_eq!(
            Quarantine::parse("kws@qemu\nkws\n").unwrap_err(),
            (2, "kws".to_string())
        );
    }
}
