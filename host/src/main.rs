//! The `hilt` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use hilt::bench::{bench, render as render_bench};
use hilt::infer::{InferRequest, infer, output_bytes, output_path, render as render_value};
use hilt::layout::{LayoutOptions, layout_file, layout_for_board, render_table};
use hilt::svg::render_svg;
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::planner::PlannerKind;

/// hilt: run TinyML models on microcontrollers and prove they still fit.
#[derive(Debug, Parser)]
#[command(name = "hilt", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a model's arena plan: the activations alone, or with --board
    /// everything that board commits (kernel op data and scratch too).
    Layout {
        /// The .tflite model.
        model: PathBuf,
        /// Plan as this board's firmware does: through every kernel's
        /// prepare, in the board's arena (figures equal to what it commits).
        #[arg(long)]
        board: Option<String>,
        /// The board definitions folder (with --board).
        #[arg(long, default_value = "boards")]
        boards_dir: PathBuf,
        /// Memory planner: linear, greedy or offline.
        #[arg(long, default_value = "greedy")]
        planner: PlannerKind,
        /// Alignment of every activation buffer (power of two, up to 1 MiB).
        #[arg(long, default_value_t = 16)]
        align: u32,
        /// Guard bands, as a scenario's `canary` (off, bounds, buffers): they
        /// take arena space, and `buffers` makes every buffer 16 bytes longer.
        #[arg(long, default_value = "off")]
        canary: CanaryMode,
        /// Plan into an arena of exactly this many bytes (fails if too
        /// small); with --board, default: the board's arena_size.
        #[arg(long)]
        arena: Option<usize>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Write to this file instead of standard output.
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
    },
    /// Run scenarios on boards (virtual ones under QEMU, real ones through
    /// probe-rs) and check the outputs.
    Run {
        /// Scenario files (scenarios/NAME.toml).
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        /// Only these boards (a name or a glob such as 'qemu-*').
        #[arg(long)]
        board: Option<String>,
        /// Boards to run at once (default: the number of CPUs).
        #[arg(long)]
        jobs: Option<usize>,
        /// The board definitions folder.
        #[arg(long, default_value = "boards")]
        boards_dir: PathBuf,
        /// Write junit.xml, summary.json and report.html here, updated as
        /// each board finishes.
        #[arg(long, default_value = "build/reports")]
        report_dir: PathBuf,
        /// Run only this host's share, I of N (1-based), of the sorted
        /// (scenario, board) pairs: N hosts with 1/N .. N/N run each once.
        #[arg(long, value_name = "I/N")]
        shard: Option<hilt::shard::Shard>,
    },
    /// Run scenarios and compare layouts and latencies with the accepted
    /// snapshots (snapshots/gate); differences leave .snap.new files for
    /// `cargo insta review`.
    Gate {
        /// Scenario files (default: every scenarios/*.toml).
        scenarios: Vec<PathBuf>,
        /// Only these boards (a name or a glob).
        #[arg(long)]
        board: Option<String>,
        /// Boards to run at once.
        #[arg(long)]
        jobs: Option<usize>,
        /// The accepted snapshots.
        #[arg(long, default_value = "snapshots/gate")]
        snapshots: PathBuf,
        /// The board definitions folder.
        #[arg(long, default_value = "boards")]
        boards_dir: PathBuf,
        /// Write junit.xml, summary.json and report.html here (a changed
        /// snapshot is a failed test case), updated as each board finishes.
        #[arg(long, default_value = "build/reports/gate")]
        report_dir: PathBuf,
        /// Gate only this host's share, I of N (1-based), of the sorted
        /// (scenario, board) pairs.
        #[arg(long, value_name = "I/N")]
        shard: Option<hilt::shard::Shard>,
    },
    /// List the defined boards.
    Boards {
        /// The board definitions folder.
        #[arg(long, default_value = "boards")]
        dir: PathBuf,
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
        /// Arena bytes.
        #[arg(long, default_value_t = hilt::host_run::DEFAULT_ARENA)]
        arena: usize,
        /// Memory planner: linear, greedy or offline.
        #[arg(long, default_value = "greedy")]
        planner: PlannerKind,
        /// Invocations on one interpreter (state carries over).
        #[arg(long, default_value_t = 1)]
        steps: usize,
        #[command(flatten)]
        accel: AccelArgs,
    },
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
        /// Arena bytes.
        #[arg(long, default_value_t = hilt::host_run::DEFAULT_ARENA)]
        arena: usize,
        /// Memory planner: linear, greedy or offline.
        #[arg(long, default_value = "greedy")]
        planner: PlannerKind,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        accel: AccelArgs,
    },
}

