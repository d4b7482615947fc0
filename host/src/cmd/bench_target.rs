//! `hilt bench-target`: run the MLPerf Tiny scenarios (and person_detect,
//! hello_world, and ResNet-8 and VWW in float32) on the virtual Cortex-M boards and print one row per model
//! and board: hilt's instructions per inference beside TFLM's, per MAC, the
//! arena and the firmware's flash bytes. A failed run is listed after the
//! table and fails the command, so a table is never silently short.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use hilt::config::scenario::{KernelChoice, OptimizeFor};
use hilt::flash_parts::{FlashRow, ForSize, OwnKernels, SizeRow, flash_bytes, flash_parts};
use hilt::orchestrate::{Job, run_jobs_timed};
use hilt::outcome::{BoardRun, Outcome};
use hilt::part_estimate::{PartFigure, REFERENCE_PARTS, benchmark_of, part_of, read_records};
use hilt::target_bench::{TargetRow, TflmM4, median, model_macs, read_tflm_figures};

use crate::cmd::args::{OffloadArgs, TableFormat, WorkspaceArgs};
use crate::cmd::print::file_stem;
use crate::cmd::reporting::ResultsLog;
use crate::cmd::workspace::{Workspace, parallel, runtime};

/// The scenarios `hilt bench-target` runs by default (`scenarios/NAME.toml`).
const BENCH_TARGET_SCENARIOS: [&str; 8] = [
    "kws_dscnn_int8",
    "vww_mobilenetv1_int8",
    "ic_resnet8_int8",
    "ad_autoencoder_int8",
    "person_detect_int8",
    "hello_world_int8",
    "ic_resnet8_float",
    "vww_mobilenetv1_float",
];

/// The boards `hilt bench-target` runs on by default: the three virtual
/// Cortex-M cores (M4, M7, M33).
const BENCH_TARGET_BOARDS: [&str; 3] = ["qemu-mps2-an386", "qemu-mps2-an500", "qemu-mps2-an505"];

/// `hilt bench-target`'s arguments. `--repo` is reworded: the benchmark
/// needs no more of the repository than its firmware and scenarios.
#[derive(Debug, clap::Args)]
#[command(mut_arg("repo", |a| a.help(
    "The hilt repository [default: found above the scenario files, the current folder or \
     this executable]",
)))]
pub(crate) struct BenchTargetArgs {
    /// Scenario files [default: the repository's MLPerf Tiny scenarios
    /// (KWS, VWW, IC, AD), person_detect and hello_world; ResNet-8 and
    /// VWW in float32].
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
    #[command(flatten)]
    workspace: WorkspaceArgs,
    /// Record the benchmark's board runs in this results store (as `hilt
    /// run --results`): a SQLite file, `postgres://…` or `none` [default:
    /// HILT_RESULTS, else the repository's build/results.sqlite].
    #[arg(long, value_name = "STORE")]
    results: Option<String>,
}

