//! `hilt history`: per (scenario, board), the last runs the store holds,
//! oldest first, each with the op whose figure moved the most since the
//! run before it, so that a user sees which op moved, when, and at which
//! commit.

use std::fmt::Write as _;

use serde::Serialize;

use super::db::Value;
use super::{Store, StoreError};
use crate::config::board::glob_match;
pub use crate::report::thousands;

/// Which runs to show.
#[derive(Debug, Clone)]
pub struct HistoryQuery {
    /// Scenario name or glob.
    pub scenario: String,
    /// Board name or glob.
    pub board: String,
    /// Runs started on or after this date (`YYYY-MM-DD`, UTC) only.
    pub since: Option<String>,
    /// At most this many runs per (scenario, board), the latest.
    pub last: usize,
}

/// One op's figures in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpFigure {
    /// Index in the model.
    pub op: u64,
    /// Builtin name.
    pub name: String,
    /// The board's cycle counter (SysTick or DWT).
    pub cycles: Option<u64>,
    /// Exact instructions (virtual boards).
    pub instructions: Option<u64>,
    /// Estimated cycles (virtual boards).
    pub estimated_cycles: Option<u64>,
}

impl OpFigure {
    /// The figure compared across runs: instructions where counted (exact),
    /// else the board's cycles.
    pub fn figure(&self) -> Option<u64> {
        self.instructions.or(self.cycles)
    }
}

/// The op that moved the most between two runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moved {
    /// Index.
    pub op: u64,
    /// Builtin name.
    pub name: String,
    /// Its figure in the run before.
    pub before: u64,
    /// Its figure in this run.
    pub after: u64,
    /// `instructions` or `cycles`.
    pub unit: &'static str,
}

impl Moved {
    /// `op 2 CONV_2D: 1,000 → 1,040 instructions (+4.0%)`.
    pub fn describe(&self) -> String {
        let change = self.after as f64 - self.before as f64;
        let percent = if self.before == 0 {
            String::new()
        } else {
            format!(" ({:+.1}%)", 100.0 * change / self.before as f64)
        };
        format!(
            "op {} {}: {} → {} {}{percent}",
            self.op,
            self.name,
            thousands(self.before),
            thousands(self.after),
            self.unit
        )
    }
}

/// One run of a (scenario, board).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEntry {
    /// When its invocation started (UTC).
    pub started_at: String,
    /// The commit it ran.
    pub commit: String,
    /// `hilt gate`, `hilt run`, `hilt bench-target`.
    pub command: String,
    /// The host.
    pub host: String,
    /// `passed`, `mismatch`, `offline` or `error`.
    pub outcome: String,
    /// What failed, if it did.
    pub message: String,
    /// Runs it took (more than 1 under `--retries`).
    pub attempts: u64,
    /// The failure a retry passed over, if any.
    pub flaky: Option<String>,
    /// The first step's cycles (board counter).
    pub cycles: Option<u64>,
    /// The first step's instructions (virtual boards).
    pub instructions: Option<u64>,
    /// The first step's estimated cycles (virtual boards).
    pub estimated_cycles: Option<u64>,
    /// Arena bytes used, of the capacity.
    pub arena_used: Option<u64>,
    /// Arena capacity.
    pub arena_capacity: Option<u64>,
    /// Deepest stack, bytes.
    pub stack_high_water: Option<u64>,
    /// Per op.
    pub ops: Vec<OpFigure>,
    /// The op that moved most since the entry before (none for the first,
    /// or when no op's figure changed).
    pub moved: Option<Moved>,
}

impl HistoryEntry {
    /// The run's latency figure: instructions where counted, else cycles.
    pub fn figure(&self) -> Option<u64> {
        self.instructions.or(self.cycles)
    }

    /// `PASS`, `FLAKY`, `MISMATCH`, `OFFLINE` (the board never
    /// answered), `ERROR`.
    pub fn verdict(&self) -> &'static str {
        match (self.outcome.as_str(), &self.flaky) {
            ("passed", Some(_)) => "FLAKY",
            ("passed", None) => "PASS",
            ("mismatch", _) => "MISMATCH",
            ("offline", _) => "OFFLINE",
            _ => "ERROR",
        }
    }
}

/// The runs of one (scenario, board), oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairHistory {
    /// Scenario.
    pub scenario: String,
    /// Board.
    pub board: String,
    /// Runs, oldest first.
    pub runs: Vec<HistoryEntry>,
    /// Runs that passed only on a retry, of all shown.
    pub flaky_runs: usize,
}

