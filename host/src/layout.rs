//! `hilt layout`: plan a model's arena on the host and report it.
//!
//! The plan comes from the runtime's own [`allocate`] over a real arena, so
//! the figures are the ones the firmware will see, not a re-implementation.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hilt_runtime::allocation::{AllocError, AllocOptions, ArenaPlan, allocate};
use hilt_runtime::arena::Arena;
use hilt_runtime::model::{Model, ModelError};
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Offline, OfflinePlanError};
use hilt_runtime::request::{BufferOwner, MAX_ALIGN};
use serde::Serialize;

/// Which planner a layout uses: the one type files, flags and the firmware
/// build share (defined with the board/scenario contract).
pub use hilt_contract::PlannerKind;

/// A model's names, to make figures readable: the gate's snapshots, the
/// reports and `hilt run`'s lines label ops and buffers with them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelNames {
    /// Tensor names by index.
    pub tensors: Vec<String>,
    /// Operator names by index (execution order).
    pub ops: Vec<String>,
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
        },
        Err(_) => ModelNames::default(),
    }
}

/// Everything that can go wrong making a layout.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
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
    /// `--align` is not a power of two up to 1 MiB.
    #[error("--align {0}: must be a power of two from 1 to 1048576")]
    Align(u32),
}

/// One planned buffer, as `--format json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BufferRow {
    /// "tensor" or "scratch".
    pub kind: &'static str,
    /// Tensor index (null for scratch).
    pub tensor: Option<u32>,
    /// Tensor name, or "scratch(op N #K)".
    pub name: String,
    /// First step.
    pub first_step: u32,
    /// Last step (including any hold).
    pub last_step: u32,
    /// Requested bytes, before rounding.
    pub size: u32,
    /// Alignment.
    pub align: u32,
    /// Offset from the head's start.
    pub offset: u32,
}

/// A model's arena plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayoutReport {
    /// Planner name.
    pub planner: &'static str,
    /// Planned section bytes.
    pub head: u32,
    /// Persistent section bytes.
    pub tail: u32,
    /// The arena's true peak (head or set-up memory, plus tail).
    pub total: u32,
    /// Liveness lower bound for the head.
    pub lower_bound: u32,
    /// Every planned buffer.
    pub buffers: Vec<BufferRow>,
}

/// Options of one layout run.
#[derive(Debug, Clone, Copy)]
pub struct LayoutOptions {
    /// Planner.
    pub planner: PlannerKind,
    /// Activation alignment.
    pub align: u32,
    /// Arena size to try; `None` sizes it to fit.
    pub arena: Option<usize>,
}

impl Default for LayoutOptions {
    fn default() -> Self {
        LayoutOptions {
            planner: PlannerKind::Greedy,
            align: 16,
            arena: None,
        }
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

/// An error from [`layout_bytes`] before a path is attached.
#[derive(Debug, Clone, Copy)]
pub enum BytesError {
    /// See [`LayoutError::Model`].
    Model(ModelError),
    /// See [`LayoutError::Offline`].
    Offline(OfflinePlanError),
    /// See [`LayoutError::Alloc`].
    Alloc(AllocError),
    /// See [`LayoutError::Align`].
    Align(u32),
}

impl BytesError {
    fn with_path(self, path: &Path) -> LayoutError {
        let path = path.to_path_buf();
        match self {
            BytesError::Model(source) => LayoutError::Model { path, source },
            BytesError::Offline(source) => LayoutError::Offline { path, source },
            BytesError::Alloc(source) => LayoutError::Alloc { path, source },
            BytesError::Align(a) => LayoutError::Align(a),
        }
    }
}

/// Verifies and plans model bytes.
pub fn layout_bytes(bytes: &[u8], options: &LayoutOptions) -> Result<LayoutReport, BytesError> {
    if !options.align.is_power_of_two() || options.align > MAX_ALIGN {
        return Err(BytesError::Align(options.align));
    }
    let model = Model::from_bytes(bytes).map_err(BytesError::Model)?;
    let offline;
    let planner: &dyn MemoryPlanner = match options.planner {
        PlannerKind::Linear => &Linear,
        PlannerKind::Greedy => &Greedy,
        PlannerKind::Offline => {
            offline = Offline::from_model(&model).map_err(BytesError::Offline)?;
            &offline
        }
    };
    match options.arena {
        Some(size) => plan_in_arena(&model, planner, options.align, size),
        None => {
            // Size the arena from what a first attempt says it needs.
            let mut size = 64 * 1024;
            loop {
                match plan_in_arena(&model, planner, options.align, size) {
                    Err(BytesError::Alloc(AllocError::ArenaTooSmall(needs))) => {
                        let want = needs.head.max(needs.temp) as usize + needs.tail as usize + 64;
                        if want <= size {
                            size *= 2;
                        } else {
                            size = want;
                        }
                    }
                    other => return other,
                }
            }
        }
    }
}

fn plan_in_arena(
    model: &Model<'_>,
    planner: &dyn MemoryPlanner,
    align: u32,
    size: usize,
) -> Result<LayoutReport, BytesError> {
    // Start the arena on a 1 MiB boundary so the figures do not depend on
    // where the host allocator happened to put it.
    let mut backing = vec![0u8; size + MAX_ALIGN as usize];
    let skip = backing.as_ptr().align_offset(MAX_ALIGN as usize);
    let mut arena = Arena::new(&mut backing[skip..skip + size]);
    let mut report = None;
    let options = AllocOptions {
        align,
        ..AllocOptions::default()
    };
    let allocation = allocate(model, planner, &mut arena, &options, &[], |plan| {
        report = Some(rows(model, plan));
    })
    .map_err(BytesError::Alloc)?;
    let (buffers, head, tail, lower_bound) =
        report.expect("allocate calls the report callback before it commits");
    Ok(LayoutReport {
        planner: planner.name(),
        head,
        tail,
        total: allocation.used_bytes,
        lower_bound,
        buffers,
    })
}

fn rows(model: &Model<'_>, plan: &ArenaPlan<'_>) -> (Vec<BufferRow>, u32, u32, u32) {
    let buffers = plan
        .requests
        .iter()
        .zip(plan.offsets)
        .map(|(r, &offset)| {
            let (kind, tensor, name) = match r.owner() {
                BufferOwner::Tensor(t) => (
                    "tensor",
                    Some(t),
                    model
                        .tensor(t)
                        .map(|t| t.name.to_string())
                        .unwrap_or_default(),
                ),
                BufferOwner::Scratch { op, index } => {
                    ("scratch", None, format!("scratch(op {op} #{index})"))
                }
            };
            BufferRow {
                kind,
                tensor,
                name,
                first_step: r.first_step,
                last_step: r.live_until(),
                size: r.size,
                align: r.align,
                offset,
            }
        })
        .collect();
    (buffers, plan.head, plan.tail, plan.lower_bound)
}

fn kib(bytes: u32) -> String {
    format!("{:.2} KiB", f64::from(bytes) / 1024.0)
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
    for (label, value) in [
        ("head", report.head),
        ("tail", report.tail),
        ("total", report.total),
        ("lower bound", report.lower_bound),
    ] {
        let _ = writeln!(out, "  {label:<12}{value:>10} B  {:>12}", kib(value));
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
        let _ = writeln!(
            out,
            "{i:>4}  {:<7} {tensor:>6}  {name:<name_width$}  {steps:>11}  {:>9}  {:>10}  {:>5}  {:>9}  {:>9}",
            b.kind,
            b.size,
            kib(b.size),
            b.align,
            b.offset,
            b.offset + padded
        );
    }
    out
}
