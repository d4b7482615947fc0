//! Running a model on the host with the runtime's interpreter: the shared
//! plumbing of `hilt infer`, `hilt bench` and the conformance suite.

use std::path::PathBuf;
use std::time::Instant;

use hilt_runtime::accel::{Offload, vnpu};
use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::interpreter::{Clock, Interpreter, InterpreterError};
use hilt_runtime::kernels::{BUILTINS_CAPACITY, OpResolver, all_builtins};
use hilt_runtime::model::Model;
use hilt_runtime::planner::{AnyPlanner, MemoryPlanner, PlannerKind};

pub use crate::aligned::{AlignedBytes, ArenaAllocError};

/// Failures of a host run, each naming what is at fault.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The model file cannot be read or is not a model.
    #[error(transparent)]
    Model(#[from] crate::model_file::ModelFileError),
    /// The offline plan is unusable.
    #[error("offline plan: {0}")]
    Offline(hilt_runtime::planner::OfflinePlanError),
    /// Set-up or invocation failed.
    #[error("{0}")]
    Interpreter(#[from] InterpreterError),
    /// Operators the runtime has no kernel for (all of them).
    #[error("{0}")]
    Unsupported(#[from] UnsupportedOps),
    /// An input file does not fit the model's input.
    #[error("input {position} ({name}): {problem}")]
    Input {
        /// Input position.
        position: usize,
        /// Tensor name.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// The arena could not be allocated.
    #[error(transparent)]
    Arena(#[from] ArenaAllocError),
    /// Wrong number of input files: one per model input per step.
    #[error("{}", input_count_message(*inputs, *steps, *given))]
    InputCount {
        /// Inputs the model has.
        inputs: usize,
        /// Steps asked for (`--steps`).
        steps: usize,
        /// Files given.
        given: usize,
    },
}

/// `1 input file` / `2 input files`.
fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// What [`RunError::InputCount`] says: the files a model needs, per step
/// when there are several, against the files given.
fn input_count_message(inputs: usize, steps: usize, given: usize) -> String {
    let was = if given == 1 { "was" } else { "were" };
    if steps <= 1 {
        return format!(
            "the model has {}, {} {was} given (one --input per model input)",
            count(inputs, "input"),
            count(given, "input file"),
        );
    }
    format!(
        "--steps {steps} needs {} ({} × {steps} steps), {given} {was} given",
        count(inputs * steps, "input file"),
        count(inputs, "model input"),
    )
}

/// The operators of a model hilt has no kernel for: every one, each with
/// its TFLite name (and custom code), its index and the tensor types it was
/// asked for, so a user sees at once everything a model needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} of the model's {total} operators {} no kernel in hilt: {}\n  {}",
    ops.len(),
    if ops.len() == 1 { "has" } else { "have" },
    self.names(),
    ops.iter().map(|o| o.line.as_str()).collect::<Vec<_>>().join("\n  ")
)]
pub struct UnsupportedOps {
    /// Operators in the model.
    pub total: u32,
    /// The unsupported ones, in execution order.
    pub ops: Vec<UnsupportedOp>,
}

/// One operator hilt has no kernel for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedOp {
    /// Its TFLite name (`TRANSPOSE`, or `CUSTOM(code)`).
    pub name: String,
    /// `op 3 TRANSPOSE (int8, int32 -> int8)`.
    pub line: String,
}

impl UnsupportedOps {
    /// `MEAN (7), TRANSPOSE (5)`: each name once, by name, with its count.
    pub fn names(&self) -> String {
        let mut counts = std::collections::BTreeMap::<&str, usize>::new();
        for op in &self.ops {
            *counts.entry(&op.name).or_default() += 1;
        }
        counts
            .iter()
            .map(|(name, n)| format!("{name} ({n})"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `Err` listing every operator of `model` the host's resolver lacks.
pub fn check_supported(model: &Model<'_>) -> Result<(), UnsupportedOps> {
    let ops: Vec<UnsupportedOp> = hilt_runtime::kernels::unsupported_ops(model, resolver())
        .map(|op| UnsupportedOp {
            name: op.code.to_string(),
            line: describe_op(model, &op),
        })
        .collect();
    if ops.is_empty() {
        return Ok(());
    }
    Err(UnsupportedOps {
        total: model.operator_count(),
        ops,
    })
}

/// `op 3 TRANSPOSE (int8, int32 -> int8)`: index, name, input and output
/// types (`-` for an omitted optional input).
pub fn describe_op(model: &Model<'_>, op: &hilt_runtime::model::OperatorInfo<'_>) -> String {
    let types = |list: &mut dyn Iterator<Item = Option<u32>>| {
        list.map(|t| match t.and_then(|t| model.tensor(t)) {
            Some(t) => tensor_type_name(t.dtype),
            None => "-".to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
    };
    format!(
        "op {} {} ({} -> {})",
        op.index,
        op.code,
        types(&mut op.inputs()),
        types(&mut op.outputs())
    )
}

/// `int8`, `float32`: TFLite's type names, lower case.
pub fn tensor_type_name(dtype: hilt_runtime::schema::TensorType) -> String {
    dtype
        .variant_name()
        .map_or_else(|| format!("type {}", dtype.0), str::to_lowercase)
}

/// The planner for `kind` over `model` (the runtime's one choice of
/// planner, shared with `hilt layout` and the firmware).
pub fn planner_for<'a>(kind: PlannerKind, model: &Model<'a>) -> Result<AnyPlanner<'a>, RunError> {
    kind.planner(model).map_err(RunError::Offline)
}

/// The builtin kernels and vnpu's custom op, built once per process.
pub fn resolver() -> &'static OpResolver<BUILTINS_CAPACITY> {
    static RESOLVER: std::sync::OnceLock<OpResolver<BUILTINS_CAPACITY>> =
        std::sync::OnceLock::new();
    RESOLVER.get_or_init(|| {
        let mut r = all_builtins();
        // BUILTINS_CAPACITY entries hold the builtins and this one.
        let _ = r.add_custom(vnpu::NEGATE_NAME, vnpu::NEGATE);
        r
    })
}

/// Default arena for host runs: large enough for every model we know of.
pub const DEFAULT_ARENA: usize = 4 << 20;

/// An interpreter with its arena, allocated.
pub fn interpreter<'m, 'a>(
    model: Model<'m>,
    planner: &dyn MemoryPlanner,
    arena: &'a mut AlignedBytes,
) -> Result<Interpreter<'m, 'a, 'static>, RunError> {
    check_supported(&model)?;
    let mut interpreter = Interpreter::new(model, resolver(), arena.as_mut_slice());
    interpreter.allocate(planner, &AllocOptions::default())?;
    Ok(interpreter)
}

/// [`interpreter`], with the ops `offload` claims run on its backend.
pub fn interpreter_offloaded<'m, 'a, 'r>(
    model: Model<'m>,
    planner: &dyn MemoryPlanner,
    arena: &'a mut AlignedBytes,
    offload: Option<Offload<'r>>,
) -> Result<Interpreter<'m, 'a, 'r>, RunError> {
    check_supported(&model)?;
    let mut interpreter = Interpreter::new(model, resolver(), arena.as_mut_slice());
    interpreter.set_offload(offload);
    interpreter.allocate(planner, &AllocOptions::default())?;
    Ok(interpreter)
}

/// Checks and copies input bytes for model input `position`.
pub fn set_input(
    interpreter: &mut Interpreter<'_, '_, '_>,
    position: usize,
    bytes: &[u8],
) -> Result<(), RunError> {
    let info = interpreter.input_info(position)?;
    let target = interpreter.input_mut(position)?;
    if target.len() != bytes.len() {
        return Err(RunError::Input {
            position,
            name: info.name.to_string(),
            problem: format!(
                "{} bytes given, the tensor ({:?} {:?}) holds {}",
                bytes.len(),
                info.dtype,
                info.shape().collect::<Vec<_>>(),
                target.len()
            ),
        });
    }
    target.copy_from_slice(bytes);
    Ok(())
}

/// Nanoseconds since the clock was made.
#[derive(Debug)]
pub struct HostClock(Instant);

impl Default for HostClock {
    fn default() -> Self {
        HostClock(Instant::now())
    }
}

impl Clock for HostClock {
    fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}
