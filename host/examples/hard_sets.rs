//! Writes hard buffer sets (MiniMalloc-"challenging"-like, see
//! `host/tests/common/hard_sets.rs`) as CSVs for `hilt plan`:
//!
//! ```text
//! cargo run -p hilt --example hard_sets -- OUT_DIR [cut SEED COUNT STEPS DROP_PERCENT | skyline SEED SECTIONS DROP_PERCENT]...
//! ```
//!
//! `cut`: pieces cut like a guillotine from the full rectangle; `skyline`:
//! pieces dropped onto a skyline, upside down. With no set given, writes
//! the four under `host/tests/data/plan/`.

#[path = "../tests/common/hard_sets.rs"]
mod hard_sets;

use std::path::PathBuf;

/// Capacity of every set: 1 MiB.
const CAPACITY: u32 = 1 << 20;

/// One set to write.
#[derive(Debug, Clone, Copy)]
enum Set {
    /// Seed, buffers, steps, percent dropped.
    Cut(u64, usize, u32, u64),
    /// Seed, sections, percent dropped.
    Skyline(u64, u32, u64),
}

/// The sets the tests use.
const DEFAULT_SETS: [Set; 4] = [
    Set::Cut(6, 300, 1000, 0),
    Set::Cut(8, 400, 1200, 0),
    Set::Skyline(1, 70, 3),
    Set::Skyline(3, 70, 3),
];

const USAGE: &str = "usage: hard_sets OUT_DIR [cut SEED COUNT STEPS DROP_PERCENT | skyline SEED SECTIONS DROP_PERCENT]...";

fn parse(args: &[String]) -> Option<Vec<Set>> {
    let mut sets = Vec::new();
    let mut rest = args;
    while let Some((kind, tail)) = rest.split_first() {
        let numbers = |n: usize| -> Option<Vec<u64>> {
            tail.get(..n)?.iter().map(|a| a.parse().ok()).collect()
        };
        match kind.as_str() {
            "cut" => {
                let v = numbers(4)?;
                sets.push(Set::Cut(v[0], v[1] as usize, v[2] as u32, v[3]));
                rest = &tail[4..];
            }
            "skyline" => {
                let v = numbers(3)?;
                sets.push(Set::Skyline(v[0], v[1] as u32, v[2]));
                rest = &tail[3..];
            }
            _ => return None,
        }
    }
    Some(sets)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((dir, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    let dir = PathBuf::from(dir);
    let sets = match parse(rest) {
        Some(sets) if sets.is_empty() => DEFAULT_SETS.to_vec(),
        Some(sets) => sets,
        None => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    for set in sets {
        let (pieces, name) = match set {
            Set::Cut(seed, count, steps, drop) => (
                hard_sets::cut_rectangle(seed, CAPACITY, steps, count, 16, drop),
                format!("hard_{count}_{steps}_seed{seed}.csv"),
            ),
            Set::Skyline(seed, sections, drop) => (
                hard_sets::drop_on_skyline(seed, CAPACITY, sections, 1024, drop),
                format!("skyline_{sections}_drop{drop}_seed{seed}.csv"),
            ),
        };
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, hard_sets::to_csv(&pieces)) {
            eprintln!("cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
        println!(
            "{}: {} buffers, capacity {CAPACITY}",
            path.display(),
            pieces.len()
        );
    }
}
