//! Drift on noisy boards: a real board's figures move a little every night
//! (caches, interrupts, clock trims), so one accepted snapshot and a fixed
//! tolerance either cry wolf or miss a slow drift. For a board whose
//! `latency_tolerance_percent` is above 0, the gate judges a run's cycles
//! against the results store instead: the median of the last
//! [`NIGHTS`] passed runs of its (scenario, board), with a band of three
//! robust standard deviations (1.4826 × the median absolute deviation), at
//! least the board's tolerance. A run outside the band fails, naming the
//! first night and commit of the step (the oldest of the latest runs that
//! lie beyond the band on the same side). Until [`MIN_NIGHTS`] runs are
//! recorded, the snapshot and its tolerance judge as before. Virtual
//! boards (tolerance 0) keep exact snapshots.

use std::path::Path;

use super::Store;
use super::history::{HistoryEntry, HistoryQuery, history, thousands};
use crate::gate::{self, ModelNames, Tolerance, Verdict};
use crate::outcome::{BoardRun, Outcome};

/// Nights the baseline looks back over.
pub const NIGHTS: usize = 10;
/// Nights recorded before the store, not the snapshot, judges.
pub const MIN_NIGHTS: usize = 5;

/// The band a run's cycles should fall in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline {
    /// Median of the nights' cycles.
    pub median: f64,
    /// Half-width of the band.
    pub spread: f64,
    /// Nights it was made from.
    pub nights: usize,
}

impl Baseline {
    /// The band over `cycles` (at least [`MIN_NIGHTS`] of them), at least
    /// `tolerance_percent` of the median wide.
    pub fn of(cycles: &[u64], tolerance_percent: f64) -> Option<Baseline> {
        if cycles.len() < MIN_NIGHTS {
            return None;
        }
        let median = median(cycles.iter().map(|&c| c as f64).collect());
        let deviation = median_of_deviations(cycles, median);
        let spread = (3.0 * 1.4826 * deviation).max(median * tolerance_percent / 100.0);
        Some(Baseline {
            median,
            spread,
            nights: cycles.len(),
        })
    }

