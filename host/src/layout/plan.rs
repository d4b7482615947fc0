//! Planning a model's arena on the host: the runtime's planner over a
//! real arena (activations only, or the interpreter's own allocation with
//! every kernel's prepare), sized to fit when no arena is given, and the
//! planned buffers as report rows.

use std::path::Path;

use crate::host_run::ArenaAllocError;
use hilt_runtime::accel::vnpu::VnpuConfig;
use hilt_runtime::allocation::{AllocError, AllocOptions, ArenaPlan, allocate};
use hilt_runtime::arena::{Arena, ArenaError};
use hilt_runtime::constants::Constants;
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::KernelError;
use hilt_runtime::model::{Model, ModelError};
use hilt_runtime::planner::{MemoryPlanner, OfflinePlanError};
use hilt_runtime::request::{BufferOwner, MAX_ALIGN};

use crate::config::scenario::{ConstantsPlace, Schedule};
use crate::holds::Liveness;
use crate::model_file::ModelFileError;

use super::{BufferRow, Coverage, LayoutError, LayoutOptions, LayoutReport, PoolRow};

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
            BytesError::Model(source) => {
                LayoutError::Model(ModelFileError::NotAModel { path, source })
            }
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
        let backing = crate::aligned::try_zeroed_vec::<u8>(total, size).map_err(|_| error)?;
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
        schedule: options.schedule,
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
        constants: 0,
        constant_image: Vec::new(),
        lean: lean_report(model, options),
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
    // Room for any constant image: prepare widens weights at most to
    // 32 bits, and the tables beside them are small.
    let mut image = match options.constants {
        ConstantsPlace::Tail => Vec::new(),
        ConstantsPlace::Flash => vec![0u8; model.bytes().len() * 4 + 65536],
    };
    // The image starts 8-aligned, as the slot's does in flash.
    let skip = image.as_ptr().align_offset(8).min(image.len());
    let mut interpreter = Interpreter::new(*model, crate::host_run::resolver(), memory.bytes());
    if let Some((engine, ops)) = &engine {
        interpreter.set_offload(Some(engine.offload(ops)));
    }
    if !image.is_empty() {
        interpreter.set_constants(Constants::write(&mut image[skip..]));
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
        constants: interpreter.constant_image().len() as u32,
        constant_image: interpreter.constant_image().to_vec(),
        lean: lean_report(model, options),
        pools,
        buffers,
    })
}

/// The lean schedule's decisions, under the lean schedule.
fn lean_report(model: &Model<'_>, options: &LayoutOptions) -> Option<super::LeanReport> {
    (options.schedule == Schedule::Lean).then(|| super::LeanReport::of(model, options.align))
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
