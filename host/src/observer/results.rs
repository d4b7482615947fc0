//! The plugin's results file, line by line: per invoke, each op's exact
//! instructions, estimated cycles and stack depth, then the invoke's
//! totals; and each access violation as it happens.

use std::collections::HashMap;

pub use crate::outcome::OpCount;

/// One invoke, as the plugin counted it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvokeCount {
    /// The plugin's number for it (from 1 in a QEMU run).
    pub number: u64,
    /// Totals (`stack_high_water`: the deepest of its ops).
    pub total: OpCount,
    /// Per op, in order; their instructions and cycles add up to `total`.
    pub ops: Vec<OpCount>,
    /// Violations seen so far in the QEMU run.
    pub violations_so_far: u64,
    /// Instructions the accelerator's jobs ran (the firmware emulating the
    /// engine), taken out of `total` and the ops.
    pub engine_instructions: u64,
}

/// One access outside what the runner may touch, as the plugin saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawViolation {
    /// The invoke it happened in.
    pub invoke: u64,
    /// `not-its-buffer`, `held-by-job`, `stack-overflow`, `unmapped`.
    pub fault: String,
    /// `op:N`, `job:N` or `interpreter`.
    pub runner: String,
    /// The op whose job was in flight.
    pub in_flight: Option<u32>,
    /// A store (else a load).
    pub store: bool,
    /// Guest address.
    pub addr: u32,
    /// Bytes.
    pub size: u32,
    /// The instruction's address.
    pub pc: u32,
}

/// Everything read from the file so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Results {
    /// Finished invokes, in order.
    pub invokes: Vec<InvokeCount>,
    /// Violations, in order (the plugin keeps the first few).
    pub violations: Vec<RawViolation>,
    /// Problems the plugin reported (an unreadable plan file).
    pub errors: Vec<String>,
}

fn fields(line: &str) -> HashMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect()
}

fn num(f: &HashMap<&str, &str>, key: &str) -> u64 {
    f.get(key)
        .and_then(|v| match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        })
        .unwrap_or(0)
}

impl Results {
    /// Reads the file's text (a partial last line is left for later).
    pub fn parse(text: &str) -> Results {
        let mut r = Results::default();
        let mut ops: Vec<OpCount> = Vec::new();
        let complete = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        for line in complete.lines() {
            let f = fields(line);
            let count = || OpCount {
                instructions: num(&f, "instructions"),
                estimated_cycles: num(&f, "cycles"),
                stack_high_water: num(&f, "stack"),
            };
            match line.split_whitespace().next() {
                Some("op") => ops.push(count()),
                Some("invoke") => r.invokes.push(InvokeCount {
                    number: num(&f, "invoke"),
                    total: count(),
                    ops: std::mem::take(&mut ops),
                    violations_so_far: num(&f, "violations"),
                    engine_instructions: num(&f, "engine_instructions"),
                }),
                Some("violation") => r.violations.push(RawViolation {
                    invoke: num(&f, "invoke"),
                    fault: f.get("fault").copied().unwrap_or("?").to_string(),
                    runner: f.get("runner").copied().unwrap_or("?").to_string(),
                    in_flight: f.get("in_flight").and_then(|v| v.parse().ok()),
                    store: f.get("access") == Some(&"store"),
                    addr: num(&f, "addr") as u32,
                    size: num(&f, "size") as u32,
                    pc: num(&f, "pc") as u32,
                }),
                Some("error") => r.errors.push(line.trim_start_matches("error ").to_string()),
                _ => {}
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_belong_to_the_invoke_line_after_them_and_violations_are_read_whole() {
        let r = Results::parse(
            "op invoke=1 index=0 instructions=10 cycles=14 stack=64\n\
             op invoke=1 index=1 instructions=5 cycles=9 stack=128\n\
             violation invoke=1 fault=not-its-buffer runner=op:1 in_flight=- access=load addr=0x20000060 size=1 pc=0x1234\n\
             invoke invoke=1 instructions=15 cycles=23 ops=2 stack=128 violations=1 engine_instructions=500 engine_cycles=640\n\
             op invoke=2 index=0 instr",
        );
        assert_eq!(r.invokes.len(), 1);
        let inv = &r.invokes[0];
        assert_eq!(inv.ops.len(), 2);
        assert_eq!(inv.total.instructions, 15);
        assert_eq!(inv.ops[1].stack_high_water, 128);
        assert_eq!(inv.violations_so_far, 1);
        assert_eq!(inv.engine_instructions, 500);
        let v = &r.violations[0];
        assert_eq!(
            (v.addr, v.size, v.pc, v.store),
            (0x2000_0060, 1, 0x1234, false)
        );
        assert_eq!((v.runner.as_str(), v.in_flight), ("op:1", None));
    }
}
