//! `hilt layout MODEL --planner optimal --write-offline OUT`: the written
//! model plans back (`--planner offline`) to the same offsets and head, runs
//! (`hilt infer`) to the same outputs, and keeps every other buffer and
//! metadata entry byte for byte, on its alignment.

mod common;

use std::path::{Path, PathBuf};

use common::{hilt, repo, succeeded};
use hilt_runtime::planner::OFFLINE_PLAN_METADATA;
use hilt_runtime::schema;

fn out_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-offline-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn layout_json(model: &Path, planner: &str) -> serde_json::Value {
    let out = hilt([
        "layout",
        model.to_str().unwrap(),
        "--planner",
        planner,
        "--format",
        "json",
    ]);
    serde_json::from_str(&succeeded(&out)).unwrap()
}

/// Offsets and head of a `--format json` layout.
fn offsets(layout: &serde_json::Value) -> (Vec<(u64, u64)>, u64) {
    let rows = layout["buffers"].as_array().unwrap();
    let offsets = rows
        .iter()
        .map(|r| (r["tensor"].as_u64().unwrap(), r["offset"].as_u64().unwrap()))
        .collect();
    (offsets, layout["head"].as_u64().unwrap())
}

/// Each buffer's data and its position modulo 16.
fn buffers(bytes: &[u8]) -> Vec<(Vec<u8>, usize)> {
    let root = schema::root_as_model(bytes).unwrap();
    let base = bytes.as_ptr() as usize;
    root.buffers()
        .iter()
        .flatten()
        .map(|b| match b.data() {
            Some(d) if !d.is_empty() => (
                d.bytes().to_vec(),
                (d.bytes().as_ptr() as usize - base) % 16,
            ),
            _ => (Vec::new(), 0),
        })
        .collect()
}

/// Metadata entries as (name, data).
fn metadata(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let root = schema::root_as_model(bytes).unwrap();
    let buffers = buffers(bytes);
    root.metadata()
        .iter()
        .flatten()
        .map(|m| {
            let name = m.name().unwrap_or("").to_string();
            (name, buffers[m.buffer() as usize].0.clone())
        })
        .collect()
}

