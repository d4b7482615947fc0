//! hilt's estimated cycles on the parts of MLPerf Tiny's records (the
//! Cortex-M4 reference part and a Cortex-M33), beside the parts' published
//! records: `hilt bench-target`'s second table.
//!
//! The records are external figures. The conformance set's
//! `mlperf-tiny-records.md` gathers them from the closed-division results
//! of MLPerf Tiny v1.1–v1.3: cycles per inference on real silicon. hilt's
//! figure beside them is an estimate: the QEMU plugin's timing model of
//! the part (`boards/timing/stm32l4r5.toml`: a Cortex-M4 at 120 MHz with
//! five flash wait states behind the ART cache; `stm32u575.toml`: a
//! Cortex-M33 at 160 MHz with four behind its instruction cache), applied
//! to the instructions the virtual board of that core executed. The table puts
//! both side by side and never mixes them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The conformance set's file of published records.
pub const RECORDS_FILE: &str = "mlperf-tiny-records.md";

/// The parts of the MLPerf Tiny records hilt estimates for, each with the
/// virtual board whose core it has (the board runs the model, the part's
/// timing profile in the QEMU plugin costs it): the Cortex-M4 reference
/// part (STM32L4R5) on the AN386, and the Cortex-M33 record holder
/// (STM32U575) on the AN505. The first reruns every model (its flash table
/// holds the flash targets, hello_world's among them); the others only the
/// models with a record on their part.
pub const REFERENCE_PARTS: [(&str, &str); 2] = [
    ("qemu-mps2-an386", "stm32l4r5"),
    ("qemu-mps2-an505", "stm32u575"),
];

/// One published record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// Cycles per inference.
    pub cycles: u64,
    /// The system it was measured on, as the records file names it
    /// ("Cortex-M4 (NUCLEO-L4R5ZI @ 120 MHz)").
    pub system: String,
    /// Who submitted it, with the software and round, as the file says
    /// ("X-CUBE-AI 9.0, v1.2").
    pub by: String,
}

/// hilt's estimate on a timing profile, and the record it stands against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartFigure {
    /// The timing profile (`boards/timing/NAME.toml`).
    pub profile: String,
    /// Instructions per inference, exactly (the QEMU plugin's count, the
    /// median over the run's steps).
    pub instructions: u64,
    /// Estimated cycles per inference (the median over the run's steps).
    pub estimated_cycles: u64,
    /// The published record for the model on that part, if the records
    /// file has one.
    pub record: Option<Record>,
}

impl PartFigure {
    /// hilt's estimate over the record (below 1: fewer cycles).
    pub fn ratio(&self) -> Option<f64> {
        self.record
            .as_ref()
            .map(|r| self.estimated_cycles as f64 / r.cycles.max(1) as f64)
    }
}

/// The records file is there but cannot be read as the table it should be.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A row or cell is not what the table's format says.
    #[error("{path}: line {line}: {problem}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Its line, from 1.
        line: usize,
        /// What is wrong.
        problem: String,
    },
}

/// The MLPerf Tiny benchmark a model's name says it is
/// (`mlperf_tiny_kws_dscnn_int8` → `kws`), matched against the first word
/// of the records' column headers. A float32 model (`..._float`) is none:
/// the closed division's records are of the int8 reference models.
pub fn benchmark_of(model: &str) -> Option<&str> {
    if model.ends_with("_float") {
        return None;
    }
    let rest = model.strip_prefix("mlperf_tiny_")?;
    rest.split('_').next().filter(|b| !b.is_empty())
}

/// The part a timing profile names, as the records' rows spell it
/// (`stm32l4r5` → `L4R5`).
pub fn part_of(profile: &str) -> String {
    profile.trim_start_matches("stm32").to_ascii_uppercase()
}

