//! `hilt bench-target`: what a model costs on a virtual board, beside what
//! TFLM costs on the same virtual Cortex-M4.
//!
//! The board figures are the ones `hilt run` measures (instructions per
//! invoke under QEMU's `-icount`, the arena the firmware committed); TFLM's
//! come from the conformance set's `tflm-cortex-m4.md`, measured the same
//! way on `mps2-an386` with its reference kernels and with CMSIS-NN. Each
//! row adds what neither run prints: multiply-accumulates per inference
//! (from the model's shapes, so instructions per MAC compare kernels across
//! models) and the firmware's flash bytes for that model (code, weights and
//! anything the build copies into flash).

use std::collections::BTreeMap;
use std::path::PathBuf;

use hilt_runtime::model::{Model, OpCode, TensorInfo};
use hilt_runtime::schema::BuiltinOperator;
use serde::Serialize;

use crate::report::thousands;

/// The file, in a conformance folder, with TFLM's Cortex-M4 figures.
pub const TFLM_FIGURES_FILE: &str = "tflm-cortex-m4.md";

/// What TFLM costs on a model, from [`TFLM_FIGURES_FILE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TflmM4 {
    /// Instructions per invoke with the reference kernels.
    pub reference: u64,
    /// Instructions per invoke with CMSIS-NN kernels.
    pub cmsis_nn: u64,
    /// `arena_used_bytes()` on a 32-bit core.
    pub arena_used: u64,
}

/// Why the figures file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TargetBenchError {
    /// A table row whose figures are not numbers.
    #[error("{file}: line {line}: {problem}")]
    BadRow {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// The firmware cannot be read.
    #[error(transparent)]
    Flash(#[from] crate::flash_parts::FlashError),
}

/// A figure as printed in the table: `43,039,880`, `22,772 (16,000 / 6,772)`.
fn leading_number(cell: &str) -> Option<u64> {
    let digits: String = cell
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Every model row of the table in `text` (`| model | reference | CMSIS-NN |
/// MACs | arena |`): the header and separator rows, and text outside the
/// table, are skipped; a model row whose figures do not read is an error
/// naming its line.
pub fn parse_tflm_figures(
    text: &str,
    file: &str,
) -> Result<BTreeMap<String, TflmM4>, TargetBenchError> {
    let mut rows = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        let model = cells[0].trim();
        if !line.trim_start().starts_with('|')
            || cells.len() < 5
            || model == "model"
            || model.starts_with("---")
        {
            continue;
        }
        let bad = |problem: String| TargetBenchError::BadRow {
            file: file.into(),
            line: i + 1,
            problem,
        };
        let figure = |column: usize, what: &str| {
            leading_number(cells[column]).ok_or_else(|| {
                bad(format!(
                    "{model}: {what} {:?} is not a number",
                    cells[column]
                ))
            })
        };
        rows.insert(
            model.to_string(),
            TflmM4 {
                reference: figure(1, "the reference kernels' count")?,
                cmsis_nn: figure(2, "the CMSIS-NN count")?,
                arena_used: figure(4, "the arena")?,
            },
        );
    }
    Ok(rows)
}

/// Reads [`TFLM_FIGURES_FILE`] from each of the conformance `sets` that has
/// one (the first set does); no file is no figures (the report then shows
/// hilt's alone).
pub fn read_tflm_figures(sets: &[PathBuf]) -> Result<BTreeMap<String, TflmM4>, TargetBenchError> {
    let mut figures = BTreeMap::new();
    for dir in sets {
        let path = dir.join(TFLM_FIGURES_FILE);
        if let Ok(text) = std::fs::read_to_string(&path) {
            figures.extend(parse_tflm_figures(&text, &path.display().to_string())?);
        }
    }
    Ok(figures)
}

/// Elements of a tensor (1 for a scalar; 0 when a dimension is unknown).
fn elements(t: &TensorInfo<'_>) -> u64 {
    t.shape().map(|d| u64::try_from(d).unwrap_or(0)).product()
}

/// Multiply-accumulates one invoke of the model performs in its CONV_2D,
/// DEPTHWISE_CONV_2D and FULLY_CONNECTED operators (the work that decides
/// speed; others count nothing): each output element costs one MAC per
/// filter tap and input channel it sums (padded taps included, as MLPerf
/// Tiny counts them).
pub fn count_macs(model: &Model<'_>) -> u64 {
    let mut macs = 0u64;
    for op in model.operators() {
        let OpCode::Builtin(code) = op.code else {
            continue;
        };
        let tensor = |i: Option<Option<u32>>| i.flatten().and_then(|i| model.tensor(i));
        let (Some(filter), Some(output)) =
            (tensor(op.inputs().nth(1)), tensor(op.outputs().next()))
        else {
            continue;
        };
        let dims: Vec<u64> = filter
            .shape()
            .map(|d| u64::try_from(d).unwrap_or(0))
            .collect();
        let per_output = match code {
            // [out_c, fh, fw, in_c]: every output sums fh·fw·in_c products.
            BuiltinOperator::CONV_2D if dims.len() == 4 => dims[1] * dims[2] * dims[3],
            // [1, fh, fw, out_c]: every output sums its channel's fh·fw taps.
            BuiltinOperator::DEPTHWISE_CONV_2D if dims.len() == 4 => dims[1] * dims[2],
            // [units, in]: every output sums `in` products.
            BuiltinOperator::FULLY_CONNECTED if dims.len() == 2 => dims[1],
            _ => 0,
        };
        macs += per_output * elements(&output);
    }
    macs
}

/// [`count_macs`] of a model file.
pub fn model_macs(model: &crate::model_file::ModelFile) -> u64 {
    count_macs(&model.model())
}

/// One (model, board) of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetRow {
    /// The model (its conformance name, or the scenario's).
    pub model: String,
    /// The board.
    pub board: String,
    /// hilt's instructions per invoke (the median over the run's steps).
    pub instructions: u64,
    /// Multiply-accumulates per invoke (0: none counted).
    pub macs: u64,
    /// Arena bytes the firmware used (head + tail).
    pub arena_used: u64,
    /// Flash bytes of the firmware built for this model.
    pub flash: u64,
    /// TFLM's figures on the Cortex-M4, when the set has them.
    pub tflm: Option<TflmM4>,
    /// Instructions per counter tick on the board, when its core is the
    /// Cortex-M4 TFLM's figures were measured on (40 on the AN386 at
    /// 25 MHz under `-icount shift=0`); `None` on other cores, where the
    /// M4's figures are shown but not judged.
    pub m4_tick: Option<u64>,
    /// The estimate on the MLPerf Tiny reference part beside its record
    /// (MLPerf Tiny models on the reference board only).
    pub part: Option<crate::part_estimate::PartFigure>,
    /// The firmware with only the model's kernels (rows of the reference
    /// board only).
    pub own_kernels: Option<crate::flash_parts::OwnKernels>,
}

