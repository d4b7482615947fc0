//! `hilt boards`: list the defined boards (one table), their serial ports
//! and whether each exists, and the attached debug probes with the boards
//! each one serves.

use std::path::{Path, PathBuf};

use hilt::config::board::{Board, Transport, load_all};
use hilt::report::thousands;

/// `hilt boards`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct BoardsArgs {
    /// The board definitions folder [default: the repository's boards/].
    // `--dir`, its old name, still works (hidden).
    #[arg(long, alias = "dir")]
    boards_dir: Option<PathBuf>,
}

/// `hilt boards`: the defined boards, their serial ports and the attached
/// probes.
pub(crate) fn run(args: BoardsArgs) -> anyhow::Result<()> {
    let dir = match args.boards_dir {
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
