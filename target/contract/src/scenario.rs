//! Scenario files: what to run where. `scenarios/NAME.toml`:
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
//! retries = 0                             # runs again after a failure; a later pass is flaky
//! canary = "buffers"                     # off | bounds | buffers
//! align = 16                              # activation buffer alignment
//! firmware_features = []                  # extra cargo features of the firmware
//! faults = ["overrun"]                    # faults armed in a fault-injection firmware (tests only)
//! accelerator = "none"                    # none | vnpu (see `crate::offload`)
//! offload = ["CONV_2D", "ADD"]            # ops vnpu may claim (default: the runtime's list)
//! coherent = true                         # false: vnpu behind a modelled cache
//! pools = ["fast", "sram"]                # the board pools buffers may use (default: one memory)
//! kernels = "all"                         # all | model: link only the model's kernels
//! optimize = "speed"                      # speed | size: the firmware's code generation
//! constants = "tail"                      # tail | flash: where kernels' prepared constants live
//! schedule = "tflm"                       # tflm | lean: lean runs ops over their inputs' buffers
//! [vnpu]                                  # overrides the board's latency model
//! job_cycles = 10000
//! cycles_per_1000_macs = 64
//! ```
//!
//! or, instead of `conformance`, a model of the repository with explicit
//! steps:
//!
//! ```toml
//! model = "models/tiny.tflite"            # relative to the scenario file
//! compare = "exact"                       # or "float: |a-b| <= 1e-5 + 1e-4*|b|"
//! expected_from_host = false              # true: expected = the host runtime's outputs
//! [[steps]]
//! inputs = ["data/in0.bin"]
//! expected = ["data/out0.bin"]
//! ```
//!
//! This module checks the file itself (every field's value, paths made
//! relative to the file); reading the tensors and the conformance set it
//! points at is the host's job, since that needs the runtime.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hilt_proto::armed_faults::{ArmedFaults, Fault};
use serde::Deserialize;

use crate::error::{ConfigError, read_toml};
use crate::offload::{OffloadChoice, RawVnpu};
use crate::{CanaryMode, PlannerKind};
pub use hilt_runtime::schedule::Schedule;

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
    retries: Option<u32>,
    #[serde(default)]
    firmware_features: Vec<String>,
    #[serde(default)]
    faults: Vec<String>,
    #[serde(default)]
    canary: Option<String>,
    #[serde(default)]
    align: Option<u32>,
    #[serde(default)]
    expected_from_host: bool,
    #[serde(default)]
    accelerator: Option<String>,
    #[serde(default)]
    offload: Option<Vec<String>>,
    #[serde(default)]
    coherent: Option<bool>,
    #[serde(default)]
    vnpu: Option<RawVnpu>,
    #[serde(default)]
    pools: Option<Vec<String>>,
    #[serde(default)]
    kernels: Option<String>,
    #[serde(default)]
    optimize: Option<String>,
    #[serde(default)]
    constants: Option<String>,
    #[serde(default)]
    schedule: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    inputs: Vec<String>,
    #[serde(default)]
    expected: Vec<String>,
}

/// One step of a `model` scenario: its files, relative paths resolved
/// against the scenario file's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFiles {
    /// Input files, in model input order.
    pub inputs: Vec<PathBuf>,
    /// Expected output files, in model output order (empty when the host
    /// computes them).
    pub expected: Vec<PathBuf>,
}

/// Where a scenario's model, inputs and expected outputs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScenarioSource {
    /// A model of the conformance set, its cases (all, or those named).
    Conformance {
        /// The conformance model's name.
        name: String,
        /// Only these cases (None: every case).
        cases: Option<Vec<String>>,
    },
    /// A model file with explicit steps (one case).
    Model {
        /// The model file.
        model: PathBuf,
        /// The comparison, as written (`exact` by default).
        compare: String,
        /// The steps.
        steps: Vec<StepFiles>,
        /// The expected outputs are the host runtime's.
        expected_from_host: bool,
    },
}

