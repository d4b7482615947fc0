//! The `hilt` command line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use hilt::bench::{bench, render as render_bench};
use hilt::config::board::{Board, Transport, load_all};
use hilt::config::scenario::Scenario;
use hilt::gate::{Tolerance, Verdict, gate_run, verdict_text};
use hilt::infer::{InferRequest, infer, output_bytes, output_path, render as render_value};
use hilt::layout::{
    LayoutOptions, ModelNames, layout_file, layout_for_board, model_names, render_table,
};
use hilt::orchestrate::{Job, run_jobs_timed};
use hilt::outcome::{BoardRun, Outcome};
use hilt::report::{PendingPair, ReportWriter, ScenarioContext, thousands};
use hilt::svg::render_svg;
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::planner::PlannerKind;

/// hilt: run TinyML models on microcontrollers and prove they still fit.
#[derive(Debug, Parser)]
#[command(name = "hilt", version, about)]
struct Cli {
    /// Show cargo's own output while firmware builds (otherwise one line
    /// when each build starts and one when it ends).
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a model's arena plan: the activations alone, or with --board
    /// everything that board commits (kernel op data and scratch too).
    Layout(LayoutArgs),
    /// Plan any buffer list (MiniMalloc's CSV: id,lower,upper,size[,alignment],
    /// a buffer live on [lower, upper)) and print its peak against the
    /// lower bound.
    Plan(PlanArgs),
    /// Run scenarios on boards (virtual ones under QEMU, real ones through
    /// probe-rs) and check the outputs.
    Run {
        /// Scenario files (scenarios/NAME.toml).
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        /// Only these boards (a name or a glob such as 'qemu-*'); a name
        /// runs each scenario on that board even if its `boards` do not
        /// list it.
        #[arg(long)]
        board: Option<String>,
        /// Boards to run at once (default: the number of CPUs).
        #[arg(long)]
        jobs: Option<usize>,
        /// The board definitions folder [default: the repository's boards/].
        #[arg(long)]
        boards_dir: Option<PathBuf>,
        /// The hilt repository (firmware sources, boards) [default: found
        /// above the scenario files, the current folder or this executable].
        #[arg(long)]
        repo: Option<PathBuf>,
        /// Write junit.xml, summary.json and report.html here, updated as
        /// each board finishes [default: the repository's build/reports;
        /// ./hilt-reports when hilt runs outside the repository on
        /// scenarios that all lie outside it].
        #[arg(long)]
        report_dir: Option<PathBuf>,
        /// Run only this host's share, I of N (1-based), of the sorted
        /// (scenario, board) pairs: N hosts with 1/N .. N/N run each once.
        #[arg(long, value_name = "I/N")]
        shard: Option<hilt::shard::Shard>,
        #[command(flatten)]
        offload: OffloadArgs,
    },
    /// Run scenarios and compare layouts and latencies with the accepted
    /// snapshots (snapshots/gate); differences leave .snap.new files, which
    /// `hilt gate --accept` (or `cargo insta review`) accepts.
    Gate {
        /// Scenario files (default: every scenarios/*.toml).
        scenarios: Vec<PathBuf>,
        /// Only these boards (a name or a glob); a name gates each
        /// scenario on that board even if its `boards` do not list it.
        #[arg(long)]
        board: Option<String>,
        /// Boards to run at once.
        #[arg(long)]
        jobs: Option<usize>,
        /// The accepted snapshots [default: the repository's snapshots/gate].
        #[arg(long)]
        snapshots: Option<PathBuf>,
        /// The board definitions folder [default: the repository's boards/].
        #[arg(long)]
        boards_dir: Option<PathBuf>,
        /// The hilt repository (firmware sources, boards, scenarios)
        /// [default: found above the scenario files, the current folder or
        /// this executable].
        #[arg(long)]
        repo: Option<PathBuf>,
        /// Write junit.xml, summary.json and report.html here (a changed
        /// snapshot is a failed test case), updated as each board finishes
        /// [default: the repository's build/reports/gate; ./hilt-reports/gate
        /// when hilt runs outside the repository on scenarios that all lie
        /// outside it].
        #[arg(long)]
        report_dir: Option<PathBuf>,
        /// Gate only this host's share, I of N (1-based), of the sorted
        /// (scenario, board) pairs.
        #[arg(long, value_name = "I/N")]
        shard: Option<hilt::shard::Shard>,
        /// Accept the pending snapshots (.snap.new, written by an earlier
        /// gate) of these scenarios (files or names; default: all) on
        /// --board (default: all): each replaces its accepted snapshot.
        /// Runs nothing; `cargo insta review` does the same, one by one.
        #[arg(long)]
        accept: bool,
        #[command(flatten)]
        offload: OffloadArgs,
    },
    /// List the defined boards.
    Boards {
        /// The board definitions folder [default: the repository's boards/].
        // `--dir`, its old name, still works (hidden).
        #[arg(long, alias = "dir")]
        boards_dir: Option<PathBuf>,
    },
    /// Run a model once (or --steps N times) on the host.
    Infer {
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
    },
    /// Run the MLPerf Tiny scenarios and person_detect on the virtual
    /// Cortex-M boards and print, per model and board, hilt's instructions
    /// per inference beside TFLM's (reference and CMSIS-NN, on a
    /// Cortex-M4), instructions per MAC, the arena against TFLM's and the
    /// firmware's flash bytes.
    BenchTarget(BenchTargetArgs),
    /// Time a model's invocations on the host, with a per-op profile.
    Bench {
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
    },
}

