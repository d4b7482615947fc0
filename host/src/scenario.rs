//! Scenarios: what to run where. `scenarios/NAME.toml`:
//!
//! ```toml
//! description = "TFLM hello_world, int8"
//! conformance = "tflm_hello_world_int8"   # model, inputs, expected outputs
//! cases = ["case0", "case1"]              # default: every case
//! boards = ["qemu-*"]                     # names or globs
//! planner = "greedy"                      # linear | greedy | offline
//! arena_size = 65536                      # default: the board's
//! iterations = 1                          # invocations per step
//! timeout_s = 120                         # per board
//! canary = "buffers"                     # off | bounds | buffers
//! align = 16                              # activation buffer alignment
//! firmware_features = []                  # fault injection (tests only)
//! ```
//!
//! or, instead of `conformance`, a model of the repository with explicit
//! steps:
//!
//! ```toml
//! model = "models/tiny.tflite"            # relative to scenarios/
//! compare = "exact"                       # or "float: |a-b| <= 1e-5 + 1e-4*|b|"
//! expected_from_host = false              # true: expected = the host runtime's outputs
//! [[steps]]
//! inputs = ["data/in0.bin"]
//! expected = ["data/out0.bin"]
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::conformance::{Comparison, read_manifest};
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::planner::PlannerKind;

/// One invocation's inputs and expected outputs (file contents).
#[derive(Debug, Clone, PartialEq)]
pub struct StepData {
    /// Input bytes, in model input order.
    pub inputs: Vec<Vec<u8>>,
    /// Expected output bytes, in model output order.
    pub expected: Vec<Vec<u8>>,
}

/// A sequence of steps on one interpreter (state carries over).
#[derive(Debug, Clone, PartialEq)]
pub struct CaseData {
    /// Name.
    pub name: String,
    /// Steps.
    pub steps: Vec<StepData>,
}

/// A loaded, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name (file stem).
    pub name: String,
    /// One line for people.
    pub description: String,
    /// The model file.
    pub model: PathBuf,
    /// Board names or globs.
    pub boards: Vec<String>,
    /// Planner.
    pub planner: PlannerKind,
    /// Arena bytes (None: the board's).
    pub arena_size: Option<u64>,
    /// Invocations per step.
    pub iterations: u32,
    /// Per-board time limit.
    pub timeout: Duration,
    /// How outputs are compared.
    pub compare: Comparison,
    /// The cases.
    pub cases: Vec<CaseData>,
    /// Extra firmware features: fault injection, for the host's own tests.
    pub firmware_features: Vec<String>,
    /// Guard bands.
    pub canary: CanaryMode,
    /// Alignment of every activation buffer.
    pub align: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    #[serde(default)]
    description: String,
    #[serde(default)]
    conformance: Option<String>,
    #[serde(default)]
    cases: Option<Vec<String>>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    compare: Option<String>,
    #[serde(default)]
    steps: Vec<RawStep>,
    boards: Vec<String>,
    #[serde(default)]
    planner: Option<String>,
    #[serde(default)]
    arena_size: Option<u64>,
    #[serde(default)]
    iterations: Option<u32>,
    #[serde(default)]
    timeout_s: Option<u64>,
    #[serde(default)]
    firmware_features: Vec<String>,
    #[serde(default)]
    canary: Option<String>,
    #[serde(default)]
    align: Option<u32>,
    #[serde(default)]
    expected_from_host: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    inputs: Vec<String>,
    #[serde(default)]
    expected: Vec<String>,
}

/// What is wrong with a scenario.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Unreadable file.
    #[error("{path}: {source}")]
    Read {
        /// File.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Syntax or types.
    #[error("{path}: {message}")]
    Parse {
        /// File.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
    /// A value that cannot work.
    #[error("{path}: field `{field}`: {problem}")]
    Invalid {
        /// File.
        path: PathBuf,
        /// Field.
        field: &'static str,
        /// Why.
        problem: String,
    },
}

fn invalid(path: &Path, field: &'static str, problem: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        path: path.into(),
        field,
        problem: problem.into(),
    }
}

fn read_file(path: &Path, field: &'static str, file: &Path) -> Result<Vec<u8>, ScenarioError> {
    std::fs::read(file).map_err(|e| invalid(path, field, format!("{}: {e}", file.display())))
}