/// A scenario file, checked: every field valid, paths resolved.
#[derive(Debug, Clone)]
pub struct ScenarioFile {
    /// Name (file stem).
    pub name: String,
    /// One line for people.
    pub description: String,
    /// Model, inputs and expected outputs.
    pub source: ScenarioSource,
    /// Board names or globs.
    pub boards: Vec<String>,
    /// Planner.
    pub planner: PlannerKind,
    /// Arena bytes (None: the board's).
    pub arena_size: Option<u64>,
    /// Invocations per step (at least 1).
    pub iterations: u32,
    /// Per-board time limit.
    pub timeout: Duration,
    /// Runs after a failed one (`retries`, `--retries`): a failure that a
    /// retry passes is reported as flaky, never as a plain pass.
    pub retries: u32,
    /// Extra cargo features of the firmware.
    pub firmware_features: Vec<String>,
    /// The faults armed in the firmware (hilt's own failure tests): the
    /// firmware is then built with its `fault-injection` feature, and the
    /// host writes these into the built ELF.
    pub faults: ArmedFaults,
    /// Guard bands.
    pub canary: CanaryMode,
    /// Alignment of every activation buffer.
    pub align: u32,
    /// Accelerator offload (off unless `accelerator` says otherwise).
    pub offload: OffloadChoice,
    /// The board pools the model's buffers may use (`None`: the arena as
    /// one memory). Checked against each board when the pair is made.
    pub pools: Option<Vec<String>>,
    /// Which kernels the firmware links.
    pub kernels: KernelChoice,
    /// What the firmware's code is generated for.
    pub optimize: OptimizeFor,
    /// Where kernels' prepared constants live.
    pub constants: ConstantsPlace,
    /// TFLM's schedule or the lean one.
    pub schedule: Schedule,
}

/// Where a firmware keeps the constants kernels work out at prepare
/// (`constants = "tail" | "flash"`; see `hilt_runtime::constants`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConstantsPlace {
    /// In the arena's tail, built at every start (TFLM's way).
    #[default]
    Tail,
    /// In a constant image the host writes beside the model in flash: the
    /// tail keeps only the interpreter's tables.
    Flash,
}

impl ConstantsPlace {
    /// The name a scenario file uses.
    pub fn name(self) -> &'static str {
        match self {
            ConstantsPlace::Tail => "tail",
            ConstantsPlace::Flash => "flash",
        }
    }
}

/// Which kernels a scenario's firmware links (`kernels = "all" | "model"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelChoice {
    /// Every kernel hilt has: one firmware for any model (and, on a board
    /// with a fixed model slot, one build for every scenario).
    #[default]
    All,
    /// Only the model's operators' kernels (TFLM's `MicroMutableOpResolver`
    /// written for the model): the least flash, a build per operator set.
    Model,
}

impl KernelChoice {
    /// The name a scenario file uses.
    pub fn name(self) -> &'static str {
        match self {
            KernelChoice::All => "all",
            KernelChoice::Model => "model",
        }
    }
}

/// What a scenario's firmware is compiled for (`optimize = "speed" |
/// "size"`), as TFLM builds at `-O2` or `-Os` and Zephyr picks
/// `CONFIG_SPEED_OPTIMIZATIONS` or `CONFIG_SIZE_OPTIMIZATIONS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OptimizeFor {
    /// The fewest cycles (`opt-level = 3`): every figure hilt publishes
    /// for speed is of such a firmware.
    #[default]
    Speed,
    /// The least flash (`opt-level = "z"`): for a board whose flash the
    /// speed build does not fit, at the cost of cycles.
    Size,
}

