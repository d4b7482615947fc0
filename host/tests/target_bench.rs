//! `hilt bench-target`: MAC counts against MLPerf Tiny's published figures,
//! TFLM's Cortex-M4 table read, and one run on a virtual board whose row
//! carries TFLM's figures beside hilt's, the flash bytes of the firmware it
//! ran and the arena it committed.

mod common;

use hilt::report::thousands;
use hilt::target_bench::{model_macs, read_tflm_figures};

#[test]
fn mac_counts_are_mlperf_tinys_and_tflm_figures_read() {
    let Some((dir, _)) = common::conformance_models() else {
        return;
    };
    // In millions: MLPerf Tiny's figures (tflm-cortex-m4.md: 2.67, 7.49,
    // 12.53, 0.27) count ADD and pooling elements too; these are the
    // convolutions' and fully connected layers' alone.
    for (model, millions) in [
        ("mlperf_tiny_kws_dscnn_int8", 2.66),
        ("mlperf_tiny_vww_mobilenetv1_int8", 7.49),
        ("mlperf_tiny_ic_resnet8_int8", 12.50),
        ("mlperf_tiny_ad_autoencoder_int8", 0.26),
    ] {
        let macs = model_macs(
            &hilt::model_file::ModelFile::open(&dir.join("models").join(format!("{model}.tflite")))
                .unwrap(),
        );
        let got = (macs as f64 / 1e4).round() / 100.0;
        assert_eq!(got, millions, "{model}: {macs} MACs");
    }
    let figures = read_tflm_figures(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(figures["mlperf_tiny_kws_dscnn_int8"].cmsis_nn, 7_697_920);
    assert_eq!(figures["tflm_hello_world_int8"].reference, 5_240);
    assert_eq!(figures["tflm_person_detect_int8"].arena_used, 82_292);
}

#[test]
fn a_virtual_board_row_has_hilts_and_tflms_figures() {
    if !common::qemu_available("hilt bench-target") {
        return;
    }
    let out = common::hilt([
        "bench-target",
        "scenarios/hello_world_int8.toml",
        "--board",
        "qemu-mps2-an386",
        "--format",
        "json",
    ]);
    let rows: serde_json::Value = serde_json::from_str(&common::succeeded(&out)).unwrap();
    let row = &rows[0];
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(row["model"], "tflm_hello_world_int8");
    assert_eq!(row["board"], "qemu-mps2-an386");
    // Three FULLY_CONNECTED: 1→16, 16→16, 16→1.
    assert_eq!(row["macs"], 288);
    let instructions = row["instructions"].as_u64().unwrap();
    assert!(instructions > 288, "{row}");
    // The firmware holds at least the model (2.7 KB) and the runtime.
    assert!(row["flash"].as_u64().unwrap() > 20_000, "{row}");
    assert_eq!(row["m4_tick"], 40, "{row}");
    if let Some((dir, _)) = common::conformance_models() {
        assert_eq!(row["tflm"]["cmsis_nn"], 3_520);
        // Within two ticks of TFLM + CMSIS-NN either way: parity, not a win.
        let margin = instructions.abs_diff(3_520);
        let expected = if margin <= 80 {
            "parity"
        } else if instructions < 3_520 {
            "below"
        } else {
            "above"
        };
        assert_eq!(row["standing"], expected, "{row}");
        // The same arena `hilt layout --board` plans for it.
        let model = dir.join("models/tflm_hello_world_int8.tflite");
        let model = model.to_str().unwrap();
        let args = [
            "layout",
            model,
            "--board",
            "qemu-mps2-an386",
            "--format",
            "json",
        ];
        let layout = common::hilt(args);
        let plan: serde_json::Value = serde_json::from_str(&common::succeeded(&layout)).unwrap();
        assert_eq!(row["arena_used"], plan["total"], "{plan}");
    }
    let table = common::succeeded(&common::hilt([
        "bench-target",
        "scenarios/hello_world_int8.toml",
        "--board",
        "qemu-mps2-an386",
        "--format",
        "markdown",
    ]));
    assert!(
        table.contains(&format!(
            "| tflm_hello_world_int8 | qemu-mps2-an386 | {} |",
            thousands(instructions)
        )),
        "{table}"
    );
}

/// An MLPerf Tiny model on the reference board gets a second run with the
/// STM32L4R5 timing profile and only its own kernels: the QEMU plugin's
/// exact instructions, its estimated cycles, the part's published record
/// beside them, and that firmware's flash; on the M33 board, the same with
/// the STM32U575's.
#[test]
fn an_mlperf_model_on_the_m4_board_is_estimated_on_the_reference_part() {
    if !common::qemu_available("hilt bench-target") {
        return;
    }
    if common::conformance_models().is_none() {
        eprintln!("conformance set missing: the AD scenario's model is in it");
        return;
    }
    let out = common::hilt([
        "bench-target",
        "scenarios/ad_autoencoder_int8.toml",
        "--board",
        "qemu-mps2-an386",
        "--format",
        "json",
    ]);
    let rows: serde_json::Value = serde_json::from_str(&common::succeeded(&out)).unwrap();
    let row = &rows[0];
    let part = &row["part"];
    assert_eq!(part["profile"], "stm32l4r5", "{row}");
    // The exact count and the SysTick one (40-instruction ticks) agree to
    // 0.2 %: the part runs the model-kernels firmware, whose code lies
    // elsewhere (the compiler allocates the invoke loop's registers a
    // little differently there: about 15 instructions an op on AD's ten)
    // and which has no virtual NPU ticking in SysTick.
    let exact = part["instructions"].as_u64().unwrap();
    let ticked = row["instructions"].as_u64().unwrap();
    assert!(exact.abs_diff(ticked) <= ticked / 500, "{row}");
    // Five flash wait states behind the ART, multi-cycle loads and MACs:
    // more cycles than instructions, but not several times more.
    let cycles = part["estimated_cycles"].as_u64().unwrap();
    assert!(cycles > exact && cycles < 3 * exact, "{row}");
    // The published record (mlperf-tiny-records.md), labelled as such.
    assert_eq!(part["record"]["cycles"], 486_000, "{row}");
    assert_eq!(part["record"]["by"], "Plumerai, v1.1", "{row}");
    assert_eq!(
        part["record"]["system"], "Cortex-M4 (NUCLEO-L4R5ZI @ 120 MHz)",
        "{row}"
    );
    // That run's firmware links the model's kernels only: its one
    // operator's, in less flash than the every-kernel firmware's.
    let own = &row["own_kernels"];
    assert_eq!(own["operators"], 1, "{row}");
    let own_flash = own["flash"].as_object().unwrap();
    let parts: u64 = own_flash.values().map(|v| v.as_u64().unwrap()).sum();
    assert!(parts < row["flash"].as_u64().unwrap(), "{row}");
    // The Cortex-M33 board: the STM32U575's profile and record.
    let out = common::hilt([
        "bench-target",
        "scenarios/ad_autoencoder_int8.toml",
        "--board",
        "qemu-mps2-an505",
        "--board",
        "qemu-mps2-an500",
        "--format",
        "json",
    ]);
    let rows: serde_json::Value = serde_json::from_str(&common::succeeded(&out)).unwrap();
    let on = |board: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["board"] == board)
            .unwrap()
    };
    let m33 = &on("qemu-mps2-an505")["part"];
    assert_eq!(m33["profile"], "stm32u575", "{rows}");
    assert_eq!(m33["record"]["cycles"], 495_000, "{rows}");
    assert_eq!(m33["record"]["by"], "Bosch, v1.2", "{rows}");
    // A board of no record's part (the M7): no estimate.
    assert!(on("qemu-mps2-an500")["part"].is_null(), "{rows}");
}
