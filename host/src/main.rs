//! The `hilt` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use hilt::layout::{LayoutOptions, PlannerKind, layout_file, render_table};
use hilt::svg::render_svg;

/// hilt: run TinyML models on microcontrollers and prove they still fit.
#[derive(Debug, Parser)]
#[command(name = "hilt", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a model's arena plan, without any board.
    Layout {
        /// The .tflite model.
        model: PathBuf,
        /// Memory planner.
        #[arg(long, value_enum, default_value = "greedy")]
        planner: PlannerKind,
        /// Alignment of every activation buffer (power of two, up to 1 MiB).
        #[arg(long, default_value_t = 16)]
        align: u32,
        /// Plan into an arena of exactly this many bytes (fails if too small).
        #[arg(long)]
        arena: Option<usize>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Write to this file instead of standard output.
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Svg,
}

fn main() -> ExitCode {
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
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Layout {
            model,
            planner,
            align,
            arena,
            format,
            output,
        } => {
            let report = layout_file(
                &model,
                &LayoutOptions {
                    planner,
                    align,
                    arena,
                },
            )?;
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
    }
}
