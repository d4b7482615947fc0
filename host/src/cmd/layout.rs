//! `hilt layout`: plan a model's arena and print the plan (table, JSON or
//! SVG), for the activations alone or, with `--board`, for everything that
//! board's firmware commits; `--write-offline` also writes the plan into a
//! copy of the model as TFLM's offline plan.

use std::path::{Path, PathBuf};

use hilt::config::board::Board;
use hilt::layout::{LayoutOptions, layout_file, layout_for_board, render_table};
use hilt::svg::render_svg;
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::planner::PlannerKind;

use crate::cmd::args::{AccelArgs, Format, canary_parser, planner_parser};
use crate::cmd::print::file_name;

/// `hilt layout`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct LayoutArgs {
    /// The .tflite model.
    model: PathBuf,
    /// Plan as this board's firmware does: through every kernel's
    /// prepare, in the board's arena (figures equal to what it commits).
    #[arg(long)]
    board: Option<String>,
    /// The board definitions folder (with --board) [default: the
    /// repository's boards/].
    #[arg(long)]
    boards_dir: Option<PathBuf>,
    /// Memory planner: linear, greedy, offline or optimal.
    #[arg(long, default_value = "greedy", value_parser = planner_parser())]
    planner: PlannerKind,
    /// Alignment of every activation buffer (power of two, up to 1 MiB;
    /// 64, 0x40 or 1K).
    #[arg(long, default_value_t = 16, value_name = "BYTES", value_parser = hilt::byte_size::parse_u32)]
    align: u32,
    /// Guard bands, as a scenario's `canary` (off, bounds, buffers): they
    /// take arena space, and `buffers` makes every buffer 16 bytes longer.
    #[arg(long, default_value = "off", value_parser = canary_parser())]
    canary: CanaryMode,
    /// Plan into an arena of exactly this many bytes (fails if too
    /// small; 32768, 0x8000, 32K or 32KiB); with --board, default: the
    /// board's arena_size.
    #[arg(long, value_name = "BYTES", value_parser = hilt::byte_size::parse_usize)]
    arena: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Write to this file instead of standard output.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Also write a copy of the model with this plan as its
    /// `OfflineMemoryAllocation` metadata (TFLM's offline plan; any
    /// existing one is replaced), for TFLM and `--planner offline`.
    /// Activations-only plans with --align 16 and --canary off only.
    #[arg(long, value_name = "OUT.tflite")]
    write_offline: Option<PathBuf>,
    /// Plan with offload to vnpu (coherent): plans through the
    /// interpreter, and names the buffers its jobs hold.
    #[command(flatten)]
    accel: AccelArgs,
    /// With --board: the board pools (by name, comma-separated) the
    /// buffers may use; the arena is then the board's pools, and each
    /// buffer is shown in its pool.
    #[arg(long, value_delimiter = ',', requires = "board")]
    pools: Option<Vec<String>>,
    /// With --board: where kernels' prepared constants live, as a
    /// scenario's `constants`: tail (in the arena) or flash (a constant
    /// image beside the model; the tail keeps only the interpreter's
    /// tables).
    #[arg(long, value_enum, default_value = "tail", requires = "board")]
    constants: ConstantsArg,
    /// The schedule: tflm (every op's inputs and outputs apart, as TFLM
    /// runs them) or lean (ops whose input dies there write over it; the
    /// ops left as TFLM's are listed with why).
    #[arg(long, value_enum, default_value = "tflm")]
    schedule: ScheduleArg,
}

/// `--schedule`'s values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ScheduleArg {
    Tflm,
    Lean,
}

/// `--constants`'s values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ConstantsArg {
    Tail,
    Flash,
}

