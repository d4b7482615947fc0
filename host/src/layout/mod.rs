//! `hilt layout`: plan a model's arena on the host and report it.
//!
//! Two scopes, one planner code (the runtime's own, over a real arena):
//!
//! - **A board's plan** ([`LayoutOptions::for_board`], `hilt layout MODEL
//!   --board NAME`): the model goes through [`Interpreter::allocate`], the
//!   path the firmware runs: the same resolver, every kernel's prepare (op
//!   data in the tail, scratch requests such as CONV_2D's im2col patch),
//!   the same planner, alignment and canary settings, in an arena of the
//!   board's size. Its figures are the ones the board commits, buffer for
//!   buffer (`host/tests/layout_matches_gate.rs` holds this against every
//!   gate snapshot).
//! - **Activations only** ([`LayoutOptions::default`], `hilt layout MODEL`):
//!   the planner over the model's tensors with no kernel at all. It needs
//!   no kernel for any operator, so it works for any verifiable model, and
//!   it is what TFLM's planner tests and the conformance layout snapshots
//!   compare; kernel op data and scratch are not in it.
//!
//! Why the host can stand in for the board: no kernel's prepare depends on
//! the target it is compiled for. Build-time choices (`arm-dsp` on
//! ARMv7E-M, SSE2 on x86-64, 32- or 64-bit requantisation) pick only the
//! arithmetic that invoke runs; scratch requests and op data are worked out
//! from shapes and quantisation alone, and every stored op-data type is
//! `repr(C)` over 32-bit fields, so it has the same size on a Cortex-M as
//! here. A kernel that ever makes prepare depend on its ISA must take the
//! ISA as a value (so the host can ask "what would an ARMv7E-M DSP build
//! request?") — the gate-snapshot test fails until it does.
//!
//! What can still differ: the arena's address. The host starts its arena on
//! a 1 MiB boundary; the firmware's is 16-aligned (`.hilt_arena`). With
//! activation and scratch alignments up to 16 (the default), padding is the
//! same; with `--align` above 16 a board may pad differently, depending on
//! where its linker put the arena.
//!
//! One idea per file: this file holds the report's types, the options and
//! the entry points; `plan.rs` plans, `render.rs` prints the table.
//!
//! [`Interpreter::allocate`]: hilt_runtime::interpreter::Interpreter::allocate

use std::path::{Path, PathBuf};

use crate::host_run::ArenaAllocError;
use hilt_runtime::accel::OpKind;
use hilt_runtime::allocation::AllocError;
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::interpreter::InterpreterError;
use hilt_runtime::model::Model;
use hilt_runtime::planner::{OfflinePlanError, PlannerKind};
use hilt_runtime::pool::PoolLayout;
use serde::Serialize;

use crate::config::board::Board;
use crate::config::scenario::{ConstantsPlace, Scenario, Schedule};
use crate::holds::{Hold, Liveness};
use crate::model_file::{ModelFile, ModelFileError};

mod plan;
mod render;

pub(crate) use plan::tail_in;
pub use plan::{BytesError, layout_bytes};
pub use render::render_table;

/// A model's names, to make figures readable: the gate's snapshots, the
/// reports and `hilt run`'s lines label ops and buffers with them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelNames {
    /// Tensor names by index.
    pub tensors: Vec<String>,
    /// Operator names by index (execution order).
    pub ops: Vec<String>,
    /// Every tensor's natural lifetime and users, to tell holds apart.
    pub liveness: Liveness,
}

/// The names in `model`, with its tensors' natural lifetimes.
pub fn model_names(model: &ModelFile) -> ModelNames {
    ModelNames {
        ops: model.op_names().to_vec(),
        tensors: model.tensor_names().to_vec(),
        liveness: natural_liveness(&model.model(), model.bytes()),
    }
}

/// The runtime's own lifetimes of `model`'s tensors without offload (its
/// planner's view, from an activations-only plan), and their users. Empty
/// lifetimes when the model cannot be planned: they only mark holds.
fn natural_liveness(model: &Model<'_>, bytes: &[u8]) -> Liveness {
    let mut last_step = vec![None; model.tensor_count() as usize];
    if let Ok(report) = layout_bytes(bytes, &LayoutOptions::default()) {
        for row in &report.buffers {
            if let Some(slot) = row.tensor.and_then(|t| last_step.get_mut(t as usize)) {
                *slot = Some(row.last_step);
            }
        }
    }
    Liveness {
        last_step,
        users: Liveness::users_of(model),
    }
}

