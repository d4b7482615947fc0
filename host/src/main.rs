//! The `hilt` command line: global flags, the subcommands and the exit
//! codes. Each subcommand's flags and handler live in its own module under
//! `cmd/`; this file only parses and dispatches.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cmd::bench::BenchArgs;
use cmd::bench_target::BenchTargetArgs;
use cmd::boards::BoardsArgs;
use cmd::gate::GateArgs;
use cmd::history::HistoryArgs;
use cmd::infer::InferArgs;
use cmd::layout::LayoutArgs;
use cmd::plan::PlanArgs;
use cmd::run::RunArgs;

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

// The subcommands, in the order `hilt --help` lists them; each variant's
// doc comment is that subcommand's help summary. (A doc comment here would
// feed clap's help text, so this one is plain.)
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
    Run(RunArgs),
    /// Run scenarios and compare layouts and latencies with the accepted
    /// snapshots (snapshots/gate); differences leave .snap.new files, which
    /// `hilt gate --accept` (or `cargo insta review`) accepts.
    Gate(GateArgs),
    /// Show what the results store remembers of each (scenario, board):
    /// outcome, latency in all and per op, and arena over the last runs,
    /// with the op that moved at each commit (table, JSON or HTML with plots).
    History(HistoryArgs),
    /// List the defined boards.
    Boards(BoardsArgs),
    /// Run a model once (or --steps N times) on the host.
    Infer(InferArgs),
    /// Run the MLPerf Tiny scenarios (int8, and IC and VWW in float32) and
    /// person_detect on the virtual Cortex-M boards and print, per model and board, hilt's instructions
    /// per inference beside TFLM's (reference and CMSIS-NN, on a
    /// Cortex-M4), instructions per MAC, the arena against TFLM's and the
    /// firmware's flash bytes.
    BenchTarget(BenchTargetArgs),
    /// Time a model's invocations on the host, with a per-op profile.
    Bench(BenchArgs),
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

/// Runs the parsed command; its error is printed by `main`.
fn run(cli: Cli) -> anyhow::Result<()> {
    hilt::firmware::set_verbose(cli.verbose);
    match cli.command {
        Command::Layout(args) => cmd::layout::run(args),
        Command::Plan(args) => cmd::plan::run(&args),
        Command::Run(args) => cmd::run::run(args),
        Command::Gate(args) => cmd::gate::run(args),
        Command::History(args) => cmd::history::run(args),
        Command::Boards(args) => cmd::boards::run(args),
        Command::Infer(args) => cmd::infer::run(args),
        Command::BenchTarget(args) => cmd::bench_target::run(args),
        Command::Bench(args) => cmd::bench::run(args),
    }
}
