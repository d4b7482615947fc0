//! `hilt layout MODEL --board B` gives the plan board B commits: for every
//! shipped scenario and every board it runs on, the host's plan (through
//! the interpreter's prepare, with the scenario's planner, alignment,
//! canaries and arena) is compared, buffer for buffer and figure for
//! figure, with the layout the board reported on a real run and the gate
//! accepted (`snapshots/gate/SCENARIO@BOARD.snap`). No QEMU is needed: the
//! snapshots are the boards' word.
//!
//! The boards' firmware is built for `thumbv7em-none-eabihf` with the
//! runtime's `arm-dsp` feature; this test runs the runtime built for the
//! host without it. Equal plans are what shows that no kernel's prepare
//! depends on the ISA it was compiled for.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hilt::config::board::{Board, load_all, select};
use hilt::config::scenario::Scenario;
use hilt::layout::{BufferRow, LayoutOptions, LayoutReport, layout_for_board};

use common::repo;

/// The layout part of a gate snapshot.
#[derive(Debug, PartialEq, Eq)]
struct SnapLayout {
    capacity: u32,
    head: u32,
    tail: u32,
    used: u32,
    /// Split arenas: each pool's name and head.
    pools: Vec<(String, u32)>,
    buffers: Vec<SnapBuffer>,
}

/// One buffer line: `'tensor 3 conv1/out: steps 0..3, size 2048, align 16,
/// offset 4096'` (the owner is a tensor index, or a scratch's op index).
#[derive(Debug, Clone, PartialEq, Eq)]
struct SnapBuffer {
    kind: String,
    index: u32,
    first_step: u32,
    last_step: u32,
    size: u32,
    align: u32,
    offset: u32,
    /// The pool it is in (split arenas only).
    pool: Option<String>,
}

impl std::fmt::Display for SnapBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: steps {}..{}, size {}, align {}, offset {}",
            self.kind,
            self.index,
            self.first_step,
            self.last_step,
            self.size,
            self.align,
            self.offset
        )?;
        match &self.pool {
            Some(pool) => write!(f, ", in {pool}"),
            None => Ok(()),
        }
    }
}

fn number(text: &str, what: &str, file: &Path) -> u32 {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}: {what} {text:?} is not a number", file.display()))
}

/// Reads the `layout:` section of a gate snapshot (insta YAML written by
/// `gate::render`, one entry per line).
fn parse_snapshot(file: &Path) -> SnapLayout {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut figures = [None; 4];
    let mut buffers = Vec::new();
    let mut pools = Vec::new();
    let mut in_layout = false;
    let mut in_pools = false;
    for line in text.lines() {
        if !line.starts_with(' ') {
            in_layout = line.trim_end() == "layout:";
            continue;
        }
        if !in_layout {
            continue;
        }
        let line = line.trim();
        if let Some(item) = line.strip_prefix("- ") {
            if in_pools {
                pools.push(parse_pool(item, file));
            } else {
                buffers.push(parse_buffer(item, file));
            }
        } else if let Some((key, value)) = line.split_once(':') {
            in_pools = key == "pools";
            let slot = match key {
                "capacity" => 0,
                "head" => 1,
                "tail" => 2,
                "used" => 3,
                "buffers" | "pools" => continue,
                other => panic!("{}: unexpected layout key {other:?}", file.display()),
            };
            figures[slot] = Some(number(value, key, file));
        }
    }
    let [capacity, head, tail, used] =
        figures.map(|f| f.unwrap_or_else(|| panic!("{}: layout figures missing", file.display())));
    SnapLayout {
        capacity,
        head,
        tail,
        used,
        pools,
        buffers,
    }
}

/// A pool line: `'fast: start 0, size 32768, cpu, head 4096'`.
fn parse_pool(item: &str, file: &Path) -> (String, u32) {
    let entry = item.trim_matches('\'');
    let (name, figures) = entry
        .split_once(": ")
        .unwrap_or_else(|| panic!("{}: pool line {entry:?}", file.display()));
    let head = figures
        .rsplit_once("head ")
        .map(|(_, h)| number(h, "pool head", file))
        .unwrap_or_else(|| panic!("{}: pool line {entry:?} lacks its head", file.display()));
    (name.to_string(), head)
}