impl OptimizeFor {
    /// The name a scenario file uses.
    pub fn name(self) -> &'static str {
        match self {
            OptimizeFor::Speed => "speed",
            OptimizeFor::Size => "size",
        }
    }

    /// Cargo's `opt-level` for it.
    pub fn opt_level(self) -> &'static str {
        match self {
            OptimizeFor::Speed => "3",
            OptimizeFor::Size => "z",
        }
    }
}

/// Reads and checks `path`.
pub fn load(path: &Path) -> Result<ScenarioFile, ConfigError> {
    let raw: RawScenario = read_toml(path)?;
    validate(path, raw)
}

fn validate(path: &Path, raw: RawScenario) -> Result<ScenarioFile, ConfigError> {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let planner = planner(path, raw.planner.as_deref())?;
    let canary = canary(path, raw.canary.as_deref())?;
    let align = align(path, raw.align)?;
    if raw.boards.is_empty() {
        return Err(ConfigError::invalid(path, "boards", "names no board"));
    }
    let source = source(path, &raw)?;
    // (Before `pools` and `vnpu` move out of `raw`.)
    let accelerated = raw.accelerator.as_deref().is_some_and(|a| a != "none");
    let (kernels, optimize, constants, schedule) = build_choices(path, &raw, accelerated)?;
    let pools = match raw.pools {
        Some(p) if p.is_empty() => {
            return Err(ConfigError::invalid(path, "pools", "names no pool"));
        }
        p => p,
    };
    let offload = crate::offload::choice(
        path,
        raw.accelerator.as_deref(),
        raw.offload.clone(),
        raw.coherent,
        raw.vnpu,
    )?;
    if pools.is_some()
        && offload.accelerator != crate::offload::Accelerator::None
        && !offload.coherent
    {
        // Non-coherent runs give the interpreter half the arena; a split
        // arena is exactly its pools.
        return Err(ConfigError::invalid(
            path,
            "pools",
            "a split arena cannot be halved for non-coherent offload (set coherent = true or drop pools)",
        ));
    }
    if let (Some(_), Some(size)) = (&pools, raw.arena_size) {
        return Err(ConfigError::invalid(
            path,
            "pools",
            format!("a split arena is the board's pools: drop arena_size ({size})"),
        ));
    }
    let faults = armed_faults(path, &raw.faults)?;
    Ok(ScenarioFile {
        name,
        description: raw.description,
        source,
        boards: raw.boards,
        planner,
        arena_size: raw.arena_size,
        iterations: raw.iterations.unwrap_or(1).max(1),
        timeout: Duration::from_secs(raw.timeout_s.unwrap_or(300)),
        retries: raw.retries.unwrap_or(0),
        firmware_features: raw.firmware_features,
        faults,
        canary,
        align,
        offload,
        pools,
        kernels,
        optimize,
        constants,
        schedule,
    })
}

/// The firmware choices of a scenario: its kernels, code generation,
/// where kernels' constants live and its schedule (the last two refuse an
/// accelerator).
fn build_choices(
    path: &Path,
    raw: &RawScenario,
    accelerated: bool,
) -> Result<(KernelChoice, OptimizeFor, ConstantsPlace, Schedule), ConfigError> {
    let kernels = match raw.kernels.as_deref() {
        None | Some("all") => KernelChoice::All,
        Some("model") => KernelChoice::Model,
        Some(other) => {
            return Err(ConfigError::invalid(
                path,
                "kernels",
                format!("{other:?}: use all or model"),
            ));
        }
    };
    let optimize = match raw.optimize.as_deref() {
        None | Some("speed") => OptimizeFor::Speed,
        Some("size") => OptimizeFor::Size,
        Some(other) => {
            return Err(ConfigError::invalid(
                path,
                "optimize",
                format!("{other:?}: use speed or size"),
            ));
        }
    };
    let constants = match raw.constants.as_deref() {
        None | Some("tail") => ConstantsPlace::Tail,
        Some("flash") => ConstantsPlace::Flash,
        Some(other) => {
            return Err(ConfigError::invalid(
                path,
                "constants",
                format!("{other:?}: use tail or flash"),
            ));
        }
    };
    if constants == ConstantsPlace::Flash && accelerated {
        return Err(ConfigError::invalid(
            path,
            "constants",
            "constants in flash do not combine with an accelerator yet (an offloaded op's constants are its job descriptor, in the arena)",
        ));
    }
    let schedule = match raw.schedule.as_deref() {
        None | Some("tflm") => Schedule::Tflm,
        Some("lean") => Schedule::Lean,
        Some(other) => {
            return Err(ConfigError::invalid(
                path,
                "schedule",
                format!("{other:?}: use tflm or lean"),
            ));
        }
    };
    if schedule == Schedule::Lean && accelerated {
        return Err(ConfigError::invalid(
            path,
            "schedule",
            "the lean schedule does not run with an accelerator yet",
        ));
    }
    Ok((kernels, optimize, constants, schedule))
}