/// The records of the row whose system names `part`, by benchmark
/// (`kws`, `vww`, ...). A cell reads `5.18 M (43.19 ms; X-CUBE-AI 9.0,
/// v1.2)`: millions of cycles, then in brackets the latency and who.
pub fn parse_records(
    text: &str,
    path: &Path,
    part: &str,
) -> Result<BTreeMap<String, Record>, RecordsError> {
    let bad = |line: usize, problem: String| RecordsError::Format {
        path: path.into(),
        line,
        problem,
    };
    let cells = |row: &str| -> Vec<String> {
        row.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut header: Option<Vec<String>> = None;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if !line.trim_start().starts_with('|') || line.contains("---") {
            continue;
        }
        let row = cells(line);
        if row[0].starts_with("core") {
            header = Some(row);
            continue;
        }
        let Some(header) = &header else {
            continue;
        };
        if !row[0].contains(part) {
            continue;
        }
        for (column, cell) in header.iter().zip(&row).skip(1) {
            let benchmark = column
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            let millions = cell
                .strip_suffix(')')
                .and_then(|c| c.split_once(" M ("))
                .ok_or_else(|| bad(number, format!("{column}: `{cell}` is not `N M (...)`")))?;
            let cycles: f64 = millions.0.parse().map_err(|_| {
                bad(
                    number,
                    format!("{column}: `{}` is not a number", millions.0),
                )
            })?;
            let by = millions
                .1
                .split_once(';')
                .map_or(millions.1, |(_, by)| by)
                .trim()
                .to_string();
            out.insert(
                benchmark,
                Record {
                    cycles: (cycles * 1e6).round() as u64,
                    system: row[0].clone(),
                    by,
                },
            );
        }
    }
    Ok(out)
}

/// The records for `part` from the first set that has the records file
/// (none: an empty map, and the table's record columns are dashes).
pub fn read_records(
    sets: &[PathBuf],
    part: &str,
) -> Result<BTreeMap<String, Record>, RecordsError> {
    for set in sets {
        let path = set.join(RECORDS_FILE);
        if path.is_file() {
            let text = std::fs::read_to_string(&path).map_err(|source| RecordsError::Io {
                path: path.clone(),
                source,
            })?;
            return parse_records(&text, &path, part);
        }
    }
    Ok(BTreeMap::new())
}

/// The models with an estimate, as a Markdown table: hilt's exact
/// instructions and estimated cycles, the record, who holds it and the
/// ratio.
pub fn render_markdown(rows: &[(&str, &PartFigure)]) -> String {
    let mut s = String::from(
        "| model | timing profile | hilt instructions | hilt estimated cycles | published record (cycles) | record on, by | hilt ÷ record |\n\
         |---|---|---:|---:|---:|---|---:|\n",
    );
    for (model, part) in rows {
        let (record, by) = part.record.as_ref().map_or_else(
            || ("–".to_string(), "–".to_string()),
            |r| {
                (
                    crate::report::thousands(r.cycles),
                    format!("{}; {}", r.system, r.by),
                )
            },
        );
        s.push_str(&format!(
            "| {model} | {} | {} | {} | {record} | {by} | {} |\n",
            part.profile,
            crate::report::thousands(part.instructions),
            crate::report::thousands(part.estimated_cycles),
            part.ratio()
                .map_or_else(|| "–".to_string(), |x| format!("{x:.2}")),
        ));
    }
    s
}