/// `hilt bench-target`'s arguments.
#[derive(Debug, clap::Args)]
struct BenchTargetArgs {
    /// Scenario files [default: the repository's MLPerf Tiny scenarios
    /// (KWS, VWW, IC, AD), person_detect and hello_world].
    scenarios: Vec<PathBuf>,
    /// Boards (names or globs; repeatable) [default: qemu-mps2-an386,
    /// qemu-mps2-an500, qemu-mps2-an505].
    #[arg(long)]
    board: Vec<String>,
    /// Boards to run at once.
    #[arg(long)]
    jobs: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: TableFormat,
    /// The board definitions folder [default: the repository's boards/].
    #[arg(long)]
    boards_dir: Option<PathBuf>,
    /// The hilt repository [default: found above the scenario files, the
    /// current folder or this executable].
    #[arg(long)]
    repo: Option<PathBuf>,
}

/// How `hilt bench-target` prints its rows.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum TableFormat {
    Table,
    Markdown,
    Json,
}

/// `hilt layout`'s arguments.
#[derive(Debug, clap::Args)]
struct LayoutArgs {
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
}

/// `hilt plan`'s arguments.
#[derive(Debug, clap::Args)]
struct PlanArgs {
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

/// `--accelerator` and `--offload`, shared by `infer`, `bench` and `layout`.
#[derive(Debug, clap::Args)]
struct AccelArgs {
    /// Run claimed ops on an accelerator: none or vnpu (the virtual NPU,
    /// on its own thread).
    #[arg(long, default_value = "none", value_parser = accelerator_parser())]
    accelerator: hilt::accel::AcceleratorKind,
    /// Ops the accelerator may claim, comma-separated builtin names
    /// [default: CONV_2D,DEPTHWISE_CONV_2D,FULLY_CONNECTED,ADD,AVERAGE_POOL_2D,MAX_POOL_2D].
    #[arg(long, value_name = "OPS")]
    offload: Option<String>,
    /// false: the engine sees memory through a modelled data cache (the
    /// CPU cleans before each job and invalidates after it).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    coherent: bool,
}

impl AccelArgs {
    fn choice(&self) -> anyhow::Result<hilt::accel::AccelChoice> {
        let offload = match &self.offload {
            Some(list) => hilt::accel::parse_offload(list)?,
            None => hilt_runtime::accel::DEFAULT_OFFLOAD.to_vec(),
        };
        Ok(hilt::accel::AccelChoice {
            kind: self.accelerator,
            offload,
            coherent: self.coherent,
        })
    }
}

/// `--accelerator`, `--coherent` and `--accel-fault` of `run` and `gate`:
/// they override every scenario's offload keys, so one firmware is run
/// with offload off, coherent or not.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
struct OffloadArgs {
    /// Offload claimed ops to the firmware's virtual NPU (vnpu) or not
    /// (none) [default: each scenario's `accelerator`].
    #[arg(long, value_parser = accelerator_parser())]
    accelerator: Option<hilt::accel::AcceleratorKind>,
    /// Whether the engine sees memory coherently [default: each
    /// scenario's `coherent`].
    #[arg(long, value_name = "true|false")]
    coherent: Option<bool>,
    /// Fault for the firmware to inject into its offload path (tests of
    /// hilt itself; needs a firmware built with the `fault-accel` feature).
    #[arg(long, value_name = "NAME", value_parser = parse_accel_fault, hide = true)]
    accel_fault: Option<hilt_proto::AccelFault>,
}

/// `--planner`: the runtime's planner names, listed by clap when one is
/// wrong (the runtime's type has only `FromStr`, no clap).
fn planner_parser() -> impl clap::builder::TypedValueParser<Value = PlannerKind> {
    planners_parser(PlannerKind::NAMES)
}

/// `hilt plan --planner`: a buffer list has no model metadata, so no
/// offline plan to follow.
const BUFFER_LIST_PLANNERS: [&str; 3] = ["linear", "greedy", "optimal"];

/// A `--planner` parser offering `names` only.
fn planners_parser(
    names: &'static [&'static str],
) -> impl clap::builder::TypedValueParser<Value = PlannerKind> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(names).try_map(|name| name.parse::<PlannerKind>())
}

/// `--canary`: the runtime's guard-band modes, listed when one is wrong.
fn canary_parser() -> impl clap::builder::TypedValueParser<Value = CanaryMode> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(CanaryMode::NAMES)
        .try_map(|name| name.parse::<CanaryMode>())
}

