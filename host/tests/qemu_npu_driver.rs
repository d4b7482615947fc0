//! The template NPU driver inside a product's firmware, on a virtual
//! board: `target/examples/custom-firmware` with its `npu-driver` feature
//! hands the agent `target/examples/npu-driver`'s `Driver` over its
//! virtual device (vnpu's engine stepped from SysTick, its interrupt in
//! PendSV) instead of hilt's `TickVnpu`. The offloaded ops must run there
//! (the run's placement) with outputs equal to TFLM's, coherent and behind
//! the modelled data cache, where only the driver's own cleans and
//! invalidates (the interpreter is told memory is coherent) keep them
//! right. That it is the driver and not `TickVnpu`: the driver keeps no
//! ledger, so nothing is taken out of the figures.
//!
//! Skipped (with a message) without `qemu-system-arm`, unless
//! `HILT_QEMU_REQUIRED=1`.

mod common;

use std::sync::Arc;

use hilt::config::board::{load_all, select};
use hilt::orchestrate::{Job, run_jobs};
use hilt::outcome::Outcome;

use common::repo;

#[test]
fn offloaded_ops_run_through_the_driver_with_tflm_outputs_coherent_and_not() {
    if !common::qemu_available("npu-driver board test") {
        return;
    }
    let boards = load_all(&repo().join("boards")).unwrap();
    let conformance = hilt::conformance::locate_all(&repo());
    let path = repo().join("host/tests/fixtures/npu_driver.toml");
    let coherent = hilt::config::scenario::load(&path, &conformance).unwrap();
    let mut cached = coherent.clone();
    cached.offload.coherent = false;
    cached.name = "npu_driver (non-coherent)".into();
    let mut jobs = Vec::new();
    for scenario in [coherent, cached] {
        let scenario = Arc::new(scenario);
        for board in select(&boards, "qemu-mps2-an386-custom").unwrap() {
            jobs.push(Job {
                scenario: scenario.clone(),
                board: board.clone(),
            });
        }
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let results = runtime.block_on(run_jobs(&repo(), jobs, 1, |_| {}));
    assert_eq!(results.len(), 2);
    for run in &results {
        assert_eq!(
            run.outcome,
            Outcome::Passed,
            "{}: {:?}",
            run.scenario,
            run.logs
        );
        let figures = run.steps[0].offload.as_ref().expect("offload figures");
        // The CONV_2D and the ADD ran on the device.
        assert_eq!(
            figures.on_npu,
            [true, false, false, true],
            "{}",
            run.scenario
        );
        assert_eq!(figures.jobs, 2, "{}", run.scenario);
        // The driver's engine keeps no ledger (TickVnpu's takes its
        // kernels out): nothing removed, nothing modelled kept.
        assert_eq!(
            (figures.removed.total(), figures.kept.total()),
            (0, 0),
            "{}",
            run.scenario
        );
    }
}