    /// Whether `value` is beyond the band: -1 below, 1 above, 0 inside.
    pub fn side(&self, value: u64) -> i8 {
        let v = value as f64;
        if v > self.median + self.spread {
            1
        } else if v < self.median - self.spread {
            -1
        } else {
            0
        }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn median_of_deviations(cycles: &[u64], median_value: f64) -> f64 {
    median(
        cycles
            .iter()
            .map(|&c| (c as f64 - median_value).abs())
            .collect(),
    )
}

/// What the store says of a run's cycles.
#[derive(Debug, Clone, PartialEq)]
pub enum Drift {
    /// Fewer than [`MIN_NIGHTS`] passed runs recorded: the snapshot judges.
    TooFew(usize),
    /// Inside the band.
    Within(Baseline),
    /// Outside it: why, in words.
    Moved(String),
}

/// Judges `cycles` (this run's, at `commit`) against `past`, the pair's
/// recorded runs oldest first; `tolerance_percent` is the board's.
pub fn judge(past: &[HistoryEntry], cycles: u64, commit: &str, tolerance_percent: f64) -> Drift {
    let nights: Vec<&HistoryEntry> = past
        .iter()
        .filter(|r| r.outcome == "passed" && r.cycles.is_some())
        .collect();
    let nights = &nights[nights.len().saturating_sub(NIGHTS)..];
    let figures: Vec<u64> = nights.iter().filter_map(|r| r.cycles).collect();
    let Some(baseline) = Baseline::of(&figures, tolerance_percent) else {
        return Drift::TooFew(figures.len());
    };
    let side = baseline.side(cycles);
    if side == 0 {
        return Drift::Within(baseline);
    }
    // The step: the oldest of the latest nights already beyond the band on
    // this side (this run, when none is).
    let first = nights
        .iter()
        .rev()
        .take_while(|r| r.cycles.is_some_and(|c| baseline.side(c) == side))
        .last();
    let since = first.map_or_else(
        || format!("this run (commit {commit}) is the first"),
        |r| format!("since {} (commit {})", r.started_at, r.commit),
    );
    Drift::Moved(format!(
        "cycles: {} against a median of {} ± {} over the last {} nights ({:+.1}%, {}); {since}",
        thousands(cycles),
        thousands(baseline.median.round() as u64),
        thousands(baseline.spread.round() as u64),
        baseline.nights,
        100.0 * (cycles as f64 - baseline.median) / baseline.median,
        if side > 0 { "slower" } else { "faster" }
    ))
}

/// [`crate::gate::gate_run`] for a run on a noisy board (`latency_tolerance_percent`
/// above 0) with a results store: the layout against the snapshot as
/// always, the cycles against the store's last nights
/// ([`crate::results::drift`]) once enough are recorded, else against the
/// snapshot with the board's tolerance. `commit` is this run's.
pub fn gate_run(
    dir: &Path,
    run: &BoardRun,
    names: &ModelNames,
    tolerance: Tolerance,
    store: &mut Store,
    commit: &str,
) -> std::io::Result<Verdict> {
    let cycles = run.steps.first().map(|s| s.total_cycles);
    let query = HistoryQuery {
        scenario: run.scenario.clone(),
        board: run.board.clone(),
        since: None,
        last: NIGHTS,
    };
    let past = history(store, &query)
        .ok()
        .and_then(|pairs| pairs.into_iter().next())
        .map(|pair| pair.runs)
        .unwrap_or_default();
    let drift = match cycles {
        Some(c) if run.outcome == Outcome::Passed => judge(&past, c, commit, tolerance.percent),
        _ => Drift::TooFew(0),
    };
    // Cycles are the store's to judge: the snapshot's latency lines are not.
    let layout_only = Tolerance {
        percent: f64::INFINITY,
        cycles: tolerance.cycles,
    };
    Ok(match drift {
        Drift::TooFew(_) => gate::gate_run(dir, run, names, tolerance)?,
        Drift::Within(_) => gate::gate_run(dir, run, names, layout_only)?,
        Drift::Moved(why) => match gate::gate_run(dir, run, names, layout_only)? {
            Verdict::Unchanged | Verdict::Faster(_) => Verdict::Drifted(why),
            Verdict::Changed(mut diffs) => {
                diffs.push(format!("drift: {why}"));
                Verdict::Changed(diffs)
            }
            other => other,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn night(date: &str, commit: &str, cycles: u64) -> HistoryEntry {
        HistoryEntry {
            started_at: date.into(),
            commit: commit.into(),
            command: "hilt gate".into(),
            host: "farm".into(),
            outcome: "passed".into(),
            message: String::new(),
            attempts: 1,
            flaky: None,
            cycles: Some(cycles),
            instructions: None,
            estimated_cycles: None,
            arena_used: None,
            arena_capacity: None,
            stack_high_water: None,
            ops: Vec::new(),
            moved: None,
        }
    }

    #[test]
    fn noise_passes_and_a_step_names_its_first_night() {
        let mut past: Vec<HistoryEntry> = [1000, 1010, 995, 1005, 990, 1002]
            .iter()
            .enumerate()
            .map(|(k, &c)| night(&format!("2026-11-0{}", k + 1), &format!("c{k}"), c))
            .collect();
        assert!(matches!(judge(&past, 1012, "now", 0.0), Drift::Within(_)));
        let Drift::Moved(why) = judge(&past, 1100, "now", 0.0) else {
            panic!()
        };
        assert!(why.ends_with("this run (commit now) is the first"), "{why}");
        // Two nights already up: the step started at the first of them.
        past.push(night("2026-11-07", "c6", 1101));
        past.push(night("2026-11-08", "c7", 1099));
        let Drift::Moved(why) = judge(&past, 1100, "now", 0.0) else {
            panic!()
        };
        assert!(why.contains("since 2026-11-07 (commit c6)"), "{why}");
        assert!(why.contains("slower"), "{why}");
        // The board's tolerance widens the band.
        assert!(matches!(judge(&past, 1100, "now", 15.0), Drift::Within(_)));
        assert_eq!(judge(&past[..3], 1100, "now", 0.0), Drift::TooFew(3));
    }
}
