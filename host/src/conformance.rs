//! The shared conformance set: real models, fixed inputs and TFLM's outputs.
//! Reads its manifest and checks hilt's outputs against TFLM's.

use std::path::{Path, PathBuf};

use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::constants::Constants;
use hilt_runtime::interpreter::Interpreter;
use hilt_runtime::planner::Greedy;
use hilt_runtime::schedule::Schedule;
use serde::Deserialize;

use crate::host_run::{AlignedBytes, DEFAULT_ARENA, RunError, interpreter, set_input};
use crate::model_file::ModelFile;

/// `manifest.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    /// The models.
    pub models: Vec<ModelEntry>,
}

/// One model of the set.
#[derive(Debug, Clone, Deserialize)]
pub struct ModelEntry {
    /// Short name.
    pub name: String,
    /// Path of the `.tflite`, relative to the set's folder.
    pub model: String,
    /// `exact` or a float tolerance `float: |a-b| <= A + R*|b|`.
    pub compare: String,
    /// Whether state carries over between steps.
    #[serde(default)]
    pub stateful: bool,
    /// TFLM's figures.
    pub tflm: TflmFigures,
    /// Builtin operators and their counts.
    pub ops: serde_json::Map<String, serde_json::Value>,
    /// Liveness lower bound of the activations.
    pub liveness_lower_bound_bytes: u64,
    /// Input/output cases.
    pub cases: Vec<Case>,
}

/// What TFLM measured.
#[derive(Debug, Clone, Deserialize)]
pub struct TflmFigures {
    /// Planned head.
    pub arena_head: u64,
    /// Persistent tail.
    pub arena_tail: u64,
    /// `arena_used_bytes()`.
    pub arena_used_total: u64,
    /// Median invoke time, reference kernels, x86-64.
    pub invoke_us_x86_reference_kernels: f64,
}

/// A sequence of invocations on one interpreter.
#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    /// Name.
    pub name: String,
    /// Steps in order.
    pub steps: Vec<Step>,
}

/// One invocation.
#[derive(Debug, Clone, Deserialize)]
pub struct Step {
    /// Input files, in model input order.
    pub inputs: Vec<TensorFile>,
    /// Expected output files, in model output order.
    pub outputs: Vec<TensorFile>,
}

/// A raw little-endian tensor file.
#[derive(Debug, Clone, Deserialize)]
pub struct TensorFile {
    /// File name inside `cases/MODEL/`.
    pub file: String,
    /// Element type name (`int8`, `float32`, ...).
    pub dtype: String,
    /// Shape.
    pub shape: Vec<i64>,
}

/// How outputs are compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Comparison {
    /// Byte for byte.
    Exact,
    /// `|a - b| <= abs + rel * |b|` per float32 element.
    Float {
        /// Absolute tolerance.
        abs: f32,
        /// Relative tolerance.
        rel: f32,
    },
}

impl Comparison {
    /// Parses the manifest's `compare` field.
    pub fn parse(text: &str) -> Option<Self> {
        if text == "exact" {
            return Some(Comparison::Exact);
        }
        // "float: |a-b| <= 1e-5 + 1e-4*|b|"
        let rhs = text.strip_prefix("float:")?.split("<=").nth(1)?;
        let (abs, rel) = rhs.split_once('+')?;
        let rel = rel.trim().strip_suffix("*|b|")?;
        Some(Comparison::Float {
            abs: abs.trim().parse().ok()?,
            rel: rel.trim().parse().ok()?,
        })
    }

    /// `None` when `got` matches `want`, else a description of the first
    /// difference and how many elements differ.
    pub fn check(&self, got: &[u8], want: &[u8]) -> Option<String> {
        if got.len() != want.len() {
            return Some(format!("{} bytes, expected {}", got.len(), want.len()));
        }
        match *self {
            Comparison::Exact => {
                let diffs: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
                let first = *diffs.first()?;
                Some(format!(
                    "{} of {} bytes differ; first at byte {first}: {} (as i8 {}) vs {} (as i8 {})",
                    diffs.len(),
                    got.len(),
                    got[first],
                    got[first] as i8,
                    want[first],
                    want[first] as i8
                ))
            }
            Comparison::Float { abs, rel } => {
                let value = |b: &[u8], i: usize| {
                    f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
                };
                let n = got.len() / 4;
                let bad: Vec<usize> = (0..n)
                    .filter(|&i| {
                        let (a, b) = (value(got, i), value(want, i));
                        // Written so that NaN on either side counts as a mismatch.
                        #[allow(clippy::neg_cmp_op_on_partial_ord)]
                        let outside = !((a - b).abs() <= abs + rel * b.abs());
                        outside
                    })
                    .collect();
                let first = *bad.first()?;
                Some(format!(
                    "{} of {n} values out of tolerance; first at {first}: {} vs {}",
                    bad.len(),
                    value(got, first),
                    value(want, first)
                ))
            }
        }
    }
}

/// The conformance sets: the folders `HILT_CONFORMANCE_DIR` names
/// (`:`-separated), else `../shared/conformance` and
/// `../shared/conformance-ops` beside the repository root `repo`. The
/// conformance suites run every model of every set.
pub fn locate_all(repo: &Path) -> Vec<PathBuf> {
    let named: Vec<PathBuf> = std::env::var_os("HILT_CONFORMANCE_DIR")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if named.is_empty() {
        vec![
            repo.join("../shared/conformance"),
            repo.join("../shared/conformance-ops"),
        ]
    } else {
        named
    }
}