/// The same for a terminal.
pub fn render_table(rows: &[(&str, &PartFigure)]) -> String {
    let mut s = format!(
        "{:<34} {:<10} {:>12} {:>12} {:>12} {:>7}  {}\n",
        "model", "profile", "hilt instr", "hilt est cyc", "record", "÷record", "record by"
    );
    for (model, part) in rows {
        let dash = || "-".to_string();
        s.push_str(&format!(
            "{:<34} {:<10} {:>12} {:>12} {:>12} {:>7}  {}\n",
            model,
            part.profile,
            crate::report::thousands(part.instructions),
            crate::report::thousands(part.estimated_cycles),
            part.record
                .as_ref()
                .map_or_else(dash, |r| crate::report::thousands(r.cycles)),
            part.ratio().map_or_else(dash, |x| format!("{x:.2}")),
            part.record.as_ref().map_or_else(dash, |r| r.by.clone()),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORDS: &str = "\
| core (board @ clock) | KWS DS-CNN | VWW MobileNetV1 | IC ResNet-8 | AD autoencoder |
|---|---:|---:|---:|---:|
| Cortex-M4 (NUCLEO-L4R5ZI @ 120 MHz) | 5.18 M (43.19 ms; X-CUBE-AI 9.0, v1.2) | 10.67 M (88.93 ms; X-CUBE-AI 9.0, v1.2) | 19.82 M (165.1 ms; X-CUBE-AI 9.0, v1.2) | 0.486 M (4.05 ms; Plumerai, v1.1) |
| Cortex-M85 (EK-RA8D1 @ 480 MHz) | 1.66 M (3.47 ms, v1.2) | 6.43 M (13.39 ms, v1.2) | 4.07 M (8.48 ms, v1.2) | 0.255 M (0.531 ms, v1.2) |
";

    #[test]
    fn reads_the_parts_row_by_benchmark() {
        let records = parse_records(RECORDS, Path::new("r.md"), &part_of("stm32l4r5")).unwrap();
        assert_eq!(records.len(), 4);
        assert_eq!(records["kws"].cycles, 5_180_000);
        assert_eq!(records["kws"].by, "X-CUBE-AI 9.0, v1.2");
        assert_eq!(records["ad"].cycles, 486_000);
        assert_eq!(records["ad"].by, "Plumerai, v1.1");
        assert_eq!(records["vww"].system, "Cortex-M4 (NUCLEO-L4R5ZI @ 120 MHz)");
        // Another part's row, another figure.
        let m85 = parse_records(RECORDS, Path::new("r.md"), "RA8D1").unwrap();
        assert_eq!(m85["ic"].cycles, 4_070_000);
        assert_eq!(m85["ic"].by, "8.48 ms, v1.2");
    }

    #[test]
    fn a_bad_cell_is_named_with_its_line_and_column() {
        let broken = RECORDS.replace("19.82 M", "19.82M");
        let e = parse_records(&broken, Path::new("r.md"), "L4R5").unwrap_err();
        assert_eq!(
            e.to_string(),
            "r.md: line 3: IC ResNet-8: `19.82M (165.1 ms; X-CUBE-AI 9.0, v1.2)` is not `N M (...)`"
        );
    }

    #[test]
    fn models_map_to_benchmarks_and_ratios_are_over_the_record() {
        assert_eq!(benchmark_of("mlperf_tiny_kws_dscnn_int8"), Some("kws"));
        assert_eq!(benchmark_of("mlperf_tiny_ad_autoencoder_int8"), Some("ad"));
        assert_eq!(benchmark_of("tflm_person_detect_int8"), None);
        assert_eq!(benchmark_of("mlperf_tiny_ic_resnet8_float"), None);
        let part = PartFigure {
            profile: "stm32l4r5".into(),
            instructions: 7_605_662,
            estimated_cycles: 10_360_000,
            record: Some(Record {
                cycles: 5_180_000,
                system: "Cortex-M4 (NUCLEO-L4R5ZI @ 120 MHz)".into(),
                by: "X-CUBE-AI 9.0, v1.2".into(),
            }),
        };
        assert_eq!(part.ratio(), Some(2.0));
        let table = render_markdown(&[("mlperf_tiny_kws_dscnn_int8", &part)]);
        assert!(
            table.contains("| mlperf_tiny_kws_dscnn_int8 | stm32l4r5 | 7,605,662 | 10,360,000 | 5,180,000 | Cortex-M4 (NUCLEO-L4R5ZI @ 120 MHz); X-CUBE-AI 9.0, v1.2 | 2.00 |"),
            "{table}"
        );
        let without = PartFigure {
            record: None,
            ..part
        };
        assert!(render_markdown(&[("m", &without)]).contains("| – | – | – |"));
    }
}
