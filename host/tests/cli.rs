//! The `hilt layout` command as a user runs it.

use std::path::PathBuf;
use std::process::{Command, Output};

use hilt_runtime::schema::{BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options};

fn hilt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hilt"))
        .args(args)
        .output()
        .expect("run hilt")
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// x → relu → a → relu → y, 256-byte tensors.
fn small_model(offline: Option<&[i32]>) -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[64]);
    let a = w.tensor("a", TensorType::FLOAT32, &[64]);
    let y = w.output("y", TensorType::FLOAT32, &[64]);
    w.op(BuiltinOperator::RELU, &[Some(x)], &[a], Options::None);
    w.op(BuiltinOperator::RELU, &[Some(a)], &[y], Options::None);
    if let Some(plan) = offline {
        w.offline_plan(plan);
    }
    w.finish()
}

/// `small_model`'s graph with an operator TFLM Micro has no kernel for
/// either (LSH_PROJECTION), so hilt never will.
fn no_kernel_model() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[64]);
    let a = w.tensor("a", TensorType::FLOAT32, &[64]);
    let y = w.output("y", TensorType::FLOAT32, &[64]);
    w.op(
        BuiltinOperator::LSH_PROJECTION,
        &[Some(x)],
        &[a],
        Options::None,
    );
    w.op(
        BuiltinOperator::LSH_PROJECTION,
        &[Some(a)],
        &[y],
        Options::None,
    );
    w.finish()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn json_has_the_documented_fields() {
    let model = temp_file("json.tflite", &small_model(None));
    let out = hilt(&["layout", model.to_str().unwrap(), "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["planner"], "greedy");
    assert_eq!(v["head"], 512);
    assert_eq!(v["lower_bound"], 512);
    let buffers = v["buffers"].as_array().unwrap();
    assert_eq!(buffers.len(), 3);
    let first = &buffers[0];
    for key in [
        "kind",
        "tensor",
        "name",
        "first_step",
        "last_step",
        "size",
        "align",
        "offset",
    ] {
        assert!(first.get(key).is_some(), "missing {key}");
    }
    assert_eq!(first["kind"], "tensor");
    assert_eq!(first["name"], "x");
    assert_eq!(first["size"], 256);
    // x [0,0] and y [1,1] never meet: greedy gives both offset 0 or 256 while a sits between.
    assert!(v["total"].as_u64().unwrap() >= 512);
}

#[test]
fn planners_and_alignment_change_the_plan() {
    let model = temp_file("planners.tflite", &small_model(Some(&[0, 256, 0])));
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["layout", model.to_str().unwrap(), "--format", "json"];
        all.extend_from_slice(args);
        let out = hilt(&all);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    };
    assert_eq!(json(&["--planner", "linear"])["head"], 768);
    assert_eq!(json(&["--planner", "offline"])["head"], 512);
    let aligned = json(&["--align", "1024"]);
    assert_eq!(aligned["buffers"][0]["align"], 1024);
    assert_eq!(aligned["head"], 2048);
}

#[test]
fn table_and_svg_render() {
    let model = temp_file("render.tflite", &small_model(None));
    let out = hilt(&["layout", model.to_str().unwrap()]);
    assert!(out.status.success());
    let table = stdout(&out);
    assert!(table.contains("greedy planner, 3 buffers"), "{table}");
    assert!(table.contains("0.50 KiB"), "{table}");
    let svg_path = model.with_extension("svg");
    let out = hilt(&[
        "layout",
        model.to_str().unwrap(),
        "--format",
        "svg",
        "-o",
        svg_path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg"));
    assert_eq!(svg.matches("<g><title>").count(), 3);
    assert!(svg.contains("lower bound 512 B"));
}

#[test]
fn bad_input_gives_one_clear_line_and_nonzero_exit() {
    // Usage errors (a wrong flag or value) are clap's full messages, with
    // its tips: see tests/cli_errors.rs.
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["layout".into(), "/nonexistent/m.tflite".into()],
            "cannot read /nonexistent/m.tflite",
        ),
        (
            vec![
                "layout".into(),
                temp_file("corrupt.tflite", b"definitely not a model")
                    .to_string_lossy()
                    .into(),
            ],
            "not a valid .tflite flatbuffer",
        ),
        (
            vec![
                "layout".into(),
                temp_file("noplan.tflite", &small_model(None))
                    .to_string_lossy()
                    .into(),
                "--planner".into(),
                "offline".into(),
            ],
            "has no `OfflineMemoryAllocation` metadata",
        ),
        (
            vec![
                "layout".into(),
                temp_file("tiny.tflite", &small_model(None))
                    .to_string_lossy()
                    .into(),
                "--arena".into(),
                "300".into(),
            ],
            "arena too small: 300 bytes given",
        ),
        (
            vec![
                "layout".into(),
                temp_file("a3.tflite", &small_model(None))
                    .to_string_lossy()
                    .into(),
                "--align".into(),
                "3".into(),
            ],
            "--align 3: must be a power of two",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = hilt(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = stderr(&out);
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: not one line:\n{err}"
        );
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// x [2,3] int8 → RESHAPE → y [6]: runs with the kernels every build has.
fn reshape_model() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[2, 3]);
    let y = w.output("y", TensorType::INT8, &[6]);
    w.op(BuiltinOperator::RESHAPE, &[Some(x)], &[y], Options::None);
    w.finish()
}

#[test]
fn infer_reads_raw_and_npy_and_writes_outputs() {
    let model = temp_file("infer.tflite", &reshape_model());
    let input = temp_file("in.bin", &[1, 2, 3, 0xFE, 5, 6]);
    let out = hilt(&[
        "infer",
        model.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("[6]: 1 2 3 -2 5 6"),
        "{}",
        stdout(&out)
    );

    let npy = hilt::tensor_file::write_npy(TensorType::INT8, &[2, 3], &[9, 8, 7, 6, 5, 4]).unwrap();
    let npy_in = temp_file("in.npy", &npy);
    let npy_out = model.with_file_name("out.npy");
    let out = hilt(&[
        "infer",
        model.to_str().unwrap(),
        "--input",
        npy_in.to_str().unwrap(),
        "--output",
        npy_out.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = hilt::tensor_file::parse_npy(&std::fs::read(&npy_out).unwrap()).unwrap();
    assert_eq!(written.data, [9, 8, 7, 6, 5, 4]);
    assert_eq!(written.shape, Some(vec![6]));

    // Two steps on one interpreter: outputs get a step suffix.
    let raw_out = model.with_file_name("out.bin");
    let out = hilt(&[
        "infer",
        model.to_str().unwrap(),
        "--steps",
        "2",
        "--input",
        input.to_str().unwrap(),
        npy_in.to_str().unwrap(),
        "--output",
        raw_out.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(model.with_file_name("out.step1.bin")).unwrap(),
        [9, 8, 7, 6, 5, 4]
    );
}

#[test]
fn infer_input_errors_name_the_input() {
    let model = temp_file("infer_err.tflite", &reshape_model());
    let short = temp_file("short.bin", &[1, 2, 3]);
    let out = hilt(&[
        "infer",
        model.to_str().unwrap(),
        "--input",
        short.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("input 0 (x): 3 bytes given, the tensor (INT8 [2, 3]) holds 6"),
        "{err}"
    );
    let npy = hilt::tensor_file::write_npy(TensorType::FLOAT32, &[6], &[0; 24]).unwrap();
    let wrong_type = temp_file("wrong.npy", &npy);
    let out = hilt(&[
        "infer",
        model.to_str().unwrap(),
        "--input",
        wrong_type.to_str().unwrap(),
    ]);
    assert!(
        stderr(&out).contains("the .npy file holds FLOAT32, the tensor is INT8"),
        "{}",
        stderr(&out)
    );
    let out = hilt(&[
        "infer",
        model.to_str().unwrap(),
        "--input",
        short.to_str().unwrap(),
        short.to_str().unwrap(),
    ]);
    assert!(
        stderr(&out).contains("the model has 1 input, 2 input files were given"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bench_reports_times_arena_and_ops() {
    let model = temp_file("bench.tflite", &reshape_model());
    let out = hilt(&[
        "bench",
        model.to_str().unwrap(),
        "--iterations",
        "20",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["iterations"], 20);
    assert!(v["min_us"].as_f64().unwrap() <= v["median_us"].as_f64().unwrap());
    assert_eq!(v["arena_head"], 32); // x and y, 6 → 16 bytes each, live together
    assert_eq!(v["ops"][0]["name"], "RESHAPE");
    let out = hilt(&["bench", model.to_str().unwrap(), "--iterations", "5"]);
    assert!(stdout(&out).contains("slowest ops"), "{}", stdout(&out));
}

/// The repository's own folders, for commands that read boards and models.
fn repo_path(relative: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_board_plan_adds_what_the_kernels_commit() {
    let model = repo_path("scenarios/models/tiny_convnet_int8.tflite");
    let boards = repo_path("boards");
    let json = |extra: &[&str]| {
        let mut args = vec!["layout", model.as_str(), "--format", "json"];
        args.extend_from_slice(extra);
        let out = hilt(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap()
    };
    let plain = json(&[]);
    let board = json(&["--board", "qemu-mps2-an386", "--boards-dir", &boards]);
    // Activations only: the JSON of before, no scratch.
    assert!(plain.get("covers").is_none() && plain.get("board").is_none());
    let is_scratch = |b: &&serde_json::Value| b["kind"] == "scratch";
    assert_eq!(
        plain["buffers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(is_scratch)
            .count(),
        0
    );
    // Through the kernels: CONV_2D's im2col patch, op data in the tail.
    assert_eq!(board["covers"], "interpreter");
    assert_eq!(board["board"], "qemu-mps2-an386");
    assert_eq!(board["capacity"], 0x20_0000);
    let scratch: Vec<&serde_json::Value> = board["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(is_scratch)
        .collect();
    assert_eq!(scratch.len(), 1);
    assert_eq!(scratch[0]["op"], 0);
    assert!(board["tail"].as_u64() > plain["tail"].as_u64());
    let table = stdout(&hilt(&[
        "layout",
        &model,
        "--board",
        "qemu-mps2-an386",
        "--boards-dir",
        &boards,
    ]));
    assert!(
        table.contains("as board qemu-mps2-an386 commits it: kernel op data and scratch included"),
        "{table}"
    );
}

#[test]
fn a_board_plan_names_an_unknown_board_and_a_missing_kernel() {
    let boards = repo_path("boards");
    let model = repo_path("scenarios/models/tiny_convnet_int8.tflite");
    let out = hilt(&["layout", &model, "--board", "nope", "--boards-dir", &boards]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown board \"nope\"; defined boards: ")
            && stderr(&out).contains("qemu-mps2-an386"),
        "{}",
        stderr(&out)
    );
    // LSH_PROJECTION has no kernel: planned without kernels, refused with them.
    let lsh = temp_file("lsh.tflite", &no_kernel_model());
    let lsh = lsh.to_str().unwrap();
    assert!(hilt(&["layout", lsh]).status.success());
    let out = hilt(&[
        "layout",
        lsh,
        "--board",
        "qemu-mps2-an386",
        "--boards-dir",
        &boards,
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("2 of the model's 2 operators have no kernel in hilt: LSH_PROJECTION (2)")
            && err.contains(
                "\n  op 0 LSH_PROJECTION (float32 -> float32)\n  op 1 LSH_PROJECTION (float32 -> float32)"
            ),
        "{err}"
    );
}

/// A model whose vendor ops no kernel of hilt's runs: a custom op named
/// `name`, between a float input and output.
fn two_vendor_ops_model() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[16]);
    let a = w.tensor("a", TensorType::INT8, &[16]);
    let y = w.output("y", TensorType::FLOAT32, &[16]);
    w.custom_op("VendorFft", &[x], &[a]);
    w.op(BuiltinOperator::DEQUANTIZE, &[Some(a)], &[y], Options::None);
    w.quantize(a, 0.5, 0);
    let z = w.output("z", TensorType::FLOAT32, &[16]);
    w.custom_op("VendorMelFilterbankWithAVeryLongCustomCode", &[y], &[z]);
    w.finish()
}

#[test]
fn bench_infer_and_layout_list_every_unsupported_op_by_name() {
    let model = temp_file("vendor.tflite", &two_vendor_ops_model());
    let model = model.to_str().unwrap();
    let boards = repo_path("boards");
    for args in [
        vec!["bench", model],
        vec!["infer", model, "--input", model],
        vec![
            "layout",
            model,
            "--board",
            "qemu-mps2-an386",
            "--boards-dir",
            &boards,
        ],
    ] {
        let out = hilt(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains(
                "2 of the model's 3 operators have no kernel in hilt: \
                 CUSTOM(VendorFft) (1), CUSTOM(VendorMelFilterbankWithAVeryLongCustomCode) (1)"
            ) && err.contains("\n  op 0 CUSTOM(VendorFft) (float32 -> int8)")
                && err.contains(
                    "\n  op 2 CUSTOM(VendorMelFilterbankWithAVeryLongCustomCode) (float32 -> float32)"
                ),
            "{args:?}: {err}"
        );
    }
}

/// `y = HILT_VNPU_NEGATE(x)` then `z = x + y` (ADD), int8: the custom op
/// and a builtin, both claimable by vnpu.
fn negate_add_model() -> Vec<u8> {
    use hilt_runtime::accel::vnpu::NEGATE_NAME;
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[1, 8]);
    let y = w.tensor("y", TensorType::INT8, &[1, 8]);
    let z = w.output("z", TensorType::INT8, &[1, 8]);
    for t in [x, y, z] {
        w.quantize(t, 0.5, 0);
    }
    w.custom_op(NEGATE_NAME, &[x], &[y]);
    w.op(
        BuiltinOperator::ADD,
        &[Some(x), Some(y)],
        &[z],
        Options::Add {
            activation: hilt_runtime::schema::ActivationFunctionType::NONE,
        },
    );
    w.finish()
}

#[test]
fn infer_and_bench_offload_to_vnpu_with_the_same_outputs() {
    let model = temp_file("offload.tflite", &negate_add_model());
    let input = temp_file("offload.bin", &[1, 2, 3, 4, 0x80, 0xFF, 7, 8]);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "infer",
            model.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = hilt(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out).lines().next().unwrap_or_default().to_string()
    };
    let cpu = run(&[]);
    assert!(cpu.contains("[1, 8]:"), "{cpu}");
    assert_eq!(run(&["--accelerator", "vnpu"]), cpu);
    assert_eq!(
        run(&["--accelerator", "vnpu", "--offload", "HILT_VNPU_NEGATE,ADD"]),
        cpu
    );
    // Behind a modelled cache: the CPU cleans and invalidates, same bytes.
    assert_eq!(run(&["--accelerator", "vnpu", "--coherent", "false"]), cpu);
    let out = hilt(&[
        "bench",
        model.to_str().unwrap(),
        "--iterations",
        "3",
        "--warmup",
        "1",
        "--accelerator",
        "vnpu",
        "--offload",
        "ADD,HILT_VNPU_NEGATE",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("vnpu: 2 jobs per invoke (ops [0, 1])"),
        "{}",
        stdout(&out)
    );
    // Host times with vnpu are an emulation's, and the output says so.
    assert!(
        stdout(&out).contains("  note         vnpu is emulated on a host thread"),
        "{}",
        stdout(&out)
    );
    // Unknown names are one clear error each.
    let out = hilt(&[
        "infer",
        model.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--accelerator",
        "tpu",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("invalid value 'tpu' for '--accelerator <ACCELERATOR>'"),
        "{}",
        stderr(&out)
    );
    let out = hilt(&[
        "infer",
        model.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--accelerator",
        "vnpu",
        "--offload",
        "CONV_4D",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown operator \"CONV_4D\""),
        "{}",
        stderr(&out)
    );
}
/// The repository this test binary was built in.
fn repo() -> PathBuf {
    std::fs::canonicalize(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap()
}

/// `hilt ARGS` run from `dir` (outside the repository).
fn hilt_in(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hilt"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run hilt")
}

/// A fresh folder outside the repository.
fn outside(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn run_from_outside_the_repository_finds_its_boards() {
    let dir = outside("run");
    let scenario = repo().join("scenarios/smoke_reshape.toml");
    // No board matches: the command gets as far as checking --board against
    // the boards, which needs the boards folder found from the scenario file.
    let out = hilt_in(
        &dir,
        &[
            "run",
            scenario.to_str().unwrap(),
            "--board",
            "no-such-board",
        ],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(!err.contains("No such file"), "{err}");
    assert!(
        err.contains("--board: unknown board \"no-such-board\""),
        "{err}"
    );
}

#[test]
fn a_scenario_outside_the_repository_uses_the_repository_of_hilt() {
    // The scenario and the current folder are both outside: the repository
    // is found from the executable (built in its build/ folder).
    let dir = outside("elsewhere");
    // Its own paths are relative to itself: point them into the repository.
    let scenarios = repo().join("scenarios");
    let text = std::fs::read_to_string(scenarios.join("smoke_reshape.toml"))
        .unwrap()
        .replace("\"models/", &format!("\"{}/models/", scenarios.display()))
        .replace("\"data/", &format!("\"{}/data/", scenarios.display()));
    let scenario = dir.join("mine.toml");
    std::fs::write(&scenario, text).unwrap();
    let out = hilt_in(&dir, &["run", "mine.toml", "--board", "no-such-board"]);
    let err = stderr(&out);
    assert!(!err.contains("No such file"), "{err}");
    assert!(
        err.contains("--board: unknown board \"no-such-board\""),
        "{err}"
    );
}

#[test]
fn a_missing_folder_is_named_with_where_and_which_flag() {
    let dir = outside("missing");
    let scenario = repo().join("scenarios/smoke_reshape.toml");
    let nowhere = dir.join("no-boards-here");
    let out = hilt_in(
        &dir,
        &[
            "run",
            scenario.to_str().unwrap(),
            "--boards-dir",
            nowhere.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "error: the boards folder not found: looked for {}; set it with --boards-dir",
            nowhere.display()
        )
    );
    let out = hilt_in(&dir, &["run", scenario.to_str().unwrap(), "--repo", "."]);
    let err = stderr(&out);
    assert!(
        err.contains("the hilt repository") && err.contains("--repo"),
        "{err}"
    );
}

#[test]
fn boards_lists_from_anywhere() {
    let out = hilt_in(&outside("boards"), &["boards"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("qemu-mps2-an386"));
}

#[test]
fn layout_names_the_buffers_an_offloaded_job_holds() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/models/branches_int8.tflite"
    );
    let plan = |extra: &[&str]| {
        let mut args = vec!["layout", model];
        args.extend_from_slice(extra);
        let out = hilt(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    // CONV_2D on the engine beside the CPU's branch: its input (last read
    // by step 1 on the CPU) and its scratch are the engine's through step 2.
    let held = plan(&["--accelerator", "vnpu", "--offload", "CONV_2D"]);
    assert_eq!(
        held.matches("held to step 2 (job of op 0)").count(),
        2,
        "{held}"
    );
    // Every op offloaded: each job is waited by the next op, nothing held.
    assert!(!plan(&["--accelerator", "vnpu"]).contains("held"));
    assert!(!plan(&[]).contains("held"));
}

#[test]
fn a_split_arena_puts_each_buffer_in_a_pool_that_reaches_it() {
    let model = repo_path("scenarios/models/branches_int8.tflite");
    let layout = |extra: &[&str]| {
        let mut args = vec![
            "layout",
            &model,
            "--board",
            "qemu-mps2-an386",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = hilt(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap()
    };
    // Without --pools: one memory, no pool fields (as before pools).
    let whole = layout(&[]);
    assert!(whole.get("pools").is_none());
    assert!(whole["buffers"][0].get("pool").is_none());
    // With vnpu: the engine's buffers (its job's input, output and scratch)
    // go to `sram`, the only pool it reaches; the CPU's stay in `fast`.
    let split = layout(&[
        "--pools",
        "fast,sram",
        "--accelerator",
        "vnpu",
        "--offload",
        "CONV_2D",
    ]);
    let pools = split["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2);
    assert_eq!(
        (pools[0]["name"].as_str(), pools[0]["reach"].as_str()),
        (Some("fast"), Some("cpu"))
    );
    assert_eq!(pools[1]["reach"], "cpu+accel");
    let mut held_in_sram = 0;
    for b in split["buffers"].as_array().unwrap() {
        let pool = b["pool"].as_str().unwrap();
        if b.get("held").is_some() {
            assert_eq!(pool, "sram", "{b}");
            held_in_sram += 1;
        }
    }
    assert!(held_in_sram > 0, "the job holds nothing: {split}");
    assert!(
        pools[0]["buffers"].as_u64().unwrap() > 0,
        "nothing in the fast pool"
    );
    // The table and the picture show the pools too.
    for (format, expected) in [
        ("table", "at    32768, cpu+accel: head "),
        ("svg", "pool sram (cpu+accel): head"),
    ] {
        let out = hilt(&[
            "layout",
            &model,
            "--board",
            "qemu-mps2-an386",
            "--pools",
            "fast,sram",
            "--format",
            format,
            "--accelerator",
            "vnpu",
            "--offload",
            "CONV_2D",
        ]);
        assert!(
            stdout(&out).contains(expected),
            "{format}: {}",
            stdout(&out)
        );
    }
}

/// Runs hilt with `args`, which must fail saying `expected`.
fn fails_saying(args: &[&str], expected: &str) {
    let out = hilt(args);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(stderr(&out).contains(expected), "{}", stderr(&out));
}

#[test]
fn a_pool_the_board_lacks_is_named_with_the_board_s_pools() {
    let model = repo_path("scenarios/models/branches_int8.tflite");
    let board = ["layout", &model, "--board", "qemu-mps2-an386"];
    fails_saying(
        &[&board[..], &["--pools", "dtcm"]].concat(),
        "board qemu-mps2-an386 has no pool \"dtcm\" (its pools: fast, sram)",
    );
    // Only the CPU's pool planned: the engine's buffers have nowhere to go.
    fails_saying(
        &[
            &board[..],
            &[
                "--pools",
                "fast",
                "--accelerator",
                "vnpu",
                "--offload",
                "CONV_2D",
            ],
        ]
        .concat(),
        "no planned pool is reached by cpu+accel",
    );
}
