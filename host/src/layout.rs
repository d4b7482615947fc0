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

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::host_run::ArenaAllocError;
use hilt_runtime::accel::OpKind;
use hilt_runtime::accel::vnpu::VnpuConfig;
use hilt_runtime::allocation::{AllocError, AllocOptions, ArenaPlan, allocate};
use hilt_runtime::arena::{Arena, ArenaError};
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::KernelError;
use hilt_runtime::model::{Model, ModelError};
use hilt_runtime::planner::{MemoryPlanner, OfflinePlanError, PlannerKind};
use hilt_runtime::pool::PoolLayout;
use hilt_runtime::request::{BufferOwner, MAX_ALIGN};
use serde::Serialize;

use crate::config::board::Board;
use crate::config::scenario::Scenario;
use crate::holds::{Hold, Liveness};

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

/// The names in `model`, empty when it cannot be read: names only label
/// figures, so an unreadable model must not stop a run's output (its run
/// fails on its own).
pub fn model_names(model: &Path) -> ModelNames {
    let Ok(bytes) = std::fs::read(model) else {
        return ModelNames::default();
    };
    let aligned = crate::host_run::AlignedBytes::new(&bytes);
    match Model::from_bytes(aligned.as_slice()) {
        Ok(m) => ModelNames {
            ops: m.operators().map(|op| op.code.to_string()).collect(),
            tensors: m.tensors().map(|t| t.name.to_string()).collect(),
            liveness: natural_liveness(&m, &bytes),
        },
        Err(_) => ModelNames::default(),
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
    /// The model file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The model failed verification.
    #[error("{path}: {source}")]
    Model {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: ModelError,
    },
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
    /// The arena's memory pools (split arenas only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolRow>,
    /// Every planned buffer.
    pub buffers: Vec<BufferRow>,
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
    let bytes = std::fs::read(path).map_err(|source| LayoutError::Read {
        path: path.into(),
        source,
    })?;
    layout_bytes(&bytes, options).map_err(|e| e.with_path(path))
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

/// An error from [`layout_bytes`] before a path is attached.
#[derive(Debug, Clone)]
pub enum BytesError {
    /// See [`LayoutError::Model`].
    Model(ModelError),
    /// See [`LayoutError::Offline`].
    Offline(OfflinePlanError),
    /// See [`LayoutError::Alloc`].
    Alloc(AllocError),
    /// See [`LayoutError::Interpreter`].
    Interpreter(InterpreterError),
    /// See [`LayoutError::Align`].
    Align(u32),
    /// See [`LayoutError::Unsupported`].
    Unsupported(crate::host_run::UnsupportedOps),
    /// See [`LayoutError::Arena`].
    Arena(ArenaAllocError),
}

impl BytesError {
    /// The [`LayoutError`] for the model file at `path`.
    pub fn with_path(self, path: &Path) -> LayoutError {
        let path = path.to_path_buf();
        match self {
            BytesError::Model(source) => LayoutError::Model { path, source },
            BytesError::Offline(source) => LayoutError::Offline { path, source },
            BytesError::Alloc(source) => LayoutError::Alloc { path, source },
            BytesError::Interpreter(InterpreterError::Alloc(source)) => {
                LayoutError::Alloc { path, source }
            }
            BytesError::Interpreter(source) => LayoutError::Interpreter { path, source },
            BytesError::Align(a) => LayoutError::Align(a),
            BytesError::Unsupported(source) => LayoutError::Unsupported { path, source },
            BytesError::Arena(source) => LayoutError::Arena(source),
        }
    }

    /// The arena a retry needs when this error says the arena was too
    /// small (`None`: a real failure, or no figure to go on).
    fn wants_arena(&self, tried: usize) -> Option<usize> {
        let needs = match self {
            BytesError::Alloc(AllocError::ArenaTooSmall(needs))
            | BytesError::Interpreter(InterpreterError::Alloc(AllocError::ArenaTooSmall(needs))) => {
                Some(needs)
            }
            // The tail filled up before the planner could say what it needs.
            BytesError::Interpreter(
                InterpreterError::Alloc(AllocError::Arena(ArenaError::OutOfMemory { .. }))
                | InterpreterError::Kernel {
                    error: KernelError::OutOfMemory { .. },
                    ..
                },
            ) => None,
            _ => return None,
        };
        let want = needs.map_or(0, |n| n.head.max(n.temp) as usize + n.tail as usize + 64);
        let next = if want > tried { want } else { tried * 2 };
        (next <= MAX_FIT_ARENA).then_some(next)
    }
}

/// The largest arena [`layout_bytes`] tries when sizing one to fit: far
/// beyond any microcontroller, so a model that needs more is reported
/// rather than planned.
const MAX_FIT_ARENA: usize = 1 << 30;

/// Verifies and plans model bytes.
pub fn layout_bytes(bytes: &[u8], options: &LayoutOptions) -> Result<LayoutReport, BytesError> {
    if !options.align.is_power_of_two() || options.align > MAX_ALIGN {
        return Err(BytesError::Align(options.align));
    }
    // Kernels view constant data in place, as in flash: keep it 16-aligned.
    let bytes = crate::host_run::AlignedBytes::new(bytes);
    let model = Model::from_bytes(bytes.as_slice()).map_err(BytesError::Model)?;
    let planner = options
        .planner
        .planner(&model)
        .map_err(BytesError::Offline)?;
    let plan = |size| match options.covers {
        Coverage::Activations => plan_activations(&model, &planner, options, size),
        Coverage::Interpreter => plan_interpreter(&model, &planner, options, size),
    };
    // A split arena is exactly its pools.
    let arena = match options.pools.is_split() {
        true => Some(options.pools.size() as usize),
        false => options.arena,
    };
    match arena {
        Some(size) => plan(size),
        None => {
            let mut size = 64 * 1024;
            loop {
                match plan(size) {
                    Err(e) => match e.wants_arena(size) {
                        Some(next) => size = next,
                        None => return Err(e),
                    },
                    done => return done,
                }
            }
        }
    }
}

/// Arena bytes starting on a 1 MiB boundary, so the figures do not depend
/// on where the host allocator happened to put them.
struct HostArena {
    backing: Vec<u8>,
    skip: usize,
    size: usize,
}

impl HostArena {
    /// Fails, naming `size`, when the system cannot give that much.
    fn new(size: usize) -> Result<Self, BytesError> {
        let error = BytesError::Arena(ArenaAllocError { bytes: size });
        let total = size.checked_add(MAX_ALIGN as usize).ok_or(error.clone())?;
        let backing = crate::host_run::try_zeroed_vec::<u8>(total, size).map_err(|_| error)?;
        let skip = backing.as_ptr().align_offset(MAX_ALIGN as usize);
        Ok(HostArena {
            backing,
            skip,
            size,
        })
    }

    fn bytes(&mut self) -> &mut [u8] {
        &mut self.backing[self.skip..self.skip + self.size]
    }
}

fn alloc_options(options: &LayoutOptions) -> AllocOptions {
    AllocOptions {
        align: options.align,
        canary: options.canary,
        pools: options.pools,
    }
}

/// Bytes of a `tail`-byte tail, at the end of a `capacity`-byte arena,
/// inside the pool `[start, start + size)`.
pub(crate) fn tail_in(start: u32, size: u32, capacity: u32, tail: u32) -> u32 {
    let tail_start = capacity.saturating_sub(tail).max(start);
    (start + size).saturating_sub(tail_start)
}

/// Each pool's figures, and each buffer's pool, from where the buffers lie
/// (pools are adjacent: an offset says which one).
fn mark_pools(
    options: &LayoutOptions,
    head_start: u32,
    capacity: u32,
    tail: u32,
    buffers: &mut [BufferRow],
) -> Vec<PoolRow> {
    let layout = &options.pools;
    let name = |k: usize| {
        options
            .pool_names
            .get(k)
            .cloned()
            .unwrap_or_else(|| format!("pool {k}"))
    };
    let mut pools: Vec<PoolRow> = layout
        .pools()
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let start = layout.start(k);
            PoolRow {
                name: name(k),
                start,
                head_offset: start.saturating_sub(head_start),
                size: p.size,
                reach: format!("{:?}", p.reach),
                planned: p.planned,
                head: 0,
                tail: tail_in(start, p.size, capacity, tail),
                buffers: 0,
            }
        })
        .collect();
    for b in buffers {
        let at = head_start + b.offset;
        let Some(k) = layout.pool_at(at) else {
            continue;
        };
        let end = at + b.size.div_ceil(b.align) * b.align;
        let pool = &mut pools[k];
        pool.head = pool.head.max(end - pool.start);
        pool.buffers += 1;
        b.pool = Some(pool.name.clone());
    }
    pools
}

