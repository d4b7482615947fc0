//! `hilt plan`: plan any buffer list (MiniMalloc's CSV), print its peak
//! against the lower bound, optionally write the offsets, and fail when the
//! peak exceeds `--capacity`. No model is involved, so none of the
//! model-planning flags apply.

use std::path::PathBuf;

use hilt_runtime::planner::PlannerKind;

use crate::cmd::args::planners_parser;

/// `hilt plan --planner`: a buffer list has no model metadata, so no
/// offline plan to follow.
const BUFFER_LIST_PLANNERS: [&str; 3] = ["linear", "greedy", "optimal"];

/// `hilt plan`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct PlanArgs {
    /// The buffer list.
    #[arg(long)]
    buffers: PathBuf,
    /// Fail (after printing) when the peak exceeds this many bytes
    /// (32768, 0x8000, 32K or 32KiB).
    #[arg(long, value_name = "BYTES", value_parser = hilt::byte_size::parse_u64)]
    capacity: Option<u64>,
    /// Memory planner: linear, greedy or optimal.
    #[arg(long, default_value = "optimal", value_parser = planners_parser(&BUFFER_LIST_PLANNERS))]
    planner: PlannerKind,
    /// Write the buffers with their offsets (the input columns plus
    /// `offset`) to this CSV.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
}

/// `hilt plan`: plan a CSV buffer list, print the summary, write the
/// offsets; a peak above `--capacity` is an error after the summary.
pub(crate) fn run(args: &PlanArgs) -> anyhow::Result<()> {
    let (buffers, capacity) = (&args.buffers, args.capacity);
    let set = hilt::buffer_list::read_buffers(buffers)?;
    let plan = hilt::buffer_list::plan_buffers_to_fit(&set, args.planner, capacity)?;
    print!(
        "{}",
        hilt::buffer_list::render_summary(&set, &plan, capacity)
    );
    if let Some(path) = &args.output {
        std::fs::write(path, hilt::buffer_list::write_csv(&set, &plan.offsets))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(capacity) = capacity.filter(|&c| u64::from(plan.peak) > c) {
        anyhow::bail!(
            "{}: peak {} bytes does not fit the capacity of {capacity} bytes",
            buffers.display(),
            plan.peak
        );
    }
    Ok(())
}
