//! Scenarios: what to run where (`scenarios/NAME.toml`; the file format is
//! described and checked in `hilt_contract::scenario`). This module turns a
//! checked file into what a run needs: the model (read and verified once,
//! a [`ModelFile`] every part of the run shares), the comparison,
//! and every step's input and expected bytes — read from the conformance
//! set or the scenario's own files, or computed by the host runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use hilt_contract::scenario::{
    ConstantsPlace, KernelChoice, OptimizeFor, ScenarioFile, ScenarioSource, Schedule, StepFiles,
};

use crate::config::ConfigError;
use crate::conformance::{Comparison, ModelEntry, read_manifest};
use crate::model_file::ModelFile;
use hilt_contract::offload::OffloadChoice;
use hilt_contract::{CanaryMode, PlannerKind};
use hilt_proto::AccelFault;

/// What is wrong with a scenario: the one config error (boards and
/// scenarios share it), under the name callers of this module know.
pub type ScenarioError = ConfigError;

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
    /// The model file's path.
    pub model: PathBuf,
    /// The model file, read and verified once when the scenario was
    /// loaded: every part of a run takes the model from here.
    pub model_file: Arc<ModelFile>,
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
    /// Runs after a failed one; a later pass is flaky.
    pub retries: u32,
    /// How outputs are compared.
    pub compare: Comparison,
    /// The cases.
    pub cases: Vec<CaseData>,
    /// Extra cargo features of the firmware.
    pub firmware_features: Vec<String>,
    /// The faults armed in a fault-injection firmware (hilt's own tests).
    pub faults: hilt_proto::armed_faults::ArmedFaults,
    /// Guard bands.
    pub canary: CanaryMode,
    /// Alignment of every activation buffer.
    pub align: u32,
    /// Accelerator offload: engine, ops, memory view, latency override.
    pub offload: OffloadChoice,
    /// A fault for a firmware with the `accel` fault armed to inject into its offload
    /// path (`--accel-fault`; never from a file: a test's choice).
    pub accel_fault: AccelFault,
    /// The board pools the model's buffers may use (`None`: the arena as
    /// one memory).
    pub pools: Option<Vec<String>>,
    /// Whether the firmware times each operator (true from a file). `hilt
    /// bench-target` turns it off: TFLM's figures beside its own are a
    /// plain `Invoke()` timed from outside, with no per-op profiler, and
    /// the gate keeps the per-op figures of `hilt run`.
    pub op_profile: bool,
    /// Which kernels the firmware links (every one, or the model's).
    pub kernels: KernelChoice,
    /// What the firmware's code is generated for (speed or size).
    pub optimize: OptimizeFor,
    /// Where kernels' prepared constants live (tail, or flash beside the
    /// model).
    pub constants: ConstantsPlace,
    /// TFLM's schedule or the lean one (ops over their inputs' buffers).
    pub schedule: Schedule,
}

impl Scenario {
    /// Whether this scenario's arena (its own, else the board's) and model
    /// can fit `board`'s memories ([`Board::check_budget`]): checked for
    /// every pair before anything is built, since a link that does not
    /// fit fails only after a minute of building.
    ///
    /// [`Board::check_budget`]: crate::config::board::Board::check_budget
    pub fn check_budget(&self, board: &crate::config::board::Board) -> Result<(), ConfigError> {
        use hilt_contract::board::MemoryShortfall;
        let arena = self.arena_size.unwrap_or(board.arena_size);
        let model_len = Some(self.model_file.len() as u64);
        board.check_budget(arena, model_len).map_err(|shortfall| {
            let remedy = match shortfall {
                MemoryShortfall::ModelSlot { .. } => "the model is too big for this board",
                _ if self.arena_size.is_some() => "lower the scenario's arena_size",
                _ => "lower arena_size in the board file",
            };
            ConfigError::Budget {
                scenario: self.name.clone(),
                board: board.name.clone(),
                shortfall,
                remedy,
            }
        })
    }

