//! A product's firmware that logs with defmt over RTT, on its virtual
//! board: `target/examples/custom-firmware` with its `defmt` feature
//! (defmt-rtt, the agent's own lines, timestamps in microseconds from the
//! board's TIMER0) talks to the host over its UART while hilt reads the
//! RTT channel `defmt` through QEMU's gdbstub and decodes it with the ELF's
//! table. The decoded lines — the firmware's timestamp, level and message
//! — must be in `hilt run`'s output, in `report.html` and in
//! `summary.json`, and say what the firmware did: the model's size, its
//! operators, the invoke's count, which the host's own figures confirm.
//!
//! Skipped (with a message) without `qemu-system-arm`, unless
//! `HILT_QEMU_REQUIRED=1`.

mod common;

use common::{hilt, repo, succeeded};
use hilt::report::thousands;

/// One decoded line as `hilt run` prints it: `0.000105 INFO  message`.
#[derive(Debug, Clone, PartialEq)]
struct Printed {
    timestamp: String,
    level: String,
    message: String,
}

/// The lines under `defmt log: N lines`, and what follows them that is
/// hilt's (`hilt: …` problems).
fn printed_log(stdout: &str) -> (usize, Vec<Printed>, Vec<String>) {
    let mut lines = stdout
        .lines()
        .skip_while(|l| !l.starts_with("    defmt log: "));
    let header = lines.next().expect("a defmt log section");
    let count = header
        .trim_start_matches("    defmt log: ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{header}"));
    let mut printed = Vec::new();
    let mut problems = Vec::new();
    for line in lines.take_while(|l| l.starts_with("      ")) {
        let line = line.trim_start();
        if let Some(problem) = line.strip_prefix("hilt: ") {
            problems.push(problem.to_string());
            continue;
        }
        let (timestamp, rest) = line.split_once(' ').unwrap();
        let (level, message) = rest.split_once(' ').unwrap();
        printed.push(Printed {
            timestamp: timestamp.into(),
            level: level.into(),
            message: message.trim_start().into(),
        });
    }
    (count, printed, problems)
}

/// Seconds with six decimals (`{=u64:us}`) as microseconds.
fn micros(timestamp: &str) -> u64 {
    let (s, us) = timestamp
        .split_once('.')
        .unwrap_or_else(|| panic!("{timestamp}"));
    assert_eq!(us.len(), 6, "{timestamp}");
    s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap()
}

#[test]
fn the_custom_firmware_s_defmt_log_is_decoded_into_the_output_and_the_reports() {
    if !common::qemu_available("defmt log test") {
        return;
    }
    let reports = std::env::temp_dir().join(format!("hilt-defmt-{}", std::process::id()));
    let out = hilt([
        "run",
        "host/tests/fixtures/defmt_logs.toml",
        "--report-dir",
        reports.to_str().unwrap(),
    ]);
    let stdout = succeeded(&out);
    let (count, printed, problems) = printed_log(&stdout);
    assert!(problems.is_empty(), "{problems:?}\n{stdout}");
    assert_eq!(count, printed.len(), "{stdout}");
    let find = |start: &str| {
        printed
            .iter()
            .position(|p| p.message.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?} in\n{stdout}"))
    };

    // What the firmware logged is what the host knows: the model's bytes…
    let model = repo().join("scenarios/models/tiny_convnet_int8.tflite");
    let model_bytes = std::fs::metadata(&model).unwrap().len();
    let boot = find("custom-firmware up: board qemu-mps2-an386-custom, core clock 25000000 Hz");
    let read = find("model read: ");
    assert_eq!(
        printed[read].message,
        format!("model read: {model_bytes} bytes, 8 operators")
    );
    let start = find("hilt-agent up on qemu-mps2-an386-custom: ");
    assert!(
        printed[start].message.contains(&format!(
            "model tiny_convnet_int8.tflite ({model_bytes} bytes)"
        )),
        "{:?}",
        printed[start]
    );
    let plan = find("arena plan committed: 10 buffers, by the greedy planner");
    // …and the invoke's count of SysTick, which the host scales by 40 (1 ns
    // an instruction, a 25 MHz clock) into the step's SysTick figure.
    let invoke = find("invoke 1: 8 ops in ");
    let counts: u64 = printed[invoke]
        .message
        .trim_start_matches("invoke 1: 8 ops in ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        stdout.contains(&format!("(SysTick: {})", thousands(counts * 40))),
        "{counts} counts\n{stdout}"
    );
    assert!(
        printed[invoke].message.ends_with(&format!(
            "counts of the systick counter ({} us at 25000000 Hz)",
            counts * 1_000_000 / 25_000_000
        )),
        "{:?}",
        printed[invoke]
    );
    // Each line with its level and the firmware's timestamp (microseconds
    // of TIMER0 since boot), in the order logged.
    assert!(boot < start && start < read && read < plan && plan < invoke);
    assert!(printed.iter().all(|p| p.level == "INFO"), "{printed:?}");
    let times: Vec<u64> = printed.iter().map(|p| micros(&p.timestamp)).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(times[invoke] > times[read], "{times:?}");

    // The same lines in report.html, per board…
    let page = std::fs::read_to_string(reports.join("report.html")).unwrap();
    assert!(
        page.contains(&format!(
            "<details class=\"defmt\"><summary>defmt log ({count} lines;"
        )),
        "{page}"
    );
    for p in &printed {
        let row = format!(
            "<td class=\"ts\">{}</td><td class=\"lvl\">{}</td><td class=\"msg\">{}</td>",
            p.timestamp, p.level, p.message
        );
        assert!(page.contains(&row), "{row}\nnot in the page");
    }
    // …and in summary.json.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reports.join("summary.json")).unwrap())
            .unwrap();
    let logged = &summary["runs"][0]["defmt"];
    assert_eq!(logged["problems"], serde_json::json!([]));
    let json_lines: Vec<Printed> = logged["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| Printed {
            timestamp: l["timestamp"].as_str().unwrap().into(),
            level: l["level"].as_str().unwrap().to_uppercase(),
            message: l["message"].as_str().unwrap().into(),
        })
        .collect();
    assert_eq!(json_lines, printed);
    let _ = std::fs::remove_dir_all(&reports);
}