/// Everything that can go wrong making a layout.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// The arena (or the model's slot) cannot fit the board's memories:
    /// refused before planning, as a firmware build would fail to link.
    #[error("board {board}: {shortfall}")]
    Budget {
        /// The board.
        board: String,
        /// What does not fit, by how much.
        shortfall: hilt_contract::board::MemoryShortfall,
    },
    /// The model file cannot be read or is not a model.
    #[error(transparent)]
    Model(#[from] ModelFileError),
    /// The offline plan is missing or invalid.
    #[error("{path}: offline plan: {source}")]
    Offline {
        /// The file.
        path: PathBuf,
        /// What is wrong with the plan.
        source: OfflinePlanError,
    },
    /// Allocation failed (too small an arena, or a planner error).
    #[error("{path}: {source}")]
    Alloc {
        /// The file.
        path: PathBuf,
        /// Why.
        source: AllocError,
    },
    /// The interpreter's set-up failed: an operator without a kernel, a
    /// kernel refusing its operator in prepare, or the arena full.
    #[error("{path}: {source}")]
    Interpreter {
        /// The file.
        path: PathBuf,
        /// What the interpreter said (it names the operator).
        source: InterpreterError,
    },
    /// The arena could not be allocated on this host.
    #[error(transparent)]
    Arena(#[from] ArenaAllocError),
    /// `--align` is not a power of two up to 1 MiB.
    #[error("--align {0}: must be a power of two from 1 to 1048576")]
    Align(u32),
    /// Operators hilt has no kernel for (every one of them).
    #[error("{path}: {source}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// The operators.
        source: crate::host_run::UnsupportedOps,
    },
}

/// One planned buffer, as `--format json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BufferRow {
    /// "tensor" or "scratch".
    pub kind: &'static str,
    /// Tensor index (null for scratch).
    pub tensor: Option<u32>,
    /// The operator whose kernel asked for it (scratch only; the index a
    /// board reports for scratch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<u32>,
    /// Tensor name, or "scratch(op N #K)".
    pub name: String,
    /// First step.
    pub first_step: u32,
    /// Last step (including any hold).
    pub last_step: u32,
    /// Last step an op uses it (without holds).
    #[serde(skip)]
    pub natural_last_step: u32,
    /// Requested bytes, before rounding (with its guard band under
    /// `buffers` canaries, as the planner sees it).
    pub size: u32,
    /// Alignment.
    pub align: u32,
    /// Offset from the head's start.
    pub offset: u32,
    /// Kept past its last use for an offloaded job (offload plans only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<Hold>,
    /// The memory pool it is in (split arenas only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// One memory pool of a split arena, as `--format json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolRow {
    /// The board's name for it.
    pub name: String,
    /// Its first byte, from the arena's start.
    pub start: u32,
    /// Its first byte in the buffers' coordinates (from the head's start;
    /// 0 for a pool the head starts in).
    pub head_offset: u32,
    /// Its bytes.
    pub size: u32,
    /// Who reaches it (`cpu`, `cpu+accel`).
    pub reach: String,
    /// Whether the scenario lets buffers go there.
    pub planned: bool,
    /// Bytes from its start to the end of its highest planned buffer.
    pub head: u32,
    /// Bytes of the persistent tail inside it.
    pub tail: u32,
    /// Buffers placed in it.
    pub buffers: u32,
}

/// Which memory a plan accounts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coverage {
    /// The model's activation tensors only: no kernel was prepared, so
    /// kernel scratch and op data are absent.
    #[default]
    Activations,
    /// Everything the interpreter commits: activations, kernel scratch,
    /// op records and op data, guard bands.
    Interpreter,
}

impl Coverage {
    fn is_activations(&self) -> bool {
        *self == Coverage::Activations
    }
}

