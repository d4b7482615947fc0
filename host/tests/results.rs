//! The results store and `hilt history`, on SQLite and on a real
//! PostgreSQL server (`HILT_TEST_POSTGRES`, a throw-away cluster that
//! `ci/postgres.sh start` makes; `.ci/run` starts one and sets
//! `HILT_POSTGRES_REQUIRED=1`, elsewhere the PostgreSQL half is skipped
//! with a message):
//!
//! - runs recorded by the library, read back by `history` with the op that
//!   moved, the date, board and scenario filters, flaky counts, JSON and
//!   HTML;
//! - two `hilt gate` runs a commit apart (hello_world built for speed, then
//!   for size: every op moves) recorded and shown by `hilt history`;
//! - a store newer than this hilt, and one that cannot be reached, named
//!   in one line, the run's own reports still written.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use hilt::outcome::{BoardRun, ObservedStep, OpCount, Outcome, StepResult};
use hilt::results::history::{HistoryQuery, history};
use hilt::results::{Invocation, Recorded, Store, StoreTarget};

use common::{hilt, repo};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-results-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fresh SQLite store, and the PostgreSQL server when there is one.
fn stores(name: &str) -> Vec<StoreTarget> {
    let mut out = vec![StoreTarget::Sqlite(scratch(name).join("results.sqlite"))];
    match std::env::var("HILT_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => out.push(StoreTarget::Postgres(url)),
        _ => {
            let required = std::env::var("HILT_POSTGRES_REQUIRED").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "HILT_TEST_POSTGRES is not set (eval \"$(ci/postgres.sh start)\")"
            );
            eprintln!("no PostgreSQL server (HILT_TEST_POSTGRES): its half skipped");
        }
    }
    out
}

/// A run of `scenario` whose ops took `ops` instructions.
fn run_of(scenario: &str, ops: &[u64], outcome: Outcome) -> BoardRun {
    let mut run = BoardRun::new(scenario, "qemu-mps2-an386");
    run.outcome = outcome;
    let total: u64 = ops.iter().sum();
    run.instructions = Some(total);
    run.arena = Some([4096, 1024, 256, 1280]);
    run.steps.push(StepResult {
        case: "case0".into(),
        step: 0,
        total_cycles: total + 40,
        op_cycles: ops.iter().map(|&i| i as u32).collect(),
        mismatch: None,
        offload: None,
        observed: Some(ObservedStep {
            instructions: total,
            estimated_cycles: total * 3 / 2,
            stack_high_water: 512,
            ops: ops
                .iter()
                .map(|&i| OpCount {
                    instructions: i,
                    estimated_cycles: i * 3 / 2,
                    stack_high_water: 512,
                })
                .collect(),
            engine_instructions: 0,
        }),
    });
    run
}

fn record(store: &mut Store, commit: &str, at: &str, runs: &[BoardRun]) {
    let names = ["CONV_2D".to_string(), "ADD".into(), "SOFTMAX".into()];
    let recorded: Vec<Recorded<'_>> = runs
        .iter()
        .map(|run| Recorded {
            run,
            wall: Duration::from_millis(1500),
            runner: "qemu",
            probe: None,
            op_names: &names,
        })
        .collect();
    let invocation = Invocation {
        command: "hilt gate".into(),
        started_at: at.into(),
        commit: commit.into(),
        host: "farm-1".into(),
    };
    store.record(&invocation, &recorded).unwrap();
}