/// `hilt bench-target`: run, then one row per passed (model, board); a
/// failed run is listed after the table and fails the command.
pub(crate) fn run(args: BenchTargetArgs) -> anyhow::Result<()> {
    let no_offload = OffloadArgs::default();
    let place = Workspace::find(&args.scenarios, args.workspace, no_offload)?;
    let scenarios = if args.scenarios.is_empty() {
        BENCH_TARGET_SCENARIOS
            .iter()
            .map(|n| place.repo.join("scenarios").join(format!("{n}.toml")))
            .collect()
    } else {
        args.scenarios
    };
    let boards = if args.board.is_empty() {
        BENCH_TARGET_BOARDS.iter().map(|b| b.to_string()).collect()
    } else {
        args.board
    };
    let work = select_jobs(&place, &scenarios, &boards)?;
    let figures = read_tflm_figures(&place.conformance)?;
    let jobs_by_pair: HashMap<(String, String), Job> = work
        .iter()
        .map(|j| ((j.scenario.name.clone(), j.board.name.clone()), j.clone()))
        .collect();
    let names: HashMap<String, hilt::layout::ModelNames> = work
        .iter()
        .map(|j| {
            let names = hilt::layout::model_names(&j.scenario.model_file);
            (j.scenario.name.clone(), names)
        })
        .collect();
    let store = hilt::results::StoreTarget::choose(args.results.as_deref(), &place.repo);
    let mut log = ResultsLog::new(store, "hilt bench-target", &place.repo, &work);
    let results = runtime()?.block_on(run_jobs_timed(
        &place.repo,
        work,
        parallel(args.jobs),
        |run, wall| {
            eprintln!("{} on {}: {}", run.scenario, run.board, run.outcome);
            log.keep(run, wall);
        },
    ));
    let (mut rows, mut failed) = target_rows(&place, &results, &jobs_by_pair, &figures)?;
    failed.extend(rerun_on_the_reference_parts(
        &place,
        &jobs_by_pair,
        &mut rows,
        args.jobs,
    )?);
    failed.extend(rerun_for_size(&place, &jobs_by_pair, &mut rows, args.jobs)?);
    rows.sort_by(|a, b| (&a.model, &a.board).cmp(&(&b.model, &b.board)));
    print_tables(args.format, &rows)?;
    log.save(&names, true)?;
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
    let above = hilt::target_bench::above_cmsis(&rows);
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

/// The four tables (`--format table` or `markdown`), or the rows as JSON.
fn print_tables(format: TableFormat, rows: &[TargetRow]) -> anyhow::Result<()> {
    let estimated: Vec<(&str, &PartFigure)> = rows
        .iter()
        .filter_map(|r| r.part.as_ref().map(|p| (r.model.as_str(), p)))
        .collect();
    let flash: Vec<FlashRow<'_>> = rows
        .iter()
        .filter_map(|r| {
            r.own_kernels
                .as_ref()
                .map(|o| (r.model.as_str(), r.board.as_str(), r.flash, o))
        })
        .collect();
    let for_size: Vec<SizeRow<'_>> = rows
        .iter()
        .filter_map(|r| {
            let (own, part) = (r.own_kernels.as_ref()?, r.part.as_ref()?);
            let speed = [own.flash.total(), part.instructions, part.estimated_cycles];
            Some((
                r.model.as_str(),
                r.board.as_str(),
                speed,
                own.for_size.as_ref()?,
            ))
        })
        .collect();
    use hilt::{flash_parts as fp, part_estimate as pe, target_bench as tb};
    type Renderers = (
        fn(&[TargetRow]) -> String,
        fn(&[(&str, &PartFigure)]) -> String,
        fn(&[FlashRow<'_>]) -> String,
        fn(&[SizeRow<'_>]) -> String,
    );
    let (main, part, own, size): Renderers = match format {
        TableFormat::Json => {
            let json = serde_json::to_string_pretty(&tb::judged(rows))?;
            println!("{json}");
            return Ok(());
        }
        TableFormat::Table => (
            tb::render_table,
            pe::render_table,
            fp::render_table,
            fp::render_size_table,
        ),
        TableFormat::Markdown => (
            tb::render_markdown,
            pe::render_markdown,
            fp::render_markdown,
            fp::render_size_markdown,
        ),
    };
    print!("{}", main(rows));
    if !estimated.is_empty() {
        print!("\n{}", part(&estimated));
    }
    if !flash.is_empty() {
        print!("\n{}", own(&flash));
    }
    if !for_size.is_empty() {
        print!("\n{}", size(&for_size));
    }
    Ok(())
}

/// Every (scenario, board) pair of `boards` (names or globs), each once
/// however many globs match it, with the per-op profile off: a plain
/// invoke, as TFLM's figures are (see `Scenario::op_profile`).
fn select_jobs(
    place: &Workspace,
    scenarios: &[PathBuf],
    boards: &[String],
) -> anyhow::Result<Vec<Job>> {
    let mut work: Vec<Job> = Vec::new();
    for glob in boards {
        for mut job in place.jobs(scenarios, Some(glob))?.0 {
            std::sync::Arc::make_mut(&mut job.scenario).op_profile = false;
            let seen = work
                .iter()
                .any(|j| j.board.name == job.board.name && j.scenario.name == job.scenario.name);
            if !seen {
                work.push(job);
            }
        }
    }
    Ok(work)
}

/// One row per passed run (its ELF read back from the firmware cache for
/// the flash bytes), and a line per failed one.
fn target_rows(
    place: &Workspace,
    results: &[BoardRun],
    jobs_by_pair: &HashMap<(String, String), Job>,
    figures: &BTreeMap<String, TflmM4>,
) -> anyhow::Result<(Vec<TargetRow>, Vec<String>)> {
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for run in results {
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
        let m4 = job
            .board
            .qemu
            .as_ref()
            .is_some_and(|q| q.cpu == "cortex-m4")
            && job.board.target.starts_with("thumbv7em");
        rows.push(TargetRow {
            m4_tick: m4.then(|| job.board.cycle_scale().round() as u64),
            tflm: figures.get(&model).copied(),
            model,
            board: run.board.clone(),
            instructions: median(&mut instructions),
            macs: model_macs(&job.scenario.model_file),
            arena_used: run.arena.map_or(0, |[_, _, _, used]| u64::from(used)),
            flash: flash_bytes(&elf)?,
            part: None,
            own_kernels: None,
        });
    }
    Ok((rows, failed))
}

/// Whether `model` is a float32 one (`*_float`): those are compared with
/// TFLM on instructions only; no MLPerf Tiny record is for a float model
/// and their flash is not a product's, so they are not run again on a part.
fn is_float(model: &str) -> bool {
    model.ends_with("_float")
}

/// [`rerun_on_part`] for every part of [`REFERENCE_PARTS`], one after the
/// other (the plugin's timing profile is the process's).
fn rerun_on_the_reference_parts(
    place: &Workspace,
    jobs_by_pair: &HashMap<(String, String), Job>,
    rows: &mut [TargetRow],
    jobs: Option<usize>,
) -> anyhow::Result<Vec<String>> {
    let mut failed = Vec::new();
    for (i, (board, profile)) in REFERENCE_PARTS.into_iter().enumerate() {
        failed.extend(rerun_on_part(
            place,
            jobs_by_pair,
            rows,
            jobs,
            (board, profile, i == 0),
        )?);
    }
    Ok(failed)
}

/// Runs every model of `rows` on `board` again as a product on the part
/// of `profile` would carry it: a firmware with only the model's kernels,
/// with the part's timing profile in the QEMU plugin. Gives each row its
/// estimate (beside the part's published record, for the MLPerf Tiny
/// models) and that firmware's flash by part; with `every_model` false,
/// only the models with a record on the part. Returns a line per failed
/// run. The estimate's instructions are this run's: another firmware,
/// whose code the linker laid out otherwise.
fn rerun_on_part(
    place: &Workspace,
    jobs_by_pair: &HashMap<(String, String), Job>,
    rows: &mut [TargetRow],
    jobs: Option<usize>,
    (board, profile_name, every_model): (&str, &str, bool),
) -> anyhow::Result<Vec<String>> {
    let records = read_records(&place.conformance, &part_of(profile_name))?;
    let work = rerun_jobs(
        jobs_by_pair,
        rows.iter().filter(|r| r.board == board).filter(|r| {
            (every_model && !is_float(&r.model))
                || benchmark_of(&r.model).is_some_and(|b| records.contains_key(b))
        }),
        OptimizeFor::Speed,
    );
    let mut failed = Vec::new();
    for (job, run) in run_on_part(place, work, profile_name, jobs, "")? {
        let model = file_stem(&job.scenario.model);
        let Some((instructions, estimated_cycles)) = part_counts(&run, profile_name, &mut failed)
        else {
            continue;
        };
        let record = benchmark_of(&model).and_then(|b| records.get(b)).cloned();
        let request = hilt::firmware::FirmwareRequest::for_scenario(&job.board, &job.scenario);
        // The ELF the run used, from the firmware cache (built already).
        let elf = hilt::firmware::build(&place.repo, &request)?;
        let own = OwnKernels {
            operators: request.kernel_names().map_or(0, |k| k.len()),
            flash: flash_parts(&elf)?,
            for_size: None,
        };
        if let Some(row) = rows
            .iter_mut()
            .find(|r| r.model == model && r.board == run.board)
        {
            row.part = Some(PartFigure {
                profile: profile_name.to_string(),
                instructions,
                estimated_cycles,
                record,
            });
            row.own_kernels = Some(own);
        }
    }
    Ok(failed)
}

/// The M4 rows' models once more, their firmware with only the model's
/// kernels built for size (`optimize = "size"`, `opt-level = "z"`), under
/// the same part's timing profile: flash, instructions and estimated
/// cycles beside the speed build's (in the rows' [`OwnKernels`]). Returns
/// a line per failed run.
fn rerun_for_size(
    place: &Workspace,
    jobs_by_pair: &HashMap<(String, String), Job>,
    rows: &mut [TargetRow],
    jobs: Option<usize>,
) -> anyhow::Result<Vec<String>> {
    let (board, profile_name) = REFERENCE_PARTS[0];
    let work = rerun_jobs(
        jobs_by_pair,
        rows.iter()
            .filter(|r| r.board == board && r.own_kernels.is_some()),
        OptimizeFor::Size,
    );
    let mut failed = Vec::new();
    for (job, run) in run_on_part(place, work, profile_name, jobs, " built for size")? {
        let Some((instructions, estimated_cycles)) = part_counts(&run, profile_name, &mut failed)
        else {
            continue;
        };
        let request = hilt::firmware::FirmwareRequest::for_scenario(&job.board, &job.scenario);
        let elf = hilt::firmware::build(&place.repo, &request)?;
        let model = file_stem(&job.scenario.model);
        if let Some(own) = rows
            .iter_mut()
            .find(|r| r.model == model && r.board == run.board)
            .and_then(|r| r.own_kernels.as_mut())
        {
            own.for_size = Some(ForSize {
                flash: flash_bytes(&elf)?,
                instructions,
                estimated_cycles,
            });
        }
    }
    Ok(failed)
}

/// The jobs of `rows` again, each with a firmware of only its model's
/// kernels, generated for `optimize`.
fn rerun_jobs<'r>(
    jobs_by_pair: &HashMap<(String, String), Job>,
    rows: impl Iterator<Item = &'r TargetRow>,
    optimize: OptimizeFor,
) -> Vec<Job> {
    rows.filter_map(|r| {
        jobs_by_pair
            .values()
            .find(|j| j.board.name == r.board && file_stem(&j.scenario.model) == r.model)
            .cloned()
    })
    .map(|mut job| {
        let scenario = std::sync::Arc::make_mut(&mut job.scenario);
        scenario.kernels = KernelChoice::Model;
        scenario.optimize = optimize;
        job
    })
    .collect()
}

/// Runs `work` with `profile_name`'s timing profile in the QEMU plugin
/// (the process's setting, put back after); each run with its job.
fn run_on_part(
    place: &Workspace,
    work: Vec<Job>,
    profile_name: &str,
    jobs: Option<usize>,
    built: &str,
) -> anyhow::Result<Vec<(Job, BoardRun)>> {
    if work.is_empty() {
        return Ok(Vec::new());
    }
    let by_pair: HashMap<(String, String), Job> = work
        .iter()
        .map(|j| ((j.scenario.name.clone(), j.board.name.clone()), j.clone()))
        .collect();
    let boards_dir = place.repo.join("boards");
    let profile =
        hilt::observer::load_profile(&boards_dir, profile_name).map_err(anyhow::Error::msg)?;
    let before = hilt::observer::settings();
    let mut settings = before.clone();
    settings.profile = Some((profile_name.to_string(), profile));
    hilt::observer::configure(settings);
    let results = runtime()?.block_on(run_jobs_timed(
        &place.repo,
        work,
        parallel(jobs),
        |run, _| {
            eprintln!(
                "{} on {}{built} with the {profile_name} timing profile: {}",
                run.scenario, run.board, run.outcome
            );
        },
    ));
    hilt::observer::configure(before);
    Ok(results
        .into_iter()
        .map(|run| {
            (
                by_pair[&(run.scenario.clone(), run.board.clone())].clone(),
                run,
            )
        })
        .collect())
}

/// A part run's instructions and estimated cycles (medians over its
/// steps), or `None` with a line in `failed` when it failed or the plugin
/// did not estimate every step.
fn part_counts(run: &BoardRun, profile_name: &str, failed: &mut Vec<String>) -> Option<(u64, u64)> {
    let observed: Vec<_> = run
        .steps
        .iter()
        .filter_map(|s| s.observed.as_ref())
        .collect();
    let mut estimates: Vec<u64> = observed.iter().map(|o| o.estimated_cycles).collect();
    let mut instructions: Vec<u64> = observed.iter().map(|o| o.instructions).collect();
    if run.outcome != Outcome::Passed || estimates.len() != run.steps.len() || estimates.is_empty()
    {
        failed.push(format!(
            "{} on {} with the {profile_name} timing profile: {}",
            run.scenario,
            run.board,
            if run.outcome == Outcome::Passed {
                "the QEMU plugin gave no estimate for every step".to_string()
            } else {
                run.outcome.to_string()
            }
        ));
        return None;
    }
    Some((median(&mut instructions), median(&mut estimates)))
}