fn parse_buffer(item: &str, file: &Path) -> SnapBuffer {
    let entry = item
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .map_or_else(|| item.to_string(), |t| t.replace("''", "'"));
    // The tensor name may hold ": ", so the figures follow the last one.
    let (owner, figures) = entry
        .rsplit_once(": ")
        .unwrap_or_else(|| panic!("{}: buffer line {entry:?}", file.display()));
    let mut words = owner.split(' ');
    let kind = words.next().unwrap_or_default().to_string();
    let index = number(words.next().unwrap_or_default(), "buffer index", file);
    let mut fields = figures.split(", ").map(|f| {
        f.split_once(' ')
            .unwrap_or_else(|| panic!("{}: buffer field {f:?}", file.display()))
    });
    let mut field = |name: &str| {
        let (key, value) = fields
            .next()
            .unwrap_or_else(|| panic!("{}: {entry:?} lacks {name}", file.display()));
        assert_eq!(key, name, "{}: {entry:?}", file.display());
        value
    };
    let steps = field("steps");
    let pool = figures
        .split(", ")
        .find_map(|f| f.strip_prefix("in "))
        .map(str::to_string);
    let (first, last) = steps
        .split_once("..")
        .unwrap_or_else(|| panic!("{}: steps {steps:?}", file.display()));
    SnapBuffer {
        kind,
        index,
        first_step: number(first, "first step", file),
        last_step: number(last, "last step", file),
        size: number(field("size"), "size", file),
        align: number(field("align"), "align", file),
        offset: number(field("offset"), "offset", file),
        pool,
    }
}

/// The host's plan in the snapshot's terms.
fn as_snapshot(report: &LayoutReport) -> SnapLayout {
    let buffer = |b: &BufferRow| SnapBuffer {
        kind: b.kind.to_string(),
        index: b.tensor.or(b.op).expect("a buffer has a tensor or an op"),
        first_step: b.first_step,
        last_step: b.last_step,
        size: b.size,
        align: b.align,
        offset: b.offset,
        pool: b.pool.clone(),
    };
    SnapLayout {
        // A board plan always has one; 0 shows up as a difference.
        capacity: report.capacity.unwrap_or(0),
        head: report.head,
        tail: report.tail,
        used: report.total,
        pools: report
            .pools
            .iter()
            .map(|p| (p.name.clone(), p.head))
            .collect(),
        buffers: report.buffers.iter().map(buffer).collect(),
    }
}

/// Every difference between the board's layout and the host's, one line each.
fn differences(board: &SnapLayout, host: &SnapLayout) -> Vec<String> {
    let mut out = Vec::new();
    for (what, b, h) in [
        ("capacity", board.capacity, host.capacity),
        ("head", board.head, host.head),
        ("tail", board.tail, host.tail),
        ("used", board.used, host.used),
    ] {
        if b != h {
            out.push(format!("{what}: board {b}, host {h}"));
        }
    }
    if board.pools != host.pools {
        out.push(format!(
            "pools: board {:?}, host {:?}",
            board.pools, host.pools
        ));
    }
    let count = board.buffers.len().max(host.buffers.len());
    for i in 0..count {
        match (board.buffers.get(i), host.buffers.get(i)) {
            (Some(b), Some(h)) if b == h => {}
            (Some(b), Some(h)) => out.push(format!("buffer {i}: board `{b}`, host `{h}`")),
            (Some(b), None) => out.push(format!("buffer {i}: board `{b}`, host has none")),
            (None, Some(h)) => out.push(format!("buffer {i}: host `{h}`, board has none")),
            (None, None) => {}
        }
    }
    out
}

/// The shipped scenarios, loaded; a scenario built on the conformance set
/// is skipped (with a message) when the set is absent, unless
/// `HILT_CONFORMANCE_REQUIRED=1`.
fn scenarios() -> Vec<Scenario> {
    let dir = repo().join("scenarios");
    let conformance = hilt::conformance::locate_all(&repo());
    let sets_present = conformance
        .iter()
        .all(|set| set.join("manifest.json").is_file());
    let shown: Vec<String> = conformance
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    let shown = shown.join(", ");
    let required = std::env::var("HILT_CONFORMANCE_REQUIRED").is_ok_and(|v| v == "1");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    let mut loaded = Vec::new();
    for path in paths {
        let is_conformance = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .any(|l| l.trim_start().starts_with("conformance"));
        if is_conformance && !sets_present {
            assert!(
                !required,
                "{}: conformance sets not found at {shown} (HILT_CONFORMANCE_REQUIRED=1)",
                path.display(),
            );
            eprintln!(
                "{}: conformance sets not found at {shown}: skipped",
                path.display(),
            );
            continue;
        }
        loaded.push(
            hilt::config::scenario::load(&path, &conformance)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        );
    }
    loaded
}