/// Within this many counter ticks of TFLM + CMSIS-NN a model is at
/// parity: a figure read through SysTick moves in whole ticks, so a
/// difference of one or two is not a win or a loss.
pub const PARITY_TICKS: u64 = 2;

/// Where hilt stands against TFLM + CMSIS-NN on the M4, in instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Fewer instructions by more than [`PARITY_TICKS`] ticks.
    Below,
    /// Within [`PARITY_TICKS`] ticks either way.
    Parity,
    /// More instructions by more than [`PARITY_TICKS`] ticks: a regression
    /// `hilt bench-target` fails on.
    Above,
}

impl Standing {
    /// How the tables print it.
    pub fn word(self) -> &'static str {
        match self {
            Standing::Below => "below",
            Standing::Parity => "parity",
            Standing::Above => "ABOVE",
        }
    }
}

impl TargetRow {
    /// hilt's instructions over TFLM + CMSIS-NN's (below 1: fewer).
    pub fn ratio_cmsis(&self) -> Option<f64> {
        self.tflm
            .map(|t| self.instructions as f64 / t.cmsis_nn.max(1) as f64)
    }

    /// Instructions per multiply-accumulate.
    pub fn per_mac(&self) -> Option<f64> {
        (self.macs > 0).then(|| self.instructions as f64 / self.macs as f64)
    }

