//! The models shipped in `scenarios/models/` are exactly what
//! `hilt_runtime::writer::examples` writes (rerun the `write_example_models` example
//! after changing it), and they load and plan.

use std::path::Path;

use hilt::layout::{LayoutOptions, layout_bytes};

#[test]
fn committed_example_models_are_current_and_plan() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/models");
    for (name, bytes) in hilt_runtime::writer::examples::all() {
        let committed = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            committed == bytes,
            "{name} is stale: run `cargo run -p hilt --example write_example_models`"
        );
        let report = layout_bytes(&bytes, &LayoutOptions::default()).unwrap();
        assert!(report.head >= report.lower_bound);
    }
}

#[test]
fn tiny_convnet_plan_is_the_hand_computed_one() {
    // Activations: image 768 B; conv1/dw2/pw3/residual 2048 B each; pool,
    // flatten 8 → 16 B; logits, probabilities 4 → 16 B. The residual add keeps
    // conv1's output alive across steps 0..3, so at steps 1..3 three 2 KiB
    // buffers are live at once: the head is 3 × 2048.
    let report = layout_bytes(
        &hilt_runtime::writer::examples::tiny_convnet_int8(),
        &LayoutOptions::default(),
    )
    .unwrap();
    assert_eq!(report.lower_bound, 3 * 2048);
    assert_eq!(report.head, 3 * 2048);
}