/// The faults a scenario arms, each named as [`Fault::name`] spells it.
fn armed_faults(path: &Path, names: &[String]) -> Result<ArmedFaults, ConfigError> {
    names.iter().try_fold(ArmedFaults::NONE, |set, name| {
        let fault = Fault::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
            ConfigError::invalid(
                path,
                "faults",
                format!(
                    "{name:?} is no fault hilt injects (one of: {})",
                    known.join(", ")
                ),
            )
        })?;
        Ok(set.with(fault))
    })
}

fn planner(path: &Path, written: Option<&str>) -> Result<PlannerKind, ConfigError> {
    written.map_or(Ok(PlannerKind::default()), |name| {
        name.parse()
            .map_err(|e: hilt_runtime::choice::UnknownName| {
                ConfigError::invalid(path, "planner", e.to_string())
            })
    })
}

fn canary(path: &Path, written: Option<&str>) -> Result<CanaryMode, ConfigError> {
    written.map_or(Ok(CanaryMode::default()), |name| {
        name.parse()
            .map_err(|e: hilt_runtime::choice::UnknownName| {
                ConfigError::invalid(path, "canary", e.to_string())
            })
    })
}

/// A power of two up to 1 MiB: what the planner and the firmware accept.
pub fn check_align(align: u32) -> Result<u32, String> {
    if !align.is_power_of_two() || align > 1 << 20 {
        return Err(format!("{align}: a power of two up to 1 MiB"));
    }
    Ok(align)
}

fn align(path: &Path, written: Option<u32>) -> Result<u32, ConfigError> {
    check_align(written.unwrap_or(16)).map_err(|e| ConfigError::invalid(path, "align", e))
}

/// Exactly one of `conformance` and `model`; a `model` scenario has steps.
fn source(path: &Path, raw: &RawScenario) -> Result<ScenarioSource, ConfigError> {
    match (&raw.conformance, &raw.model) {
        (Some(_), Some(_)) => Err(ConfigError::invalid(
            path,
            "model",
            "give either `conformance` or `model`, not both",
        )),
        (None, None) => Err(ConfigError::invalid(
            path,
            "model",
            "give `conformance` (a conformance model) or `model`",
        )),
        (Some(name), None) => Ok(ScenarioSource::Conformance {
            name: name.clone(),
            cases: raw.cases.clone(),
        }),
        (None, Some(model)) => {
            let base = path.parent().unwrap_or(Path::new("."));
            let files = |names: &[String]| names.iter().map(|f| base.join(f)).collect();
            Ok(ScenarioSource::Model {
                model: base.join(model),
                compare: raw.compare.clone().unwrap_or_else(|| "exact".into()),
                steps: raw
                    .steps
                    .iter()
                    .map(|s| StepFiles {
                        inputs: files(&s.inputs),
                        expected: files(&s.expected),
                    })
                    .collect(),
                expected_from_host: raw.expected_from_host,
            })
        }
    }
}
