//! The results store: every board run of `hilt run`, `hilt gate` and
//! `hilt bench-target` recorded with where and when it ran (commit, date,
//! host, board, probe), its outcome and retries, its figures in all and per
//! op, and its arena, so that a later night can say what moved and since
//! when (`hilt history`).
//!
//! A store is a SQLite file (embedded, the default `build/results.sqlite`)
//! or, for a farm of several hosts, one PostgreSQL database
//! (`postgres://…`): one schema ([`schema`], migrations versioned) and one
//! code path ([`db`]). A store that cannot be opened, or whose schema is
//! newer than this hilt, is one error naming it; the commands write their
//! own reports first, so nothing of the run is lost.

pub mod db;
pub mod drift;
pub mod history;
pub mod html;
pub mod schema;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::outcome::{BoardRun, Outcome};
use db::{Db, Value};

/// Why the store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file or server could not be opened or reached.
    #[error("cannot open it: {0}")]
    Open(String),
    /// A statement failed.
    #[error("{0}")]
    Query(String),
    /// The store was written by a newer hilt.
    #[error(
        "{store} has schema version {found}; this hilt knows up to {known}: use a newer hilt or another store"
    )]
    Newer {
        /// The store.
        store: String,
        /// Its version.
        found: i64,
        /// The newest this hilt knows.
        known: i64,
    },
}

/// Where results go: `--results`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreTarget {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL server.
    Postgres(String),
    /// Nowhere (`--results none`).
    Off,
}

impl StoreTarget {
    /// `postgres://…` or `postgresql://…`, `none`, else a SQLite file path.
    pub fn parse(text: &str) -> StoreTarget {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            StoreTarget::Postgres(text.to_string())
        } else if text == "none" {
            StoreTarget::Off
        } else {
            StoreTarget::Sqlite(PathBuf::from(text))
        }
    }

    /// `--results` if given, else `HILT_RESULTS`, else the repository's
    /// `build/results.sqlite`.
    pub fn choose(given: Option<&str>, repo: &Path) -> StoreTarget {
        match given
            .map(str::to_string)
            .or_else(|| std::env::var("HILT_RESULTS").ok())
        {
            Some(text) if !text.is_empty() => StoreTarget::parse(&text),
            _ => StoreTarget::Sqlite(repo.join("build/results.sqlite")),
        }
    }

    /// How messages name it: the file, or the URL without its password.
    pub fn name(&self) -> String {
        match self {
            StoreTarget::Sqlite(path) => path.display().to_string(),
            StoreTarget::Postgres(url) => without_password(url),
            StoreTarget::Off => "none".to_string(),
        }
    }
}

/// `postgres://user:secret@host/db` as `postgres://user:***@host/db`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{name}:***@{host}")
        }
        _ => url.to_string(),
    }
}

/// An open store, at the current schema.
#[derive(Debug)]
pub struct Store {
    db: Db,
    name: String,
}