    /// Where this row stands against TFLM + CMSIS-NN: judged only on the
    /// M4 and where the set has TFLM's figure.
    pub fn standing(&self) -> Option<Standing> {
        let (tflm, tick) = (self.tflm?, self.m4_tick?);
        let margin = PARITY_TICKS * tick;
        Some(if self.instructions + margin < tflm.cmsis_nn {
            Standing::Below
        } else if self.instructions > tflm.cmsis_nn + margin {
            Standing::Above
        } else {
            Standing::Parity
        })
    }
}

/// A row with its standing, as `--format json` prints it.
#[derive(Debug, Serialize)]
pub struct JudgedRow<'r> {
    /// The row's figures.
    #[serde(flatten)]
    pub row: &'r TargetRow,
    /// [`TargetRow::standing`] (`null`: not judged).
    pub standing: Option<Standing>,
}

/// Every row with its standing.
pub fn judged(rows: &[TargetRow]) -> Vec<JudgedRow<'_>> {
    rows.iter()
        .map(|row| JudgedRow {
            row,
            standing: row.standing(),
        })
        .collect()
}

/// The rows that need more instructions than TFLM + CMSIS-NN on the M4
/// (by more than [`PARITY_TICKS`] ticks), as lines for the error.
pub fn above_cmsis(rows: &[TargetRow]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.standing() == Some(Standing::Above))
        .filter_map(|r| {
            let t = r.tflm?;
            Some(format!(
                "{} on {}: {} instructions, TFLM + CMSIS-NN {} (+{})",
                r.model,
                r.board,
                thousands(r.instructions),
                thousands(t.cmsis_nn),
                thousands(r.instructions - t.cmsis_nn)
            ))
        })
        .collect()
}

/// The median of `figures` (the lower middle one of an even count).
pub fn median(figures: &mut [u64]) -> u64 {
    figures.sort_unstable();
    figures
        .get(figures.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(0)
}

/// The report as a Markdown table (the README's), rows in the order given.
/// TFLM's columns are its Cortex-M4 figures on every board: the one
/// measured core to compare against.
pub fn render_markdown(rows: &[TargetRow]) -> String {
    let mut s = String::from(
        "| model | board | hilt instructions | TFLM reference (M4, external) | TFLM + CMSIS-NN (M4, external) | hilt ÷ CMSIS-NN | vs CMSIS-NN | instructions / MAC | arena hilt / TFLM | flash |\n\
         |---|---|---:|---:|---:|---:|:---:|---:|---:|---:|\n",
    );
    let dash = || "–".to_string();
    for r in rows {
        let (reference, cmsis, tflm_arena) = match r.tflm {
            Some(t) => (
                thousands(t.reference),
                thousands(t.cmsis_nn),
                thousands(t.arena_used),
            ),
            None => (dash(), dash(), dash()),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {reference} | {cmsis} | {} | {} | {} | {} / {tflm_arena} | {} |\n",
            r.model,
            r.board,
            thousands(r.instructions),
            r.ratio_cmsis().map_or_else(dash, |x| format!("{x:.2}")),
            r.standing().map_or_else(dash, |v| v.word().to_string()),
            r.per_mac().map_or_else(dash, |x| format!("{x:.2}")),
            thousands(r.arena_used),
            thousands(r.flash),
        ));
    }
    s
}

