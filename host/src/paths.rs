//! Where hilt finds the repository's folders (boards, scenarios, snapshots,
//! the firmware sources) when it is run from anywhere: from the scenario
//! files it was given, the current folder, or its own executable, walking
//! up to the hilt workspace. A missing folder is reported with what it is,
//! where it was looked for and which flag sets it — not as a bare
//! "No such file or directory" of a relative path.
//!
//! ```no_run
//! let repo = hilt::paths::find_repo(&["scenarios/hello_world_int8.toml".into()])?;
//! let boards = hilt::paths::folder("the boards folder", repo.join("boards"), "--boards-dir")?;
//! # Ok::<(), hilt::paths::PathError>(())
//! ```

use std::path::{Path, PathBuf};

/// Why a folder hilt needs was not found.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// No hilt workspace above any of the places looked from.
    #[error(
        "cannot find the hilt repository (a folder with boards/ beside a Cargo.toml whose workspace names \"host\"); looked upwards from {}; run hilt inside a clone or pass --repo DIR",
        list(looked_from)
    )]
    NoRepository {
        /// Where the search started (each walked up to the root).
        looked_from: Vec<PathBuf>,
    },
    /// A folder (or file) that is not there.
    #[error("{what} not found: looked for {}; set it with {flag}", path.display())]
    Missing {
        /// What it is, for people ("the boards folder").
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
        /// The flag that names it.
        flag: &'static str,
    },
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `dir` is the root of a hilt checkout: a `boards/` folder beside
/// a `Cargo.toml` whose workspace lists the `host` crate.
pub fn is_repo_root(dir: &Path) -> bool {
    dir.join("boards").is_dir()
        && std::fs::read_to_string(dir.join("Cargo.toml"))
            .is_ok_and(|t| t.contains("[workspace]") && t.contains("\"host\""))
}

/// The first hilt checkout at or above `start` (made absolute first).
pub fn find_repo_from(start: &Path) -> Option<PathBuf> {
    let start = std::path::absolute(start).ok()?;
    start
        .ancestors()
        .find(|dir| is_repo_root(dir))
        .map(Path::to_path_buf)
}

/// The hilt checkout a command works in: found above the first of `files`
/// (scenario files) that lies in one, else above the current folder, else
/// above the running executable (a `hilt` built in a clone's `build/`).
pub fn find_repo(files: &[PathBuf]) -> Result<PathBuf, PathError> {
    let mut looked_from: Vec<PathBuf> = files
        .iter()
        .map(|f| f.parent().unwrap_or(Path::new(".")).to_path_buf())
        .collect();
    looked_from.extend(std::env::current_dir().ok());
    looked_from.extend(
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf)),
    );
    looked_from
        .iter()
        .find_map(|start| find_repo_from(start))
        .ok_or(PathError::NoRepository { looked_from })
}

/// `dir` if it is a hilt checkout (`--repo`), else what was expected there.
pub fn repo_at(dir: PathBuf) -> Result<PathBuf, PathError> {
    if is_repo_root(&dir) {
        Ok(dir)
    } else {
        Err(PathError::Missing {
            what: "the hilt repository (boards/ beside a Cargo.toml whose workspace names \"host\")",
            path: dir,
            flag: "--repo",
        })
    }
}

/// `path` if it is an existing folder, else what is missing, where it was
/// looked for and which flag sets it.
pub fn folder(what: &'static str, path: PathBuf, flag: &'static str) -> Result<PathBuf, PathError> {
    if path.is_dir() {
        Ok(path)
    } else {
        Err(PathError::Missing { what, path, flag })
    }
}

/// The folder a user's own reports go to when their scenarios all lie
/// outside the repository: in the current folder, where they ran hilt.
pub const OWN_REPORTS: &str = "hilt-reports";

/// Where `hilt run` (`sub` None) or `hilt gate` (`sub` `gate`) writes its
/// reports without `--report-dir`: `./hilt-reports[/sub]` in the current
/// folder when it and every scenario named lie outside `repo` — a user's
/// first run of their own scenario should not write into a hilt checkout
/// they may not even know they are using — else, as for the repository's
/// own scenarios (or none named: the gate then runs those), the
/// repository's `build/reports[/sub]`.
pub fn default_report_dir(repo: &Path, scenarios: &[PathBuf], sub: Option<&str>) -> PathBuf {
    let repo = std::fs::canonicalize(repo).unwrap_or_else(|_| repo.to_path_buf());
    let inside = |file: &Path| {
        std::fs::canonicalize(file)
            .or_else(|_| std::path::absolute(file))
            .is_ok_and(|f| f.starts_with(&repo))
    };
    let here = std::env::current_dir().unwrap_or_default();
    let base = if scenarios.is_empty() || inside(&here) || scenarios.iter().any(|s| inside(s)) {
        repo.join("build/reports")
    } else {
        here.join(OWN_REPORTS)
    };
    match sub {
        Some(sub) => base.join(sub),
        None => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkout_is_found_from_inside_it() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = find_repo_from(&here.join("src")).unwrap();
        assert!(is_repo_root(&root));
        assert_eq!(
            std::fs::canonicalize(root).unwrap(),
            std::fs::canonicalize(here.join("..")).unwrap()
        );
    }

    #[test]
    fn a_missing_folder_says_what_where_and_which_flag() {
        let e = folder(
            "the boards folder",
            "/no/such/boards".into(),
            "--boards-dir",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the boards folder not found: looked for /no/such/boards; set it with --boards-dir"
        );
    }
}