/// Every (scenario, board) matching `query`, sorted by name.
pub fn history(store: &mut Store, query: &HistoryQuery) -> Result<Vec<PairHistory>, StoreError> {
    let since = query.since.clone().unwrap_or_default();
    let rows = store.db().query(
        "SELECT r.id, r.scenario, r.board, i.started_at, i.commit_id, i.command, i.host, \
         r.outcome, r.message, r.attempts, r.flaky, r.cycles, r.instructions, \
         r.estimated_cycles, r.arena_used, r.arena_capacity, r.stack_high_water \
         FROM board_runs r JOIN invocations i ON i.id = r.invocation_id \
         WHERE i.started_at >= $1 ORDER BY i.started_at DESC, r.id DESC",
        &[since.into()],
    )?;
    let mut pairs: Vec<(PairHistory, Vec<i64>)> = Vec::new();
    for row in rows {
        let (scenario, board) = (row[1].text(), row[2].text());
        if !glob_match(&query.scenario, scenario) || !glob_match(&query.board, board) {
            continue;
        }
        let at = match pairs
            .iter()
            .position(|(p, _)| p.scenario == scenario && p.board == board)
        {
            Some(at) => at,
            None => {
                pairs.push((
                    PairHistory {
                        scenario: scenario.to_string(),
                        board: board.to_string(),
                        runs: Vec::new(),
                        flaky_runs: 0,
                    },
                    Vec::new(),
                ));
                pairs.len() - 1
            }
        };
        let (pair, ids) = &mut pairs[at];
        if pair.runs.len() >= query.last {
            continue;
        }
        let number = |k: usize| row[k].int().map(|v| v.max(0) as u64);
        pair.runs.push(HistoryEntry {
            started_at: row[3].text().to_string(),
            commit: row[4].text().to_string(),
            command: row[5].text().to_string(),
            host: row[6].text().to_string(),
            outcome: row[7].text().to_string(),
            message: row[8].text().to_string(),
            attempts: number(9).unwrap_or(1),
            flaky: (row[10] != Value::Null).then(|| row[10].text().to_string()),
            cycles: number(11),
            instructions: number(12),
            estimated_cycles: number(13),
            arena_used: number(14),
            arena_capacity: number(15),
            stack_high_water: number(16),
            ops: Vec::new(),
            moved: None,
        });
        ids.push(row[0].int().unwrap_or_default());
    }
    let mut out = Vec::with_capacity(pairs.len());
    for (mut pair, ids) in pairs {
        for (entry, id) in pair.runs.iter_mut().zip(ids) {
            entry.ops = ops_of(store, id)?;
        }
        pair.runs.reverse();
        for k in 1..pair.runs.len() {
            let moved = most_moved(&pair.runs[k - 1].ops, &pair.runs[k].ops);
            pair.runs[k].moved = moved;
        }
        pair.flaky_runs = pair.runs.iter().filter(|r| r.flaky.is_some()).count();
        out.push(pair);
    }
    out.sort_by(|a, b| (&a.scenario, &a.board).cmp(&(&b.scenario, &b.board)));
    Ok(out)
}

fn ops_of(store: &mut Store, run: i64) -> Result<Vec<OpFigure>, StoreError> {
    let rows = store.db().query(
        "SELECT op, name, cycles, instructions, estimated_cycles FROM op_figures \
         WHERE board_run_id = $1 ORDER BY op",
        &[run.into()],
    )?;
    Ok(rows
        .iter()
        .map(|r| {
            let number = |k: usize| r[k].int().map(|v| v.max(0) as u64);
            OpFigure {
                op: number(0).unwrap_or_default(),
                name: r[1].text().to_string(),
                cycles: number(2),
                instructions: number(3),
                estimated_cycles: number(4),
            }
        })
        .collect())
}

/// The op whose figure changed most (in absolute terms) from `before` to
/// `after`, when the two runs have the same ops.
pub fn most_moved(before: &[OpFigure], after: &[OpFigure]) -> Option<Moved> {
    if before.len() != after.len() {
        return None;
    }
    before
        .iter()
        .zip(after)
        .filter_map(|(b, a)| {
            let unit = if a.instructions.is_some() {
                "instructions"
            } else {
                "cycles"
            };
            let (x, y) = (b.figure()?, a.figure()?);
            (x != y).then(|| Moved {
                op: a.op,
                name: a.name.clone(),
                before: x,
                after: y,
                unit,
            })
        })
        .max_by_key(|m| m.after.abs_diff(m.before))
}

/// The history as text: a table per (scenario, board).
pub fn table(pairs: &[PairHistory]) -> String {
    let mut s = String::new();
    let figure = |v: Option<u64>| v.map_or_else(|| "-".to_string(), thousands);
    for pair in pairs {
        let flaky = if pair.flaky_runs > 0 {
            format!(", {} flaky of {}", pair.flaky_runs, pair.runs.len())
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "{} @ {} ({} runs{flaky})",
            pair.scenario,
            pair.board,
            pair.runs.len()
        );
        let _ = writeln!(
            s,
            "  {:<20}  {:<18}  {:<8}  {:>13}  {:>13}  {:>10}  moved since the run before",
            "started (UTC)", "commit", "outcome", "instructions", "cycles", "arena used"
        );
        for r in &pair.runs {
            let moved = r
                .moved
                .as_ref()
                .map_or_else(|| "-".to_string(), Moved::describe);
            let _ = writeln!(
                s,
                "  {:<20}  {:<18}  {:<8}  {:>13}  {:>13}  {:>10}  {moved}",
                r.started_at,
                r.commit,
                r.verdict(),
                figure(r.instructions),
                figure(r.cycles),
                figure(r.arena_used),
            );
        }
    }
    if pairs.is_empty() {
        s.push_str("no runs recorded that match\n");
    }
    s
}
