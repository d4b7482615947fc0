//! The gate end to end on a virtual board: an unchanged tree passes; a
//! changed alignment or planner fails with a diff that names the moved
//! buffers; accepting the pending snapshot makes it pass again.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::repo;

fn scenario(dir: &Path, extra: &str) -> PathBuf {
    let r = repo();
    let text = format!(
        "model = \"{}\"\nboards = [\"qemu-mps2-an386\"]\ntimeout_s = 120\n{extra}\n[[steps]]\ninputs = [\"{d}\"]\nexpected = [\"{d}\"]\n",
        r.join("scenarios/models/tiny_convnet_int8.tflite")
            .display(),
        d = r.join("scenarios/data/tiny_convnet_in.bin").display(),
    );
    let path = dir.join("gated.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn gate(scenario: &Path, snapshots: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(repo())
        .arg("gate")
        .arg(scenario)
        .arg("--snapshots")
        .arg(snapshots)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// `hilt gate --accept` (what `cargo insta review` does on "accept"): the
/// pending file replaces the snapshot.
fn accept(snapshots: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(repo())
        .args(["gate", "--accept", "gated", "--board", "qemu-mps2-an386"])
        .arg("--snapshots")
        .arg(snapshots)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("accepted gated @ qemu-mps2-an386: "),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!snapshots.join("gated@qemu-mps2-an386.snap.new").exists());
}

#[test]
fn gate_passes_unchanged_fails_on_moved_buffers_and_passes_after_accepting() {
    if !common::qemu_available("gate test") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hilt-gate-{}", std::process::id()));
    let snapshots = dir.join("snapshots");
    std::fs::create_dir_all(&snapshots).unwrap();
    // Expected outputs are the host runtime's own (firmware == host).
    let path = scenario(&dir, "compare = \"exact\"\nexpected_from_host = true");
    let (ok, out) = gate(&path, &snapshots);
    assert!(!ok && out.contains("NEW"), "{out}");
    accept(&snapshots);
    let (ok, out) = gate(&path, &snapshots);
    assert!(ok, "unchanged tree must pass:\n{out}");

    let path = scenario(
        &dir,
        "compare = \"exact\"\nexpected_from_host = true\nalign = 64",
    );
    let (ok, out) = gate(&path, &snapshots);
    assert!(!ok, "{out}");
    assert!(
        out.contains("CHANGED") && out.contains("buffer tensor") && out.contains("align 16 → 64"),
        "{out}"
    );
    // Every pending run says how to accept it, and the diff is printed once.
    assert!(
        out.contains(&format!(
            "accept with: hilt gate --accept gated --board qemu-mps2-an386 --snapshots {} \
             (or cargo insta review)",
            snapshots.display()
        )),
        "{out}"
    );
    let moved = out.lines().filter(|l| l.contains("buffer tensor")).count();
    let distinct: std::collections::BTreeSet<&str> = out
        .lines()
        .filter(|l| l.contains("buffer tensor"))
        .collect();
    assert_eq!(moved, distinct.len(), "a difference printed twice:\n{out}");
    accept(&snapshots);
    let (ok, out) = gate(&path, &snapshots);
    assert!(ok, "accepted snapshot must pass:\n{out}");

    let path = scenario(
        &dir,
        "compare = \"exact\"\nexpected_from_host = true\nalign = 64\nplanner = \"linear\"",
    );
    let (ok, out) = gate(&path, &snapshots);
    assert!(!ok && out.contains("offset"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Latencies on a virtual board: an edit to the firmware outside the timed
/// region (`edit-outside-timing`: more code and work before the session,
/// every address after it moved) leaves the gate green; a kernel made 1%
/// slower in one op (the `slow-op` fault: op 2, a 107 K-instruction CONV_2D,
/// runs 1% longer) fails it, naming that op with its change (the QEMU
/// plugin's exact instructions: 1%), and so does one only 3 ticks slower
/// (`slow-op-3-ticks`).
#[test]
fn gate_is_quiet_on_an_unrelated_edit_and_fails_on_a_one_percent_slower_op() {
    if !common::qemu_available("gate latency test") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hilt-gate-latency-{}", std::process::id()));
    let snapshots = dir.join("snapshots");
    std::fs::create_dir_all(&snapshots).unwrap();
    let base = "compare = \"exact\"\nexpected_from_host = true";
    let path = scenario(&dir, base);
    let (ok, out) = gate(&path, &snapshots);
    assert!(!ok && out.contains("NEW"), "{out}");
    accept(&snapshots);

    let path = scenario(
        &dir,
        &format!("{base}\nfirmware_features = [\"edit-outside-timing\"]"),
    );
    let (ok, out) = gate(&path, &snapshots);
    assert!(
        ok,
        "an edit outside the timed region must leave the gate green:\n{out}"
    );

    let path = scenario(&dir, &format!("{base}\nfaults = [\"slow-op\"]"));
    let (ok, out) = gate(&path, &snapshots);
    assert!(!ok, "a 1% slower op must fail the gate:\n{out}");
    // The QEMU plugin's exact counts, "op 2 CONV_2D: 107404 → 108535
    // instructions (+1.1%, slower)": (name, old, new) per op line.
    let moved: Vec<(&str, u64, u64)> = out
        .lines()
        .filter(|l| l.contains(" instructions (+") && l.trim_start().starts_with("op "))
        .filter_map(|l| {
            let (name, figures) = l.trim().split_once(": ")?;
            let (old, rest) = figures.split_once(" → ")?;
            let new = rest.split_once(' ')?.0;
            Some((name, old.parse().ok()?, new.parse().ok()?))
        })
        .collect();
    let op2 = moved.iter().find(|(name, ..)| *name == "op 2 CONV_2D");
    assert!(
        op2.is_some_and(|&(_, old, new)| {
            let percent = 100.0 * (new - old) as f64 / old as f64;
            (0.9..=1.2).contains(&percent)
        }),
        "the slower op is named with its change, about 1%:\n{out}"
    );
    // No other op is blamed: the fault's harness (the interpreter's watched
    // loop, which a firmware with a fault armed runs instead of the plain
    // one) costs each op a few dozen instructions (op 0, which also carries
    // the loop's set-up, about 90), no more.
    for &(name, old, new) in &moved {
        assert!(
            name == "op 2 CONV_2D" || new - old <= 150,
            "{name} moved by {} instructions:\n{out}",
            new - old
        );
    }

    // The smallest slowdown the gate must catch: 3 ticks (120 instructions)
    // on the same 107 K-instruction op, 0.1%.
    let path = scenario(&dir, &format!("{base}\nfaults = [\"slow-op-3-ticks\"]"));
    let (ok, out) = gate(&path, &snapshots);
    assert!(!ok, "an op 3 ticks slower must fail the gate:\n{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("op 2 CONV_2D:") && l.contains("slower")),
        "the op 3 ticks slower is named:\n{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