#[test]
fn history_shows_each_pairs_runs_with_the_op_that_moved() {
    for target in stores("history") {
        let mut store = Store::open(&target).unwrap();
        // Names of this test run only: a PostgreSQL server may hold others'.
        let scenario = format!("kws_{}", std::process::id());
        let other = format!("vww_{}", std::process::id());
        record(
            &mut store,
            "c0ffee1",
            "2026-11-30T01:00:00Z",
            &[run_of(&scenario, &[1000, 500, 20], Outcome::Passed)],
        );
        let mut flaky = run_of(&scenario, &[1000, 540, 20], Outcome::Passed);
        flaky.attempts = 2;
        flaky.flaky = Some("ERROR: no answer from the board".into());
        record(
            &mut store,
            "c0ffee2",
            "2026-12-01T01:00:00Z",
            &[
                flaky,
                run_of(&other, &[7, 8, 9], Outcome::Mismatch("output 0".into())),
            ],
        );
        record(
            &mut store,
            "c0ffee3",
            "2026-12-02T01:00:00Z",
            &[run_of(&scenario, &[1300, 540, 20], Outcome::Passed)],
        );
        let query = |scenario: &str, since: Option<&str>, last| HistoryQuery {
            scenario: scenario.to_string(),
            board: "qemu-*".into(),
            since: since.map(str::to_string),
            last,
        };
        let pairs = history(&mut store, &query(&scenario, None, 10)).unwrap();
        assert_eq!(pairs.len(), 1, "{target:?}");
        let runs = &pairs[0].runs;
        let commits: Vec<&str> = runs.iter().map(|r| r.commit.as_str()).collect();
        assert_eq!(commits, ["c0ffee1", "c0ffee2", "c0ffee3"], "{target:?}");
        assert_eq!(runs[0].moved, None);
        let moved = runs[1].moved.as_ref().unwrap();
        assert_eq!((moved.op, moved.before, moved.after), (1, 500, 540));
        assert_eq!(moved.describe(), "op 1 ADD: 500 → 540 instructions (+8.0%)");
        let moved = runs[2].moved.as_ref().unwrap();
        assert_eq!(
            moved.describe(),
            "op 0 CONV_2D: 1,000 → 1,300 instructions (+30.0%)"
        );
        assert_eq!((runs[1].verdict(), runs[1].attempts), ("FLAKY", 2));
        assert_eq!(pairs[0].flaky_runs, 1);
        assert_eq!(runs[2].arena_used, Some(1280));
        assert_eq!(runs[2].ops.len(), 3);
        // --since, --last and the scenario glob.
        let since = history(&mut store, &query(&scenario, Some("2026-12-01"), 10)).unwrap();
        assert_eq!(since[0].runs.len(), 2);
        let last = history(&mut store, &query(&scenario, None, 1)).unwrap();
        assert_eq!(last[0].runs[0].commit, "c0ffee3");
        let both = history(
            &mut store,
            &query(&format!("*_{}", std::process::id()), None, 10),
        )
        .unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!(both[1].runs[0].verdict(), "MISMATCH");
        // The text forms.
        let text = hilt::results::history::table(&pairs);
        assert!(
            text.contains("c0ffee3") && text.contains("op 0 CONV_2D: 1,000 → 1,300"),
            "{text}"
        );
        let page = hilt::results::html::page(&pairs, "history");
        assert!(page.contains("<svg") && page.contains("polyline") && page.contains("FLAKY"));
    }
}

#[test]
fn a_store_newer_than_this_hilt_is_refused_by_name() {
    let path = scratch("newer").join("results.sqlite");
    let target = StoreTarget::Sqlite(path.clone());
    drop(Store::open(&target).unwrap());
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute("INSERT INTO hilt_schema (version) VALUES (99)", [])
        .unwrap();
    let err = Store::open(&target).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{} has schema version 99; this hilt knows up to 1: use a newer hilt or another store",
            path.display()
        )
    );
    let out = hilt(["history", "--results", path.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("schema version 99"), "{said}");
}

/// hello_world gated on the AN386 as a scenario of its own, built for
/// `optimize` (speed, then size: a change of code that moves every op).
fn gate_hello(
    dir: &std::path::Path,
    name: &str,
    optimize: &str,
    commit: &str,
    store: &str,
) -> String {
    let scenario = dir.join(format!("{name}.toml"));
    std::fs::write(
        &scenario,
        format!(
            "conformance = \"tflm_hello_world_int8\"\nboards = [\"qemu-mps2-an386\"]\n\
             kernels = \"model\"\noptimize = \"{optimize}\"\ntimeout_s = 120\n"
        ),
    )
    .unwrap();
    let repo = repo();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(&repo)
        .env("HILT_COMMIT", commit)
        .args(["gate", scenario.to_str().unwrap(), "--repo"])
        .arg(&repo)
        .args(["--snapshots", dir.join("snapshots").to_str().unwrap()])
        .args(["--report-dir", dir.join("reports").to_str().unwrap()])
        .args(["--results", store])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.contains("results: 1 board runs recorded in"),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said
}