    /// The runtime's pool layout for this scenario on `board` (checked by
    /// the contract: every pool named must be the board's).
    pub fn pool_layout(
        &self,
        board: &crate::config::board::Board,
    ) -> Result<hilt_runtime::pool::PoolLayout, ConfigError> {
        hilt_contract::pools::layout(
            Path::new(&format!("scenario {}", self.name)),
            &board.name,
            &board.pools,
            self.pools.as_deref(),
        )
    }
}

fn invalid(path: &Path, field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::invalid(path, field, problem)
}

/// A tensor file's data bytes: raw little-endian, or a `.npy` file's data
/// (as `hilt infer` reads them).
fn read_file(path: &Path, field: &'static str, file: &Path) -> Result<Vec<u8>, ConfigError> {
    crate::tensor_file::read(file)
        .map(|t| t.data)
        .map_err(|e| invalid(path, field, e.to_string()))
}

/// Loads `path`; `conformance_sets` are the conformance sets, searched in
/// order for a `conformance = "…"` model
/// ([`locate_all`](crate::conformance::locate_all)).
pub fn load(path: &Path, conformance_sets: &[PathBuf]) -> Result<Scenario, ScenarioError> {
    let file = hilt_contract::scenario::load(path)?;
    let (model, opened, compare, cases) = match &file.source {
        ScenarioSource::Conformance { name, cases } => {
            let (model, compare, cases) =
                conformance_cases(path, conformance_sets, name, cases.as_deref())?;
            (model, None, compare, cases)
        }
        ScenarioSource::Model {
            model,
            compare,
            steps,
            expected_from_host,
        } => {
            let (file, compare, cases) =
                model_case(path, model, compare, steps, *expected_from_host)?;
            (model.clone(), Some(file), compare, cases)
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
    let model_file = match opened {
        Some(file) => file,
        None => ModelFile::open(&model).map_err(|e| ConfigError::Content {
            path: path.to_path_buf(),
            part: format!("model {}", model.display()),
            problem: e.to_string(),
        })?,
    };
    Ok(Scenario {
        name: file.name,
        description: file.description,
        model,
        model_file: Arc::new(model_file),
        boards: file.boards,
        planner: file.planner,
        arena_size: file.arena_size,
        iterations: file.iterations,
        timeout: file.timeout,
        retries: file.retries,
        compare,
        cases,
        firmware_features: file.firmware_features,
        faults: file.faults,
        canary: file.canary,
        align: file.align,
        offload: file.offload,
        accel_fault: AccelFault::None,
        pools: file.pools,
        op_profile: true,
        kernels: file.kernels,
        optimize: file.optimize,
        constants: file.constants,
        schedule: file.schedule,
    })
}

/// What a conformance scenario runs: the model's path, its comparison
/// and its cases.
type Loaded = (PathBuf, Comparison, Vec<CaseData>);

/// The set holding conformance model `name`, and its manifest entry: the
/// first of `sets` whose manifest lists it. A set without a readable
/// manifest is passed over, and named in the error if no set has `name`.
fn find_conformance_model(
    path: &Path,
    sets: &[PathBuf],
    name: &str,
) -> Result<(PathBuf, ModelEntry), ConfigError> {
    let mut unreadable = Vec::new();
    for dir in sets {
        match read_manifest(dir) {
            Ok(manifest) => {
                if let Some(entry) = manifest.models.into_iter().find(|m| m.name == name) {
                    return Ok((dir.clone(), entry));
                }
            }
            Err(e) => unreadable.push(e),
        }
    }
    let searched: Vec<String> = sets.iter().map(|d| d.display().to_string()).collect();
    let mut problem = format!(
        "no model {name:?} in the conformance sets ({}; set them with HILT_CONFORMANCE_DIR, `:`-separated)",
        searched.join(", ")
    );
    for e in unreadable {
        problem.push_str(&format!("; {e}"));
    }
    Err(invalid(path, "conformance", problem))
}

/// A conformance model's cases (those named in `only`, or all), read from
/// the first of `sets` that holds it.
fn conformance_cases(
    path: &Path,
    sets: &[PathBuf],
    name: &str,
    only: Option<&[String]>,
) -> Result<Loaded, ConfigError> {
    let (conformance_dir, entry) = find_conformance_model(path, sets, name)?;
    let (conformance_dir, entry) = (conformance_dir.as_path(), &entry);
    let compare = Comparison::parse(&entry.compare).ok_or_else(|| {
        invalid(
            path,
            "conformance",
            format!("unknown comparison {:?}", entry.compare),
        )
    })?;
    let cases = read_conformance_cases(path, conformance_dir, entry, only)?;
    let missing = only.and_then(|only| only.iter().find(|w| !cases.iter().any(|c| &c.name == *w)));
    if let Some(wanted) = missing {
        return Err(invalid(
            path,
            "cases",
            format!("{name} has no case {wanted:?}"),
        ));
    }
    Ok((conformance_dir.join(&entry.model), compare, cases))
}

fn read_conformance_cases(
    path: &Path,
    conformance_dir: &Path,
    entry: &ModelEntry,
    only: Option<&[String]>,
) -> Result<Vec<CaseData>, ConfigError> {
    let case_dir = conformance_dir.join("cases").join(&entry.name);
    let load = |files: &[crate::conformance::TensorFile]| -> Result<Vec<Vec<u8>>, ConfigError> {
        files
            .iter()
            .map(|f| read_file(path, "conformance", &case_dir.join(&f.file)))
            .collect()
    };
    let mut cases = Vec::new();
    for case in &entry.cases {
        if only.is_some_and(|only| !only.contains(&case.name)) {
            continue;
        }
        let steps = case
            .steps
            .iter()
            .map(|step| {
                Ok(StepData {
                    inputs: load(&step.inputs)?,
                    expected: load(&step.outputs)?,
                })
            })
            .collect::<Result<_, ConfigError>>()?;
        cases.push(CaseData {
            name: case.name.clone(),
            steps,
        });
    }
    Ok(cases)
}

/// A `model` scenario's one case: its steps' files read, and their expected
/// outputs computed on the host when the file asks for it.
fn model_case(
    path: &Path,
    model: &Path,
    compare_text: &str,
    files: &[StepFiles],
    expected_from_host: bool,
) -> Result<(ModelFile, Comparison, Vec<CaseData>), ConfigError> {
    let compare = Comparison::parse(compare_text).ok_or_else(|| {
        invalid(
            path,
            "compare",
            format!("{compare_text:?}: use \"exact\" or \"float: |a-b| <= A + R*|b|\""),
        )
    })?;
    let read = |files: &[PathBuf]| -> Result<Vec<Vec<u8>>, ConfigError> {
        files.iter().map(|f| read_file(path, "steps", f)).collect()
    };
    let mut steps = files
        .iter()
        .map(|s| {
            Ok(StepData {
                inputs: read(&s.inputs)?,
                expected: read(&s.expected)?,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    if steps.is_empty() {
        return Err(invalid(
            path,
            "steps",
            "a `model` scenario needs at least one [[steps]]",
        ));
    }
    let model_file = check_model_files(path, model, files, &steps, expected_from_host)?;
    if expected_from_host {
        // The host runs the same runtime on the same inputs: the
        // firmware must agree with it byte for byte.
        // What fails here is the model's (it parsed, and its inputs
        // fit): name it, and why the host ran it.
        expected_on_host(&model_file, &mut steps).map_err(|problem| ConfigError::Content {
            path: path.to_path_buf(),
            part: format!(
                "model {}, run on the host for expected_from_host",
                model.display()
            ),
            problem,
        })?;
    } else if steps.iter().any(|s| s.expected.is_empty()) {
        return Err(invalid(
            path,
            "steps",
            "every step needs `expected` files (or set expected_from_host = true)",
        ));
    }
    let case = CaseData {
        name: "case0".into(),
        steps,
    };
    Ok((model_file, compare, vec![case]))
}

/// `model m.tflite`, `steps[0].inputs[1] (data/in.bin)`: a file by its
/// place in the scenario, its path relative to the scenario's folder when
/// it lies there.
fn part(scenario: &Path, what: &str, file: &Path) -> String {
    let dir = scenario.parent().unwrap_or(Path::new(""));
    let shown = file.strip_prefix(dir).unwrap_or(file);
    format!("{what} ({})", shown.display())
}

/// `1×16×16×3 int8 = 768 bytes`: what a tensor takes.
fn tensor_size(t: &hilt_runtime::model::TensorInfo<'_>) -> String {
    let dims: Vec<String> = t.shape().map(|d| d.to_string()).collect();
    let dims = if dims.is_empty() {
        "scalar".to_string()
    } else {
        dims.join("×")
    };
    let dtype = crate::host_run::tensor_type_name(t.dtype);
    format!("{dims} {dtype} = {} bytes", t.bytes)
}

/// Opens a `model` scenario's model and checks the scenario's files
/// against it before anything is built: the model parses and has a kernel for every operator, and
/// every step gives one file per model input (and output, when expected
/// files are given and not replaced by the host's outputs) of exactly the
/// tensor's size. Each error names the
/// file at fault by its place in the scenario, not the field that made
/// the host look.
fn check_model_files(
    path: &Path,
    model_path: &Path,
    files: &[StepFiles],
    steps: &[StepData],
    expected_from_host: bool,
) -> Result<ModelFile, ConfigError> {
    use crate::host_run::check_supported;
    let content = |part: String, problem: String| ConfigError::Content {
        path: path.to_path_buf(),
        part,
        problem,
    };
    let model_part = || format!("model {}", model_path.display());
    if !model_path.is_file() {
        return Err(content(model_part(), "does not exist".into()));
    }
    let file = ModelFile::open(model_path).map_err(|e| content(model_part(), e.to_string()))?;
    let model = file.model();
    check_supported(&model).map_err(|e| content(model_part(), e.to_string()))?;
    let inputs: Vec<_> = model.inputs().filter_map(|t| model.tensor(t)).collect();
    let outputs: Vec<_> = model.outputs().filter_map(|t| model.tensor(t)).collect();
    for (s, (step, data)) in files.iter().zip(steps).enumerate() {
        let sides = [
            ("inputs", "input", &step.inputs, &data.inputs, &inputs),
            (
                "expected",
                "output",
                &step.expected,
                &data.expected,
                &outputs,
            ),
        ];
        for (field, side, names, contents, tensors) in sides {
            // Expected files the host's outputs replace are not read.
            if field == "expected" && (names.is_empty() || expected_from_host) {
                continue;
            }
            if names.len() != tensors.len() {
                return Err(content(
                    format!("steps[{s}].{field}"),
                    format!(
                        "{} files given, the model has {} {side}s",
                        names.len(),
                        tensors.len()
                    ),
                ));
            }
            for (i, ((name, bytes), t)) in names.iter().zip(contents).zip(tensors).enumerate() {
                if bytes.len() != t.bytes as usize {
                    return Err(content(
                        part(path, &format!("steps[{s}].{field}[{i}]"), name),
                        format!(
                            "{} bytes, the model's {side} {i} ({}) takes {}",
                            bytes.len(),
                            t.name,
                            tensor_size(t)
                        ),
                    ));
                }
            }
        }
    }
    Ok(file)
}

/// Fills every step's expected outputs by running the model on the host
/// (one interpreter for all steps, as on the board).
fn expected_on_host(model: &ModelFile, steps: &mut [StepData]) -> Result<(), String> {
    use crate::host_run::{AlignedBytes, DEFAULT_ARENA, interpreter, set_input};
    let m = model.model();
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
