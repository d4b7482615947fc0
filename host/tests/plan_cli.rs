//! The `hilt plan` command as a user runs it: MiniMalloc's CSV in, peak,
//! lower bound and offsets out.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hilt::buffer_list::{parse_buffers, plan_buffers, read_buffers};
use hilt_runtime::planner::{PlannerKind, verify_plan};

fn hilt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hilt"))
        .args(args)
        .output()
        .expect("run hilt")
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A chain where greedy (largest first) leaves a hole: greedy's peak is
/// 160, the bound (and the optimal peak) 128.
const CHAIN: &str = "id,lower,upper,size\n\
                     a,0,2,64\n\
                     b,1,3,48\n\
                     c,2,4,32\n\
                     d,3,5,80\n\
                     e,0,5,16\n";

fn summary_value(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"))
        .trim()
        .to_string()
}

#[test]
fn a_good_file_is_planned_and_summarised() {
    let input = temp_file("chain.csv", CHAIN);
    let out = hilt(&["plan", "--buffers", input.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(summary_value(&text, "buffers"), "5");
    assert_eq!(summary_value(&text, "planner"), "optimal");
    assert_eq!(summary_value(&text, "peak"), "128 bytes");
    assert_eq!(summary_value(&text, "lower bound"), "128 bytes");
    assert!(summary_value(&text, "time").ends_with(" ms"), "{text}");

    let greedy = hilt(&[
        "plan",
        "--buffers",
        input.to_str().unwrap(),
        "--planner",
        "greedy",
    ]);
    assert!(greedy.status.success(), "{}", stderr(&greedy));
    assert_eq!(summary_value(&stdout(&greedy), "peak"), "160 bytes");
}

#[test]
fn the_capacity_is_judged() {
    let input = temp_file("capacity.csv", CHAIN);
    let path = input.to_str().unwrap();
    let fits = hilt(&["plan", "--buffers", path, "--capacity", "128"]);
    assert!(fits.status.success(), "{}", stderr(&fits));
    assert_eq!(summary_value(&stdout(&fits), "capacity"), "128 bytes: fits");
    let short = hilt(&["plan", "--buffers", path, "--capacity", "127"]);
    assert!(!short.status.success());
    assert_eq!(
        summary_value(&stdout(&short), "capacity"),
        "127 bytes: does not fit (1 bytes short)"
    );
    assert!(
        stderr(&short).contains("peak 128 bytes does not fit the capacity of 127 bytes"),
        "{}",
        stderr(&short)
    );
    let greedy = hilt(&[
        "plan",
        "--buffers",
        path,
        "--capacity",
        "128",
        "--planner",
        "greedy",
    ]);
    assert!(!greedy.status.success(), "greedy fitted 128 bytes");
}

/// Reads a planned CSV back: its offsets, after checking the columns.
fn offsets_of(path: &Path, columns: &str) -> Vec<u32> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(columns));
    lines
        .map(|l| l.rsplit(',').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn the_output_keeps_the_input_columns_and_reads_back() {
    let text = "id,lower,upper,size,alignment\nx,0,3,100,64\ny,1,2,10,1\nz,2,4,300,16\n";
    let input = temp_file("aligned.csv", text);
    let first = input.with_file_name("aligned.out.csv");
    let out = hilt(&[
        "plan",
        "--buffers",
        input.to_str().unwrap(),
        "-o",
        first.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let columns = "id,lower,upper,size,alignment,offset";
    let offsets = offsets_of(&first, columns);
    let set = read_buffers(&input).unwrap();
    let requests = set.requests();
    let peak: u32 = summary_value(&stdout(&out), "peak")
        .trim_end_matches(" bytes")
        .parse()
        .unwrap();
    assert_eq!(verify_plan(&requests, &offsets, peak), Ok(()));
    assert_eq!(offsets[0] % 64, 0);
    assert_eq!(offsets[2] % 16, 0);

    // The output is an input: the same buffers, planned the same way.
    let second = input.with_file_name("aligned.again.csv");
    let again = hilt(&[
        "plan",
        "--buffers",
        first.to_str().unwrap(),
        "-o",
        second.to_str().unwrap(),
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(
        std::fs::read_to_string(&first).unwrap(),
        std::fs::read_to_string(&second).unwrap()
    );
}

#[test]
fn bad_files_name_the_file_line_and_column() {
    let cases = [
        ("empty.csv", "", ":1: header \"\""),
        (
            "header.csv",
            "id,start,end,size\n",
            ":1: header \"id,start,end,size\"",
        ),
        (
            "fields.csv",
            "id,lower,upper,size\na,0,1,16\nb,0,1\n",
            ":3: 3 fields, the header has 4",
        ),
        (
            "number.csv",
            "id,lower,upper,size\na,0,1,sixteen\n",
            ":2: column size: \"sixteen\" is not a whole number",
        ),
        (
            "negative.csv",
            "id,lower,upper,size\na,-1,1,16\n",
            ":2: column lower: \"-1\" is not a whole number",
        ),
        (
            "lifetime.csv",
            "id,lower,upper,size\na,0,1,16\nb,4,4,16\n",
            ":3: column upper: 4 must be above lower (4)",
        ),
        (
            "align.csv",
            "id,lower,upper,size,alignment\na,0,1,16,24\n",
            ":2: column alignment: \"24\" is not a power of two",
        ),
        (
            "overflow.csv",
            "id,lower,upper,size,alignment\na,0,1,4294967295,16\n",
            "buffer a (line 2): buffer request 0: size overflows 32 bits",
        ),
    ];
    for (name, text, expected) in cases {
        let path = temp_file(name, text);
        let out = hilt(&["plan", "--buffers", path.to_str().unwrap()]);
        assert!(!out.status.success(), "{name} succeeded");
        let err = stderr(&out);
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: {err}");
        assert!(
            err.contains(&format!("{}{expected}", path.display())) || err.contains(expected),
            "{name}: {err}"
        );
        assert!(err.contains(name), "{name}: the file is not named: {err}");
    }
    let out = hilt(&["plan", "--buffers", "/nonexistent/b.csv"]);
    assert!(stderr(&out).contains("cannot read /nonexistent/b.csv"));
    let input = temp_file("offline.csv", CHAIN);
    let out = hilt(&[
        "plan",
        "--buffers",
        input.to_str().unwrap(),
        "--planner",
        "offline",
    ]);
    assert!(!out.status.success());
    // Refused by the flag's parser, which lists the planners a buffer list
    // can use.
    assert!(
        stderr(&out).contains("[possible values: linear, greedy, optimal]"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn blank_lines_and_spaces_are_accepted() {
    let set = parse_buffers(
        Path::new("spaced.csv"),
        "\n ID, Lower, Upper, Size \n\n a , 0 , 2 , 8 \n",
    )
    .unwrap();
    assert_eq!(set.buffers.len(), 1);
    assert_eq!(set.buffers[0].id, "a");
    assert_eq!(set.buffers[0].line, 4);
    assert_eq!(set.buffers[0].alignment, 1);
}

#[test]
fn minimalloc_benchmark_header_is_read() {
    // MiniMalloc's published benchmark files name the columns
    // buffer,start,end,size; they mean id,lower,upper,size.
    let bench = parse_buffers(
        Path::new("A.1048576.csv"),
        "buffer,start,end,size\n0,0,4,64\n1,2,8,32\n",
    )
    .unwrap();
    let plain = parse_buffers(
        Path::new("plain.csv"),
        "id,lower,upper,size\n0,0,4,64\n1,2,8,32\n",
    )
    .unwrap();
    assert_eq!(bench.requests(), plain.requests());
    assert_eq!(bench.buffers[1].id, "1");
}

/// The hard sets (cut from a full 1 MiB × time rectangle, or dropped onto
/// a skyline and turned upside down, by `common::hard_sets`, written by
/// `examples/hard_sets.rs`): optimal finds the packing, greedy does not.
#[test]
fn hard_sets_fit_with_optimal_and_not_with_greedy() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/plan");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .collect();
    names.sort();
    assert!(names.len() >= 4, "hard sets missing from {}", dir.display());
    // The book's table (docs/performance.md, "Planning speed"): buffers and
    // greedy's peak per set.
    let published: [(&str, usize, u32); 4] = [
        ("hard_300_1000_seed6", 300, 1_493_088),
        ("hard_400_1200_seed8", 400, 1_907_296),
        ("skyline_70_drop3_seed1", 464, 1_184_768),
        ("skyline_70_drop3_seed3", 387, 1_154_048),
    ];
    for path in names {
        let set = read_buffers(&path).unwrap();
        assert!(set.buffers.len() >= 200, "{}", path.display());
        let stem = path.file_stem().unwrap().to_string_lossy();
        if let Some((_, buffers, peak)) = published.iter().find(|(name, _, _)| *name == stem) {
            assert_eq!(set.buffers.len(), *buffers, "{stem}");
            let greedy = plan_buffers(&set, PlannerKind::Greedy).unwrap();
            assert_eq!(greedy.peak, *peak, "{stem}: greedy's peak");
        }
        let optimal = plan_buffers(&set, PlannerKind::Optimal).unwrap();
        let greedy = plan_buffers(&set, PlannerKind::Greedy).unwrap();
        let requests = set.requests();
        assert_eq!(
            verify_plan(&requests, &optimal.offsets, optimal.peak),
            Ok(())
        );
        assert_eq!(optimal.peak, 1 << 20, "{}", path.display());
        assert!(greedy.peak > 1 << 20, "{}: greedy fits", path.display());
        assert_eq!(optimal.lower_bound, 1 << 20);
    }
}

#[test]
fn skyline_sets_are_packings_at_the_capacity() {
    // Every piece where it was dropped (upside down) is a valid plan whose
    // peak is the capacity; without drops every step is full, so the
    // lower bound is the capacity too.
    for (seed, drop) in [(1, 0), (2, 0), (3, 5)] {
        let pieces = common::hard_sets::drop_on_skyline(seed, 1 << 16, 20, 64, drop);
        let csv = common::hard_sets::to_csv(&pieces);
        let set = parse_buffers(Path::new("generated.csv"), &csv).unwrap();
        let requests = set.requests();
        let mut dropped: Vec<_> = pieces.clone();
        dropped.sort_by_key(|p| (std::cmp::Reverse(p.size), p.lower, p.offset));
        let offsets: Vec<u32> = dropped.iter().map(|p| p.offset).collect();
        assert_eq!(
            verify_plan(&requests, &offsets, 1 << 16),
            Ok(()),
            "seed {seed}"
        );
        let bound = hilt_runtime::planner::lower_bound(&requests);
        if drop == 0 {
            assert_eq!(bound, 1 << 16, "seed {seed}");
        }
        let optimal = plan_buffers(&set, PlannerKind::Optimal).unwrap();
        assert!(optimal.peak <= 1 << 16, "seed {seed}: {}", optimal.peak);
    }
}

#[test]
fn generated_sets_are_perfect_packings() {
    // The generator's own promise: the cut positions are a valid plan
    // whose peak is the capacity and equals the lower bound.
    for seed in [1, 2, 3] {
        let pieces = common::hard_sets::cut_rectangle(seed, 1 << 16, 40, 120, 16, 0);
        assert_eq!(pieces.len(), 120);
        let csv = common::hard_sets::to_csv(&pieces);
        let set = parse_buffers(Path::new("generated.csv"), &csv).unwrap();
        let requests = set.requests();
        let mut cut: Vec<_> = pieces.clone();
        cut.sort_by_key(|p| (std::cmp::Reverse(p.size), p.lower, p.offset));
        let offsets: Vec<u32> = cut.iter().map(|p| p.offset).collect();
        assert_eq!(verify_plan(&requests, &offsets, 1 << 16), Ok(()));
        assert_eq!(hilt_runtime::planner::lower_bound(&requests), 1 << 16);
    }
}
