//! `hilt gate --accept`: pending snapshots (`.snap.new`) moved over the
//! accepted ones, each with what changed.

use std::path::{Path, PathBuf};

use hilt_contract::board::Tolerance;

use super::compare::{compare, headline};
use super::snapshot::read_snapshot;

/// Why accepting pending snapshots failed, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The snapshots folder could not be listed.
    #[error("cannot list the snapshots folder {path}: {source}")]
    List {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A pending snapshot could not replace the accepted one.
    #[error("cannot accept {path}: {source}")]
    Rename {
        /// The `.snap.new`.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One pending snapshot accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// Scenario name.
    pub scenario: String,
    /// Board name.
    pub board: String,
    /// What changed, as the gate said it (`new snapshot` when there was
    /// none): its headline and how many differences in all.
    pub change: String,
}

/// `hilt gate --accept`: every pending snapshot of `dir`
/// (`SCENARIO@BOARD.snap.new`) of the scenarios named (by name or file:
/// the stem counts; all when none) on the boards `board` matches (a name
/// or glob; all when None) replaces its accepted snapshot, as `cargo insta
/// review` does on accept. Nothing is run: the gate wrote them.
pub fn accept(
    dir: &Path,
    scenarios: &[String],
    board: Option<&str>,
) -> Result<Vec<Accepted>, AcceptError> {
    let entries = std::fs::read_dir(dir).map_err(|source| AcceptError::List {
        path: dir.into(),
        source,
    })?;
    let mut pending: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".snap.new"))
        .collect();
    pending.sort();
    let mut accepted = Vec::new();
    for new in pending {
        let file = new.file_name().unwrap_or_default().to_string_lossy();
        let Some((scenario, board_name)) = file.trim_end_matches(".snap.new").split_once('@')
        else {
            continue;
        };
        let wanted = scenarios.is_empty() || scenarios.iter().any(|s| s == scenario);
        if !wanted || board.is_some_and(|b| !hilt_contract::board::glob_match(b, board_name)) {
            continue;
        }
        let old = new.with_extension("");
        let change = match (read_snapshot(&old), read_snapshot(&new)) {
            (Some(before), Some(after)) => {
                let moved = compare(&before, &after, Tolerance::EXACT);
                let all: Vec<String> = moved
                    .regressions
                    .into_iter()
                    .chain(moved.improvements)
                    .collect();
                match headline(&all) {
                    Some(h) if all.len() > 1 => format!("{h} (and {} more)", all.len() - 1),
                    Some(h) => h.to_string(),
                    None => "no difference".into(),
                }
            }
            _ => "new snapshot".into(),
        };
        std::fs::rename(&new, &old).map_err(|source| AcceptError::Rename {
            path: new.clone(),
            source,
        })?;
        accepted.push(Accepted {
            scenario: scenario.to_string(),
            board: board_name.to_string(),
            change,
        });
    }
    Ok(accepted)
}