fn plan_activations(
    model: &Model<'_>,
    planner: &dyn MemoryPlanner,
    options: &LayoutOptions,
    size: usize,
) -> Result<LayoutReport, BytesError> {
    let mut memory = HostArena::new(size)?;
    let mut arena = Arena::new(memory.bytes());
    let mut report = None;
    let allocation = allocate(
        model,
        planner,
        &mut arena,
        &alloc_options(options),
        &[],
        |plan| {
            report = Some((rows(model, plan), plan.head_start, plan.planner));
        },
    )
    .map_err(BytesError::Alloc)?;
    let ((mut buffers, head, tail, lower_bound), head_start, used) =
        report.expect("allocate calls the report callback before it commits");
    let pools = mark_pools(
        options,
        head_start,
        size as u32,
        allocation.tail_bytes,
        &mut buffers,
    );
    Ok(LayoutReport {
        planner: planner.name(),
        covers: Coverage::Activations,
        board: None,
        capacity: None,
        head,
        tail,
        total: allocation.used_bytes,
        setup: allocation.temp_bytes,
        kept: (used != planner.name()).then_some(used),
        lower_bound,
        pools,
        buffers,
    })
}

/// The firmware's own set-up: [`Interpreter::allocate_with_report`] with
/// the resolver every build registers.
fn plan_interpreter(
    model: &Model<'_>,
    planner: &dyn MemoryPlanner,
    options: &LayoutOptions,
    size: usize,
) -> Result<LayoutReport, BytesError> {
    let mut memory = HostArena::new(size)?;
    // Declared before the interpreter, which borrows it.
    let engine = options.offload.as_ref().map(|ops| {
        (
            crate::accel::ThreadedVnpu::start(VnpuConfig::default()),
            ops,
        )
    });
    crate::host_run::check_supported(model).map_err(BytesError::Unsupported)?;
    let mut interpreter = Interpreter::new(*model, crate::host_run::resolver(), memory.bytes());
    if let Some((engine, ops)) = &engine {
        interpreter.set_offload(Some(engine.offload(ops)));
    }
    let mut report = None;
    let allocation = *interpreter
        .allocate_with_report(planner, &alloc_options(options), |plan| {
            report = Some((rows(model, plan), plan.head_start, plan.planner));
        })
        .map_err(BytesError::Interpreter)?;
    let ((mut buffers, _, _, lower_bound), head_start, used) =
        report.expect("allocate calls the report callback before it commits");
    let pools = mark_pools(
        options,
        head_start,
        size as u32,
        allocation.tail_bytes,
        &mut buffers,
    );
    if engine.is_some() {
        let mut on_npu = vec![false; model.operator_count() as usize];
        interpreter
            .claimed_ops(&mut on_npu)
            .map_err(BytesError::Interpreter)?;
        mark_holds(model, &mut buffers, &on_npu);
    }
    // The committed figures, as the firmware sends them (`ArenaUsage`): the
    // tail includes what was carved after planning (scratch locations,
    // guard table, the tail's guard band).
    Ok(LayoutReport {
        planner: planner.name(),
        covers: Coverage::Interpreter,
        board: None,
        capacity: options.arena.map(|_| size as u32),
        head: allocation.head.len,
        tail: allocation.tail_bytes,
        total: interpreter.arena_used_bytes() as u32,
        setup: allocation.temp_bytes,
        kept: (used != planner.name()).then_some(used),
        lower_bound,
        pools,
        buffers,
    })
}

