//! Flag groups and value parsers more than one subcommand uses, as
//! `#[derive(clap::Args)]` structs each command takes in with
//! `#[command(flatten)]`: one definition per flag, so a flag spelled, parsed
//! or defaulted in two places cannot drift apart. A command whose flag says
//! something of its own rewords the help with `mut_arg` where it flattens the
//! group (see `cmd::gate`). The output-format enums live here too, beside the
//! parsers, as the commands' vocabulary.

use std::path::PathBuf;

use clap::ValueEnum;
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::planner::PlannerKind;

/// `--board` and `--jobs` of `run` and `gate`: which boards, and how many
/// at once. The help is `hilt run`'s; `hilt gate` rewords it.
#[derive(Debug, clap::Args)]
pub(crate) struct BoardChoiceArgs {
    /// Only these boards (a name or a glob such as 'qemu-*'); a name
    /// runs each scenario on that board even if its `boards` do not
    /// list it.
    #[arg(long)]
    pub(crate) board: Option<String>,
    /// Boards to run at once (default: the number of CPUs).
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// Run a failed board run again up to N times [default: each
    /// scenario's `retries`, else 0]; one that then passes is reported as
    /// flaky (JUnit's flakyFailure), never as a plain pass.
    #[arg(long, value_name = "N")]
    pub(crate) retries: Option<u32>,
}

impl BoardChoiceArgs {
    /// `--retries` over every job's scenario.
    pub(crate) fn apply_retries(&self, work: &mut [hilt::orchestrate::Job]) {
        if let Some(n) = self.retries {
            for job in work {
                std::sync::Arc::make_mut(&mut job.scenario).retries = n;
            }
        }
    }
}

/// `--boards-dir` and `--repo` of `run`, `gate` and `bench-target`: where
/// the board definitions and the repository (firmware sources) are, for
/// [`Workspace::find`](crate::cmd::workspace::Workspace::find). The help is
/// `hilt run`'s; `gate` and `bench-target` reword `--repo`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkspaceArgs {
    /// The board definitions folder [default: the repository's boards/].
    #[arg(long)]
    pub(crate) boards_dir: Option<PathBuf>,
    /// The hilt repository (firmware sources, boards) [default: found
    /// above the scenario files, the current folder or this executable].
    #[arg(long)]
    pub(crate) repo: Option<PathBuf>,
}

/// `--report-dir` and `--shard` of `run` and `gate`: where the reports go
/// and which share of the pairs this host runs, for
/// [`RunReporting`](crate::cmd::reporting::RunReporting). The help is
/// `hilt run`'s; `hilt gate` rewords it.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// Write junit.xml, summary.json and report.html here, updated as
    /// each board finishes [default: the repository's build/reports;
    /// ./hilt-reports when hilt runs outside the repository on
    /// scenarios that all lie outside it].
    #[arg(long)]
    pub(crate) report_dir: Option<PathBuf>,
    /// Run only this host's share, I of N (1-based), of the sorted
    /// (scenario, board) pairs: N hosts with 1/N .. N/N run each once.
    #[arg(long, value_name = "I/N")]
    pub(crate) shard: Option<hilt::shard::Shard>,
    /// Record every board run in this results store (`hilt history` reads
    /// it): a SQLite file, `postgres://…` for a farm's one database, or
    /// `none` [default: HILT_RESULTS, else the repository's
    /// build/results.sqlite].
    #[arg(long, value_name = "STORE")]
    pub(crate) results: Option<String>,
    /// Known-flaky (scenario, board) pairs, one `SCENARIO@BOARD` per line
    /// (globs allowed, `#` comments): they run and are reported, marked
    /// quarantined, but their failures do not fail the command.
    #[arg(long, value_name = "FILE")]
    pub(crate) quarantine: Option<PathBuf>,
}