#[test]
fn two_gate_runs_a_commit_apart_are_in_the_history_with_the_op_that_moved() {
    if !common::qemu_available("results store tests") || common::conformance_models().is_none() {
        return;
    }
    for target in stores("gate") {
        let dir = scratch("gate-runs");
        let store = match &target {
            StoreTarget::Sqlite(path) => path.to_string_lossy().into_owned(),
            StoreTarget::Postgres(url) => url.clone(),
            StoreTarget::Off => unreachable!(),
        };
        let name = format!("hello_{}", std::process::id());
        gate_hello(&dir, &name, "speed", "1111aaaa", &store);
        gate_hello(&dir, &name, "size", "2222bbbb", &store);
        let out = hilt([
            "history",
            "--results",
            &store,
            "--scenario",
            &name,
            "--format",
            "json",
        ]);
        let pairs: serde_json::Value = serde_json::from_str(&common::succeeded(&out)).unwrap();
        let runs = pairs[0]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{pairs}");
        assert_eq!(
            (runs[0]["commit"].as_str(), runs[1]["commit"].as_str()),
            (Some("1111aaaa"), Some("2222bbbb"))
        );
        let moved = &runs[1]["moved"];
        assert!(
            moved["after"].as_u64().unwrap() > moved["before"].as_u64().unwrap(),
            "the size build takes more instructions: {moved}"
        );
        // The figures docs/gate-and-ci.md shows ("The results store").
        let figures = (
            (runs[0]["instructions"].as_u64(), runs[0]["cycles"].as_u64()),
            (runs[1]["instructions"].as_u64(), runs[1]["cycles"].as_u64()),
            moved["op"].as_u64(),
            moved["name"].as_str(),
            moved["before"].as_u64(),
            moved["after"].as_u64(),
        );
        assert_eq!(
            figures,
            (
                (Some(3285), Some(3320)),
                (Some(5706), Some(5760)),
                Some(1),
                Some("FULLY_CONNECTED"),
                Some(1629),
                Some(2552)
            )
        );
        let table = common::succeeded(&hilt(["history", "--results", &store, "--scenario", &name]));
        assert!(table.contains("2222bbbb") && table.contains("→"), "{table}");
    }
}

#[test]
fn a_store_that_cannot_be_reached_is_named_and_the_reports_are_still_written() {
    if !common::qemu_available("results store tests") || common::conformance_models().is_none() {
        return;
    }
    let dir = scratch("unreachable");
    let out = hilt([
        "run",
        "scenarios/hello_world_int8.toml",
        "--board",
        "qemu-mps2-an386",
        "--report-dir",
        dir.to_str().unwrap(),
        "--results",
        "postgres://hilt:secret@127.0.0.1:9/nowhere",
    ]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let errors: Vec<&str> = said.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{said}");
    assert!(
        errors[0].starts_with(
            "error: results store postgres://hilt:***@127.0.0.1:9/nowhere: cannot open it:"
        ) && errors[0].contains("nothing recorded"),
        "{said}"
    );
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(summary.contains("hello_world_int8"), "{summary}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 board runs: 1 passed"));
}

