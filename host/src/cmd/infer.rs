//! `hilt infer`: run a model once (or `--steps N` times on one interpreter)
//! on the host, and print its outputs or write them to files.

use std::path::PathBuf;

use hilt::infer::{InferRequest, infer, output_bytes, output_path, render as render_value};
use hilt_runtime::planner::PlannerKind;

use crate::cmd::args::{AccelArgs, planner_parser};

/// `hilt infer`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct InferArgs {
    /// The .tflite model.
    model: PathBuf,
    /// Input files (raw little-endian or .npy), one per model input, in
    /// order; with --steps N, N such sets one after another.
    #[arg(long = "input", num_args = 1.., required = true)]
    inputs: Vec<PathBuf>,
    /// Output files (raw, or .npy by extension), one per model output;
    /// printed when omitted.
    #[arg(long = "output", num_args = 1..)]
    outputs: Vec<PathBuf>,
    /// Arena bytes (32768, 0x8000, 32K or 32KiB).
    #[arg(long, default_value_t = hilt::host_run::DEFAULT_ARENA, value_name = "BYTES", value_parser = hilt::byte_size::parse_usize)]
    arena: usize,
    /// Memory planner: linear, greedy, offline or optimal.
    #[arg(long, default_value = "greedy", value_parser = planner_parser())]
    planner: PlannerKind,
    /// Invocations on one interpreter (state carries over).
    #[arg(long, default_value_t = 1)]
    steps: usize,
    #[command(flatten)]
    accel: AccelArgs,
}

/// `hilt infer`: the flags as the library's request, then run it.
pub(crate) fn run(args: InferArgs) -> anyhow::Result<()> {
    let InferArgs {
        model,
        inputs,
        outputs,
        arena,
        planner,
        steps,
        accel,
    } = args;
    infer_command(&InferRequest {
        model,
        inputs,
        outputs,
        arena,
        planner,
        steps,
        accelerator: accel.choice()?,
    })
}

/// `hilt infer`: run a model on the host and print or write its outputs.
fn infer_command(request: &InferRequest) -> anyhow::Result<()> {
    let (values, arena_used) = infer(request)?;
    let outputs = &request.outputs;
    let per_step = values.iter().filter(|v| v.step == 0).count();
    if !outputs.is_empty() && outputs.len() != per_step {
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        anyhow::bail!(
            "the model has {}, {} {} given (one --output per model output; each step's \
             files are numbered from it)",
            plural(per_step, "output"),
            plural(outputs.len(), "output file"),
            if outputs.len() == 1 { "was" } else { "were" }
        );
    }
    for value in &values {
        match outputs.get(value.position) {
            Some(base) => {
                let path = output_path(base, value.step, request.steps);
                std::fs::write(&path, output_bytes(&path, value))
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
                println!("wrote {}", path.display());
            }
            None => println!("{}", render_value(value)),
        }
    }
    println!("arena used: {arena_used} bytes");
    Ok(())
}
