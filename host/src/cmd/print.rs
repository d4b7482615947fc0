//! Text the commands print that is not a library report: a finished board
//! run as `hilt run` shows it (status, arena, offload, steps, costliest
//! ops), and the short model names used in headings and rows. Kept out of
//! the command modules so each of those reads as flags plus what it does.

use std::path::Path;

use hilt::outcome::BoardRun;
use hilt::report::thousands;

/// A path's file name for headings (the whole path when it has none).
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// A path's file name without its extension.
pub(crate) fn file_stem(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// One finished board run, as `hilt run` prints it when the board ends:
/// a status line, then the arena, offload and per-step figures, then the
/// first step's costliest ops (`ops` names them when the model was read).
pub(crate) fn print_run(run: &BoardRun, ops: Option<&Vec<String>>, wall: std::time::Duration) {
    let status = &run.outcome;
    // A run the QEMU plugin observed leads with its exact count.
    let cycles = run
        .steps
        .first()
        .map_or(String::new(), |s| match &s.observed {
            Some(seen) => format!("   {} instructions", thousands(seen.instructions)),
            None => format!("   {} cycles", thousands(s.total_cycles)),
        });
    // Wide enough for every shipped board name ("qemu-netduinoplus2-uart").
    // The wall time is the board's own (start-up, transfers, invokes), not
    // its firmware build or its wait for a free slot.
    println!(
        "{:<23} {:<28} {} ({} steps){cycles}   {:.2} s wall",
        run.board,
        run.scenario,
        status,
        run.steps.len(),
        wall.as_secs_f64()
    );
    if let Some(first) = &run.flaky {
        println!(
            "    FLAKY: passed on attempt {} of {}; the first failed: {first}",
            run.attempts, run.attempts
        );
    } else if run.attempts > 1 {
        println!("    failed on every one of {} attempts", run.attempts);
    }
    if let Some([capacity, head, tail, used]) = run.arena {
        println!("    arena: {used} of {capacity} bytes used (head {head}, tail {tail})");
    }
    print_offload(run);
    if let (Some(violations), Some(timing)) = (run.access_violations, &run.timing) {
        println!(
            "    QEMU plugin: {violations} access violations, cycles estimated for {timing}{}",
            run.stack_high_water
                .map_or(String::new(), |s| format!(", stack high-water {s} B"))
        );
    }
    if let Some(h) = &run.hotspots {
        print_hotspots(h);
    }
    for step in &run.steps {
        match &step.observed {
            // The firmware's own count (SysTick) stays beside the exact one.
            Some(seen) => println!(
                "    {} step {}: {} instructions, {} estimated cycles (SysTick: {}){}",
                step.case,
                step.step,
                thousands(seen.instructions),
                thousands(seen.estimated_cycles),
                thousands(step.total_cycles),
                if seen.engine_instructions > 0 {
                    format!(
                        "; the engine's emulation, {} instructions, left out",
                        thousands(seen.engine_instructions)
                    )
                } else {
                    String::new()
                }
            ),
            None => println!(
                "    {} step {}: {} cycles",
                step.case,
                step.step,
                thousands(step.total_cycles)
            ),
        }
        if let Some(o) = &step.offload {
            println!(
                "      npu busy {}, cpu waited {}, overlap {}, {} jobs",
                thousands(o.busy),
                thousands(o.waited),
                thousands(o.overlap()),
                o.jobs,
            );
            println!(
                "      removed (emulation): engine {}, shadow copies {}, oversleep {}; kept (modelled driver): submits {}, cache lines {}",
                thousands(o.removed.engine),
                thousands(o.removed.shadow_copies),
                thousands(o.removed.oversleep),
                thousands(o.kept.driver_submit),
                thousands(o.kept.driver_cache),
            );
        }
    }
    print_costliest_ops(run, ops);
    print_defmt(run);
}

/// Lines of a run's defmt log `hilt run` prints; the reports hold them all.
const DEFMT_SHOWN: usize = 40;

/// The run's defmt log, decoded: each line with the firmware's timestamp
/// and its level, then what could not be decoded.
fn print_defmt(run: &BoardRun) {
    let Some(log) = &run.defmt else {
        return;
    };
    let n = log.lines.len();
    println!(
        "    defmt log: {n} line{} (timestamps: the firmware's defmt::timestamp!)",
        if n == 1 { "" } else { "s" }
    );
    for line in log.lines.iter().take(DEFMT_SHOWN) {
        println!("      {line}");
    }
    if n > DEFMT_SHOWN {
        println!("      … {} more in the reports", n - DEFMT_SHOWN);
    }
    for problem in &log.problems {
        println!("      hilt: {problem}");
    }
}

/// The run's offload set-up and, when the firmware also ran with offload
/// off, how the engine changed the first step's cycles.
fn print_offload(run: &BoardRun) {
    let Some(o) = &run.offload else {
        return;
    };
    println!(
        "    offload: vnpu, {}, {} cycles per job + {} per 1000 MACs; driver {} cycles per submit + {} per cache line{}",
        o.mode,
        o.job_cycles,
        o.cycles_per_1000_macs,
        o.driver_submit_cycles,
        o.driver_cycles_per_line,
        o.fault.map_or(String::new(), |f| format!(", fault {f}"))
    );
    if let (Some(alone), Some(first)) = (run.cpu_alone, run.steps.first()) {
        let change = first.total_cycles as f64 / alone.max(1) as f64;
        println!(
            "    cpu alone: {} cycles (same firmware, offload off); with the engine {:.2}× that",
            thousands(alone),
            change
        );
    }
}

/// The first step's eight costliest ops, most first (exact instructions
/// and estimated cycles when the QEMU plugin observed the run, else the
/// firmware's cycles); in an offload run each says whether it ran on the
/// NPU or the CPU.
fn print_costliest_ops(run: &BoardRun, ops: Option<&Vec<String>>) {
    let Some(step) = run.steps.first() else {
        return;
    };
    // Observed: the plugin's exact instructions and estimated cycles per
    // op; else the firmware's per-op cycles.
    let mut by_cost: Vec<(usize, u64, Option<u64>)> = match &step.observed {
        Some(seen) => seen
            .ops
            .iter()
            .enumerate()
            .map(|(op, c)| (op, c.instructions, Some(c.estimated_cycles)))
            .collect(),
        None => step
            .op_cycles
            .iter()
            .enumerate()
            .map(|(op, &c)| (op, u64::from(c), None))
            .collect(),
    };
    by_cost.sort_by_key(|&(_, c, _)| std::cmp::Reverse(c));
    for (op, c, estimated) in by_cost.iter().take(8) {
        let name = ops.and_then(|o| o.get(*op)).map_or("?", String::as_str);
        // Offload runs say where each op ran; others print as before.
        let place = step.offload.as_ref().map_or("", |o| {
            if o.on_npu.get(*op).copied().unwrap_or(false) {
                "  NPU"
            } else {
                "  CPU"
            }
        });
        match estimated {
            Some(e) => println!(
                "      op {op:>3} {name:<30} {:>12} instructions {:>12} est. cycles{place}",
                thousands(*c),
                thousands(*e)
            ),
            None => println!(
                "      op {op:>3} {name:<30} {:>14} cycles{place}",
                thousands(*c)
            ),
        }
    }
}

/// `--hotspots`: the busiest functions of a run's invokes.
fn print_hotspots(h: &hilt::observer::hotspots::Hotspots) {
    println!(
        "    hotspots: {} instructions in the invokes, by function (busiest {}):",
        thousands(h.total),
        h.functions.len()
    );
    for f in &h.functions {
        let share = if h.total == 0 {
            0.0
        } else {
            100.0 * f.instructions as f64 / h.total as f64
        };
        println!(
            "      {share:5.1} %  {:>13}  {}  ({})",
            thousands(f.instructions),
            f.function,
            f.runners.join(", ")
        );
    }
}
