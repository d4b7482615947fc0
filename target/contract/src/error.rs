//! The one error type of the board and scenario files: both are read,
//! parsed and validated the same way, so a caller handles one enum whatever
//! file it loaded.

use std::path::{Path, PathBuf};

/// What is wrong with a board or scenario file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file (or folder) could not be read.
    #[error("{path}: {source}")]
    Read {
        /// File.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// TOML syntax or a field of the wrong type/unknown field.
    #[error("{path}: {message}")]
    Parse {
        /// File.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field with a value that cannot work.
    #[error("{path}: field `{field}`: {problem}")]
    Invalid {
        /// File.
        path: PathBuf,
        /// Field.
        field: &'static str,
        /// Why.
        problem: String,
    },
    /// A file a scenario points at (its model, an input) that cannot
    /// work with the rest: named by where it sits in the scenario
    /// (`model m.tflite`, `steps[0].inputs[1] (in.bin)`), since the field
    /// alone would not say which of several files is at fault.
    #[error("{path}: {part}: {problem}")]
    Content {
        /// The scenario file.
        path: PathBuf,
        /// The file at fault, by its place in the scenario.
        part: String,
        /// Why.
        problem: String,
    },
    /// A scenario's arena or model cannot fit a board it names: refused
    /// before the firmware is built.
    #[error("scenario {scenario} on board {board}: {shortfall} ({remedy})")]
    Budget {
        /// The scenario.
        scenario: String,
        /// The board.
        board: String,
        /// What does not fit, by how much.
        shortfall: crate::shortfall::MemoryShortfall,
        /// What to change.
        remedy: &'static str,
    },
    /// No board of that name, or none matching that glob.
    #[error("{}", unknown_board(name, known))]
    Unknown {
        /// Name (or glob) asked for.
        name: String,
        /// The defined boards' names.
        known: Vec<String>,
    },
}

/// [`ConfigError::Unknown`]'s text: a glob that matches nothing says so; a
/// name gets the closest defined names (a typo's likely meaning); both list
/// the defined boards.
fn unknown_board(name: &str, known: &[String]) -> String {
    let defined = known.join(", ");
    if name.contains(['*', '?']) {
        return format!("{name:?} matches no board; defined boards: {defined}");
    }
    let tip = crate::suggest::did_you_mean(name, known.iter().map(String::as_str));
    format!("unknown board {name:?}{tip}; defined boards: {defined}")
}

impl ConfigError {
    /// A field of `path` whose value cannot work.
    pub fn invalid(path: &Path, field: &'static str, problem: impl Into<String>) -> Self {
        ConfigError::Invalid {
            path: path.to_path_buf(),
            field,
            problem: problem.into(),
        }
    }
}

/// Reads `path` and parses it as TOML into `T`, the parser's message kept on
/// one line.
pub(crate) fn read_toml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.into(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.into(),
        message: parse_message(&text, &e),
    })
}

/// One line for a TOML or field error: where (line, column and the table
/// it is in), then what; an unknown key is named with the closest known
/// ones and every key the table takes (serde's own text lists them
/// flattened behind the parser's source excerpt).
fn parse_message(text: &str, error: &toml::de::Error) -> String {
    let what = error.message().trim();
    let what = match unknown_key(what) {
        Some((key, known)) if known.is_empty() => {
            format!("unknown key `{key}`: this table takes no keys")
        }
        Some((key, known)) => format!(
            "unknown key `{key}`{}; the keys are: {}",
            crate::suggest::did_you_mean(key, known.iter().copied()),
            known.join(", ")
        ),
        // A wrong value: name its key, which the excerpt dropped showed.
        None => {
            let what = what.lines().collect::<Vec<_>>().join(" ");
            match error.span().and_then(|span| key_at(text, span.start)) {
                Some(key) => format!("key `{key}`: {what}"),
                None => what,
            }
        }
    };
    match error.span() {
        Some(span) => format!("{}: {what}", location(text, span.start)),
        None => what,
    }
}

/// The key of the `key = value` line holding byte `at` of `text`, if it is
/// one.
fn key_at(text: &str, at: usize) -> Option<&str> {
    let start = text.get(..at)?.rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let key = line.split_once('=')?.0.trim();
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '"'));
    bare.then_some(key)
}

/// `line 5, column 1` (in `[[steps]]` when under a table header) for byte
/// offset `at` of `text`.
fn location(text: &str, at: usize) -> String {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    // The header above: among the lines before this one.
    let complete = &before[..before.rfind('\n').unwrap_or(0)];
    let table = complete
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|header| format!(" in {}", header.split('#').next().unwrap_or(header).trim()))
        .unwrap_or_default();
    format!("line {line}, column {column}{table}")
}

/// The key and the known keys of serde's ``unknown field `k`, expected one
/// of `a`, `b` `` (or `` expected `a` or `b` ``, or `there are no fields`).
fn unknown_key(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, rest) = rest.split_once('`')?;
    let known = match rest.split_once("expected") {
        Some((_, list)) => list.split('`').skip(1).step_by(2).collect(),
        None => Vec::new(),
    };
    Some((key, known))
}
