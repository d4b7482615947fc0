//! `hilt history`: what the results store remembers of each (scenario,
//! board): outcome, latency in all and per op, arena, over the last runs,
//! with the op that moved at each commit; as a table, JSON, or a
//! self-contained HTML page with plots.

use std::path::PathBuf;

use hilt::results::history::{HistoryQuery, history, table};
use hilt::results::{Store, StoreTarget};

/// `hilt history`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct HistoryArgs {
    /// The results store: a SQLite file or `postgres://…` [default:
    /// HILT_RESULTS, else the repository's build/results.sqlite].
    #[arg(long, value_name = "STORE")]
    results: Option<String>,
    /// Only these scenarios (a name or a glob).
    #[arg(long, default_value = "*")]
    scenario: String,
    /// Only these boards (a name or a glob).
    #[arg(long, default_value = "*")]
    board: String,
    /// Only runs started on or after this date (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE", value_parser = parse_date)]
    since: Option<String>,
    /// At most this many runs per (scenario, board), the latest.
    #[arg(long, default_value_t = 10)]
    last: usize,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: HistoryFormat,
    /// Write to this file instead of standard output.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum HistoryFormat {
    Table,
    Json,
    Html,
}

/// `YYYY-MM-DD`, checked.
fn parse_date(text: &str) -> Result<String, String> {
    let parts: Vec<&str> = text.split('-').collect();
    let ok = matches!(parts[..], [y, m, d] if y.len() == 4 && m.len() == 2 && d.len() == 2)
        && parts.iter().all(|p| p.bytes().all(|b| b.is_ascii_digit()))
        && (1..=12).contains(&parts[1].parse::<u32>().unwrap_or(0))
        && (1..=31).contains(&parts[2].parse::<u32>().unwrap_or(0));
    if ok {
        Ok(text.to_string())
    } else {
        Err(format!("{text:?} is not a date as YYYY-MM-DD"))
    }
}

/// `hilt history`.
pub(crate) fn run(args: HistoryArgs) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()?;
    let repo = hilt::paths::find_repo_from(&cwd).unwrap_or(cwd);
    let target = StoreTarget::choose(args.results.as_deref(), &repo);
    if target == StoreTarget::Off {
        anyhow::bail!("--results none: no store to read");
    }
    if let StoreTarget::Sqlite(path) = &target
        && !path.is_file()
    {
        anyhow::bail!(
            "results store {}: no such file (a `hilt run`, `gate` or `bench-target` writes it)",
            path.display()
        );
    }
    let mut store = Store::open(&target)
        .map_err(|e| anyhow::anyhow!("results store {}: {e}", target.name()))?;
    let query = HistoryQuery {
        scenario: args.scenario,
        board: args.board,
        since: args.since,
        last: args.last.max(1),
    };
    let pairs = history(&mut store, &query)
        .map_err(|e| anyhow::anyhow!("results store {}: {e}", target.name()))?;
    let text = match args.format {
        HistoryFormat::Table => table(&pairs),
        HistoryFormat::Json => serde_json::to_string_pretty(&pairs)? + "\n",
        HistoryFormat::Html => {
            hilt::results::html::page(&pairs, &format!("hilt history ({})", target.name()))
        }
    };
    match args.output {
        Some(path) => std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}
