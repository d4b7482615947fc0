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
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["layout".into(), "x.tflite".into(), "--bogus".into()],
            "unexpected argument '--bogus'",
        ),
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