/// `hilt layout`: plan, print, or write the plan into the model.
pub(crate) fn run(args: LayoutArgs) -> anyhow::Result<()> {
    let LayoutArgs {
        model,
        board,
        boards_dir,
        planner,
        align,
        canary,
        arena,
        format,
        output,
        write_offline,
        accel,
        pools,
        constants,
        schedule,
    } = args;
    let choice = accel.choice()?;
    let offload = (choice.kind == hilt::accel::AcceleratorKind::Vnpu).then_some(choice.offload);
    let options = LayoutOptions {
        planner,
        align,
        arena,
        canary,
        // Jobs exist only through the interpreter's prepare.
        covers: if offload.is_some() {
            hilt::layout::Coverage::Interpreter
        } else {
            hilt::layout::Coverage::Activations
        },
        offload,
        constants: match constants {
            ConstantsArg::Tail => hilt::config::scenario::ConstantsPlace::Tail,
            ConstantsArg::Flash => hilt::config::scenario::ConstantsPlace::Flash,
        },
        schedule: match schedule {
            ScheduleArg::Tflm => hilt::config::scenario::Schedule::Tflm,
            ScheduleArg::Lean => hilt::config::scenario::Schedule::Lean,
        },
        ..LayoutOptions::default()
    };
    if let Some(out) = &write_offline {
        hilt::offline_plan::check_options(&options, board.is_some())?;
        return write_offline_command(&model, out, &options, format, output.as_deref());
    }
    let board = board
        .map(|name| layout_board(&name, boards_dir))
        .transpose()?;
    let options = match (&board, pools) {
        (Some(board), Some(pools)) => options.with_pools(board, &pools)?,
        _ => options,
    };
    layout_command(&model, board.as_ref(), &options, format, output.as_deref())
}

/// `hilt layout --board NAME`: that board alone, from `--boards-dir` (else
/// the repository's `boards/`).
fn layout_board(name: &str, boards_dir: Option<PathBuf>) -> anyhow::Result<Board> {
    let dir = match boards_dir {
        Some(dir) => dir,
        None => hilt::paths::find_repo(&[])?.join("boards"),
    };
    let dir = hilt::paths::folder("the boards folder", dir, "--boards-dir")?;
    Ok(hilt::config::board::load_named(&dir, name)?)
}

/// Plans `model`'s activations, or with `board` everything that board
/// commits (its arena and coverage unless the flags set them), and prints
/// the plan.
fn layout_command(
    model: &Path,
    board: Option<&Board>,
    options: &LayoutOptions,
    format: Format,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    let report = match board {
        None => layout_file(model, options)?,
        Some(board) => {
            let defaults = LayoutOptions::for_board(board);
            let options = LayoutOptions {
                arena: options.arena.or(defaults.arena),
                covers: defaults.covers,
                ..options.clone()
            };
            layout_for_board(model, board, &options)?
        }
    };
    print_layout(&report, model, format, output)
}

/// Prints a layout in `format`, or writes it to `output`.
fn print_layout(
    report: &hilt::layout::LayoutReport,
    model: &Path,
    format: Format,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    let name = file_name(model);
    let text = match format {
        Format::Table => render_table(report, &name),
        Format::Json => serde_json::to_string_pretty(report)? + "\n",
        Format::Svg => render_svg(report, &name),
    };
    match output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// `hilt layout --write-offline OUT`: write the model with its plan, then
/// print (or write) that plan as `hilt layout` does; what was written goes
/// to standard error, so the layout output stays machine-readable.
fn write_offline_command(
    model: &Path,
    out: &Path,
    options: &LayoutOptions,
    format: Format,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    let written = hilt::offline_plan::write_offline(model, out, options)?;
    eprintln!(
        "wrote {}: {} planner's offsets for {} tensors ({} left to the run-time planner), \
         head {} B; TFLM's head with its kernels' scratch {} B (its own plan: {} B){}",
        out.display(),
        options.planner.name(),
        written.fixed,
        written.online,
        written.report.head,
        written.tflm_head,
        written.tflm_own_head,
        if written.replaced {
            "; replaced the model's OfflineMemoryAllocation"
        } else {
            ""
        }
    );
    print_layout(&written.report, model, format, output)
}
