//! Run reports: the JUnit file against the schema CI systems read, files
//! rewritten whole after every board, and `hilt run --report-dir --shard`
//! and `hilt gate --report-dir` end to end.
//!
//! The schema checks need `xmllint` (Debian's `libxml2-utils`, which
//! `ci/setup.sh` installs); without it they say so and pass, unless
//! `HILT_XMLLINT_REQUIRED=1`. The end-to-end run needs `qemu-system-arm`
//! likewise (`HILT_QEMU_REQUIRED=1`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hilt::outcome::{BoardRun, Outcome, StepResult};
use hilt::report::{
    HTML_FILE, JUNIT_FILE, PendingPair, ReportError, ReportWriter, SUMMARY_FILE, ScenarioContext,
};

use common::{hilt, repo};

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/junit-10-strict.xsd")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-reports-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn tool_available(tool: &str, variable: &str, package: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let required = std::env::var(variable).is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{tool} is required ({variable}=1) but missing: run ci/setup.sh"
        );
        eprintln!("{tool} not installed: test skipped (ci/setup.sh installs {package})");
    }
    ok
}

fn xmllint_available() -> bool {
    tool_available("xmllint", "HILT_XMLLINT_REQUIRED", "libxml2-utils")
}

/// `Ok` when `xml` is valid against the strict JUnit schema, else xmllint's words.
fn validate(xml: &Path) -> Result<(), String> {
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(schema())
        .arg(xml)
        .output()
        .expect("run xmllint");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn smoke_context() -> ScenarioContext {
    let scenario = hilt::config::scenario::load(
        &repo().join("scenarios/smoke_reshape.toml"),
        &hilt::conformance::locate_all(&repo()),
    )
    .unwrap();
    let names = hilt::layout::model_names(&scenario.model_file);
    let options = hilt::layout::LayoutOptions {
        planner: scenario.planner,
        ..Default::default()
    };
    let layout =
        hilt::layout::layout_model(&scenario.model_file, &options).map_err(|e| e.to_string());
    ScenarioContext::new(&scenario, names.ops, names.tensors, layout)
}

fn step(case: &str, step: usize, mismatch: Option<&str>) -> StepResult {
    StepResult {
        case: case.into(),
        step,
        total_cycles: 123_456,
        op_cycles: vec![100_000, 20_000, 3_456],
        mismatch: mismatch.map(str::to_string),
        observed: None,
        offload: None,
    }
}

/// One run of each kind, with the characters a garbled link or a stray
/// terminal escape can put in a log or a message.
fn runs() -> Vec<BoardRun> {
    let nasty = "bytes <0x3c> & \"quoted\" 'single' ]]> \u{1b}[31mred\u{1b}[0m \u{0}\u{7} é ✓";
    vec![
        BoardRun {
            scenario: "smoke_reshape".into(),
            board: "qemu-mps2-an386".into(),
            outcome: Outcome::Passed,
            steps: vec![step("case0", 0, None)],
            arena: Some([2_097_152, 128, 44, 172]),
            logs: vec!["hilt firmware up".into(), nasty.into()],
            plan: Vec::new(),
            offload: None,
            pools: None,
            cpu_alone: None,
            ..BoardRun::new("", "")
        },
        BoardRun {
            scenario: "smoke_reshape".into(),
            board: "qemu-mps2-an500".into(),
            outcome: Outcome::Mismatch(format!("case0 step 1: output 0 differs at [3]: {nasty}")),
            steps: vec![
                step("case0", 0, None),
                step("case0", 1, Some("output 0 differs at [3]: 7 != 9")),
            ],
            arena: Some([2_097_152, 128, 44, 172]),
            logs: Vec::new(),
            plan: Vec::new(),
            offload: None,
            pools: None,
            cpu_alone: None,
            ..BoardRun::new("", "")
        },
        BoardRun {
            scenario: "other & <odd> name".into(),
            board: "qemu-netduinoplus2".into(),
            outcome: Outcome::Error(format!("timed out after 15s\nfirmware said: {nasty}")),
            steps: Vec::new(),
            arena: None,
            logs: vec![nasty.into()],
            plan: Vec::new(),
            offload: None,
            pools: None,
            cpu_alone: None,
            ..BoardRun::new("", "")
        },
    ]
}

fn pending() -> Vec<PendingPair> {
    runs()
        .iter()
        .map(|r| PendingPair {
            scenario: r.scenario.clone(),
            board: r.board.clone(),
        })
        .chain([PendingPair {
            scenario: "smoke_reshape".into(),
            board: "nrf52840-dk".into(),
        }])
        .collect()
}

fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join(SUMMARY_FILE)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn junit_xml_validates_against_the_junit_schema_at_every_stage_of_a_run() {
    if !xmllint_available() {
        return;
    }
    let dir = temp_dir("schema");
    let mut writer = ReportWriter::new(
        &dir,
        "hilt run (shard 1/2)",
        vec![smoke_context()],
        pending(),
    )
    .unwrap();
    let junit = dir.join(JUNIT_FILE);
    // Before any board, part way (one board never reports), and at the end.
    validate(&junit).unwrap_or_else(|e| panic!("{e}"));
    for run in runs() {
        writer.record(&run, Duration::from_millis(1500)).unwrap();
        validate(&junit).unwrap_or_else(|e| panic!("{e}"));
    }
    writer.write().unwrap();
    validate(&junit).unwrap_or_else(|e| panic!("{e}"));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 4, "{xml}");
    assert!(
        xml.contains(r#"tests="4" failures="1" errors="1""#),
        "{xml}"
    );
    assert!(xml.contains(r#"<testcase classname="smoke_reshape" name="qemu-mps2-an500""#));
    assert!(xml.contains("case0 step 0: 123,456 cycles"), "{xml}");
    assert!(xml.contains("op   0 RESHAPE"), "{xml}");
    assert!(xml.contains(r#"<skipped message="did not finish"#), "{xml}");
    assert!(xml.contains("\\x1B[31mred"), "{xml}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_schema_check_rejects_what_ci_systems_would_misread() {
    if !xmllint_available() {
        return;
    }
    let dir = temp_dir("bad");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, xml) in [
        (
            "no-counts.xml",
            r#"<testsuites><testsuite name="s"><testcase classname="s" name="b"/></testsuite></testsuites>"#,
        ),
        (
            "text-count.xml",
            r#"<testsuites><testsuite name="s" tests="one" failures="0" errors="0"/></testsuites>"#,
        ),
        (
            "bare-failure.xml",
            r#"<testsuites><testsuite name="s" tests="1" failures="1" errors="0"><testcase classname="s" name="b"><failure/></testcase></testsuite></testsuites>"#,
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, xml).unwrap();
        assert!(validate(&path).is_err(), "{name} passed the schema");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_file_is_rewritten_whole_after_each_board() {
    let dir = temp_dir("rewrite");
    let mut writer = ReportWriter::new(&dir, "hilt run", vec![smoke_context()], pending()).unwrap();
    assert_eq!(summary(&dir)["totals"]["pending"], 4);
    for (done, run) in runs().iter().enumerate() {
        writer.record(run, Duration::from_secs(2)).unwrap();
        let s = summary(&dir);
        assert_eq!(s["runs"].as_array().unwrap().len(), done + 1);
        assert_eq!(s["totals"]["pending"], 3 - done);
        assert_eq!(s["totals"]["pairs"], 4);
        let html = std::fs::read_to_string(dir.join(HTML_FILE)).unwrap();
        assert!(html.trim_end().ends_with("</html>"));
    }
    let s = summary(&dir);
    assert_eq!(s["totals"]["passed"], 1);
    assert_eq!(s["totals"]["mismatched"], 1);
    assert_eq!(s["totals"]["errors"], 1);
    assert_eq!(s["pending"][0]["board"], "nrf52840-dk");
    assert_eq!(s["runs"][0]["wall_seconds"], 2.0);
    // Named figures: the arena's four and every op's, its name from the
    // scenario's model (smoke_reshape: one RESHAPE; the step's two more
    // ops have none).
    let smoke = s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["board"] == "qemu-mps2-an386")
        .unwrap();
    assert_eq!(
        smoke["arena"],
        serde_json::json!({"capacity": 2_097_152, "head": 128, "tail": 44, "used": 172})
    );
    assert_eq!(
        smoke["steps"][0]["op_cycles"][0],
        serde_json::json!({"index": 0, "name": "RESHAPE", "cycles": 100_000})
    );
    assert_eq!(
        smoke["steps"][0]["op_cycles"][2]["name"],
        serde_json::Value::Null
    );
    // Only the three reports: no temporary file left behind.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [JUNIT_FILE, HTML_FILE, SUMMARY_FILE]);
    // The page draws the plan and the op bars, failures first.
    let html = std::fs::read_to_string(dir.join(HTML_FILE)).unwrap();
    assert!(html.contains("<svg"), "no arena picture");
    assert!(html.contains(">RESHAPE<"), "no op names");
    let error = html.find(r#"<section class="card error""#).unwrap();
    let pass = html.find(r#"<section class="card pass""#).unwrap();
    assert!(error < pass);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unwritable_report_folder_fails_before_any_board_runs() {
    let dir = temp_dir("unwritable");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let err =
        ReportWriter::new(&file.join("reports"), "hilt run", Vec::new(), Vec::new()).unwrap_err();
    assert!(matches!(err, ReportError::CreateDir { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("cannot create the report folder")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_shard_values_are_refused_with_a_clear_message() {
    for (value, expected) in [
        ("0/2", "I counts from 1 to N, so it must be between 1 and 2"),
        ("3/2", "I counts from 1 to N, so it must be between 1 and 2"),
        ("1/0", "N (the number of shards) must be at least 1"),
        ("half", "is not I/N (two whole numbers, such as 2/4)"),
    ] {
        let out = hilt(["run", "scenarios/smoke_reshape.toml", "--shard", value]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {stderr}");
        assert!(stderr.contains(expected), "{value}: {stderr}");
        assert!(stderr.contains("--shard"), "{value}: {stderr}");
    }
}

/// The shipped virtual boards, sorted by name: smoke_reshape runs on each
/// (`boards = ["qemu-*"]`), so its pairs are these, in this order.
fn virtual_boards() -> Vec<String> {
    let boards = hilt::config::board::load_all(&repo().join("boards")).unwrap();
    let mut names: Vec<String> = hilt::config::board::select(&boards, "qemu-*")
        .unwrap()
        .iter()
        .map(|b| b.name.clone())
        .collect();
    names.sort();
    names
}

#[test]
fn an_empty_shard_runs_nothing_and_still_writes_valid_reports() {
    let dir = temp_dir("empty-shard");
    // One shard more than there are pairs: the last one gets none.
    let pairs = virtual_boards().len();
    let shard = format!("{0}/{0}", pairs + 1);
    let out = hilt([
        "run",
        "scenarios/smoke_reshape.toml",
        "--shard",
        &shard,
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    let stdout = common::succeeded(&out);
    assert!(
        stdout.contains(&format!(
            "shard {shard}: 0 of {pairs} (scenario, board) pairs"
        )),
        "{stdout}"
    );
    assert_eq!(summary(&dir)["totals"]["pairs"], 0);
    if xmllint_available() {
        validate(&dir.join(JUNIT_FILE)).unwrap_or_else(|e| panic!("{e}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hilt_run_with_a_shard_runs_its_share_and_reports_it() {
    if !common::qemu_available("QEMU report tests") {
        return;
    }
    let dir = temp_dir("e2e");
    // With as many shards as pairs, shard K is the K-th board by name alone.
    let boards = virtual_boards();
    let k = 1 + boards.iter().position(|b| b == "qemu-mps2-an500").unwrap();
    let shard = format!("{k}/{}", boards.len());
    let out = hilt([
        "run",
        "scenarios/smoke_reshape.toml",
        "--shard",
        &shard,
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    let stdout = common::succeeded(&out);
    assert!(
        stdout.contains("1 board runs: 1 passed, 0 failed"),
        "{stdout}"
    );
    let s = summary(&dir);
    assert_eq!(s["title"], format!("hilt run (shard {shard})"));
    assert_eq!(s["totals"]["passed"], 1);
    assert_eq!(s["runs"][0]["board"], "qemu-mps2-an500");
    assert!(s["runs"][0]["steps"][0]["total_cycles"].as_u64().unwrap() > 0);
    assert!(s["runs"][0]["wall_seconds"].as_f64().unwrap() > 0.0);
    let html = std::fs::read_to_string(dir.join(HTML_FILE)).unwrap();
    assert!(html.contains("qemu-mps2-an500") && html.contains(">RESHAPE<"));
    if xmllint_available() {
        validate(&dir.join(JUNIT_FILE)).unwrap_or_else(|e| panic!("{e}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hilt_gate_reports_a_missing_snapshot_as_a_failed_test_case() {
    if !common::qemu_available("QEMU report tests") {
        return;
    }
    let dir = temp_dir("gate");
    let snapshots = dir.join("snapshots");
    let reports = dir.join("reports");
    std::fs::create_dir_all(&snapshots).unwrap();
    let r = repo();
    let scenario = dir.join("gated.toml");
    std::fs::write(
        &scenario,
        format!(
            "model = \"{}\"\nboards = [\"qemu-mps2-an386\"]\ntimeout_s = 120\ncompare = \"exact\"\nexpected_from_host = true\n[[steps]]\ninputs = [\"{d}\"]\nexpected = [\"{d}\"]\n",
            r.join("scenarios/models/tiny_convnet_int8.tflite").display(),
            d = r.join("scenarios/data/tiny_convnet_in.bin").display(),
        ),
    )
    .unwrap();
    let out = hilt([
        "gate",
        scenario.to_str().unwrap(),
        "--snapshots",
        snapshots.to_str().unwrap(),
        "--report-dir",
        reports.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && stdout.contains("NEW"), "{stdout}");
    let s = summary(&reports);
    assert_eq!(s["title"], "hilt gate");
    assert_eq!(s["totals"]["mismatched"], 1, "{s}");
    let xml = std::fs::read_to_string(reports.join(JUNIT_FILE)).unwrap();
    assert!(
        xml.contains(
            r#"<failure message="no accepted snapshot; accept with: hilt gate --accept gated --board qemu-mps2-an386 (or cargo insta review)"#
        ),
        "{xml}"
    );
    // The page draws the plan the board committed.
    let html = std::fs::read_to_string(reports.join(HTML_FILE)).unwrap();
    assert!(html.contains("as the board committed it"), "no board plan");
    assert!(
        html.contains(r#"<span class="badge">NEW</span>"#),
        "not called NEW"
    );
    if xmllint_available() {
        validate(&reports.join(JUNIT_FILE)).unwrap_or_else(|e| panic!("{e}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