/// `--accelerator`: none (alias cpu) or vnpu, listed when one is wrong.
fn accelerator_parser() -> impl clap::builder::TypedValueParser<Value = hilt::accel::AcceleratorKind>
{
    use clap::builder::{PossibleValue, TypedValueParser as _};
    clap::builder::PossibleValuesParser::new([
        PossibleValue::new("none").alias("cpu"),
        PossibleValue::new("vnpu"),
    ])
    .try_map(|name| name.parse::<hilt::accel::AcceleratorKind>())
}

/// An [`AccelFault`](hilt_proto::AccelFault) by its name.
fn parse_accel_fault(name: &str) -> Result<hilt_proto::AccelFault, String> {
    hilt_proto::AccelFault::ALL
        .iter()
        .copied()
        .find(|f| f.name() == name)
        .ok_or_else(|| {
            let known: Vec<&str> = hilt_proto::AccelFault::ALL
                .iter()
                .map(|f| f.name())
                .collect();
            format!(
                "unknown accelerator fault {name:?} (known: {})",
                known.join(", ")
            )
        })
}

impl OffloadArgs {
    /// `scenario` with these overrides; a fault without offload is refused
    /// (nothing would inject it).
    fn apply(&self, scenario: &mut hilt::config::scenario::Scenario) -> anyhow::Result<()> {
        use hilt_contract::offload::Accelerator;
        if let Some(kind) = self.accelerator {
            scenario.offload.accelerator = match kind {
                hilt::accel::AcceleratorKind::None => Accelerator::None,
                hilt::accel::AcceleratorKind::Vnpu => Accelerator::Vnpu,
            };
        }
        if let Some(coherent) = self.coherent {
            scenario.offload.coherent = coherent;
        }
        if let Some(fault) = self.accel_fault {
            if scenario.offload.accelerator == Accelerator::None
                && fault != hilt_proto::AccelFault::None
            {
                anyhow::bail!(
                    "--accel-fault {} needs offload: scenario {} has accelerator = \"none\" (add --accelerator vnpu)",
                    fault.name(),
                    scenario.name
                );
            }
            scenario.accel_fault = fault;
        }
        Ok(())
    }
}

/// How `hilt bench` prints its report.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum BenchFormat {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Svg,
}

fn main() -> ExitCode {
    // `hilt boards | head`: end quietly when the reader goes away, as Unix
    // tools do, instead of failing on the next line printed. Nothing else
    // is affected: sockets (the gdbstub) never raise SIGPIPE in Rust (it
    // sends with MSG_NOSIGNAL / SO_NOSIGPIPE), a closed pty fails with EIO,
    // and children's pipes are only read.
    #[cfg(unix)]
    // SAFETY: restores the default disposition at start-up, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // A cancel (SIGINT, SIGTERM, SIGHUP) ends every QEMU, build and flash
    // command hilt started before hilt exits.
    hilt::children::exit_on_signals();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap's whole message (as `e.exit()`, but returning so the
            // streams are flushed): the missing argument's name, a "did you
            // mean" tip, the possible values; help and version exit 0,
            // usage errors 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    hilt::firmware::set_verbose(cli.verbose);
    match cli.command {
        Command::Layout(args) => layout(args),
        Command::Run {
            scenarios,
            board,
            jobs,
            boards_dir,
            repo,
            report_dir,
            shard,
            offload,
        } => {
            let place = Workspace::find(&scenarios, repo, boards_dir, offload)?;
            let reporting = RunReporting {
                report_dir: report_dir.unwrap_or_else(|| {
                    hilt::paths::default_report_dir(&place.repo, &scenarios, None)
                }),
                shard,
            };
            run_scenarios(&place, &scenarios, board.as_deref(), jobs, &reporting)
        }
        Command::Gate {
            scenarios,
            board,
            jobs,
            snapshots,
            boards_dir,
            repo,
            report_dir,
            shard,
            accept,
            offload,
        } => {
            if accept {
                return accept_snapshots(&scenarios, board.as_deref(), snapshots, repo);
            }
            let place = Workspace::find(&scenarios, repo, boards_dir, offload)?;
            let reporting = RunReporting {
                report_dir: report_dir.unwrap_or_else(|| {
                    hilt::paths::default_report_dir(&place.repo, &scenarios, Some("gate"))
                }),
                shard,
            };
            let snapshots = snapshots.unwrap_or_else(|| place.repo.join("snapshots/gate"));
            gate_scenarios(
                &place,
                &scenarios,
                board.as_deref(),
                jobs,
                &snapshots,
                &reporting,
            )
        }
        Command::Boards { boards_dir } => list_boards(boards_dir),
        Command::BenchTarget(args) => bench_target(args),
        Command::Plan(args) => plan_command(&args),
        Command::Infer {
            model,
            inputs,
            outputs,
            arena,
            planner,
            steps,
            accel,
        } => infer_command(&InferRequest {
            model,
            inputs,
            outputs,
            arena,
            planner,
            steps,
            accelerator: accel.choice()?,
        }),
        Command::Bench {
            model,
            iterations,
            warmup,
            arena,
            planner,
            format,
            json,
            accel,
        } => {
            let report = bench(&model, planner, arena, iterations, warmup, &accel.choice()?)?;
            let format = if json { BenchFormat::Json } else { format };
            print_bench(&report, &model, format)
        }
    }
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

/// A path's file name for headings (the whole path when it has none).
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `hilt layout`: plan `model`'s arena and print it (or write it).
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

/// `hilt layout`: plan, print, or write the plan into the model.
fn layout(args: LayoutArgs) -> anyhow::Result<()> {
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
         head {} B{}",
        out.display(),
        written.report.planner,
        written.fixed,
        written.online,
        written.report.head,
        if written.replaced {
            "; replaced the model's OfflineMemoryAllocation"
        } else {
            ""
        }
    );
    print_layout(&written.report, model, format, output)
}