/// Loads `path`; `conformance_dir` is where conformance models live.
pub fn load(path: &Path, conformance_dir: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        path: path.into(),
        source,
    })?;
    let raw: RawScenario = toml::from_str(&text).map_err(|e| ScenarioError::Parse {
        path: path.into(),
        message: e.to_string().lines().collect::<Vec<_>>().join(" "),
    })?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = path.parent().unwrap_or(Path::new("."));
    let planner = match raw.planner.as_deref() {
        None => PlannerKind::default(),
        Some(name) => name
            .parse::<PlannerKind>()
            .map_err(|e| invalid(path, "planner", e.to_string()))?,
    };
    let canary = match raw.canary.as_deref() {
        None => CanaryMode::default(),
        Some(name) => name
            .parse::<CanaryMode>()
            .map_err(|e| invalid(path, "canary", e.to_string()))?,
    };
    let align = raw.align.unwrap_or(16);
    if !align.is_power_of_two() || align > 1 << 20 {
        return Err(invalid(
            path,
            "align",
            format!("{align}: a power of two up to 1 MiB"),
        ));
    }
    if raw.boards.is_empty() {
        return Err(invalid(path, "boards", "names no board"));
    }
    let (model, compare, cases) = match (&raw.conformance, &raw.model) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                path,
                "model",
                "give either `conformance` or `model`, not both",
            ));
        }
        (None, None) => {
            return Err(invalid(
                path,
                "model",
                "give `conformance` (a conformance model) or `model`",
            ));
        }
        (Some(conformance), None) => {
            let manifest =
                read_manifest(conformance_dir).map_err(|e| invalid(path, "conformance", e))?;
            let entry = manifest
                .models
                .iter()
                .find(|m| &m.name == conformance)
                .ok_or_else(|| {
                    invalid(
                        path,
                        "conformance",
                        format!("no model {conformance:?} in the conformance set"),
                    )
                })?;
            let compare = Comparison::parse(&entry.compare).ok_or_else(|| {
                invalid(
                    path,
                    "conformance",
                    format!("unknown comparison {:?}", entry.compare),
                )
            })?;
            let case_dir = conformance_dir.join("cases").join(&entry.name);
            let mut cases = Vec::new();
            for case in &entry.cases {
                if raw
                    .cases
                    .as_ref()
                    .is_some_and(|only| !only.contains(&case.name))
                {
                    continue;
                }
                let mut steps = Vec::new();
                for step in &case.steps {
                    let load = |files: &[crate::conformance::TensorFile]| -> Result<Vec<Vec<u8>>, ScenarioError> {
                        files.iter().map(|f| read_file(path, "conformance", &case_dir.join(&f.file))).collect()
                    };
                    steps.push(StepData {
                        inputs: load(&step.inputs)?,
                        expected: load(&step.outputs)?,
                    });
                }
                cases.push(CaseData {
                    name: case.name.clone(),
                    steps,
                });
            }
            if let Some(only) = &raw.cases {
                for wanted in only {
                    if !cases.iter().any(|c| &c.name == wanted) {
                        return Err(invalid(
                            path,
                            "cases",
                            format!("{conformance} has no case {wanted:?}"),
                        ));
                    }
                }
            }
            (conformance_dir.join(&entry.model), compare, cases)
        }
        (None, Some(model)) => {
            let compare_text = raw.compare.as_deref().unwrap_or("exact");
            let compare = Comparison::parse(compare_text).ok_or_else(|| {
                invalid(
                    path,
                    "compare",
                    format!("{compare_text:?}: use \"exact\" or \"float: |a-b| <= A + R*|b|\""),
                )
            })?;
            let mut steps = Vec::new();
            for step in &raw.steps {
                let load = |files: &[String]| -> Result<Vec<Vec<u8>>, ScenarioError> {
                    files
                        .iter()
                        .map(|f| read_file(path, "steps", &base.join(f)))
                        .collect()
                };
                steps.push(StepData {
                    inputs: load(&step.inputs)?,
                    expected: load(&step.expected)?,
                });
            }
            if steps.is_empty() {
                return Err(invalid(
                    path,
                    "steps",
                    "a `model` scenario needs at least one [[steps]]",
                ));
            }
            if raw.expected_from_host {
                // The host runs the same runtime on the same inputs: the
                // firmware must agree with it byte for byte.
                expected_on_host(&base.join(model), &mut steps)
                    .map_err(|e| invalid(path, "expected_from_host", e))?;
            } else if steps.iter().any(|s| s.expected.is_empty()) {
                return Err(invalid(
                    path,
                    "steps",
                    "every step needs `expected` files (or set expected_from_host = true)",
                ));
            }
            (
                base.join(model),
                compare,
                vec![CaseData {
                    name: "case0".into(),
                    steps,
                }],
            )
        }
    };
    if !model.is_file() {
        return Err(invalid(
            path,
            "model",
            format!("{} does not exist", model.display()),
        ));
    }
    if cases.is_empty() {
        return Err(invalid(path, "cases", "no case to run"));
    }
    Ok(Scenario {
        name,
        description: raw.description,
        model,
        boards: raw.boards,
        planner,
        arena_size: raw.arena_size,
        iterations: raw.iterations.unwrap_or(1).max(1),
        timeout: Duration::from_secs(raw.timeout_s.unwrap_or(300)),
        compare,
        cases,
        firmware_features: raw.firmware_features,
        canary,
        align,
    })
}

/// Fills every step's expected outputs by running the model on the host
/// (one interpreter for all steps, as on the board).
fn expected_on_host(model: &Path, steps: &mut [StepData]) -> Result<(), String> {
    use crate::host_run::{
        AlignedBytes, DEFAULT_ARENA, interpreter, read_model, set_input, verify,
    };
    let bytes = read_model(model).map_err(|e| e.to_string())?;
    let m = verify(model, &bytes).map_err(|e| e.to_string())?;
    let mut arena = AlignedBytes::zeroed(DEFAULT_ARENA);
    let mut interp =
        interpreter(m, &hilt_runtime::planner::Greedy, &mut arena).map_err(|e| e.to_string())?;
    for step in steps {
        for (i, input) in step.inputs.iter().enumerate() {
            set_input(&mut interp, i, input).map_err(|e| e.to_string())?;
        }
        interp.invoke().map_err(|e| e.to_string())?;
        step.expected = (0..interp.output_count())
            .map(|o| {
                interp
                    .output(o)
                    .map(<[u8]>::to_vec)
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?;
    }
    Ok(())
}