/// One invocation of hilt: what ran, when, where, on which commit.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// `hilt gate`, `hilt run`, `hilt bench-target`.
    pub command: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ` (sorts as text).
    pub started_at: String,
    /// The repository's commit (`HILT_COMMIT` overrides; `+dirty` when
    /// the work tree differs from it).
    pub commit: String,
    /// The host's name.
    pub host: String,
}

impl Invocation {
    /// `command`, now, on this host, at `repo`'s commit.
    pub fn now(command: &str, repo: &Path) -> Invocation {
        Invocation {
            command: command.to_string(),
            started_at: utc_timestamp(std::time::SystemTime::now()),
            commit: commit_of(repo),
            host: host_name(),
        }
    }
}

/// One board run to record, with what the store keeps of its board.
#[derive(Debug, Clone, Copy)]
pub struct Recorded<'a> {
    /// The run.
    pub run: &'a BoardRun,
    /// Its wall time.
    pub wall: Duration,
    /// `qemu`, `probe-rs` or `uart`.
    pub runner: &'a str,
    /// The probe selector, for a probe-rs board that names one.
    pub probe: Option<&'a str>,
    /// The model's op names, by index.
    pub op_names: &'a [String],
}

impl Store {
    /// Opens `target` and brings its schema up to date.
    pub fn open(target: &StoreTarget) -> Result<Store, StoreError> {
        let mut db = match target {
            StoreTarget::Sqlite(path) => Db::sqlite(path)?,
            StoreTarget::Postgres(url) => Db::postgres(url)?,
            StoreTarget::Off => return Err(StoreError::Open("no store (`none`)".into())),
        };
        let name = target.name();
        schema::migrate(&mut db, &name)?;
        Ok(Store { db, name })
    }

    /// How messages name the store.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Records `runs` of one invocation, all or none; the invocation's id.
    pub fn record(
        &mut self,
        invocation: &Invocation,
        runs: &[Recorded<'_>],
    ) -> Result<i64, StoreError> {
        self.db.transaction(|db| {
            let id = returned_id(db.query(
                "INSERT INTO invocations (command, started_at, commit_id, host, hilt_version) \
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
                &[
                    invocation.command.as_str().into(),
                    invocation.started_at.as_str().into(),
                    invocation.commit.as_str().into(),
                    invocation.host.as_str().into(),
                    env!("CARGO_PKG_VERSION").into(),
                ],
            )?)?;
            for r in runs {
                insert_run(db, id, r)?;
            }
            Ok(id)
        })
    }

    /// The database, for [`history`]'s queries.
    pub(crate) fn db(&mut self) -> &mut Db {
        &mut self.db
    }
}

fn returned_id(rows: Vec<Vec<Value>>) -> Result<i64, StoreError> {
    rows.first()
        .and_then(|r| r.first())
        .and_then(Value::int)
        .ok_or_else(|| StoreError::Query("an insert returned no id".into()))
}

fn insert_run(db: &mut Db, invocation: i64, r: &Recorded<'_>) -> Result<(), StoreError> {
    let run = r.run;
    let (outcome, message) = match &run.outcome {
        Outcome::Passed => ("passed", String::new()),
        Outcome::Mismatch(m) => ("mismatch", m.clone()),
        Outcome::Error(m) if run.offline => ("offline", m.clone()),
        Outcome::Error(m) => ("error", m.clone()),
    };
    let first = run.steps.first();
    let arena = |k: usize| run.arena.map(|a| u64::from(a[k]));
    let id = returned_id(db.query(
        "INSERT INTO board_runs (invocation_id, scenario, board, runner, probe, outcome, \
         message, attempts, flaky, cycles, instructions, estimated_cycles, arena_capacity, \
         arena_head, arena_tail, arena_used, stack_high_water, wall_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) \
         RETURNING id",
        &[
            invocation.into(),
            run.scenario.as_str().into(),
            run.board.as_str().into(),
            r.runner.into(),
            r.probe.into(),
            outcome.into(),
            message.into(),
            u64::from(run.attempts).into(),
            run.flaky.clone().into(),
            first.map(|s| s.total_cycles).into(),
            run.instructions.into(),
            run.estimated_cycles.into(),
            arena(0).into(),
            arena(1).into(),
            arena(2).into(),
            arena(3).into(),
            run.stack_high_water.into(),
            (r.wall.as_millis() as u64).into(),
        ],
    )?)?;
    let Some(step) = first else {
        return Ok(());
    };
    let observed = step.observed.as_ref().map_or(&[][..], |o| &o.ops[..]);
    for op in 0..step.op_cycles.len().max(observed.len()) {
        let counted = observed.get(op);
        db.query(
            "INSERT INTO op_figures (board_run_id, op, name, cycles, instructions, \
             estimated_cycles) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                id.into(),
                (op as u64).into(),
                r.op_names.get(op).cloned().unwrap_or_default().into(),
                step.op_cycles.get(op).map(|&c| u64::from(c)).into(),
                counted.map(|c| c.instructions).into(),
                counted.map(|c| c.estimated_cycles).into(),
            ],
        )?;
    }
    Ok(())
}

/// `time` as `YYYY-MM-DDTHH:MM:SSZ`, UTC (sorts as text).
pub fn utc_timestamp(time: std::time::SystemTime) -> String {
    format!("{}Z", crate::report::utc_timestamp(time))
}

/// `HILT_COMMIT`, else git's short hash of `repo`'s HEAD (with `+dirty`
/// when tracked files differ from it), else `unknown`.
fn commit_of(repo: &Path) -> String {
    if let Ok(c) = std::env::var("HILT_COMMIT")
        && !c.is_empty()
    {
        return c;
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
    };
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]).filter(|o| o.status.success())
    else {
        return "unknown".to_string();
    };
    let mut commit = String::from_utf8_lossy(&head.stdout).trim().to_string();
    if git(&["diff", "--quiet", "HEAD"]).is_some_and(|o| o.status.code() == Some(1)) {
        commit.push_str("+dirty");
    }
    commit
}

/// The host's name, or `unknown`.
fn host_name() -> String {
    crate::report::hostname().unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_civil_dates() {
        let at = |secs| utc_timestamp(std::time::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_796_589_296), "2026-12-06T20:34:56Z");
    }

    #[test]
    fn targets_parse_and_hide_passwords() {
        assert_eq!(
            StoreTarget::parse("postgres://u:pw@h/db").name(),
            "postgres://u:***@h/db"
        );
        assert_eq!(StoreTarget::parse("none"), StoreTarget::Off);
        assert_eq!(
            StoreTarget::parse("r.sqlite"),
            StoreTarget::Sqlite("r.sqlite".into())
        );
    }
}