/// `hilt plan`: plan a CSV buffer list, print the summary, write the
/// offsets; a peak above `--capacity` is an error after the summary.
fn plan_command(args: &PlanArgs) -> anyhow::Result<()> {
    let (buffers, capacity) = (&args.buffers, args.capacity);
    let set = hilt::plan::read_buffers(buffers)?;
    let plan = hilt::plan::plan_buffers(&set, args.planner)?;
    print!("{}", hilt::plan::render_summary(&set, &plan, capacity));
    if let Some(path) = &args.output {
        std::fs::write(path, hilt::plan::write_csv(&set, &plan.offsets))
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

/// `hilt boards`: the defined boards, their serial ports and the attached
/// probes.
fn list_boards(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = match dir {
        Some(dir) => dir,
        None => hilt::paths::find_repo(&[])?.join("boards"),
    };
    let dir = hilt::paths::folder("the boards folder", dir, "--boards-dir")?;
    let boards = load_all(&dir)?;
    print!("{}", boards_table(&boards));
    for b in &boards {
        if let Some(port) = &b.serial_port {
            let state = if Path::new(port).exists() {
                "present"
            } else {
                "not present"
            };
            println!("\n{}: serial port {port} ({state})", b.name);
        }
    }
    print_probes(&boards);
    Ok(())
}

/// `hilt boards`'s table, every column as wide as its widest cell. RAM is
/// every memory but flash (an `ARENA` region and the `RAM` beside it
/// together), the memory the arena is a part of.
fn boards_table(boards: &[Board]) -> String {
    let header = ["board", "runner", "link", "target", "arena", "RAM"];
    let rows: Vec<[String; 6]> = boards
        .iter()
        .map(|b| {
            let ram: u64 = b
                .memory
                .iter()
                .filter(|m| m.name != "FLASH")
                .map(|m| m.length)
                .sum();
            let link = match b.transport {
                Transport::Rtt => "rtt",
                Transport::Uart => "uart",
            };
            [
                b.name.clone(),
                b.runner.to_string(),
                link.to_string(),
                b.target.clone(),
                thousands(b.arena_size),
                thousands(ram),
            ]
        })
        .collect();
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].len())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: [&str; 6], description: &str| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let w = widths[i];
            // Names left, byte counts right.
            match i {
                4 | 5 => out.push_str(&format!("{cell:>w$}  ")),
                _ => out.push_str(&format!("{cell:<w$}  ")),
            }
        }
        out.push_str(description);
        out.push('\n');
        out
    };
    let mut table = line(header, "description");
    for (b, r) in boards.iter().zip(&rows) {
        table.push_str(&line(
            [&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]],
            &b.description,
        ));
    }
    table
}

/// Where `hilt run` and `hilt gate` work: the repository (firmware sources,
/// default folders), its boards and the conformance set.
struct Workspace {
    repo: PathBuf,
    boards: Vec<Board>,
    /// The conformance sets, in search order.
    conformance: Vec<PathBuf>,
    offload: OffloadArgs,
}

impl Workspace {
    /// The repository from `--repo` or found from `scenarios` (see
    /// [`hilt::paths::find_repo`]), and its boards from `--boards-dir` or its
    /// `boards/`: each missing one named with where it was looked for and
    /// the flag that sets it.
    fn find(
        scenarios: &[PathBuf],
        repo: Option<PathBuf>,
        boards_dir: Option<PathBuf>,
        offload: OffloadArgs,
    ) -> anyhow::Result<Self> {
        let repo = match repo {
            Some(dir) => hilt::paths::repo_at(dir)?,
            None => hilt::paths::find_repo(scenarios)?,
        };
        let boards_dir = match boards_dir {
            Some(dir) => hilt::paths::folder("the boards folder", dir, "--boards-dir")?,
            None => hilt::paths::folder("the boards folder", repo.join("boards"), "--boards-dir")?,
        };
        Ok(Workspace {
            boards: load_all(&boards_dir)?,
            conformance: hilt::conformance::locate_all(&repo),
            repo,
            offload,
        })
    }

