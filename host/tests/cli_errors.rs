//! The `hilt` command's errors as a user meets them in the first hour:
//! each names the flag, file, key or board at fault and, where it can,
//! what would have been right (issue 20).

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use hilt_runtime::schema::{BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options};

/// Runs `hilt` from the repository root (so `boards/` and `scenarios/` are
/// found as a user's clone finds them).
fn hilt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(common::repo())
        .args(args)
        .output()
        .expect("run hilt")
}

/// A file in this test run's own temporary folder.
fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-cli-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// x → relu → a → relu → y, 64 floats each: one input, one output.
fn small_model() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[64]);
    let a = w.tensor("a", TensorType::FLOAT32, &[64]);
    let y = w.output("y", TensorType::FLOAT32, &[64]);
    w.op(BuiltinOperator::RELU, &[Some(x)], &[a], Options::None);
    w.op(BuiltinOperator::RELU, &[Some(a)], &[y], Options::None);
    w.finish()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The stderr of a run that must have failed with `code`.
fn failed(out: &Output, code: i32) -> String {
    let err = stderr(out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {err}",
        String::from_utf8_lossy(&out.stdout)
    );
    err
}

fn path_str(path: &std::path::Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

#[test]
fn an_arena_too_large_for_the_host_is_an_error_not_an_abort() {
    let model = temp_file("huge_arena.tflite", &small_model());
    let input = temp_file("huge_arena.bin", &[0u8; 256]);
    let (model, input) = (path_str(&model), path_str(&input));
    // The size, and one no allocator can give whatever the host's
    // overcommit policy.
    for size in ["999999999999", "18446744073709551615"] {
        for args in [
            vec!["infer", model, "--input", input, "--arena", size],
            vec!["layout", model, "--arena", size],
            vec!["bench", model, "--arena", size, "--iterations", "1"],
            vec![
                "infer",
                model,
                "--input",
                input,
                "--arena",
                size,
                "--accelerator",
                "vnpu",
                "--coherent",
                "false",
            ],
        ] {
            let err = failed(&hilt(&args), 1);
            let want = format!("cannot allocate an arena of {size} bytes");
            assert!(err.contains(&want), "{args:?}: {err}");
            assert!(!err.contains("memory allocation of"), "{args:?}: {err}");
        }
    }
}

#[test]
fn a_missing_argument_is_named() {
    let err = failed(&hilt(&["layout"]), 2);
    assert!(
        err.contains("the following required arguments were not provided"),
        "{err}"
    );
    assert!(err.contains("<MODEL>"), "{err}");
    assert!(err.contains("Usage: hilt layout"), "{err}");
}

#[test]
fn a_misspelt_flag_gets_a_did_you_mean() {
    let err = failed(&hilt(&["layout", "m.tflite", "--planer", "greedy"]), 2);
    assert!(err.contains("unexpected argument '--planer'"), "{err}");
    assert!(
        err.contains("a similar argument exists: '--planner'"),
        "{err}"
    );
}

#[test]
fn a_wrong_choice_lists_the_possible_values() {
    for (args, values) in [
        (
            vec!["layout", "m.tflite", "--format", "yaml"],
            "[possible values: table, json, svg]",
        ),
        (
            vec!["layout", "m.tflite", "--planner", "gready"],
            "[possible values: linear, greedy, offline, optimal]",
        ),
        (
            vec!["layout", "m.tflite", "--canary", "on"],
            "[possible values: off, bounds, buffers]",
        ),
        (
            vec![
                "infer",
                "m.tflite",
                "--input",
                "i.bin",
                "--accelerator",
                "npu",
            ],
            "[possible values: none, vnpu]",
        ),
        (
            vec!["plan", "--buffers", "b.csv", "--planner", "offline"],
            "[possible values: linear, greedy, optimal]",
        ),
    ] {
        let err = failed(&hilt(&args), 2);
        assert!(err.contains(values), "{args:?}: {err}");
        assert!(err.contains("invalid value"), "{args:?}: {err}");
    }
}

#[test]
fn too_few_input_files_for_the_steps_says_what_steps_need() {
    let model = temp_file("steps.tflite", &small_model());
    let input = temp_file("steps.bin", &[0u8; 256]);
    let (model, input) = (path_str(&model), path_str(&input));
    let err = failed(
        &hilt(&["infer", model, "--input", input, "--steps", "2"]),
        1,
    );
    assert!(
        err.contains("--steps 2 needs 2 input files (1 model input × 2 steps), 1 was given"),
        "{err}"
    );
    assert!(!err.contains("the model has 2 inputs"), "{err}");
    let err = failed(&hilt(&["infer", model, "--input", input, input]), 1);
    assert!(
        err.contains("the model has 1 input, 2 input files were given"),
        "{err}"
    );
    // The right count runs.
    let out = hilt(&["infer", model, "--input", input, input, "--steps", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Output files: one per model output, whatever the steps.
    let out_a = temp_file("steps_a.bin", b"");
    let out_b = temp_file("steps_b.bin", b"");
    let err = failed(
        &hilt(&[
            "infer",
            model,
            "--input",
            input,
            "--output",
            path_str(&out_a),
            path_str(&out_b),
        ]),
        1,
    );
    assert!(
        err.contains(
            "the model has 1 output, 2 output files were given (one --output per model output"
        ),
        "{err}"
    );
}

/// A fresh report folder for a `hilt run` that runs nothing.
fn report_dir(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("hilt-cli-errors-{}-{name}", std::process::id()));
    dir.to_string_lossy().into_owned()
}

#[test]
fn a_misspelt_board_gets_the_closest_name() {
    let err = failed(
        &hilt(&[
            "run",
            "scenarios/smoke_reshape.toml",
            "--board",
            "qemu-mps2-an368",
        ]),
        1,
    );
    assert!(
        err.contains("--board: unknown board \"qemu-mps2-an368\" (did you mean qemu-mps2-an386?)"),
        "{err}"
    );
    assert!(!err.contains("no (scenario, board) pair"), "{err}");
    // `layout --board` goes through the same lookup.
    let model = temp_file("board_typo.tflite", &small_model());
    let err = failed(
        &hilt(&["layout", path_str(&model), "--board", "stm32f746g-discoo"]),
        1,
    );
    assert!(
        err.contains("unknown board \"stm32f746g-discoo\" (did you mean stm32f746g-disco?)"),
        "{err}"
    );
}

#[test]
fn a_board_glob_that_matches_nothing_says_so() {
    let err = failed(
        &hilt(&[
            "run",
            "scenarios/smoke_reshape.toml",
            "--board",
            "qemu-stm32*",
        ]),
        1,
    );
    assert!(
        err.contains("--board \"qemu-stm32*\" matches no board; defined boards: "),
        "{err}"
    );
    assert!(err.contains("qemu-mps2-an386"), "{err}");
    assert!(!err.contains("unknown board"), "{err}");
    // A glob that matches boards, none of which the scenario lists.
    let err = failed(
        &hilt(&["run", "scenarios/smoke_reshape.toml", "--board", "nrf*"]),
        1,
    );
    assert!(
        err.contains(
            "--board \"nrf*\" matches no board the scenarios list (smoke_reshape lists qemu-*)"
        ),
        "{err}"
    );
}

#[test]
fn a_scenario_board_pattern_that_matches_nothing_names_the_file() {
    let dir = std::env::temp_dir().join(format!("hilt-cli-errors-{}-pattern", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("m.tflite"), small_model()).unwrap();
    std::fs::write(dir.join("in.bin"), [0u8; 256]).unwrap();
    let scenario = dir.join("s.toml");
    std::fs::write(
        &scenario,
        "model = \"m.tflite\"\nboards = [\"qemu-stm32*\"]\nexpected_from_host = true\n\
         [[steps]]\ninputs = [\"in.bin\"]\n",
    )
    .unwrap();
    let err = failed(
        &hilt(&[
            "run",
            path_str(&scenario),
            "--repo",
            path_str(&common::repo()),
        ]),
        1,
    );
    assert!(
        err.contains("s.toml: `boards`: \"qemu-stm32*\" matches no board"),
        "{err}"
    );
}

#[test]
fn an_explicit_board_the_scenario_does_not_list_runs_there_with_a_note() {
    // Shard 2/2 of the one pair: the pair is made (and counted), nothing
    // is built or run.
    let reports = report_dir("unlisted");
    let out = hilt(&[
        "run",
        "scenarios/smoke_reshape.toml",
        "--board",
        "nrf52840-dk",
        "--shard",
        "2/2",
        "--report-dir",
        &reports,
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "note: scenario smoke_reshape does not list board nrf52840-dk (its boards: qemu-*)"
        ),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("shard 2/2: 0 of 1 (scenario, board) pairs"),
        "{stdout}"
    );
}

/// A folder holding `files` (name, text), fresh for this test run.
fn temp_dir_with(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-cli-errors-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    dir
}

#[test]
fn a_misspelt_scenario_key_is_named_with_the_closest_and_the_known_keys() {
    let dir = temp_dir_with(
        "scenario-keys",
        &[
            (
                "top.toml",
                "model = \"m.tflite\"\nboards = [\"qemu-*\"]\ntimout_s = 10\n",
            ),
            (
                "value.toml",
                "model = \"m.tflite\"\nboards = [\"qemu-*\"]\ncoherent = \"yes\"\n",
            ),
            (
                "step.toml",
                "model = \"m.tflite\"\nboards = [\"qemu-*\"]\n\n[[steps]]\ninptus = [\"in.bin\"]\n",
            ),
        ],
    );
    let repo = common::repo();
    let run = |file: &str| {
        let path = dir.join(file);
        failed(
            &hilt(&["run", path_str(&path), "--repo", path_str(&repo)]),
            1,
        )
    };
    let err = run("top.toml");
    assert!(
        err.contains(
            "top.toml: line 3, column 1: unknown key `timout_s` (did you mean timeout_s?); \
             the keys are: description, conformance, cases, model,"
        ),
        "{err}"
    );
    assert!(!err.contains("TOML parse error"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let err = run("value.toml");
    assert!(
        err.contains("value.toml: line 3, column 12: key `coherent`: invalid type: string \"yes\", expected a boolean"),
        "{err}"
    );
    let err = run("step.toml");
    assert!(
        err.contains(
            "step.toml: line 5, column 1 in [[steps]]: unknown key `inptus` \
             (did you mean inputs?); the keys are: inputs, expected"
        ),
        "{err}"
    );
}

#[test]
fn a_misspelt_board_key_is_named_with_the_closest_and_the_known_keys() {
    let board = std::fs::read_to_string(common::repo().join("boards/qemu-mps2-an386.toml"))
        .unwrap()
        .replace("core_clock_hz", "core_clock_hertz");
    let dir = temp_dir_with("board-keys", &[("qemu-mps2-an386.toml", &board)]);
    let model = temp_file("board_keys.tflite", &small_model());
    let err = failed(
        &hilt(&[
            "layout",
            path_str(&model),
            "--board",
            "qemu-mps2-an386",
            "--boards-dir",
            path_str(&dir),
        ]),
        1,
    );
    assert!(err.contains("qemu-mps2-an386.toml: line "), "{err}");
    assert!(
        err.contains(
            "unknown key `core_clock_hertz` (did you mean core_clock_hz?); the keys are: name,"
        ),
        "{err}"
    );
}

#[test]
fn boards_takes_boards_dir_and_aligns_its_table() {
    let out = hilt(&["boards", "--boards-dir", "boards"]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Vec<&str> = table.lines().take_while(|l| !l.is_empty()).collect();
    assert!(rows.len() > 5, "{table}");
    // Every column starts where its header does, whatever a cell holds
    // (the runner's name used to ignore its width).
    for header in ["runner", "link", "target", "description"] {
        let at = rows[0].find(header).unwrap();
        for row in &rows[1..] {
            assert_eq!(&row[at - 2..at], "  ", "{header}: {row}\n{table}");
            assert_ne!(&row[at..=at], " ", "{header}: {row}\n{table}");
        }
    }
    // The F746's arena spans DTCM and SRAM1 (its ARENA region): RAM counts
    // it, not only the 64 KiB left for data and stack.
    let f746 = rows
        .iter()
        .find(|r| r.starts_with("stm32f746g-disco "))
        .unwrap();
    assert!(f746.contains("262,144    327,680"), "{f746}");
    // `--dir`, the old name, still works but is not shown.
    let old = hilt(&["boards", "--dir", "boards"]);
    assert_eq!(String::from_utf8_lossy(&old.stdout), table);
    let help = String::from_utf8_lossy(&hilt(&["boards", "--help"]).stdout).into_owned();
    assert!(help.contains("--boards-dir"), "{help}");
    assert!(!help.contains("--dir"), "{help}");
}

#[test]
fn bench_takes_format_json_as_layout_does_and_keeps_json() {
    let model = temp_file("bench_format.tflite", &small_model());
    let model = path_str(&model);
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["bench", model, "--iterations", "2", "--warmup", "0"];
        all.extend_from_slice(args);
        let out = hilt(&all);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(json(&["--format", "json"])["iterations"], 2);
    assert_eq!(json(&["--json"])["iterations"], 2);
    let out = hilt(&["bench", model, "--iterations", "2", "--format", "table"]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        serde_json::from_str::<serde_json::Value>(&table).is_err(),
        "{table}"
    );
    assert!(table.contains("bench_format.tflite"), "{table}");
    let err = failed(&hilt(&["bench", model, "--format", "csv"]), 2);
    assert!(err.contains("[possible values: table, json]"), "{err}");
    let help = String::from_utf8_lossy(&hilt(&["bench", "--help"]).stdout).into_owned();
    assert!(help.contains("--format <FORMAT>"), "{help}");
    assert!(!help.contains("--json"), "{help}");
}

#[test]
fn byte_sizes_take_hex_separators_and_suffixes_as_toml_does() {
    let model = temp_file("sizes.tflite", &small_model());
    let model = path_str(&model);
    // Too small an arena says the size it read.
    for arena in ["256", "2_56", "0x100", "0x1_00"] {
        let err = failed(&hilt(&["layout", model, "--arena", arena]), 1);
        assert!(
            err.contains("arena too small: 256 bytes given"),
            "{arena}: {err}"
        );
    }
    let out = hilt(&["layout", model, "--arena", "1K"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = hilt(&["layout", model, "--align", "0x400", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["buffers"][0]["align"], 1024);
    let input = temp_file("sizes.bin", &[0u8; 256]);
    let out = hilt(&[
        "infer",
        model,
        "--input",
        path_str(&input),
        "--arena",
        "0x8000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = hilt(&["bench", model, "--iterations", "1", "--arena", "16KiB"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = failed(&hilt(&["layout", model, "--arena", "0x80zz"]), 2);
    assert!(
        err.contains(
            "invalid value '0x80zz' for '--arena <BYTES>': \"0x80zz\" is not a byte count"
        ),
        "{err}"
    );
    let csv = temp_file("sizes.csv", b"id,lower,upper,size\na,0,1,2048\n");
    let plan =
        |capacity: &str| hilt(&["plan", "--buffers", path_str(&csv), "--capacity", capacity]);
    for fits in ["2048", "0x800", "2K", "2KiB", "2k"] {
        let out = plan(fits);
        assert!(out.status.success(), "{fits}: {}", stderr(&out));
    }
    let err = failed(&plan("1K"), 1);
    assert!(err.contains("capacity of 1024 bytes"), "{err}");
}

#[test]
fn the_test_only_accel_fault_flag_is_hidden_but_works() {
    for command in ["run", "gate"] {
        for help in ["-h", "--help"] {
            let out = hilt(&[command, help]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(out.status.success(), "{}", stderr(&out));
            assert!(text.contains("--accelerator"), "{command} {help}: {text}");
            assert!(!text.contains("accel-fault"), "{command} {help}: {text}");
        }
    }
    // Still parsed (hilt's own fault tests use it).
    let err = failed(
        &hilt(&[
            "run",
            "scenarios/smoke_reshape.toml",
            "--accel-fault",
            "nope",
        ]),
        2,
    );
    assert!(err.contains("unknown accelerator fault \"nope\""), "{err}");
}