/// `--accelerator` and `--offload`, shared by `infer`, `bench` and `layout`.
#[derive(Debug, clap::Args)]
pub(crate) struct AccelArgs {
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
    /// The accelerator, its offload list (the runtime's default when
    /// `--offload` is absent) and coherence, as the library takes them.
    pub(crate) fn choice(&self) -> anyhow::Result<hilt::accel::AccelChoice> {
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
pub(crate) struct OffloadArgs {
    /// Offload claimed ops to the firmware's virtual NPU (vnpu) or not
    /// (none) [default: each scenario's `accelerator`].
    #[arg(long, value_parser = accelerator_parser())]
    accelerator: Option<hilt::accel::AcceleratorKind>,
    /// Whether the engine sees memory coherently [default: each
    /// scenario's `coherent`].
    #[arg(long, value_name = "true|false")]
    coherent: Option<bool>,
    /// Fault for the firmware to inject into its offload path (tests of
    /// hilt itself; builds the fault-injection firmware with `accel` armed).
    #[arg(long, value_name = "NAME", value_parser = parse_accel_fault, hide = true)]
    accel_fault: Option<hilt_proto::AccelFault>,
}

impl OffloadArgs {
    /// `scenario` with these overrides; a fault without offload is refused
    /// (nothing would inject it).
    pub(crate) fn apply(
        &self,
        scenario: &mut hilt::config::scenario::Scenario,
    ) -> anyhow::Result<()> {
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
            if fault != hilt_proto::AccelFault::None {
                // The firmware takes the host's offload faults only with
                // this one armed.
                scenario.faults = scenario.faults.with(hilt_proto::armed_faults::Fault::Accel);
            }
        }
        Ok(())
    }
}

/// `--planner`: the runtime's planner names, listed by clap when one is
/// wrong (the runtime's type has only `FromStr`, no clap).
pub(crate) fn planner_parser() -> impl clap::builder::TypedValueParser<Value = PlannerKind> {
    planners_parser(PlannerKind::NAMES)
}

/// A `--planner` parser offering `names` only.
pub(crate) fn planners_parser(
    names: &'static [&'static str],
) -> impl clap::builder::TypedValueParser<Value = PlannerKind> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(names).try_map(|name| name.parse::<PlannerKind>())
}

/// How virtual boards are observed (hilt's QEMU plugin).
#[derive(Debug, clap::Args)]
pub(crate) struct ObserveArgs {
    /// Check every load and store on virtual boards against the committed
    /// arena plan (the QEMU plugin's counts and cycle estimates are kept
    /// either way).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    pub(crate) access_checks: String,
    /// Estimate cycles with a timing profile of a real part
    /// (boards/timing/NAME.toml, e.g. stm32l4r5) instead of each virtual
    /// board's own core.
    #[arg(long, value_name = "PROFILE")]
    pub(crate) timing: Option<String>,
    /// Count each function's instructions on virtual boards and print the
    /// busiest (the QEMU plugin counts every block the invokes run)
    #[arg(long)]
    pub(crate) hotspots: bool,
}

impl ObserveArgs {
    /// Puts the settings in force for this process's virtual board runs.
    pub(crate) fn apply(&self, boards_dir: &std::path::Path) -> anyhow::Result<()> {
        let profile = match &self.timing {
            Some(name) => Some((
                name.clone(),
                hilt::observer::load_profile(boards_dir, name).map_err(anyhow::Error::msg)?,
            )),
            None => None,
        };
        let mut settings = hilt::observer::settings();
        settings.checks = self.access_checks == "on";
        settings.profile = profile;
        settings.hotspots = self.hotspots;
        hilt::observer::configure(settings);
        Ok(())
    }
}

/// `--canary`: the runtime's guard-band modes, listed when one is wrong.
pub(crate) fn canary_parser() -> impl clap::builder::TypedValueParser<Value = CanaryMode> {
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

/// How `hilt layout` prints a plan.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    Table,
    Json,
    Svg,
}

/// How `hilt bench` prints its report.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum BenchFormat {
    Table,
    Json,
}

/// How `hilt bench-target` prints its rows.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum TableFormat {
    Table,
    Markdown,
    Json,
}