    /// Every (scenario, board) pair of `paths`, with each scenario's model
    /// names for readable output. An explicit `--board NAME` (not a glob)
    /// runs every scenario there, listed or not (with a note).
    fn jobs(&self, paths: &[PathBuf], board_filter: Option<&str>) -> anyhow::Result<Work> {
        let mut scenarios = Vec::new();
        let mut names = HashMap::new();
        for path in paths {
            let mut scenario = hilt::config::scenario::load(path, &self.conformance)?;
            self.offload.apply(&mut scenario)?;
            for pattern in &scenario.boards {
                hilt::config::board::select(&self.boards, pattern)
                    .map_err(|e| anyhow::anyhow!("{}: `boards`: {e}", path.display()))?;
            }
            names.insert(scenario.name.clone(), model_names(&scenario.model));
            scenarios.push(Arc::new(scenario));
        }
        if let Some(filter) = board_filter {
            check_board_filter(&self.boards, filter)?;
        }
        let mut work = hilt::orchestrate::jobs_for(&scenarios, &self.boards, board_filter)?;
        if let Some(name) = board_filter.filter(|f| !is_glob(f)) {
            add_unlisted(&mut work, &scenarios, &self.boards, name);
        }
        // Before any build: an arena that cannot fit fails only at the link.
        for job in &work {
            job.scenario.check_budget(&job.board)?;
        }
        if work.is_empty() {
            anyhow::bail!("{}", no_pairs(&scenarios, board_filter));
        }
        Ok((work, names))
    }
}

/// Whether a `--board` value is a glob rather than one board's name.
fn is_glob(filter: &str) -> bool {
    filter.contains(['*', '?'])
}

/// `--board` names a defined board or matches one: else the error says
/// which it did not, with the closest names or the defined boards.
fn check_board_filter(boards: &[Board], filter: &str) -> anyhow::Result<()> {
    match hilt::config::board::select(boards, filter) {
        Ok(_) => Ok(()),
        // `--board "qemu-stm32*" matches no board; …`
        Err(e) if is_glob(filter) => Err(anyhow::anyhow!("--board {e}")),
        // `--board: unknown board "…" (did you mean …?); …`
        Err(e) => Err(anyhow::anyhow!("--board: {e}")),
    }
}

/// Adds the pairs of scenarios that do not list board `name` (an explicit
/// `--board`, so the user asked for it), each with a note.
fn add_unlisted(work: &mut Vec<Job>, scenarios: &[Arc<Scenario>], boards: &[Board], name: &str) {
    let Some(board) = boards.iter().find(|b| b.name == name) else {
        return;
    };
    for scenario in scenarios {
        if work
            .iter()
            .any(|j| j.board.name == name && j.scenario.name == scenario.name)
        {
            continue;
        }
        eprintln!(
            "note: scenario {} does not list board {name} (its boards: {}); running it there as --board asks",
            scenario.name,
            scenario.boards.join(", ")
        );
        work.push(Job {
            scenario: scenario.clone(),
            board: board.clone(),
        });
    }
}

/// Why there is nothing to run: a `--board` glob that matches boards none
/// of the scenarios list, said with what each scenario does list.
fn no_pairs(scenarios: &[Arc<Scenario>], board_filter: Option<&str>) -> String {
    let listed: Vec<String> = scenarios
        .iter()
        .map(|s| format!("{} lists {}", s.name, s.boards.join(", ")))
        .collect();
    let filter = board_filter.map_or(String::new(), |f| format!("--board {f:?} matches "));
    format!(
        "no (scenario, board) pair to run: {filter}no board the scenarios list ({})",
        listed.join("; ")
    )
}

/// `hilt gate`: run the scenarios (default: every one of the repository)
/// and judge each run against its accepted snapshot.
fn gate_scenarios(
    place: &Workspace,
    paths: &[PathBuf],
    board_filter: Option<&str>,
    jobs: Option<usize>,
    snapshots: &Path,
    reporting: &RunReporting,
) -> anyhow::Result<()> {
    let paths = if paths.is_empty() {
        every_scenario(&place.repo.join("scenarios"))?
    } else {
        paths.to_vec()
    };
    let (work, names) = place.jobs(&paths, board_filter)?;
    let (work, mut reports) = reporting.start("hilt gate", work, &names)?;
    // How to accept names the folder only when it is not the default.
    let hint_snapshots = (snapshots != place.repo.join("snapshots/gate")).then_some(snapshots);
    let tolerance: HashMap<String, Tolerance> = work
        .iter()
        .map(|j| (j.board.name.clone(), j.board.latency_tolerance()))
        .collect();
    let runtime = runtime()?;
    let mut verdicts = Vec::new();
    let on_result = |run: &BoardRun, wall| {
        let names = names.get(&run.scenario).cloned().unwrap_or_default();
        let tol = tolerance
            .get(&run.board)
            .copied()
            .unwrap_or(Tolerance::EXACT);
        let verdict = gate_run(snapshots, run, &names, tol)
            .unwrap_or_else(|e| Verdict::RunFailed(format!("cannot write snapshot: {e}")));
        let key = (run.scenario.clone(), run.board.clone());
        let text = verdict_text(&run.scenario, &run.board, &verdict, hint_snapshots, true);
        println!("{text}");
        if let Err(e) = reports.record(&hilt::report::gated(run, &verdict), wall) {
            eprintln!("warning: {e}");
        }
        verdicts.push((key, verdict));
    };
    let parallel = parallel(jobs);
    runtime.block_on(run_jobs_timed(&place.repo, work, parallel, on_result));
    println!("reports: {}", reports.finish()?.display());
    // The runs to look at again, last, where a log's tail shows them.
    let failing: Vec<&((String, String), Verdict)> =
        verdicts.iter().filter(|(_, v)| !v.passes()).collect();
    if !failing.is_empty() {
        println!("to review or fix:");
        for ((scenario, board), verdict) in &failing {
            println!(
                "{}",
                verdict_text(scenario, board, verdict, hint_snapshots, false)
            );
        }
    }
    let bad = failing.len();
    let faster = verdicts
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::Faster(_)))
        .count();
    println!(
        "gate: {} runs, {} unchanged, {faster} faster, {bad} to review or fix",
        verdicts.len(),
        verdicts.len() - bad - faster
    );
    if bad > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// Every `*.toml` of `dir`, sorted.
