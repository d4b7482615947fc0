//! Writes hard buffer sets (MiniMalloc-"challenging"-like, see
//! `host/tests/common/hard_sets.rs`) as CSVs for `hilt plan`:
//!
//! ```text
//! cargo run -p hilt --example hard_sets -- OUT_DIR [SEED COUNT STEPS DROP_PERCENT]...
//! ```
//!
//! With no set given, writes the two under `host/tests/data/plan/`.

#[path = "../tests/common/hard_sets.rs"]
mod hard_sets;

use std::path::PathBuf;

/// Capacity of every set: 1 MiB.
const CAPACITY: u32 = 1 << 20;

/// The sets the tests use: (seed, buffers, steps, percent dropped).
const DEFAULT_SETS: [(u64, usize, u32, u64); 2] = [(6, 300, 1000, 0), (8, 400, 1200, 0)];

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: hard_sets OUT_DIR [SEED COUNT STEPS DROP_PERCENT]...");
        std::process::exit(2);
    };
    let rest: Vec<u64> = args.filter_map(|a| a.parse().ok()).collect();
    let sets: Vec<(u64, usize, u32, u64)> = if rest.is_empty() {
        DEFAULT_SETS.to_vec()
    } else {
        rest.chunks_exact(4)
            .map(|c| (c[0], c[1] as usize, c[2] as u32, c[3]))
            .collect()
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    for (seed, count, steps, drop) in sets {
        let pieces = hard_sets::cut_rectangle(seed, CAPACITY, steps, count, 16, drop);
        let path = dir.join(format!("hard_{count}_{steps}_seed{seed}.csv"));
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