/// A model's arena plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayoutReport {
    /// Planner name.
    pub planner: &'static str,
    /// What the figures cover (omitted from JSON for activations-only
    /// plans, whose JSON is unchanged from before boards were planned).
    #[serde(skip_serializing_if = "Coverage::is_activations")]
    pub covers: Coverage,
    /// The board planned for, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub board: Option<String>,
    /// The arena's size, when planned into a given one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u32>,
    /// Planned section bytes.
    pub head: u32,
    /// Persistent section bytes.
    pub tail: u32,
    /// The arena's true peak (head or set-up memory, plus tail).
    pub total: u32,
    /// Set-up memory in the head's place while planning: the buffer
    /// requests and the planner's workspace (why `total` can exceed
    /// `head + tail`). Not in the JSON, whose figures stay as accepted.
    #[serde(skip)]
    pub setup: u32,
    /// The planner whose plan set-up kept instead of `planner`'s, when
    /// `planner`'s own would have committed a larger total (optimal's
    /// search workspace above greedy's whole plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<&'static str>,
    /// Liveness lower bound for the head.
    pub lower_bound: u32,
    /// Bytes of kernel constants kept in flash (a constant image) instead
    /// of the tail; 0 when they are in the tail.
    #[serde(skip_serializing_if = "is_zero")]
    pub constants: u32,
    /// That constant image, as the host writes it beside the model.
    #[serde(skip)]
    pub constant_image: Vec<u8>,
    /// The lean schedule's ops in place and the ops it left as TFLM's
    /// (`None` under TFLM's schedule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lean: Option<LeanReport>,
    /// The arena's memory pools (split arenas only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolRow>,
    /// Every planned buffer.
    pub buffers: Vec<BufferRow>,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// What the lean schedule did with a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeanReport {
    /// The schedule lean resolved to for this model (`lean`, or
    /// `narrowing` when widening ops in place would raise the peak).
    pub runs: &'static str,
    /// The liveness bound of TFLM's schedule (every op's inputs and
    /// outputs apart), beside the plan's own bound under the lean one.
    pub classic_bound: u32,
    /// Ops written over their inputs' buffers.
    pub in_place: Vec<u32>,
    /// Ops of a kind that has an in-place form, run as TFLM's, each with
    /// why (`op 12 DEPTHWISE_CONV_2D: input still read by op 14`).
    pub as_tflm: Vec<String>,
    /// The fused chains (`ops 4, 5 (CONV_2D → CONV_2D; op 5 runs them)`).
    pub fused: Vec<String>,
    /// Convolutions outside every chain that could start one, each with
    /// why not (`op 0 CONV_2D: its output is read by op 3 too …`).
    pub not_fused: Vec<String>,
}

impl LeanReport {
    /// The lean schedule's decisions on `model`, with TFLM's bound for
    /// buffers aligned to `align`.
    pub fn of(model: &Model<'_>, align: u32) -> Self {
        use hilt_runtime::schedule::{Refusal, Schedule, chain_of, fused, in_place, resolve};
        let schedule = resolve(model, Schedule::Lean, align);
        let requests: Vec<_> = hilt_runtime::liveness::tensor_request_iter(model)
            .map(|r| r.with_align(align))
            .collect();
        let classic_bound =
            hilt_runtime::planner::lower_bound(&requests).min(u64::from(u32::MAX)) as u32;
        let mut report = LeanReport {
            runs: schedule.name(),
            classic_bound,
            in_place: Vec::new(),
            as_tflm: Vec::new(),
            fused: Vec::new(),
            not_fused: Vec::new(),
        };
        let name = |op: u32| {
            model
                .operator(op)
                .map(|o| o.code.to_string())
                .unwrap_or_default()
        };
        let conv =
            hilt_runtime::model::OpCode::Builtin(hilt_runtime::schema::BuiltinOperator::CONV_2D);
        for op in model.operators() {
            match in_place(model, schedule, op.index) {
                Ok(_) => report.in_place.push(op.index),
                Err(Refusal::NoInPlaceForm | Refusal::Fused { .. }) => {}
                Err(why) => report
                    .as_tflm
                    .push(format!("op {} {}: {why}", op.index, op.code)),
            }
            match fused(model, schedule, op.index) {
                Ok(chain) => {
                    let ops: Vec<String> =
                        (chain.head..=chain.runner).map(|o| o.to_string()).collect();
                    let codes: Vec<String> = (chain.head..=chain.runner).map(name).collect();
                    let over = if chain.sum.is_some() {
                        ", the ADD over the input"
                    } else {
                        ""
                    };
                    report.fused.push(format!(
                        "ops {} ({}; op {} runs them{over})",
                        ops.join(", "),
                        codes.join(" → "),
                        chain.runner
                    ));
                }
                // Only a convolution starts a chain; under TFLM's schedule
                // the line above said why already.
                Err(Refusal::NoFusedForm | Refusal::TflmSchedule) => {}
                Err(_) if op.code != conv => {}
                Err(_) if chain_of(model, schedule, op.index).is_some() => {}
                Err(why) => report
                    .not_fused
                    .push(format!("op {} {}: {why}", op.index, op.code)),
            }
        }
        report
    }
}