/// `--accelerator` and `--offload`, shared by `infer` and `bench`.
#[derive(Debug, clap::Args)]
struct AccelArgs {
    /// Run claimed ops on an accelerator: none or vnpu (the virtual NPU,
    /// on its own thread).
    #[arg(long, default_value = "none")]
    accelerator: hilt::accel::AcceleratorKind,
    /// Ops the accelerator may claim, comma-separated builtin names
    /// [default: CONV_2D,DEPTHWISE_CONV_2D,FULLY_CONNECTED,ADD,AVERAGE_POOL_2D,MAX_POOL_2D].
    #[arg(long, value_name = "OPS")]
    offload: Option<String>,
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
        })
    }
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = e.print();
                return ExitCode::from(2);
            }
            // One line: clap's first line says what is wrong.
            let text = e.to_string();
            eprintln!(
                "{} (see hilt --help)",
                text.lines().next().unwrap_or("invalid arguments")
            );
            return ExitCode::from(2);
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
    match cli.command {
        Command::Layout {
            model,
            board,
            boards_dir,
            planner,
            align,
            canary,
            arena,
            format,
            output,
        } => {
            let report = match board {
                None => layout_file(
                    &model,
                    &LayoutOptions {
                        planner,
                        align,
                        arena,
                        canary,
                        ..LayoutOptions::default()
                    },
                )?,
                Some(name) => {
                    let board = hilt::board::find(&boards_dir, &name)?;
                    let defaults = LayoutOptions::for_board(&board);
                    let options = LayoutOptions {
                        planner,
                        align,
                        canary,
                        arena: arena.or(defaults.arena),
                        ..defaults
                    };
                    layout_for_board(&model, &board, &options)?
                }
            };
            let name = model.file_name().map_or_else(
                || model.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            let text = match format {
                Format::Table => render_table(&report, &name),
                Format::Json => serde_json::to_string_pretty(&report)? + "\n",
                Format::Svg => render_svg(&report, &name),
            };
            match output {
                Some(path) => std::fs::write(&path, text)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
                None => print!("{text}"),
            }
            Ok(())
        }
        Command::Run {
            scenarios,
            board,
            jobs,
            boards_dir,
            report_dir,
            shard,
        } => run_scenarios(
            &scenarios,
            board.as_deref(),
            jobs,
            &boards_dir,
            &RunReporting { report_dir, shard },
        ),
        Command::Gate {
            scenarios,
            board,
            jobs,
            snapshots,
            boards_dir,
            report_dir,
            shard,
        } => gate_scenarios(
            &scenarios,
            board.as_deref(),
            jobs,
            &snapshots,
            &boards_dir,
            &RunReporting { report_dir, shard },
        ),
        Command::Boards { dir } => {
            let boards = hilt::board::load_all(&dir)?;
            let width = boards
                .iter()
                .map(|b| b.name.len())
                .max()
                .unwrap_or(5)
                .max(5);
            println!(
                "{:<width$} {:<9} {:<5} {:<26} {:>10} {:>10}  description",
                "board", "runner", "link", "target", "arena", "RAM"
            );
            for b in &boards {
                let ram = b
                    .memory
                    .iter()
                    .find(|m| m.name == "RAM")
                    .map_or(0, |m| m.length);
                let runner = match b.runner {
                    hilt::board::RunnerKind::Qemu => "qemu",
                    hilt::board::RunnerKind::ProbeRs => "probe-rs",
                    hilt::board::RunnerKind::Uart => "uart",
                };
                let link = match b.transport {
                    hilt::board::Transport::Rtt => "rtt",
                    hilt::board::Transport::Uart => "uart",
                };
                println!(
                    "{:<width$} {:<9} {:<5} {:<26} {:>10} {:>10}  {}",
                    b.name, runner, link, b.target, b.arena_size, ram, b.description
                );
            }
            for b in &boards {
                if let Some(port) = &b.serial_port {
                    let state = if std::path::Path::new(port).exists() {
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
        Command::Infer {
            model,
            inputs,
            outputs,
            arena,
            planner,
            steps,
            accel,
        } => {
            let request = InferRequest {
                model,
                inputs,
                outputs: outputs.clone(),
                arena,
                planner,
                steps,
                accelerator: accel.choice()?,
            };
            let (values, arena_used) = infer(&request)?;
            if !outputs.is_empty() && outputs.len() != values.iter().filter(|v| v.step == 0).count()
            {
                anyhow::bail!(
                    "{} output files given, the model has {} outputs",
                    outputs.len(),
                    values.iter().filter(|v| v.step == 0).count()
                );
            }
            for value in &values {
                match outputs.get(value.position) {
                    Some(base) => {
                        let path = output_path(base, value.step, steps);
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
        Command::Bench {
            model,
            iterations,
            warmup,
            arena,
            planner,
            json,
            accel,
        } => {
            let report = bench(&model, planner, arena, iterations, warmup, &accel.choice()?)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                let name = model.file_name().map_or_else(
                    || model.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                );
                print!("{}", render_bench(&report, &name, 10));
            }
            Ok(())
        }
    }
}

fn gate_scenarios(
    paths: &[PathBuf],
    board_filter: Option<&str>,
    jobs: Option<usize>,
    snapshots: &std::path::Path,
    boards_dir: &std::path::Path,
    reporting: &RunReporting,
) -> anyhow::Result<()> {
    use hilt::gate::{ModelNames, Verdict, gate_run};
    let mut paths = paths.to_vec();
    if paths.is_empty() {
        for entry in std::fs::read_dir("scenarios")? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "toml") {
                paths.push(path);
            }
        }
        paths.sort();
    }
    let (work, names) = jobs_for(&paths, board_filter, boards_dir)?;
    let (work, mut reports) = reporting.start("hilt gate", work)?;
    let tolerance: std::collections::HashMap<String, hilt::gate::Tolerance> = work
        .iter()
        .map(|j| (j.board.name.clone(), j.board.latency_tolerance()))
        .collect();
    let repo = std::env::current_dir()?;
    let parallel =
        jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut verdicts = Vec::new();
    runtime.block_on(hilt::orchestrate::run_jobs_timed(&repo, work, parallel, |run, wall| {
        let (ops, tensors) = names.get(&run.scenario).cloned().unwrap_or_default();
        let names = ModelNames { tensors, ops };
        let tol = tolerance
            .get(&run.board)
            .copied()
            .unwrap_or(hilt::gate::Tolerance::EXACT);
        let verdict = gate_run(snapshots, run, &names, tol)
            .unwrap_or_else(|e| Verdict::RunFailed(format!("cannot write snapshot: {e}")));
        let key = format!("{} @ {}", run.scenario, run.board);
        match &verdict {
            Verdict::Unchanged => println!("ok       {key}"),
            Verdict::Faster(diffs) => {
                println!("ok       {key} (faster; accept the .snap.new to keep the gain):");
                for d in diffs {
                    println!("           {d}");
                }
            }
            Verdict::New => println!(
                "NEW      {key}: no accepted snapshot; review the .snap.new (cargo insta review)"
            ),
            Verdict::Changed(diffs) => {
                println!("CHANGED  {key}:");
                for d in diffs {
                    println!("           {d}");
                }
            }
            Verdict::RunFailed(m) => println!("FAILED   {key}: {m}"),
        }
        if let Err(e) = reports.record(&hilt::report::gated(run, &verdict), wall) {
            eprintln!("warning: {e}");
        }
        verdicts.push(verdict);
    }));
    println!("reports: {}", reports.finish()?.display());
    let bad = verdicts.iter().filter(|v| !v.passes()).count();
    let faster = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::Faster(_)))
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

/// Operator names and tensor names of a model, for readable output.
type OpAndTensorNames = (Vec<String>, Vec<String>);

type Work = (
    Vec<hilt::orchestrate::Job>,
    std::collections::HashMap<String, OpAndTensorNames>,
);

fn jobs_for(
    paths: &[PathBuf],
    board_filter: Option<&str>,
    boards_dir: &std::path::Path,
) -> anyhow::Result<Work> {
    use hilt::orchestrate::Job;
    let repo = std::env::current_dir()?;
    let boards = hilt::board::load_all(boards_dir)?;
    let conformance = hilt::conformance::locate(&repo);
    let mut work = Vec::new();
    let mut names = std::collections::HashMap::new();
    for path in paths {
        let scenario = std::sync::Arc::new(hilt::scenario::load(path, &conformance)?);
        names.insert(scenario.name.clone(), model_names(&scenario.model));
        let mut chosen: Vec<&hilt::board::Board> = Vec::new();
        for pattern in &scenario.boards {
            for b in hilt::board::select(&boards, pattern)? {
                if !chosen.iter().any(|c| c.name == b.name) {
                    chosen.push(b);
                }
            }
        }
        if let Some(filter) = board_filter {
            chosen.retain(|b| hilt::board::glob_match(filter, &b.name));
        }
        for board in chosen {
            work.push(Job {
                scenario: scenario.clone(),
                board: board.clone(),
            });
        }
    }
    if work.is_empty() {
        anyhow::bail!(
            "no (scenario, board) pair to run: check the scenarios' `boards` and --board"
        );
    }
    Ok((work, names))
}

fn model_names(model: &std::path::Path) -> OpAndTensorNames {
    let Ok(bytes) = std::fs::read(model) else {
        return Default::default();
    };
    let aligned = hilt::host_run::AlignedBytes::new(&bytes);
    match hilt_runtime::model::Model::from_bytes(aligned.as_slice()) {
        Ok(m) => (
            m.operators().map(|op| op.code.to_string()).collect(),
            m.tensors().map(|t| t.name.to_string()).collect(),
        ),
        Err(_) => Default::default(),
    }
}

fn run_scenarios(
    paths: &[PathBuf],
    board_filter: Option<&str>,
    jobs: Option<usize>,
    boards_dir: &std::path::Path,
    reporting: &RunReporting,
) -> anyhow::Result<()> {
    use hilt::orchestrate::{Job, run_jobs_timed};
    use hilt::runner::Outcome;
    let repo = std::env::current_dir()?;
    let boards = hilt::board::load_all(boards_dir)?;
    let conformance = hilt::conformance::locate(&repo);
    let mut work = Vec::new();
    for path in paths {
        let scenario = std::sync::Arc::new(hilt::scenario::load(path, &conformance)?);
        let mut chosen: Vec<&hilt::board::Board> = Vec::new();
        for pattern in &scenario.boards {
            for b in hilt::board::select(&boards, pattern)? {
                if !chosen.iter().any(|c| c.name == b.name) {
                    chosen.push(b);
                }
            }
        }
        if let Some(filter) = board_filter {
            chosen.retain(|b| hilt::board::glob_match(filter, &b.name));
        }
        for board in chosen {
            work.push(Job {
                scenario: scenario.clone(),
                board: board.clone(),
            });
        }
    }
    if work.is_empty() {
        anyhow::bail!(
            "no (scenario, board) pair to run: check the scenarios' `boards` and --board"
        );
    }
    let (work, mut reports) = reporting.start("hilt run", work)?;
    let parallel =
        jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let names: std::collections::HashMap<String, Vec<String>> = work
        .iter()
        .map(|j| (j.scenario.name.clone(), op_names(&j.scenario.model)))
        .collect();
    let results = runtime.block_on(run_jobs_timed(&repo, work, parallel, |run, wall| {
        print_run(run, names.get(&run.scenario), wall);
        if let Err(e) = reports.record(run, wall) {
            eprintln!("warning: {e}");
        }
    }));
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
        work: Vec<hilt::orchestrate::Job>,
    ) -> anyhow::Result<(Vec<hilt::orchestrate::Job>, hilt::report::ReportWriter)> {
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
        let reports = hilt::report::ReportWriter::for_jobs(&self.report_dir, &title, &work)?;
        Ok((work, reports))
    }
}

/// The attached probes and the boards each one serves (USB listing only:
/// no probe is opened, so this stays fast).
fn print_probes(boards: &[hilt::board::Board]) {
    let probes = hilt::probe::list_probes(&probe_rs::probe::list::Lister::new());
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
                    .is_some_and(|s| hilt::probe::selector_matches(s, p))
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

fn op_names(model: &std::path::Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(model) else {
        return Vec::new();
    };
    let aligned = hilt::host_run::AlignedBytes::new(&bytes);
    match hilt_runtime::model::Model::from_bytes(aligned.as_slice()) {
        Ok(m) => m.operators().map(|op| op.code.to_string()).collect(),
        Err(_) => Vec::new(),
    }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn print_run(run: &hilt::runner::BoardRun, ops: Option<&Vec<String>>, wall: std::time::Duration) {
    use hilt::runner::Outcome;
    let status = match &run.outcome {
        Outcome::Passed => "PASS".to_string(),
        Outcome::Mismatch(m) => format!("MISMATCH: {m}"),
        Outcome::Error(e) => format!("ERROR: {e}"),
    };
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
    for step in &run.steps {
        println!(
            "    {} step {}: {} cycles",
            step.case,
            step.step,
            thousands(step.total_cycles)
        );
    }
    if let Some(step) = run.steps.first() {
        let mut by_cost: Vec<(usize, u32)> = step.op_cycles.iter().copied().enumerate().collect();
        by_cost.sort_by_key(|&(_, c)| std::cmp::Reverse(c));
        for (op, c) in by_cost.iter().take(8) {
            let name = ops.and_then(|o| o.get(*op)).map_or("?", String::as_str);
            println!(
                "      op {op:>3} {name:<30} {:>14} cycles",
                thousands(u64::from(*c))
            );
        }
    }
}
