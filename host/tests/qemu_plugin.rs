//! hilt's QEMU plugin behind every virtual board run: exact per-op
//! instruction counts that add up to the invoke's, estimated cycles from
//! the board's core (or a real part's timing profile), and every access
//! checked against the committed plan with no false alarm on a shipped
//! scenario. (The faults it catches are in `qemu_faults.rs`.)

mod common;

use common::{hilt, repo, succeeded};

fn summary(dir: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn kws_on(board: &str, extra: &[&str], dir: &std::path::Path) -> serde_json::Value {
    let mut args = vec![
        "run",
        "scenarios/kws_dscnn_int8.toml",
        "--board",
        board,
        "--report-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    succeeded(&hilt(&args));
    summary(dir)
}

#[test]
fn kws_on_three_kinds_of_virtual_board_has_exact_counts_estimated_cycles_and_no_violation() {
    if !common::qemu_available("QEMU plugin tests") {
        return;
    }
    // Three boards, one per kind of run: the Cortex-M4 over RTT, the
    // ARMv6-M build (the M0+ timing model) and the STM32F405 over its UART.
    // The gate runs KWS on every virtual board with checks on.
    let boards = [
        "qemu-mps2-an386",
        "qemu-mps2-an386-armv6m",
        "qemu-netduinoplus2-uart",
    ];
    let runs: Vec<serde_json::Value> = boards
        .iter()
        .flat_map(|board| {
            let dir = repo().join(format!("build/test-reports/qemu-plugin-kws-{board}"));
            kws_on(board, &[], &dir)["runs"].as_array().unwrap().clone()
        })
        .collect();
    assert_eq!(runs.len(), 3, "{} board runs", runs.len());
    for run in &runs {
        let board = run["board"].as_str().unwrap();
        assert_eq!(run["access_violations"], 0, "{board}");
        let total = run["instructions"].as_u64().unwrap();
        let cycles = run["estimated_cycles"].as_u64().unwrap();
        // Loads, multiplies and taken branches cost more than a cycle on
        // every modelled core: the estimate is above the count.
        assert!(
            cycles > total,
            "{board}: {cycles} cycles for {total} instructions"
        );
        assert!(run["stack_high_water"].as_u64().unwrap() > 0, "{board}");
        for step in run["steps"].as_array().unwrap() {
            let o = &step["observed"];
            let ops = o["ops"].as_array().unwrap();
            assert_eq!(ops.len(), 13, "{board}: one count per op");
            let sum: u64 = ops
                .iter()
                .map(|op| op["instructions"].as_u64().unwrap())
                .sum();
            assert_eq!(
                sum,
                o["instructions"].as_u64().unwrap(),
                "{board}: ops add up to the invoke"
            );
            let sum: u64 = ops
                .iter()
                .map(|op| op["estimated_cycles"].as_u64().unwrap())
                .sum();
            assert_eq!(sum, o["estimated_cycles"].as_u64().unwrap(), "{board}");
            // On the AN386 (cycles are instructions, unscaled) SysTick
            // times the agent's region around the marked invoke: the exact
            // count is inside it, to within SysTick's 40-instruction tick,
            // and the region adds only the counter reads and the call.
            if board == "qemu-mps2-an386" {
                let systick = step["total_cycles"].as_u64().unwrap();
                let exact = o["instructions"].as_u64().unwrap();
                assert!(
                    exact <= systick + 40 && systick <= exact + 200,
                    "SysTick {systick} vs exact {exact}"
                );
            }
        }
    }
}

#[test]
fn the_l4r5_profile_charges_flash_wait_states_on_the_same_instructions() {
    if !common::qemu_available("QEMU plugin tests") {
        return;
    }
    let plain = kws_on(
        "qemu-mps2-an386",
        &[],
        &repo().join("build/test-reports/qemu-plugin-m4"),
    );
    let l4r5 = kws_on(
        "qemu-mps2-an386",
        &["--timing", "stm32l4r5"],
        &repo().join("build/test-reports/qemu-plugin-l4r5"),
    );
    let (p, l) = (&plain["runs"][0], &l4r5["runs"][0]);
    assert_eq!(p["timing"], "cortex-m4");
    assert_eq!(l["timing"], "stm32l4r5");
    assert_eq!(p["instructions"], l["instructions"], "the same code ran");
    let (pc, lc) = (
        p["estimated_cycles"].as_u64().unwrap(),
        l["estimated_cycles"].as_u64().unwrap(),
    );
    // Weights are read from flash: five wait states on each line the ART's
    // data side misses.
    assert!(lc > pc, "L4R5 {lc} vs plain M4 {pc}");
}

#[test]
fn hotspots_name_the_functions_of_every_instruction_the_invokes_ran() {
    if !common::qemu_available("QEMU plugin tests") {
        return;
    }
    let dir = repo().join("build/test-reports/qemu-plugin-hotspots");
    let out = hilt([
        "run",
        "scenarios/kws_dscnn_int8.toml",
        "--board",
        "qemu-mps2-an386",
        "--hotspots",
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    succeeded(&out);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("hotspots: "), "{printed}");
    let run = &summary(&dir)["runs"][0];
    let hotspots = &run["hotspots"];
    let total = hotspots["total"].as_u64().unwrap();
    let invokes: u64 = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["observed"]["instructions"].as_u64().unwrap())
        .sum();
    // Blocks are counted whole from the first one the invoke enters: within
    // a few instructions per invoke of the exact counts.
    assert!(
        total.abs_diff(invokes) * 1000 <= invokes,
        "hotspots {total} vs invokes {invokes}"
    );
    let functions = hotspots["functions"].as_array().unwrap();
    assert_eq!(functions.len(), 12);
    // KWS's four 1×1 layers (ops 2, 4, 6, 8) and its first layer's im2col
    // patches (op 0) run in the channel-quad kernel, the busiest function.
    let top = &functions[0];
    assert_eq!(
        top["function"],
        "hilt_runtime::kernels::gemm_quads::column_1x4_wide_weights"
    );
    assert_eq!(top["runners"][0], "ops 0, 2, 4, 6, 8", "{top}");
    let kept: u64 = functions
        .iter()
        .map(|f| f["instructions"].as_u64().unwrap())
        .sum();
    assert!(kept <= total && kept * 10 >= total * 9, "{kept} of {total}");
}

#[test]
fn an_unknown_timing_profile_is_named_with_the_known_ones() {
    let out = hilt([
        "run",
        "scenarios/kws_dscnn_int8.toml",
        "--board",
        "qemu-mps2-an386",
        "--timing",
        "stm32l4r9",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("timing profile `stm32l4r9`") && err.contains("(known: stm32l4r5, stm32u575)"),
        "{err}"
    );
}