/// Options of one layout run.
#[derive(Debug, Clone)]
pub struct LayoutOptions {
    /// Planner.
    pub planner: PlannerKind,
    /// Activation alignment.
    pub align: u32,
    /// Arena size to try; `None` sizes it to fit.
    pub arena: Option<usize>,
    /// Guard bands, as the firmware's `HILT_CANARY` (they take arena space).
    pub canary: CanaryMode,
    /// What to plan: activations only, or through the interpreter.
    pub covers: Coverage,
    /// Plan with vnpu claiming these ops (through the interpreter only):
    /// its jobs' holds are in the plan.
    pub offload: Option<Vec<OpKind<'static>>>,
    /// The arena's memory pools ([`PoolLayout::WHOLE`]: one memory).
    pub pools: PoolLayout,
    /// The pools' names, in the layout's order.
    pub pool_names: Vec<String>,
    /// Where kernels' constants go (through the interpreter only): the
    /// tail, or a constant image for flash.
    pub constants: ConstantsPlace,
    /// TFLM's schedule or the lean one.
    pub schedule: Schedule,
}

impl Default for LayoutOptions {
    /// Activations only, with the defaults every board build uses
    /// (greedy, 16-byte alignment, no canaries).
    fn default() -> Self {
        LayoutOptions {
            planner: PlannerKind::Greedy,
            align: 16,
            arena: None,
            canary: CanaryMode::Off,
            covers: Coverage::Activations,
            offload: None,
            pools: PoolLayout::WHOLE,
            pool_names: Vec::new(),
            constants: ConstantsPlace::Tail,
            schedule: Schedule::Tflm,
        }
    }
}

impl LayoutOptions {
    /// What `board` commits for a model with the build defaults (greedy,
    /// 16-byte alignment, no canaries), in its `arena_size`.
    pub fn for_board(board: &Board) -> Self {
        LayoutOptions {
            arena: Some(board.arena_size as usize),
            covers: Coverage::Interpreter,
            ..LayoutOptions::default()
        }
    }

    /// What `board` commits for `scenario`: its planner, alignment, canary
    /// mode and arena size (else the board's) — the settings `hilt run`
    /// builds the firmware with (`FirmwareRequest::for_scenario`).
    pub fn for_scenario(board: &Board, scenario: &Scenario) -> Self {
        let choice = &scenario.offload;
        let offload = (choice.accelerator == hilt_contract::offload::Accelerator::Vnpu)
            .then(|| crate::accel::parse_offload(&choice.ops.join(",")).ok())
            .flatten();
        let mut arena = scenario.arena_size.unwrap_or(board.arena_size) as usize;
        if offload.is_some() && !choice.coherent {
            // The firmware's interpreter gets the first half; the other is
            // the engine's view of memory.
            arena = (arena / 2) & !63;
        }
        // A pool choice the board cannot meet fails the firmware build,
        // which names it; the layout is then of no use either way.
        let pools = scenario.pool_layout(board).unwrap_or(PoolLayout::WHOLE);
        LayoutOptions {
            planner: scenario.planner,
            align: scenario.align,
            arena: Some(arena),
            canary: scenario.canary,
            covers: Coverage::Interpreter,
            offload,
            pool_names: board.pools.iter().map(|p| p.name.clone()).collect(),
            pools,
            constants: scenario.constants,
            schedule: scenario.schedule,
        }
    }

    /// The same options with the board's pools `chosen` (by name) planned.
    pub fn with_pools(
        mut self,
        board: &Board,
        chosen: &[String],
    ) -> Result<Self, hilt_contract::ConfigError> {
        let layout = hilt_contract::pools::layout(
            Path::new("--pools"),
            &board.name,
            &board.pools,
            Some(chosen),
        )?;
        self.pools = layout;
        self.pool_names = board.pools.iter().map(|p| p.name.clone()).collect();
        Ok(self)
    }
}

/// Reads, verifies and plans the model at `path`.
pub fn layout_file(path: &Path, options: &LayoutOptions) -> Result<LayoutReport, LayoutError> {
    layout_model(&ModelFile::open(path)?, options)
}

/// Plans a model file already opened.
pub fn layout_model(
    model: &ModelFile,
    options: &LayoutOptions,
) -> Result<LayoutReport, LayoutError> {
    layout_bytes(model.bytes(), options).map_err(|e| e.with_path(model.path()))
}

/// [`layout_file`] for `board`, which is named in the report.
pub fn layout_for_board(
    path: &Path,
    board: &Board,
    options: &LayoutOptions,
) -> Result<LayoutReport, LayoutError> {
    let arena = options.arena.map_or(board.arena_size, |a| a as u64);
    let model_len = std::fs::metadata(path).ok().map(|m| m.len());
    board
        .check_budget(arena, model_len)
        .map_err(|shortfall| LayoutError::Budget {
            board: board.name.clone(),
            shortfall,
        })?;
    let mut report = layout_file(path, options)?;
    report.board = Some(board.name.clone());
    Ok(report)
}
