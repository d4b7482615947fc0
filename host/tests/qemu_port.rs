//! An allocator port inside a product's own firmware, on a virtual board:
//! `target/examples/custom-firmware` plans with the example ports of
//! `target/examples/allocator-ports` (features `port-first-fit`,
//! `port-broken`) under buffer canaries. The broken port's plan is
//! committed unchecked (`unchecked-plan`), so that the runtime's plan check
//! does not catch it: the QEMU plugin must, at the first store into bytes
//! two live buffers share; and with the plugin's checks off, the canaries
//! must, naming the buffer whose guard the overlapping output overwrote and
//! the op that did it.
//! The correct port passes. (The plan check's own message, naming the
//! pair, is asserted on the host in that crate's `tests/interpreter.rs`.)
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
fn the_broken_port_is_caught_by_the_plugin_and_by_buffer_canaries_and_first_fit_passes() {
    if !common::qemu_available("allocator-port board test") {
        return;
    }
    let boards = load_all(&repo().join("boards")).unwrap();
    let conformance = hilt::conformance::locate_all(&repo());
    let mut jobs = Vec::new();
    for path in [
        "host/tests/fixtures/port_broken.toml",
        "host/tests/fixtures/port_first_fit.toml",
    ] {
        let scenario = hilt::config::scenario::load(&repo().join(path), &conformance).unwrap();
        let scenario = Arc::new(scenario);
        for board in select(&boards, "qemu-mps2-an386-custom").unwrap() {
            jobs.push(Job {
                scenario: scenario.clone(),
                board: board.clone(),
            });
        }
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let results = runtime.block_on(run_jobs(&repo(), jobs.clone(), 1, |_| {}));
    assert_eq!(results.len(), 2);
    let outcome = |results: &[hilt::outcome::BoardRun], name: &str| {
        results
            .iter()
            .find(|r| r.scenario == name)
            .unwrap()
            .outcome
            .clone()
    };
    // The QEMU plugin names the first store into bytes the broken plan
    // gave two live buffers, before any guard is looked at.
    match outcome(&results, "port_broken") {
        Outcome::Error(m) => assert!(
            m.contains("access check: op 0 (CONV_2D): store of")
                && m.contains("both live at op 0, sharing these bytes (the plan overlaps them)"),
            "{m}"
        ),
        other => panic!("the broken port must be caught, got {other:?}"),
    }
    assert_eq!(outcome(&results, "port_first_fit"), Outcome::Passed);
    // Without the plugin's checks (a real board has none), the buffer
    // canaries catch it after the op.
    let mut settings = hilt::observer::settings();
    settings.checks = false;
    hilt::observer::configure(settings);
    let results = runtime.block_on(run_jobs(&repo(), jobs, 1, |_| {}));
    match outcome(&results, "port_broken") {
        Outcome::Error(m) => assert!(
            m.contains("firmware check: the guard after tensor 0 was overwritten")
                && m.contains("(16 bytes hit), after op 0"),
            "{m}"
        ),
        other => panic!("the broken port must be caught, got {other:?}"),
    }
}