fn every_scenario(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let dir = hilt::paths::folder("the scenarios folder", dir.to_path_buf(), "--repo")?;
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// `hilt gate --accept`: the pending snapshots of the scenarios named (by
/// file or name; all when none) on the boards `board` matches replace the
/// accepted ones. Nothing runs; the repository (for its snapshots/gate) is
/// found as for a gate run.
fn accept_snapshots(
    scenarios: &[PathBuf],
    board: Option<&str>,
    snapshots: Option<PathBuf>,
    repo: Option<PathBuf>,
) -> anyhow::Result<()> {
    let snapshots = match snapshots {
        Some(dir) => dir,
        None => {
            let files: Vec<PathBuf> = scenarios.iter().filter(|p| p.is_file()).cloned().collect();
            let repo = match repo {
                Some(dir) => hilt::paths::repo_at(dir)?,
                None => hilt::paths::find_repo(&files)?,
            };
            repo.join("snapshots/gate")
        }
    };
    let names: Vec<String> = scenarios
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    let accepted = hilt::gate::accept(&snapshots, &names, board)?;
    if accepted.is_empty() {
        anyhow::bail!(
            "nothing to accept: no pending snapshot (.snap.new) in {}{}{}",
            snapshots.display(),
            if names.is_empty() {
                String::new()
            } else {
                format!(" for {}", names.join(", "))
            },
            board.map_or(String::new(), |b| format!(" on {b}"))
        );
    }
    for a in &accepted {
        println!("accepted {} @ {}: {}", a.scenario, a.board, a.change);
    }
    println!(
        "{} snapshot(s) accepted in {}",
        accepted.len(),
        snapshots.display()
    );
    Ok(())
}

/// The jobs of a command and each scenario's model names.
type Work = (Vec<Job>, HashMap<String, ModelNames>);

/// Boards run at once: `--jobs`, else one per CPU.
fn parallel(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// `hilt run`: run the scenarios on their boards and print each result.
fn run_scenarios(
    place: &Workspace,
    paths: &[PathBuf],
    board_filter: Option<&str>,
    jobs: Option<usize>,
    reporting: &RunReporting,
) -> anyhow::Result<()> {
    let (work, names) = place.jobs(paths, board_filter)?;
    let (work, mut reports) = reporting.start("hilt run", work, &names)?;
    let runtime = runtime()?;
    let on_result = |run: &BoardRun, wall| {
        print_run(run, names.get(&run.scenario).map(|n| &n.ops), wall);
        if let Err(e) = reports.record(run, wall) {
            eprintln!("warning: {e}");
        }
    };
    let results = runtime.block_on(run_jobs_timed(&place.repo, work, parallel(jobs), on_result));
    println!("reports: {}", reports.finish()?.display());
    let failed = results
        .iter()
        .filter(|r| r.outcome != Outcome::Passed)
        .count();
    println!(
        "{} board runs: {} passed, {failed} failed",
        results.len(),
        results.len() - failed
    );
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// The scenarios `hilt bench-target` runs by default (`scenarios/NAME.toml`).
const BENCH_TARGET_SCENARIOS: [&str; 6] = [
    "kws_dscnn_int8",
    "vww_mobilenetv1_int8",
    "ic_resnet8_int8",
    "ad_autoencoder_int8",
    "person_detect_int8",
    "hello_world_int8",
];

/// `hilt bench-target`: run, then one row per passed (model, board); a
/// failed run is listed after the table and fails the command.
fn bench_target(args: BenchTargetArgs) -> anyhow::Result<()> {
    use hilt::target_bench::{TargetRow, flash_bytes, median, model_macs, read_tflm_figures};
    let no_offload = OffloadArgs::default();
    let place = Workspace::find(&args.scenarios, args.repo, args.boards_dir, no_offload)?;
    let scenarios = if args.scenarios.is_empty() {
        BENCH_TARGET_SCENARIOS
            .iter()
            .map(|n| place.repo.join("scenarios").join(format!("{n}.toml")))
            .collect()
    } else {
        args.scenarios
    };
    let boards = if args.board.is_empty() {
        vec![
            "qemu-mps2-an386".into(),
            "qemu-mps2-an500".into(),
            "qemu-mps2-an505".into(),
        ]
    } else {
        args.board
    };
    let mut work: Vec<Job> = Vec::new();
    for glob in &boards {
        for mut job in place.jobs(&scenarios, Some(glob))?.0 {
            // A plain invoke, as TFLM's figures are (see `Scenario::op_profile`).
            std::sync::Arc::make_mut(&mut job.scenario).op_profile = false;
            let seen = work
                .iter()
                .any(|j| j.board.name == job.board.name && j.scenario.name == job.scenario.name);
            if !seen {
                work.push(job);
            }
        }
    }
    let figures = read_tflm_figures(&place.conformance)?;
    let jobs_by_pair: HashMap<(String, String), Job> = work
        .iter()
        .map(|j| ((j.scenario.name.clone(), j.board.name.clone()), j.clone()))
        .collect();
    let results = runtime()?.block_on(run_jobs_timed(
        &place.repo,
        work,
        parallel(args.jobs),
        |run, _| {
            eprintln!("{} on {}: {}", run.scenario, run.board, run.outcome);
        },
    ));
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for run in &results {
        let job = &jobs_by_pair[&(run.scenario.clone(), run.board.clone())];
        if run.outcome != Outcome::Passed {
            failed.push(format!(
                "{} on {}: {}",
                run.scenario, run.board, run.outcome
            ));
            continue;
        }
        let request = hilt::firmware::FirmwareRequest::for_scenario(&job.board, &job.scenario);
        // The ELF the run used, from the firmware cache (built already).
        let elf = hilt::firmware::build(&place.repo, &request)?;
        let model = file_stem(&job.scenario.model);
        let mut instructions: Vec<u64> = run.steps.iter().map(|s| s.total_cycles).collect();
        // TFLM's figures were measured on the AN386's Cortex-M4 running M4
        // code: rows of that core (not its ARMv6-M build) are judged.
        let m4 = job.board.qemu.as_ref().is_some_and(|q| q.cpu == "cortex-m4")
            && job.board.target.starts_with("thumbv7em");
        rows.push(TargetRow {
            m4_tick: m4.then(|| job.board.cycle_scale().round() as u64),
            tflm: figures.get(&model).copied(),
            model,
            board: run.board.clone(),
            instructions: median(&mut instructions),
            macs: model_macs(&job.scenario.model)?,
            arena_used: run.arena.map_or(0, |[_, _, _, used]| u64::from(used)),
            flash: flash_bytes(&elf)?,
        });
    }
    rows.sort_by(|a, b| (&a.model, &a.board).cmp(&(&b.model, &b.board)));
    let above = hilt::target_bench::above_cmsis(&rows);
    match args.format {
        TableFormat::Table => print!("{}", hilt::target_bench::render_table(&rows)),
        TableFormat::Markdown => print!("{}", hilt::target_bench::render_markdown(&rows)),
        TableFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&hilt::target_bench::judged(&rows))?
        ),
    }
    if figures.is_empty() {
        eprintln!(
            "note: no {} in {}: TFLM's columns are empty",
            hilt::target_bench::TFLM_FIGURES_FILE,
            place
                .conformance
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !failed.is_empty() {
        anyhow::bail!("{} run(s) failed:\n  {}", failed.len(), failed.join("\n  "));
    }
    if !above.is_empty() {
        anyhow::bail!(
            "{} model(s) need more instructions than TFLM + CMSIS-NN on the Cortex-M4 (by more than {} ticks):\n  {}",
            above.len(),
            hilt::target_bench::PARITY_TICKS,
            above.join("\n  ")
        );
    }
    Ok(())
}

/// A path's file name without its extension.
fn file_stem(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Where `hilt run` and `hilt gate` write their reports and which share of
/// the pairs they run.
struct RunReporting {
    report_dir: PathBuf,
    shard: Option<hilt::shard::Shard>,
}

impl RunReporting {
    /// Keeps this shard's jobs and opens the report folder (failing before
    /// any board runs when it cannot be written).
    fn start(
        &self,
        command: &str,
        work: Vec<Job>,
        names: &HashMap<String, ModelNames>,
    ) -> anyhow::Result<(Vec<Job>, ReportWriter)> {
        let mut title = command.to_string();
        let work = match self.shard {
            Some(shard) => {
                let all = work.len();
                let part = shard.select(work, |j| (j.scenario.name.clone(), j.board.name.clone()));
                println!(
                    "shard {shard}: {} of {all} (scenario, board) pairs",
                    part.len()
                );
                title.push_str(&format!(" (shard {shard})"));
                part
            }
            None => work,
        };
        let reports = ReportWriter::new(
            &self.report_dir,
            &title,
            scenario_contexts(&work, names),
            pending_pairs(&work),
        )?;
        Ok((work, reports))
    }
}

/// What the reports show of each scenario of `work`: its model's names
/// (read once, for the run's own lines too) and the host's plan of its arena
/// with the scenario's planner.
fn scenario_contexts(work: &[Job], names: &HashMap<String, ModelNames>) -> Vec<ScenarioContext> {
    let mut contexts: Vec<ScenarioContext> = Vec::new();
    for job in work {
        let scenario = &job.scenario;
        if contexts.iter().any(|c| c.name == scenario.name) {
            continue;
        }
        let options = LayoutOptions {
            planner: scenario.planner,
            ..LayoutOptions::default()
        };
        let layout = layout_file(&scenario.model, &options).map_err(|e| e.to_string());
        let names = names.get(&scenario.name).cloned().unwrap_or_default();
        contexts.push(ScenarioContext::new(
            scenario,
            names.ops,
            names.tensors,
            layout,
        ));
    }
    contexts
}

/// Every pair of `work`, none reported yet.
fn pending_pairs(work: &[Job]) -> Vec<PendingPair> {
    work.iter()
        .map(|j| PendingPair {
            scenario: j.scenario.name.clone(),
            board: j.board.name.clone(),
        })
        .collect()
}

/// The attached probes and the boards each one serves (USB listing only:
/// no probe is opened, so this stays fast).
fn print_probes(boards: &[Board]) {
    let probes = hilt::driver::probe_rs::list_probes(&probe_rs::probe::list::Lister::new());
    println!();
    if probes.is_empty() {
        println!("no probes attached");
        return;
    }
    println!("attached probes:");
    for p in &probes {
        let users: Vec<&str> = boards
            .iter()
            .filter(|b| {
                b.probe
                    .as_ref()
                    .is_some_and(|s| hilt::driver::probe_rs::selector_matches(s, p))
            })
            .map(|b| b.name.as_str())
            .collect();
        if users.is_empty() {
            println!("  {p}  (no board definition names it)");
        } else {
            println!("  {p}  -> {}", users.join(", "));
        }
    }
}

fn print_run(run: &BoardRun, ops: Option<&Vec<String>>, wall: std::time::Duration) {
    let status = &run.outcome;
    let cycles = run.steps.first().map_or(String::new(), |s| {
        format!("   {} cycles", thousands(s.total_cycles))
    });
    // Wide enough for every shipped board name ("qemu-netduinoplus2-uart").
    // The wall time is the board's own (start-up, transfers, invokes), not
    // its firmware build or its wait for a free slot.
    println!(
        "{:<23} {:<28} {} ({} steps){cycles}   {:.2} s wall",
        run.board,
        run.scenario,
        status,
        run.steps.len(),
        wall.as_secs_f64()
    );
    if let Some([capacity, head, tail, used]) = run.arena {
        println!("    arena: {used} of {capacity} bytes used (head {head}, tail {tail})");
    }
    if let Some(o) = &run.offload {
        println!(
            "    offload: vnpu, {}, {} cycles per job + {} per 1000 MACs{}",
            o.mode,
            o.job_cycles,
            o.cycles_per_1000_macs,
            o.fault.map_or(String::new(), |f| format!(", fault {f}"))
        );
        if let (Some(alone), Some(first)) = (run.cpu_alone, run.steps.first()) {
            let change = first.total_cycles as f64 / alone.max(1) as f64;
            println!(
                "    cpu alone: {} cycles (same firmware, offload off); with the engine {:.2}× that",
                thousands(alone),
                change
            );
        }
    }
    for step in &run.steps {
        println!(
            "    {} step {}: {} cycles",
            step.case,
            step.step,
            thousands(step.total_cycles)
        );
        if let Some(o) = &step.offload {
            println!(
                "      npu busy {}, cpu waited {}, overlap {}, {} jobs, {} emulation cycles removed",
                thousands(o.busy),
                thousands(o.waited),
                thousands(o.overlap()),
                o.jobs,
                thousands(o.emulation)
            );
        }
    }
    if let Some(step) = run.steps.first() {
        let mut by_cost: Vec<(usize, u32)> = step.op_cycles.iter().copied().enumerate().collect();
        by_cost.sort_by_key(|&(_, c)| std::cmp::Reverse(c));
        for (op, c) in by_cost.iter().take(8) {
            let name = ops.and_then(|o| o.get(*op)).map_or("?", String::as_str);
            // Offload runs say where each op ran; others print as before.
            let place = step.offload.as_ref().map_or("", |o| {
                if o.on_npu.get(*op).copied().unwrap_or(false) {
                    "  NPU"
                } else {
                    "  CPU"
                }
            });
            println!(
                "      op {op:>3} {name:<30} {:>14} cycles{place}",
                thousands(u64::from(*c))
            );
        }
    }
}