/// Writes `model`'s optimal plan into a copy and checks the copy against
/// the original; returns the copy's path. `tflm_scratch`: whether TFLM's
/// kernels for the model request scratch (then the plan is made for TFLM's
/// buffers, not hilt's alone).
fn write_and_check(model: &Path, inputs: &[PathBuf], tflm_scratch: bool) -> PathBuf {
    let name = model.file_stem().unwrap().to_string_lossy().into_owned();
    let written = out_path(&format!("{name}_offline.tflite"));
    let out = hilt([
        "layout",
        model.to_str().unwrap(),
        "--planner",
        "optimal",
        "--write-offline",
        written.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let optimal: serde_json::Value = serde_json::from_str(&succeeded(&out)).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("wrote"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("TFLM's head with its kernels' scratch"),
        "{stderr}"
    );
    // The printed plan is the one written, and it reads back the same;
    // without TFLM scratch it is hilt's own optimal plan.
    if !tflm_scratch {
        assert_eq!(offsets(&optimal), offsets(&layout_json(model, "optimal")));
    }
    let back = layout_json(&written, "offline");
    assert_eq!(back["planner"], "offline");
    assert_eq!(offsets(&back), offsets(&optimal), "{name}");

    let (before, after) = (
        std::fs::read(model).unwrap(),
        std::fs::read(&written).unwrap(),
    );
    let plan_buffer = schema::root_as_model(&after)
        .unwrap()
        .metadata()
        .iter()
        .flatten()
        .find(|m| m.name() == Some(OFFLINE_PLAN_METADATA))
        .map(|m| m.buffer() as usize)
        .unwrap();
    let (old, new) = (buffers(&before), buffers(&after));
    assert!(new.len() >= old.len());
    for (i, (o, n)) in old.iter().zip(&new).enumerate() {
        if i != plan_buffer {
            assert_eq!(o, n, "{name}: buffer {i} (data or its alignment) changed");
        }
    }
    let others = |bytes: &[u8]| -> Vec<(String, Vec<u8>)> {
        metadata(bytes)
            .into_iter()
            .filter(|(n, _)| n != OFFLINE_PLAN_METADATA)
            .collect()
    };
    assert_eq!(others(&before), others(&after), "{name}: other metadata");
    assert_infer_equal(model, &written, inputs, !tflm_scratch);
    written
}

/// `hilt infer` prints the same outputs for both models; with `smaller`, the
/// written plan's arena is no larger than greedy's (a plan made for TFLM's
/// kernel scratch may be larger for hilt's kernels, which need none).
fn assert_infer_equal(model: &Path, written: &Path, inputs: &[PathBuf], smaller: bool) {
    let run = |m: &Path, planner: &str| {
        let mut args = vec![
            "infer".to_string(),
            m.to_str().unwrap().to_string(),
            "--planner".into(),
            planner.into(),
            "--input".into(),
        ];
        args.extend(inputs.iter().map(|p| p.to_str().unwrap().to_string()));
        succeeded(&hilt(&args))
    };
    // The values, without the "arena used" line (the plans differ).
    let split = |text: String| -> (String, u64) {
        let (values, arena): (Vec<&str>, Vec<&str>) =
            text.lines().partition(|l| !l.starts_with("arena used: "));
        let used = arena
            .first()
            .and_then(|l| l.split_whitespace().nth(2))
            .and_then(|n| n.parse().ok())
            .expect("hilt infer prints the arena it used");
        (values.join("\n"), used)
    };
    let (original, greedy_arena) = split(run(model, "greedy"));
    assert!(!original.trim().is_empty());
    let (offline, offline_arena) = split(run(written, "offline"));
    assert_eq!(offline, original, "{}", model.display());
    assert!(
        !smaller || offline_arena <= greedy_arena,
        "{offline_arena} > {greedy_arena}"
    );
    assert_eq!(
        split(run(written, "greedy")).0,
        original,
        "{}",
        model.display()
    );
}

#[test]
fn a_shipped_model_keeps_everything_but_gains_the_plan() {
    let model = repo().join("scenarios/models/tiny_convnet_int8.tflite");
    let input = repo().join("scenarios/data/tiny_convnet_in.bin");
    let written = write_and_check(&model, &[input], false);
    // Writing again replaces the plan in its own buffer, and says so.
    let again = out_path("tiny_convnet_again.tflite");
    let out = hilt([
        "layout",
        written.to_str().unwrap(),
        "--planner",
        "greedy",
        "--write-offline",
        again.to_str().unwrap(),
    ]);
    succeeded(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("replaced the model's OfflineMemoryAllocation"),
        "{stderr}"
    );
    let (first, second) = (
        std::fs::read(&written).unwrap(),
        std::fs::read(&again).unwrap(),
    );
    assert_eq!(buffers(&first).len(), buffers(&second).len());
    let greedy = layout_json(&model, "greedy");
    assert_eq!(offsets(&layout_json(&again, "offline")), offsets(&greedy));
}

#[test]
fn a_conformance_model_reads_back_with_the_optimal_head() {
    let Some((dir, models)) = common::conformance_models() else {
        return;
    };
    for name in ["mlperf_tiny_vww_mobilenetv1_int8", "tflm_keyword_scrambled"] {
        let Some(entry) = models.iter().find(|m| m.name == name) else {
            continue;
        };
        let step = &entry.cases[0].steps[0];
        let inputs: Vec<PathBuf> = step
            .inputs
            .iter()
            .map(|i| dir.join("cases").join(name).join(&i.file))
            .collect();
        let svdf = name == "tflm_keyword_scrambled";
        let written = write_and_check(&dir.join(&entry.model), &inputs, svdf);
        let back = layout_json(&written, "offline");
        if svdf {
            // Planned for TFLM's SVDF scratch too: TFLM's own head, where a
            // plan of hilt's buffers alone made TFLM need 800 bytes.
            assert_eq!(back["head"], entry.tflm.arena_head, "{name}");
            assert_eq!(back["head"], 672);
        } else {
            assert_eq!(back["head"], back["lower_bound"], "{name}");
            assert_eq!(back["head"], 55_296);
        }
    }
}

/// A plan under which TFLM would need more than its own (its SVDF scratch
/// finds no room among the fixed tensors of a linear plan) is not written,
/// and the message gives both heads.
#[test]
fn a_plan_that_makes_tflm_worse_is_not_written() {
    let Some((dir, models)) = common::conformance_models() else {
        return;
    };
    let name = "tflm_keyword_scrambled";
    let Some(entry) = models.iter().find(|m| m.name == name) else {
        return;
    };
    let written = out_path("linear_refused.tflite");
    let out = hilt([
        "layout",
        dir.join(&entry.model).to_str().unwrap(),
        "--planner",
        "linear",
        "--write-offline",
        written.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "not written: with this plan TFLM would need a 832-byte head (its kernels' scratch \
             placed around the fixed tensors), its own plan needs {}",
            entry.tflm.arena_head
        )),
        "{stderr}"
    );
    assert!(!written.exists());
}

#[test]
fn options_tflm_would_not_see_and_bad_files_are_refused_by_name() {
    let model = repo().join("scenarios/models/reshape_int8.tflite");
    let model = model.to_str().unwrap();
    let out = out_path("refused.tflite");
    let out = out.to_str().unwrap();
    for (extra, says) in [
        (&["--align", "32"][..], "--write-offline needs --align 16"),
        (
            &["--canary", "buffers"][..],
            "--write-offline needs --canary off",
        ),
        (
            &["--board", "qemu-m4"][..],
            "cannot be combined with --board",
        ),
        (&["--accelerator", "vnpu"][..], "--offload"),
    ] {
        let mut args = vec!["layout", model, "--write-offline", out];
        args.extend_from_slice(extra);
        let o = hilt(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && stderr.contains(says),
            "{extra:?}: {stderr}"
        );
    }
    assert!(!Path::new(out).exists(), "nothing is written when refused");

    let garbage = out_path("garbage.tflite");
    std::fs::write(&garbage, b"not a model at all").unwrap();
    let o = hilt(["layout", garbage.to_str().unwrap(), "--write-offline", out]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("garbage.tflite"),
        "{stderr}"
    );

    let o = hilt([
        "layout",
        model,
        "--write-offline",
        "/nonexistent-dir/x.tflite",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("cannot write /nonexistent-dir/x.tflite"),
        "{stderr}"
    );
}