/// Names each buffer's hold, against the tensors' natural lifetimes (the
/// plan's rows carry the planned ones, holds included).
fn mark_holds(model: &Model<'_>, buffers: &mut [BufferRow], on_npu: &[bool]) {
    let users = Liveness::users_of(model);
    for row in buffers {
        row.held = match (row.tensor, row.op, row.natural_last_step) {
            (Some(t), _, natural) => crate::holds::tensor_hold(
                natural,
                users.get(t as usize).map_or(&[][..], Vec::as_slice),
                row.last_step,
                on_npu,
            ),
            (None, Some(op), _) => crate::holds::scratch_hold(op, row.last_step),
            (None, None, _) => None,
        };
    }
}

fn rows(model: &Model<'_>, plan: &ArenaPlan<'_>) -> (Vec<BufferRow>, u32, u32, u32) {
    let buffers = plan
        .requests
        .iter()
        .zip(plan.offsets)
        .map(|(r, &offset)| {
            let (kind, tensor, op, name) = match r.owner() {
                BufferOwner::Tensor(t) => (
                    "tensor",
                    Some(t),
                    None,
                    model
                        .tensor(t)
                        .map(|t| t.name.to_string())
                        .unwrap_or_default(),
                ),
                BufferOwner::Scratch { op, index } => (
                    "scratch",
                    None,
                    Some(op),
                    format!("scratch(op {op} #{index})"),
                ),
            };
            BufferRow {
                kind,
                tensor,
                op,
                name,
                first_step: r.first_step,
                last_step: r.live_until(),
                natural_last_step: r.last_step,
                size: r.size,
                align: r.align,
                offset,
                held: None,
                pool: None,
            }
        })
        .collect();
    (buffers, plan.head, plan.tail, plan.lower_bound)
}

