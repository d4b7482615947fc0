//! Scenario files as a user writes them: tensor files in either format.

mod common;

use common::repo;
use hilt_runtime::schema::TensorType;

/// A folder of its own for one test's files.
fn folder(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-scenario-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `[[steps]] inputs` take `.npy` files as `hilt infer --input` does: the
/// data of the array, the same bytes as the raw file it was made from.
#[test]
fn a_scenario_takes_npy_inputs_as_infer_does() {
    let dir = folder("npy");
    let raw = std::fs::read(repo().join("scenarios/data/tiny_convnet_in.bin")).unwrap();
    let npy = hilt::tensor_file::write_npy(TensorType::INT8, &[1, 16, 16, 3], &raw).unwrap();
    std::fs::write(dir.join("in.npy"), npy).unwrap();
    let model = repo().join("scenarios/models/tiny_convnet_int8.tflite");
    let write = |name: &str, input: &str| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "model = {model:?}\nexpected_from_host = true\nboards = [\"qemu-*\"]\n\n[[steps]]\ninputs = [{input:?}]\n",
                model = model.display().to_string(),
            ),
        )
        .unwrap();
        hilt::config::scenario::load(&path, &[]).unwrap()
    };
    let from_npy = write("npy.toml", "in.npy");
    let from_raw = write(
        "raw.toml",
        &repo()
            .join("scenarios/data/tiny_convnet_in.bin")
            .display()
            .to_string(),
    );
    let input = |s: &hilt::config::scenario::Scenario| s.cases[0].steps[0].inputs[0].clone();
    assert_eq!(input(&from_npy), raw);
    assert_eq!(input(&from_npy), input(&from_raw));
    assert_eq!(
        from_npy.cases[0].steps[0].expected,
        from_raw.cases[0].steps[0].expected
    );
}

/// A malformed `.npy` input is named, with what is wrong with it.
#[test]
fn a_broken_npy_input_is_named() {
    let dir = folder("bad-npy");
    std::fs::write(dir.join("in.npy"), b"not numpy at all").unwrap();
    let model = repo().join("scenarios/models/tiny_convnet_int8.tflite");
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        format!(
            "model = {:?}\nexpected_from_host = true\nboards = [\"qemu-*\"]\n\n[[steps]]\ninputs = [\"in.npy\"]\n",
            model.display().to_string()
        ),
    )
    .unwrap();
    let error = hilt::config::scenario::load(&path, &[]).unwrap_err().to_string();
    assert!(error.contains("in.npy: not a .npy file (bad magic)"), "{error}");
}