/// The report as a plain table for a terminal.
pub fn render_table(rows: &[TargetRow]) -> String {
    let mut s = format!(
        "{:<34} {:<17} {:>12} {:>12} {:>12} {:>8} {:>7} {:>7} {:>8} {:>8} {:>9}\n",
        "model",
        "board",
        "hilt",
        "TFLM ref",
        "CMSIS-NN",
        "÷CMSIS",
        "vs",
        "/MAC",
        "arena",
        "TFLM",
        "flash"
    );
    let dash = || "-".to_string();
    for r in rows {
        let t = r.tflm;
        s.push_str(&format!(
            "{:<34} {:<17} {:>12} {:>12} {:>12} {:>8} {:>7} {:>7} {:>8} {:>8} {:>9}\n",
            r.model,
            r.board,
            thousands(r.instructions),
            t.map_or_else(dash, |t| thousands(t.reference)),
            t.map_or_else(dash, |t| thousands(t.cmsis_nn)),
            r.ratio_cmsis().map_or_else(dash, |x| format!("{x:.2}")),
            r.standing().map_or_else(dash, |v| v.word().to_string()),
            r.per_mac().map_or_else(dash, |x| format!("{x:.2}")),
            thousands(r.arena_used),
            t.map_or_else(dash, |t| thousands(t.arena_used)),
            thousands(r.flash),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_figures_table_and_names_a_bad_row() {
        let text = "intro\n\n| model | reference kernels | CMSIS-NN kernels | MACs | arena |\n\
                    |---|---|---|---|---|\n\
                    | kws | 43,039,880 | 7,697,920 | 2.67 M | 22,772 (16,000 / 6,772) |\n\
                    | hello | 5,240 | 3,520 | | 676 (32 / 644) |\n\nafter | x |\n";
        let rows = parse_tflm_figures(text, "f.md").unwrap();
        assert_eq!(
            rows["kws"],
            TflmM4 {
                reference: 43_039_880,
                cmsis_nn: 7_697_920,
                arena_used: 22_772
            }
        );
        assert_eq!(rows["hello"].cmsis_nn, 3_520);
        assert_eq!(rows.len(), 2);
        let bad = "| m | n/a | 1 | | 2 |\n";
        let e = parse_tflm_figures(bad, "f.md").unwrap_err().to_string();
        assert_eq!(
            e,
            "f.md: line 1: m: the reference kernels' count \" n/a \" is not a number"
        );
    }

    #[test]
    fn renders_ratios_and_dashes() {
        let row = TargetRow {
            model: "kws".into(),
            board: "qemu-mps2-an386".into(),
            instructions: 3_849_000,
            macs: 2_660_000,
            arena_used: 22_448,
            flash: 123_456,
            tflm: Some(TflmM4 {
                reference: 43_039_880,
                cmsis_nn: 7_697_920,
                arena_used: 22_772,
            }),
            m4_tick: Some(40),
            part: None,
            own_kernels: None,
        };
        let md = render_markdown(&[
            row.clone(),
            TargetRow {
                tflm: None,
                macs: 0,
                ..row
            },
        ]);
        assert!(
            md.contains("| kws | qemu-mps2-an386 | 3,849,000 | 43,039,880 | 7,697,920 | 0.50 | below | 1.45 | 22,448 / 22,772 | 123,456 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| kws | qemu-mps2-an386 | 3,849,000 | – | – | – | – | – | 22,448 / – | 123,456 |"
            ),
            "{md}"
        );
        assert_eq!(median(&mut [5, 1, 3]), 3);
        assert_eq!(median(&mut [4, 1]), 1);
        assert_eq!(median(&mut []), 0);
    }

    #[test]
    fn judges_against_cmsis_nn_in_ticks_and_only_on_the_m4() {
        let tflm = TflmM4 {
            reference: 10_000,
            cmsis_nn: 3_520,
            arena_used: 0,
        };
        let row = |instructions, m4_tick| TargetRow {
            model: "m".into(),
            board: "b".into(),
            instructions,
            macs: 0,
            arena_used: 0,
            flash: 0,
            tflm: Some(tflm),
            m4_tick,
            part: None,
            own_kernels: None,
        };
        // hello_world's 3,480 against 3,520 is one tick of 40: parity.
        assert_eq!(row(3_480, Some(40)).standing(), Some(Standing::Parity));
        assert_eq!(row(3_440, Some(40)).standing(), Some(Standing::Parity));
        assert_eq!(row(3_439, Some(40)).standing(), Some(Standing::Below));
        assert_eq!(row(3_600, Some(40)).standing(), Some(Standing::Parity));
        assert_eq!(row(3_601, Some(40)).standing(), Some(Standing::Above));
        // Not the M4, or no TFLM figure: not judged.
        assert_eq!(row(9_999, None).standing(), None);
        assert_eq!(
            TargetRow {
                tflm: None,
                ..row(9_999, Some(40))
            }
            .standing(),
            None
        );
        assert_eq!(
            above_cmsis(&[row(3_480, Some(40)), row(3_641, Some(40)), row(9_999, None)]),
            ["m on b: 3,641 instructions, TFLM + CMSIS-NN 3,520 (+121)"]
        );
    }
}
