//! `hilt infer`: run a model on the host once (or N steps) on given inputs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hilt_runtime::model::TensorInfo;
use hilt_runtime::schema::TensorType;

use crate::accel::AccelChoice;
use crate::host_run::{AlignedBytes, RunError, interpreter_offloaded, planner_for, set_input};
use crate::model_file::ModelFile;
use crate::tensor_file;
use hilt_runtime::planner::PlannerKind;

/// What `hilt infer` was asked to do.
#[derive(Debug, Clone)]
pub struct InferRequest {
    /// The model file.
    pub model: PathBuf,
    /// Input files, step-major: step 0's inputs in model order, then step 1's, ...
    pub inputs: Vec<PathBuf>,
    /// Output files (one per model output); printed when empty.
    pub outputs: Vec<PathBuf>,
    /// Arena bytes.
    pub arena: usize,
    /// Planner.
    pub planner: PlannerKind,
    /// Invocations on one interpreter (stateful models).
    pub steps: usize,
    /// The accelerator claimed ops run on (none: all on the CPU).
    pub accelerator: AccelChoice,
}

/// One output of one step.
#[derive(Debug, Clone)]
pub struct OutputValue {
    /// Step.
    pub step: usize,
    /// Output position.
    pub position: usize,
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub dtype: TensorType,
    /// Shape.
    pub shape: Vec<i32>,
    /// Little-endian bytes.
    pub data: Vec<u8>,
}

/// Runs the request; returns every output of every step and the arena's
/// high-water mark.
pub fn infer(request: &InferRequest) -> Result<(Vec<OutputValue>, usize), RunError> {
    let file = ModelFile::open(&request.model)?;
    let model = file.model();
    let n_inputs = model.inputs().len();
    let steps = request.steps.max(1);
    if request.inputs.len() != n_inputs * steps {
        return Err(RunError::InputCount {
            inputs: n_inputs,
            steps,
            given: request.inputs.len(),
        });
    }
    let planner = planner_for(request.planner, &model)?;
    let mut arena = AlignedBytes::try_zeroed(request.arena)?;
    // SAFETY: `arena` is declared first, so it outlives the engine.
    let engine = unsafe { request.accelerator.engine(arena.as_mut_slice()) }?;
    let offload = engine
        .as_ref()
        .map(|e| e.offload(&request.accelerator.offload));
    let mut interpreter = interpreter_offloaded(model, &planner, &mut arena, offload)?;
    let mut results = Vec::new();
    for step in 0..steps {
        for position in 0..n_inputs {
            let path = &request.inputs[step * n_inputs + position];
            let info = interpreter.input_info(position)?;
            let file = tensor_file::read(path).map_err(|e| RunError::Input {
                position,
                name: info.name.to_string(),
                problem: e.to_string(),
            })?;
            check_npy(position, &info, &file)?;
            set_input(&mut interpreter, position, &file.data)?;
        }
        interpreter.invoke()?;
        for position in 0..interpreter.output_count() {
            let info = interpreter.output_info(position)?;
            results.push(OutputValue {
                step,
                position,
                name: info.name.to_string(),
                dtype: info.dtype,
                shape: info.shape().collect(),
                data: interpreter.output(position)?.to_vec(),
            });
        }
    }
    Ok((results, interpreter.arena_used_bytes()))
}

fn check_npy(
    position: usize,
    info: &TensorInfo<'_>,
    file: &tensor_file::TensorFile,
) -> Result<(), RunError> {
    let problem = |p: String| RunError::Input {
        position,
        name: info.name.to_string(),
        problem: p,
    };
    if let Some(dtype) = file.dtype
        && dtype != info.dtype
    {
        return Err(problem(format!(
            "the .npy file holds {dtype:?}, the tensor is {:?}",
            info.dtype
        )));
    }
    if let Some(shape) = &file.shape {
        let want: Vec<usize> = info.shape().map(|d| d.max(0) as usize).collect();
        if shape.iter().product::<usize>() != want.iter().product::<usize>() {
            return Err(problem(format!(
                "the .npy shape {shape:?} does not fit the tensor's {want:?}"
            )));
        }
    }
    Ok(())
}

/// Where output `value` goes when output files were named: the file itself
/// for a single step, `NAME.stepK.EXT` for several.
pub fn output_path(base: &Path, step: usize, steps: usize) -> PathBuf {
    if steps <= 1 {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match base.extension() {
        Some(ext) => format!("{stem}.step{step}.{}", ext.to_string_lossy()),
        None => format!("{stem}.step{step}"),
    };
    base.with_file_name(name)
}

/// Bytes to write for an output: `.npy` when the path says so, raw otherwise.
pub fn output_bytes(path: &Path, value: &OutputValue) -> Vec<u8> {
    if path.extension().is_some_and(|e| e == "npy") {
        let shape: Vec<usize> = value.shape.iter().map(|&d| d.max(0) as usize).collect();
        if let Some(bytes) = tensor_file::write_npy(value.dtype, &shape, &value.data) {
            return bytes;
        }
    }
    value.data.clone()
}

/// A readable rendering of an output's values.
pub fn render(value: &OutputValue) -> String {
    let mut out = format!(
        "step {} output {} {:?} {:?} {:?}:",
        value.step, value.position, value.name, value.dtype, value.shape
    );
    let d = &value.data;
    let items: Vec<String> = match value.dtype {
        TensorType::INT8 => d.iter().map(|&b| (b as i8).to_string()).collect(),
        TensorType::UINT8 | TensorType::BOOL => d.iter().map(u8::to_string).collect(),
        TensorType::INT16 => d
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]).to_string())
            .collect(),
        TensorType::INT32 => d
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_string())
            .collect(),
        TensorType::FLOAT32 => d
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_string())
            .collect(),
        _ => d.iter().map(|b| format!("{b:02x}")).collect(),
    };
    const SHOWN: usize = 64;
    for item in items.iter().take(SHOWN) {
        let _ = write!(out, " {item}");
    }
    if items.len() > SHOWN {
        let _ = write!(out, " … ({} values)", items.len());
    }
    out
}