fn boards_of<'b>(scenario: &Scenario, boards: &'b [Board]) -> Vec<&'b Board> {
    let mut chosen: Vec<&Board> = scenario
        .boards
        .iter()
        .flat_map(|pattern| select(boards, pattern).unwrap())
        .collect();
    chosen.sort_by(|a, b| a.name.cmp(&b.name));
    chosen.dedup_by(|a, b| a.name == b.name);
    chosen
}

#[test]
fn board_layouts_equal_the_layouts_the_boards_committed() {
    let boards = load_all(&repo().join("boards")).unwrap();
    let snapshots = repo().join("snapshots/gate");
    let mut compared = BTreeSet::new();
    let mut failures = Vec::new();
    for scenario in scenarios() {
        for board in boards_of(&scenario, &boards) {
            let snap = snapshots.join(format!("{}@{}.snap", scenario.name, board.name));
            if !snap.is_file() {
                failures.push(format!(
                    "{}@{}: no accepted snapshot at {} (run `hilt gate`)",
                    scenario.name,
                    board.name,
                    snap.display()
                ));
                continue;
            }
            let options = LayoutOptions::for_scenario(board, &scenario);
            let host = match layout_for_board(&scenario.model, board, &options) {
                Ok(report) => as_snapshot(&report),
                Err(e) => {
                    failures.push(format!("{}@{}: {e}", scenario.name, board.name));
                    continue;
                }
            };
            let diffs = differences(&parse_snapshot(&snap), &host);
            println!(
                "{}@{}: {} buffers, head {}, tail {}, used {}: {}",
                scenario.name,
                board.name,
                host.buffers.len(),
                host.head,
                host.tail,
                host.used,
                if diffs.is_empty() {
                    "same"
                } else {
                    "DIFFERENT"
                }
            );
            failures.extend(
                diffs
                    .into_iter()
                    .map(|d| format!("{}@{}: {d}", scenario.name, board.name)),
            );
            compared.insert(format!("{}@{}.snap", scenario.name, board.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(!compared.is_empty(), "no (scenario, board) pair compared");
    // Every accepted snapshot of a shipped pair was compared (a snapshot of
    // a skipped conformance scenario is only left out with the set absent).
    let conformance_present = hilt::conformance::locate_all(&repo())
        .iter()
        .all(|set| set.join("manifest.json").is_file());
    if conformance_present {
        let on_disk: BTreeSet<String> = std::fs::read_dir(&snapshots)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".snap"))
            .collect();
        let unchecked: Vec<&String> = on_disk.difference(&compared).collect();
        assert!(
            unchecked.is_empty(),
            "snapshots of no shipped (scenario, board) pair: {unchecked:?}"
        );
    }
}

#[test]
fn a_plan_that_differs_is_named_buffer_by_buffer() {
    // The comparison itself: one moved buffer and a changed tail are both
    // reported, each on its own line.
    let dir = std::env::temp_dir().join(format!("hilt-layout-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("x@b.snap");
    std::fs::write(
        &file,
        "---\nsource: host/src/gate.rs\nexpression: x@b\n---\nscenario: x\nboard: b\nlayout:\n  capacity: 4096\n  head: 64\n  tail: 40\n  used: 104\n  buffers:\n    - 'tensor 0 in: a: steps 0..1, size 16, align 16, offset 0'\n    - 'scratch 1 : steps 1..1, size 8, align 16, offset 16'\nlatency:\n  steps:\n  ops:\n",
    )
    .unwrap();
    let board = parse_snapshot(&file);
    assert_eq!(board.buffers.len(), 2);
    assert_eq!(board.buffers[0].index, 0);
    assert_eq!(
        (board.buffers[1].kind.as_str(), board.buffers[1].index),
        ("scratch", 1)
    );
    let mut host = SnapLayout {
        capacity: 4096,
        head: 64,
        tail: 48,
        used: 112,
        pools: Vec::new(),
        buffers: board.buffers.clone(),
    };
    host.buffers[1].offset = 32;
    let diffs = differences(&board, &host);
    assert_eq!(
        diffs,
        [
            "tail: board 40, host 48",
            "used: board 104, host 112",
            "buffer 1: board `scratch 1: steps 1..1, size 8, align 16, offset 16`, host `scratch 1: steps 1..1, size 8, align 16, offset 32`",
        ]
    );
}
