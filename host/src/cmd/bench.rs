//! `hilt bench`: time a model's invocations on the host and print the
//! report with its per-op profile, as a table or as JSON.

use std::path::{Path, PathBuf};

use hilt::bench::{bench, render as render_bench};
use hilt_runtime::planner::PlannerKind;

use crate::cmd::args::{AccelArgs, BenchFormat, planner_parser};
use crate::cmd::print::file_name;

/// `hilt bench`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The .tflite model.
    model: PathBuf,
    /// Timed invocations.
    #[arg(long, default_value_t = 200)]
    iterations: usize,
    /// Untimed invocations first.
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Arena bytes (32768, 0x8000, 32K or 32KiB).
    #[arg(long, default_value_t = hilt::host_run::DEFAULT_ARENA, value_name = "BYTES", value_parser = hilt::byte_size::parse_usize)]
    arena: usize,
    /// Memory planner: linear, greedy, offline or optimal.
    #[arg(long, default_value = "greedy", value_parser = planner_parser())]
    planner: PlannerKind,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: BenchFormat,
    /// `--format json` by its old name (hidden).
    #[arg(long, hide = true)]
    json: bool,
    #[command(flatten)]
    accel: AccelArgs,
}

/// `hilt bench`: time the model, then print the report.
pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    let BenchArgs {
        model,
        iterations,
        warmup,
        arena,
        planner,
        format,
        json,
        accel,
    } = args;
    let report = bench(&model, planner, arena, iterations, warmup, &accel.choice()?)?;
    let format = if json { BenchFormat::Json } else { format };
    print_bench(&report, &model, format)
}

/// `hilt bench`'s report, as JSON or as the table.
fn print_bench(
    report: &hilt::bench::BenchReport,
    model: &Path,
    format: BenchFormat,
) -> anyhow::Result<()> {
    match format {
        BenchFormat::Json => println!("{}", serde_json::to_string_pretty(report)?),
        BenchFormat::Table => print!("{}", render_bench(report, &file_name(model), 10)),
    }
    Ok(())
}