/// The first conformance set ([`locate_all`]): where scenarios find their
/// `conformance = "…"` models and `hilt bench-target` TFLM's Cortex-M
/// figures.
pub fn locate(repo: &Path) -> PathBuf {
    locate_all(repo).swap_remove(0)
}

/// Reads `manifest.json` from `dir`.
pub fn read_manifest(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// What running one model's cases gave.
#[derive(Debug, Clone)]
pub struct ModelOutcome {
    /// Model name.
    pub name: String,
    /// Cases that matched at every step.
    pub cases_passed: usize,
    /// Cases in all.
    pub cases: usize,
    /// Failures, one line each.
    pub failures: Vec<String>,
    /// `arena_used_bytes()` with the greedy planner (0 if set-up failed).
    pub arena_used: usize,
}

/// How a conformance run sets the interpreter up.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunSetup {
    /// TFLM's schedule or the lean one.
    pub schedule: Schedule,
    /// Kernel constants in a constant image instead of the tail.
    pub constants_in_flash: bool,
    /// The optimal planner instead of greedy.
    pub optimal: bool,
}

/// Runs every case of `entry` and compares every output of every step.
pub fn run_model(dir: &Path, entry: &ModelEntry) -> ModelOutcome {
    run_model_with(dir, entry, RunSetup::default())
}

/// [`run_model`] with the interpreter set up as `setup` says; the
/// outcome's `arena_used` is then the committed head plus tail.
pub fn run_model_with(dir: &Path, entry: &ModelEntry, setup: RunSetup) -> ModelOutcome {
    let mut outcome = ModelOutcome {
        name: entry.name.clone(),
        cases_passed: 0,
        cases: entry.cases.len(),
        failures: Vec::new(),
        arena_used: 0,
    };
    let Some(comparison) = Comparison::parse(&entry.compare) else {
        outcome
            .failures
            .push(format!("unknown comparison rule {:?}", entry.compare));
        return outcome;
    };
    let path = dir.join(&entry.model);
    let file = match ModelFile::open(&path) {
        Ok(f) => f,
        Err(e) => {
            outcome.failures.push(e.to_string());
            return outcome;
        }
    };
    for case in &entry.cases {
        let case_setup = (comparison, setup);
        match run_case(dir, entry, &file, case, case_setup, &mut outcome.arena_used) {
            Ok(None) => outcome.cases_passed += 1,
            Ok(Some(mismatch)) => outcome.failures.push(format!("{}: {mismatch}", case.name)),
            Err(e) => outcome.failures.push(format!("{}: {e}", case.name)),
        }
    }
    outcome
}

fn run_case(
    dir: &Path,
    entry: &ModelEntry,
    file: &ModelFile,
    case: &Case,
    (comparison, setup): (Comparison, RunSetup),
    arena_used: &mut usize,
) -> Result<Option<String>, RunError> {
    let model = file.model();
    let mut arena = AlignedBytes::zeroed(DEFAULT_ARENA);
    // 8-aligned room for any constant image (prepare widens weights at
    // most to 32 bits).
    let mut image = vec![
        0u64;
        if setup.constants_in_flash {
            file.bytes().len() + 8192
        } else {
            0
        }
    ];
    let mut interpreter =
        if setup.schedule == Schedule::Tflm && !setup.constants_in_flash && !setup.optimal {
            let interpreter = interpreter(model, &Greedy, &mut arena)?;
            *arena_used = interpreter.arena_used_bytes();
            interpreter
        } else {
            crate::host_run::check_supported(&model)?;
            let mut interpreter =
                Interpreter::new(model, crate::host_run::resolver(), arena.as_mut_slice());
            if setup.constants_in_flash {
                interpreter.set_constants(Constants::write(bytemuck_bytes(&mut image)));
            }
            let options = AllocOptions {
                schedule: setup.schedule,
                ..AllocOptions::default()
            };
            let optimal = hilt_runtime::planner::Optimal::default();
            let planner: &dyn hilt_runtime::planner::MemoryPlanner =
                if setup.optimal { &optimal } else { &Greedy };
            let allocation = interpreter.allocate(planner, &options)?;
            *arena_used = (allocation.head.len + allocation.tail_bytes) as usize;
            interpreter
        };
    let case_dir = dir.join("cases").join(&entry.name);
    let read = |name: &str| {
        let p = case_dir.join(name);
        std::fs::read(&p).map_err(|source| RunError::Io { path: p, source })
    };
    for (s, step) in case.steps.iter().enumerate() {
        for (i, input) in step.inputs.iter().enumerate() {
            set_input(&mut interpreter, i, &read(&input.file)?)?;
        }
        interpreter.invoke()?;
        for (o, output) in step.outputs.iter().enumerate() {
            let want = read(&output.file)?;
            if let Some(problem) = comparison.check(interpreter.output(o)?, &want) {
                return Ok(Some(format!("step {s} output {o}: {problem}")));
            }
        }
    }
    Ok(None)
}

/// `words` as bytes (8-aligned: a constant image's start).
fn bytemuck_bytes(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: any byte pattern is a valid `u8`; the length covers exactly
    // the words' bytes, and the borrow is the caller's one.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 8) }
}