fn kib(bytes: u32) -> String {
    format!("{:.2} KiB", f64::from(bytes) / 1024.0)
}

/// What `total` counts, under the figures: the arena's peak is its tail
/// plus the higher of the head and the set-up memory planning used in the
/// head's place (requests and planner workspace; with kernels, their
/// prepare's temp memory too), so it can exceed `head + tail`. And, when
/// set-up kept another planner's plan for a smaller total, which and why.
fn render_total_note(out: &mut String, report: &LayoutReport) {
    let _ = writeln!(
        out,
        "  (total: the arena's peak, the tail plus the higher of the head and the set-up \
         memory planning used below it: {} B of requests and planner workspace{}; \
         guards and alignment included)",
        report.setup,
        if report.covers == Coverage::Interpreter {
            ", and kernels' prepare"
        } else {
            ""
        }
    );
    if let Some(kept) = report.kept {
        let _ = writeln!(
            out,
            "  ({} plan kept: {}'s search needs more set-up memory than {kept}'s whole plan \
             commits, so its total would be larger)",
            kept, report.planner
        );
    }
}

/// The plain-text table a person reads first.
pub fn render_table(report: &LayoutReport, model_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{model_name}: {} planner, {} buffers",
        report.planner,
        report.buffers.len()
    );
    match (&report.board, report.covers) {
        (Some(board), _) => {
            let _ = writeln!(
                out,
                "  as board {board} commits it: kernel op data and scratch included"
            );
        }
        (None, Coverage::Interpreter) => {
            let _ = writeln!(
                out,
                "  through the interpreter: kernel op data and scratch included"
            );
        }
        (None, Coverage::Activations) => {}
    }
    if let Some(capacity) = report.capacity {
        let _ = writeln!(
            out,
            "  {:<12}{capacity:>10} B  {:>12}",
            "arena",
            kib(capacity)
        );
    }
    for (label, value) in [
        ("head", report.head),
        ("tail", report.tail),
        ("total", report.total),
        ("lower bound", report.lower_bound),
    ] {
        let _ = writeln!(out, "  {label:<12}{value:>10} B  {:>12}", kib(value));
    }
    render_total_note(&mut out, report);
    for p in &report.pools {
        let _ = writeln!(
            out,
            "  pool {:<7}{:>10} B  at {:>8}, {}{}: head {} B, tail {} B, {} buffers",
            p.name,
            p.size,
            p.start,
            p.reach,
            if p.planned { "" } else { ", not planned" },
            p.head,
            p.tail,
            p.buffers
        );
    }
    let _ = writeln!(out);
    let name_width = report
        .buffers
        .iter()
        .map(|b| b.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 48);
    let _ = writeln!(
        out,
        "{:>4}  {:<7} {:>6}  {:<name_width$}  {:>11}  {:>9}  {:>10}  {:>5}  {:>9}  {:>9}",
        "#", "kind", "tensor", "name", "steps", "size B", "size", "align", "offset", "end"
    );
    for (i, b) in report.buffers.iter().enumerate() {
        let mut name: String = b.name.chars().take(name_width).collect();
        if b.name.chars().count() > name_width {
            name.pop();
            name.push('…');
        }
        let tensor = b.tensor.map_or_else(|| "-".to_string(), |t| t.to_string());
        let steps = format!("{}..{}", b.first_step, b.last_step);
        let padded = b.size.div_ceil(b.align) * b.align;
        let _ = write!(
            out,
            "{i:>4}  {:<7} {tensor:>6}  {name:<name_width$}  {steps:>11}  {:>9}  {:>10}  {:>5}  {:>9}  {:>9}",
            b.kind,
            b.size,
            kib(b.size),
            b.align,
            b.offset,
            b.offset + padded
        );
        // Only offload plans have holds: other tables are unchanged.
        if let Some(pool) = &b.pool {
            let _ = write!(out, "  in {pool}");
        }
        if let Some(hold) = b.held {
            let _ = write!(out, "  {hold}");
        }
        out.push('\n');
    }
    out
}
