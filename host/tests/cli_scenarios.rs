//! `hilt run`, `gate` and `layout` as a user's first scenarios meet them:
//! errors that name the file or figure at fault, checked before anything
//! is built.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hilt_runtime::schema::{BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options};

/// A fresh folder of the temp dir, for one test's files.
fn temp_dir(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("hilt-cli-scenarios-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `hilt` in folder `dir`.
fn hilt_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run hilt")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The repository's tiny convnet: one int8 input of 1×16×16×3.
fn tiny_convnet() -> String {
    common::repo()
        .join("scenarios/models/tiny_convnet_int8.tflite")
        .display()
        .to_string()
}

/// x → RELU → a → `op` → y, 4×4 float32 tensors.
fn relu_then(op: BuiltinOperator) -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[4, 4]);
    let a = w.tensor("a", TensorType::FLOAT32, &[4, 4]);
    let y = w.output("y", TensorType::FLOAT32, &[4, 4]);
    w.op(BuiltinOperator::RELU, &[Some(x)], &[a], Options::None);
    w.op(op, &[Some(a)], &[y], Options::None);
    w.finish()
}

/// A `model` scenario in `dir`: `model`, one step of `inputs`.
fn model_scenario(dir: &Path, model: &str, inputs: &[&str], from_host: bool) -> PathBuf {
    let inputs: Vec<String> = inputs.iter().map(|i| format!("{i:?}")).collect();
    let text = format!(
        "model = {model:?}\nexpected_from_host = {from_host}\nboards = [\"qemu-mps2-an386\"]\n\
         [[steps]]\ninputs = [{}]\n{}",
        inputs.join(", "),
        if from_host {
            ""
        } else {
            "expected = [\"out.bin\"]\n"
        }
    );
    let path = dir.join("first.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_wrong_sized_input_is_named_by_its_step_and_file_not_expected_from_host() {
    let dir = temp_dir("input-size");
    std::fs::write(dir.join("in.bin"), [0u8; 100]).unwrap();
    std::fs::write(dir.join("out.bin"), [0u8; 10]).unwrap();
    for from_host in [true, false] {
        let scenario = model_scenario(&dir, &tiny_convnet(), &["in.bin"], from_host);
        let out = hilt_in(&dir, &["run", scenario.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(
                "first.toml: steps[0].inputs[0] (in.bin): 100 bytes, the model's input 0 \
                 (image) takes 1×16×16×3 int8 = 768 bytes"
            ) && !err.contains("expected_from_host")
                && !err.contains("Compiling"),
            "from_host {from_host}: {err}"
        );
    }
    // A right input and a wrong expected output.
    std::fs::write(dir.join("ok.bin"), [0u8; 768]).unwrap();
    let scenario = model_scenario(&dir, &tiny_convnet(), &["ok.bin"], false);
    let err = stderr(&hilt_in(&dir, &["run", scenario.to_str().unwrap()]));
    assert!(
        err.contains(
            "first.toml: steps[0].expected[0] (out.bin): 10 bytes, the model's output 0 \
             (probabilities) takes 1×4 int8 = 4 bytes"
        ),
        "{err}"
    );
    // Expected files the host's outputs replace are not checked (nor read
    // for their size): such a scenario loads.
    let text = format!(
        "model = {:?}\nexpected_from_host = true\nboards = [\"qemu-mps2-an386\"]\n\
         [[steps]]\ninputs = [\"ok.bin\"]\nexpected = [\"out.bin\"]\n",
        tiny_convnet()
    );
    std::fs::write(dir.join("first.toml"), text).unwrap();
    hilt::config::scenario::load(&dir.join("first.toml"), &[]).unwrap();
    // Two files for a model of one input.
    let scenario = model_scenario(&dir, &tiny_convnet(), &["in.bin", "in.bin"], true);
    let err = stderr(&hilt_in(&dir, &["run", scenario.to_str().unwrap()]));
    assert!(
        err.contains("first.toml: steps[0].inputs: 2 files given, the model has 1 inputs"),
        "{err}"
    );
}

#[test]
fn an_unsupported_op_is_blamed_on_the_model_file() {
    let dir = temp_dir("unsupported");
    // LSH_PROJECTION: no kernel in TFLM Micro either, so hilt never has one.
    std::fs::write(
        dir.join("m.tflite"),
        relu_then(BuiltinOperator::LSH_PROJECTION),
    )
    .unwrap();
    std::fs::write(dir.join("in.bin"), [0u8; 64]).unwrap();
    std::fs::write(dir.join("out.bin"), [0u8; 64]).unwrap();
    for from_host in [true, false] {
        let scenario = model_scenario(&dir, "m.tflite", &["in.bin"], from_host);
        let out = hilt_in(&dir, &["run", scenario.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        let model = dir.join("m.tflite");
        assert!(
            err.contains(&format!(
                "first.toml: model {}: 1 of the model's 2 operators has no kernel in hilt: \
                 LSH_PROJECTION (1)\n  op 1 LSH_PROJECTION (float32 -> float32)",
                model.display()
            )) && !err.contains("expected_from_host"),
            "from_host {from_host}: {err}"
        );
    }
}

#[test]
fn a_model_the_host_cannot_run_for_expected_outputs_is_named() {
    let dir = temp_dir("host-run");
    // TRANSPOSE without its permutation input: set-up fails on the host.
    std::fs::write(dir.join("m.tflite"), relu_then(BuiltinOperator::TRANSPOSE)).unwrap();
    std::fs::write(dir.join("in.bin"), [0u8; 64]).unwrap();
    let scenario = model_scenario(&dir, "m.tflite", &["in.bin"], true);
    let out = hilt_in(&dir, &["run", scenario.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "first.toml: model {}, run on the host for expected_from_host: \
             operator 1 (TRANSPOSE): input 1 is missing",
            dir.join("m.tflite").display()
        )) && !err.contains("field `expected_from_host`"),
        "{err}"
    );
}

#[test]
fn an_arena_too_big_for_the_board_is_refused_by_layout_with_the_figures() {
    let out = common::hilt([
        "layout",
        &tiny_convnet(),
        "--board",
        "qemu-netduinoplus2",
        "--arena",
        "1000000",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "board qemu-netduinoplus2: arena 1,000,000 B + stack 16,384 B do not fit \
             RAM 131,072 B (by 885,312 B)"
        ),
        "{}",
        stderr(&out)
    );
    // The board's own arena still plans.
    common::succeeded(&common::hilt([
        "layout",
        &tiny_convnet(),
        "--board",
        "qemu-netduinoplus2",
    ]));
}

#[test]
fn a_scenario_arena_too_big_for_a_board_is_refused_before_any_build() {
    let dir = temp_dir("arena");
    std::fs::write(dir.join("in.bin"), [0u8; 768]).unwrap();
    let text = format!(
        "model = {:?}\nexpected_from_host = true\narena_size = 1000000\n\
         boards = [\"qemu-netduinoplus2\"]\n[[steps]]\ninputs = [\"in.bin\"]\n",
        tiny_convnet()
    );
    std::fs::write(dir.join("big.toml"), text).unwrap();
    let started = std::time::Instant::now();
    let out = common::hilt([
        "run",
        dir.join("big.toml").to_str().unwrap(),
        "--report-dir",
        dir.join("reports").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "scenario big on board qemu-netduinoplus2: arena 1,000,000 B + stack 16,384 B \
             do not fit RAM 131,072 B (by 885,312 B) (lower the scenario's arena_size)"
        ) && !err.contains("rust-lld"),
        "{err}"
    );
    // Refused up front, not after a firmware build.
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

/// The budget refuses nothing that works today: every board's own arena
/// with the least stack, and every repository scenario on every board it
/// names (those whose conformance model is absent here are passed over).
#[test]
fn every_board_and_repository_scenario_fits_its_memory_budget() {
    let repo = common::repo();
    let boards = hilt::config::board::load_all(&repo.join("boards")).unwrap();
    assert!(boards.len() >= 10, "{} boards", boards.len());
    for board in &boards {
        board
            .check_budget(board.arena_size, None)
            .unwrap_or_else(|e| panic!("{}: {e}", board.name));
    }
    let sets = hilt::conformance::locate_all(&repo);
    let mut checked = 0;
    for entry in std::fs::read_dir(repo.join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let Ok(scenario) = hilt::config::scenario::load(&path, &sets) else {
            eprintln!(
                "{}: not loadable here (conformance set absent?)",
                path.display()
            );
            continue;
        };
        let scenario = std::sync::Arc::new(scenario);
        for job in hilt::orchestrate::jobs_for(&[scenario], &boards, None).unwrap() {
            job.scenario
                .check_budget(&job.board)
                .unwrap_or_else(|e| panic!("{e}"));
            checked += 1;
        }
    }
    eprintln!("{checked} (scenario, board) pairs fit");
    assert!(checked > 0);
}

/// A snapshot file as the gate writes it (insta's header, then the body).
fn snap(head: u32) -> String {
    format!(
        "---\nsource: host/src/gate.rs\nexpression: s\n---\nscenario: s\nboard: b\nlayout:\n  \
         head: {head}\n  buffers:\n    - 'tensor 0 x: steps 0..1, size 16, align 16, offset 0'\n"
    )
}

#[test]
fn gate_accept_moves_the_pending_snapshot_over_the_accepted_one_without_cargo_insta() {
    let dir = temp_dir("accept");
    let snapshots = dir.join("snapshots");
    std::fs::create_dir_all(&snapshots).unwrap();
    for board in ["qemu-mps2-an386", "qemu-netduinoplus2"] {
        std::fs::write(snapshots.join(format!("tiny@{board}.snap")), snap(16000)).unwrap();
        std::fs::write(
            snapshots.join(format!("tiny@{board}.snap.new")),
            snap(72736),
        )
        .unwrap();
    }
    let snaps = snapshots.to_str().unwrap();
    let out = common::hilt([
        "gate",
        "--accept",
        "scenarios/tiny.toml",
        "--board",
        "qemu-mps2-an386",
        "--snapshots",
        snaps,
    ]);
    let text = common::succeeded(&out);
    assert!(
        text.contains("accepted tiny @ qemu-mps2-an386: layout head: 16000 → 72736\n")
            && text.contains("1 snapshot(s) accepted in "),
        "{text}"
    );
    let accepted = std::fs::read_to_string(snapshots.join("tiny@qemu-mps2-an386.snap")).unwrap();
    assert_eq!(accepted, snap(72736));
    assert!(!snapshots.join("tiny@qemu-mps2-an386.snap.new").exists());
    // The other board's change waits for its own accept.
    assert!(snapshots.join("tiny@qemu-netduinoplus2.snap.new").exists());
    // Asking again for the same pair: nothing is pending, and it says where it looked.
    let out = common::hilt([
        "gate",
        "--accept",
        "tiny",
        "--board",
        "qemu-mps2-an386",
        "--snapshots",
        snaps,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "nothing to accept: no pending snapshot (.snap.new) in {snaps} for tiny on qemu-mps2-an386"
        )),
        "{}",
        stderr(&out)
    );
}

/// `hilt ARGS` in `dir` on a scenario of one pair, as shard 9 of 9: the
/// shard is empty, so nothing is built or run, but the reports are written
/// where they would be.
fn empty_shard(dir: &Path, command: &str, scenario: &Path, extra: &[&str]) -> String {
    let mut args = vec![command, scenario.to_str().unwrap(), "--shard", "9/9"];
    args.extend_from_slice(extra);
    let out = hilt_in(dir, &args);
    common::succeeded(&out)
}

#[test]
fn a_scenario_outside_the_repository_reports_into_hilt_reports_where_hilt_ran() {
    let dir = temp_dir("reports");
    std::fs::write(dir.join("in.bin"), [0u8; 768]).unwrap();
    let scenario = model_scenario(&dir, &tiny_convnet(), &["in.bin"], true);
    let text = empty_shard(&dir, "run", &scenario, &[]);
    let reports = dir.join("hilt-reports");
    assert!(
        text.contains(&format!(
            "reports: {}\n",
            reports.join("report.html").display()
        )),
        "{text}"
    );
    assert!(reports.join("summary.json").is_file());
    let snapshots = dir.join("snapshots");
    let snaps = snapshots.to_str().unwrap();
    let text = empty_shard(&dir, "gate", &scenario, &["--snapshots", snaps]);
    assert!(
        text.contains(&format!(
            "reports: {}\n",
            reports.join("gate/report.html").display()
        )),
        "{text}"
    );
    assert!(reports.join("gate/summary.json").is_file());
    // --report-dir still wins.
    let own = dir.join("mine");
    let text = empty_shard(
        &dir,
        "run",
        &scenario,
        &["--report-dir", own.to_str().unwrap()],
    );
    assert!(
        text.contains(&format!("reports: {}\n", own.join("report.html").display())),
        "{text}"
    );
}

#[test]
fn a_repository_scenario_reports_into_the_repositorys_build_reports() {
    let repo = common::repo();
    let inside = [repo.join("scenarios/smoke_reshape.toml")];
    assert_eq!(
        hilt::paths::default_report_dir(&repo, &inside, None),
        std::fs::canonicalize(&repo).unwrap().join("build/reports")
    );
    assert_eq!(
        hilt::paths::default_report_dir(&repo, &[], Some("gate")),
        std::fs::canonicalize(&repo)
            .unwrap()
            .join("build/reports/gate")
    );
    // One scenario inside is enough to keep the repository's folder.
    let outside = std::env::temp_dir().join("elsewhere.toml");
    assert_eq!(
        hilt::paths::default_report_dir(&repo, &[outside.clone(), inside[0].clone()], None),
        std::fs::canonicalize(&repo).unwrap().join("build/reports")
    );
    // So is running hilt inside it (as the repository's own tests do, on
    // scenarios they write to the temp folder): nothing lands in the tree.
    // (cargo runs this test in host/, inside the repository.)
    assert!(
        std::env::current_dir()
            .unwrap()
            .starts_with(std::fs::canonicalize(&repo).unwrap())
    );
    assert_eq!(
        hilt::paths::default_report_dir(&repo, &[outside], Some("gate")),
        std::fs::canonicalize(&repo)
            .unwrap()
            .join("build/reports/gate")
    );
}

/// A chain of `n` RELUs over 16 floats: every plan's head is two tensors,
/// while the optimal search's workspace grows with the request count.
fn relu_chain(n: usize) -> Vec<u8> {
    let mut w = ModelWriter::new();
    let mut x = w.input("x", TensorType::FLOAT32, &[16]);
    for i in 0..n {
        let y = if i + 1 == n {
            w.output("y", TensorType::FLOAT32, &[16])
        } else {
            w.tensor(&format!("t{i}"), TensorType::FLOAT32, &[16])
        };
        w.op(BuiltinOperator::RELU, &[Some(x)], &[y], Options::None);
        x = y;
    }
    w.finish()
}

fn layout_with(
    path: &Path,
    board: Option<&hilt::config::board::Board>,
    planner: hilt_runtime::planner::PlannerKind,
) -> Result<hilt::layout::LayoutReport, hilt::layout::LayoutError> {
    use hilt::layout::{LayoutOptions, layout_file, layout_for_board};
    match board {
        None => layout_file(
            path,
            &LayoutOptions {
                planner,
                ..LayoutOptions::default()
            },
        ),
        Some(board) => layout_for_board(
            path,
            board,
            &LayoutOptions {
                planner,
                ..LayoutOptions::for_board(board)
            },
        ),
    }
}

#[test]
fn optimal_keeps_greedys_plan_when_its_search_would_commit_more_and_says_so() {
    use hilt_runtime::planner::PlannerKind::{Greedy, Optimal};
    let dir = temp_dir("optimal");
    let model = dir.join("chain.tflite");
    std::fs::write(&model, relu_chain(24)).unwrap();
    let greedy = layout_with(&model, None, Greedy).unwrap();
    let optimal = layout_with(&model, None, Optimal).unwrap();
    // The search's workspace (12 words a request) dwarfs a 128-byte head.
    assert!(greedy.setup > greedy.head, "{greedy:?}");
    assert_eq!(optimal.kept, Some("greedy"));
    assert_eq!((optimal.head, optimal.total), (greedy.head, greedy.total));
    let table = hilt::layout::render_table(&optimal, "chain.tflite");
    assert!(
        table.contains(
            "(greedy plan kept: optimal's search needs more set-up memory than greedy's whole \
             plan commits, so its total would be larger)"
        ) && table.contains(&format!(
            "(total: the arena's peak, the tail plus the higher of the head and the set-up \
             memory planning used below it: {} B of requests and planner workspace; guards and \
             alignment included)",
            greedy.setup
        )),
        "{table}"
    );
    // The CLI prints the same.
    let out = common::succeeded(&common::hilt([
        "layout",
        model.to_str().unwrap(),
        "--planner",
        "optimal",
    ]));
    assert!(out.contains("(greedy plan kept: "), "{out}");
    // Greedy's own table explains total too, and keeps no other plan.
    let table = hilt::layout::render_table(&greedy, "chain.tflite");
    assert!(table.contains("(total: the arena's peak") && !table.contains("plan kept"));
}

/// The property behind it, on every conformance model a board plans:
/// optimal never commits more than greedy (`--board qemu-mps2-an386`).
#[test]
fn optimal_never_commits_more_than_greedy_on_any_conformance_model() {
    use hilt_runtime::planner::PlannerKind::{Greedy, Optimal};
    let board =
        hilt::config::board::load_named(&common::repo().join("boards"), "qemu-mps2-an386").unwrap();
    let mut checked = 0;
    for (dir, models) in common::conformance_sets() {
        for entry in models {
            let path = dir.join(&entry.model);
            let greedy = match layout_with(&path, Some(&board), Greedy) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("{}: not planned on the board ({e})", entry.name);
                    continue;
                }
            };
            let optimal = layout_with(&path, Some(&board), Optimal)
                .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            eprintln!(
                "{:<36} greedy {:>8} optimal {:>8}{}",
                entry.name,
                greedy.total,
                optimal.total,
                optimal
                    .kept
                    .map_or(String::new(), |k| format!(" ({k}'s plan kept)"))
            );
            assert!(
                optimal.total <= greedy.total && optimal.head <= greedy.head,
                "{}: optimal total {} head {} against greedy total {} head {}",
                entry.name,
                optimal.total,
                optimal.head,
                greedy.total,
                greedy.head
            );
            checked += 1;
        }
    }
    eprintln!("{checked} conformance models checked");
}

/// Each memory the budget checks, on the board whose layout has it: the
/// arena's own region, and a model slot too big for the flash.
#[test]
fn the_budget_names_the_arena_region_and_the_model_slot_that_do_not_fit() {
    let boards = common::repo().join("boards");
    let disco = hilt::config::board::load_named(&boards, "stm32f746g-disco").unwrap();
    assert_eq!(
        disco.check_budget(300_000, None).unwrap_err().to_string(),
        "arena 300,000 B does not fit the ARENA region 262,144 B (by 37,856 B)"
    );
    disco.check_budget(disco.arena_size, None).unwrap();
    let netduino = hilt::config::board::load_named(&boards, "qemu-netduinoplus2").unwrap();
    assert_eq!(
        netduino
            .check_budget(netduino.arena_size, Some(1_067_648))
            .unwrap_err()
            .to_string(),
        "model slot 1,067,712 B (the model and its 64-byte header) leaves no room for the code \
         in FLASH 1,048,576 B (over by at least 19,137 B)"
    );
    // person_detect (294 KiB) fits, as the gate runs it there.
    netduino
        .check_budget(netduino.arena_size, Some(300_568))
        .unwrap();
    // A board that declares its stack (`stack_size`) is budgeted with it,
    // not with the default 16 KiB: the 64 KiB board's arena fits beside
    // its 10.5 KiB, and 8 KiB more would not.
    let small = hilt::config::board::load_named(&boards, "qemu-mps2-an386-64k").unwrap();
    small.check_budget(small.arena_size, None).unwrap();
    assert_eq!(
        small
            .check_budget(small.arena_size + 8192, None)
            .unwrap_err()
            .to_string(),
        "arena 55,680 B + stack 10,752 B do not fit RAM 65,536 B (by 896 B)"
    );
}