/// `hilt run` of a hello_world scenario whose firmware fails its first run
/// in the folder it runs in (`flaky-first-attempt`), from `dir`.
fn run_flaky(dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let scenario = dir.join("hello_flaky.toml");
    std::fs::write(
        &scenario,
        "conformance = \"tflm_hello_world_int8\"\nboards = [\"qemu-mps2-an386\"]\n\
         kernels = \"model\"\nfirmware_features = [\"flaky-first-attempt\"]\ntimeout_s = 120\n",
    )
    .unwrap();
    let repo = repo();
    std::process::Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(dir)
        .args(["run", scenario.to_str().unwrap(), "--repo"])
        .arg(&repo)
        .args(["--report-dir", dir.join("reports").to_str().unwrap()])
        .args(["--results", dir.join("results.sqlite").to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_failure_a_retry_passes_is_flaky_and_quarantine_keeps_the_gate_green() {
    if !common::qemu_available("results store tests") || common::conformance_models().is_none() {
        return;
    }
    // With a retry: the first run fails, the second passes, and every
    // report says flaky.
    let dir = scratch("flaky");
    let out = run_flaky(&dir, &["--retries", "1"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The first failure is the firmware's panic, in its words, with the
    // backtrace the host read from the stopped core: the panic handler's
    // frames, then the function that panicked and its caller.
    assert!(
        said.contains("FLAKY: passed on attempt 2 of 2; the first failed: ERROR: the firmware stopped: panic: panicked at firmware/src/main.rs:")
            && said.contains("flaky-first-attempt: the first run in this folder fails")
            && said.contains("1 board runs: 1 passed, 0 failed (1 flaky)"),
        "{said}"
    );
    let unwound = said
        .find("backtrace:")
        .map(|at| &said[at..])
        .unwrap_or_else(|| panic!("no backtrace: {said}"));
    let panicked = unwound
        .find("in fail_first_attempt at target/firmware/src/main.rs:")
        .unwrap_or_else(|| panic!("{unwound}"));
    assert!(
        unwound
            .find("rust_begin_unwind")
            .is_some_and(|at| at < panicked),
        "{unwound}"
    );
    assert!(
        unwound
            .find("__cortex_m_rt_main")
            .is_some_and(|at| at > panicked),
        "{unwound}"
    );
    let junit = std::fs::read_to_string(dir.join("reports/junit.xml")).unwrap();
    assert!(
        junit.contains("<flakyError message=\"passed on attempt 2 of 2; the first failed\""),
        "{junit}"
    );
    // The backtrace is in the reports too.
    let page = std::fs::read_to_string(dir.join("reports/report.html")).unwrap();
    for report in [&junit, &page] {
        assert!(
            report.contains("backtrace:") && report.contains("in fail_first_attempt at"),
            "{report}"
        );
    }
    // Valid against the strict JUnit schema, which takes Surefire's
    // flakyFailure and flakyError (when xmllint is here; reports.rs
    // requires it in CI).
    let schema = repo().join("host/tests/data/junit-10-strict.xsd");
    if let Ok(check) = std::process::Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(&schema)
        .arg(dir.join("reports/junit.xml"))
        .output()
    {
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
    let summary = std::fs::read_to_string(dir.join("reports/summary.json")).unwrap();
    assert!(summary.contains("\"flaky\""), "{summary}");
    let history = common::succeeded(&hilt([
        "history",
        "--results",
        dir.join("results.sqlite").to_str().unwrap(),
    ]));
    assert!(
        history.contains("FLAKY") && history.contains("1 flaky of 1"),
        "{history}"
    );
    // Without one, in a fresh folder: a failure; quarantined, not counted.
    let dir = scratch("flaky-quarantine");
    let failed = run_flaky(&dir, &[]);
    assert!(!failed.status.success());
    let dir = scratch("flaky-quarantined");
    std::fs::write(
        dir.join("quarantine.txt"),
        "# known flaky\nhello_flaky@qemu-*\n",
    )
    .unwrap();
    let quarantined = run_flaky(
        &dir,
        &["--quarantine", dir.join("quarantine.txt").to_str().unwrap()],
    );
    let said = String::from_utf8_lossy(&quarantined.stdout);
    assert!(quarantined.status.success(), "{said}");
    assert!(
        said.contains("quarantined (--quarantine): this failure does not fail the run")
            && said
                .contains("1 board runs: 0 passed, 0 failed (1 failed in quarantine, not counted)"),
        "{said}"
    );
}

/// A copy of `qemu-mps2-an386` that says its figures are noisy
/// (`latency_tolerance_percent = 2`, as a real board's), in `dir/boards`.
fn noisy_board(dir: &std::path::Path) {
    let shipped = repo().join("boards");
    let boards = dir.join("boards");
    std::fs::create_dir_all(boards.join("qemu-mps2-an386")).unwrap();
    let toml = std::fs::read_to_string(shipped.join("qemu-mps2-an386.toml"))
        .unwrap()
        .replacen(
            "transport = \"rtt\"\n",
            "transport = \"rtt\"\nlatency_tolerance_percent = 2\n",
            1,
        );
    std::fs::write(boards.join("qemu-mps2-an386.toml"), toml).unwrap();
    std::fs::copy(
        shipped.join("qemu-mps2-an386/memory.x"),
        boards.join("qemu-mps2-an386/memory.x"),
    )
    .unwrap();
}

/// `hilt gate` of `name` (hello_world) from `dir`, on the noisy board.
fn gate_noisy(dir: &std::path::Path, name: &str, extra: &[&str]) -> (bool, String) {
    let scenario = format!("{name}.toml");
    let mut args = vec![
        scenario.as_str(),
        "--boards-dir",
        "boards",
        "--snapshots",
        "snapshots",
    ];
    args.extend_from_slice(&["--report-dir", "reports", "--results", "results.sqlite"]);
    args.extend_from_slice(extra);
    common::hilt_in(dir, &[("HILT_COMMIT", "d00dfeed")], "gate", &args)
}

#[test]
fn a_noisy_boards_cycles_are_judged_by_the_stores_last_nights() {
    if !common::qemu_available("results store tests") || common::conformance_models().is_none() {
        return;
    }
    let dir = scratch("drift");
    noisy_board(&dir);
    let name = "hello_noisy";
    std::fs::write(
        dir.join(format!("{name}.toml")),
        "conformance = \"tflm_hello_world_int8\"\nboards = [\"qemu-mps2-an386\"]\n\
         kernels = \"model\"\ntimeout_s = 120\n",
    )
    .unwrap();
    // A snapshot to hold the layout.
    gate_noisy(&dir, name, &[]);
    gate_noisy(&dir, name, &["--accept"]);
    let (ok, said) = gate_noisy(&dir, name, &[]);
    assert!(
        ok,
        "fewer nights than the store needs: the snapshot judges\n{said}"
    );
    // Six nights recorded some 40 % faster than this firmware runs.
    let target = StoreTarget::Sqlite(dir.join("results.sqlite"));
    let mut store = Store::open(&target).unwrap();
    let night = |cycles: u32| {
        let mut run = run_of(name, &[u64::from(cycles)], Outcome::Passed);
        run.steps[0].total_cycles = u64::from(cycles);
        run
    };
    for (k, cycles) in [2000, 2010, 1990, 2005, 1995, 2002].into_iter().enumerate() {
        record(
            &mut store,
            &format!("old{k}"),
            &format!("2026-11-0{}T01:00:00Z", k + 1),
            &[night(cycles)],
        );
    }
    let (ok, said) = gate_noisy(&dir, name, &[]);
    assert!(!ok);
    // The gate's own two earlier runs (today, at this firmware's figure)
    // are the newest nights: the step started at the first of them.
    assert!(
        said.contains("DRIFT    hello_noisy @ qemu-mps2-an386: cycles: ")
            && said.contains("over the last 8 nights")
            && said.contains("slower); since ")
            && said.contains("(commit d00dfeed)"),
        "{said}"
    );
    // Once the nights are at this firmware's figure, it passes again.
    for k in 0..6 {
        let cycles = store_cycles(&mut store, name);
        record(
            &mut store,
            &format!("new{k}"),
            &format!("2026-11-2{k}T01:00:00Z"),
            &[night(cycles)],
        );
    }
    let (ok, said) = gate_noisy(&dir, name, &[]);
    assert!(ok, "{said}");
}

/// The cycles the latest run of `scenario` the store holds took.
fn store_cycles(store: &mut Store, scenario: &str) -> u32 {
    let pairs = history(
        store,
        &HistoryQuery {
            scenario: scenario.into(),
            board: "*".into(),
            since: None,
            last: 1,
        },
    )
    .unwrap();
    pairs[0].runs[0].cycles.unwrap() as u32
}
