//! `hilt run --hotspots`: where a virtual board's invokes spent their
//! instructions, by function. The plugin counts every translated block's
//! executions by the op that ran it (`host/qemu-plugin/src/hotspots.rs`);
//! here each block is mapped to the ELF function that holds it.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use serde::Serialize;

/// Functions kept per run (the rest are summed into the total only).
pub const KEPT: usize = 12;

/// One function's share of a run's invokes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hotspot {
    /// Demangled, without the hash (`hilt_runtime::kernels::...`), or the
    /// block's address when no function symbol covers it.
    pub function: String,
    /// Instructions executed in it, over every invoke of the run.
    pub instructions: u64,
    /// Who ran it: `ops 1, 3`, `jobs 0` (an engine's), `interpreter`.
    pub runners: Vec<String>,
}

/// A run's hotspots: the [`KEPT`] busiest functions, and the instructions
/// of all of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Hotspots {
    /// Every instruction the plugin saw inside invokes.
    pub total: u64,
    /// Busiest first.
    pub functions: Vec<Hotspot>,
}

/// Who ran a function, gathered: op numbers, job numbers, and whether
/// the interpreter did.
#[derive(Debug, Default)]
struct Runners {
    ops: BTreeSet<u32>,
    jobs: BTreeSet<u32>,
    interpreter: bool,
}

impl Runners {
    /// Adds a runner as the plugin writes it: `op:3`, `job:0`,
    /// `interpreter`.
    fn add(&mut self, runner: &str) {
        match runner.split_once(':') {
            Some(("op", n)) => self.ops.extend(n.parse::<u32>().ok()),
            Some(("job", n)) => self.jobs.extend(n.parse::<u32>().ok()),
            _ => self.interpreter = true,
        }
    }

    /// `ops 1, 3`, `jobs 0`, `interpreter`, in that order.
    fn words(&self) -> Vec<String> {
        let list = |kind: &str, set: &BTreeSet<u32>| {
            let numbers: Vec<String> = set.iter().map(u32::to_string).collect();
            let plural = if set.len() == 1 { "" } else { "s" };
            format!("{kind}{plural} {}", numbers.join(", "))
        };
        let mut out = Vec::new();
        if !self.ops.is_empty() {
            out.push(list("op", &self.ops));
        }
        if !self.jobs.is_empty() {
            out.push(list("job", &self.jobs));
        }
        if self.interpreter {
            out.push("interpreter".into());
        }
        out
    }
}

/// Function symbols of an ELF: (start, end, name), sorted by start.
fn functions(elf: &Path) -> Vec<(u64, u64, String)> {
    use object::{Object, ObjectSymbol};
    let Ok(data) = std::fs::read(elf) else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Vec::new();
    };
    let mut all: Vec<_> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .filter_map(|s| {
            let start = s.address() & !1;
            let name = format!("{:#}", rustc_demangle::demangle(s.name().ok()?));
            Some((start, start + s.size().max(1), name))
        })
        .collect();
    all.sort();
    all
}

/// Reads the plugin's hotspots file (`runner start executions length` per
/// line) and sums it by function of `elf`. Lines it cannot read are
/// skipped (the file is rewritten after each invoke, whole).
pub fn read(text: &str, elf: &Path) -> Hotspots {
    let symbols = functions(elf);
    let name_of = |address: u64| {
        let at = symbols.partition_point(|s| s.0 <= address);
        match at.checked_sub(1).map(|i| &symbols[i]) {
            Some((_, end, name)) if address < *end => name.clone(),
            _ => format!("{address:#x}"),
        }
    };
    let mut by_function: HashMap<String, (u64, Runners)> = HashMap::new();
    let mut total = 0u64;
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [runner, start, runs, length] = w[..] else {
            continue;
        };
        let (Some(start), Ok(runs), Ok(length)) = (
            start
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok()),
            runs.parse::<u64>(),
            length.parse::<u64>(),
        ) else {
            continue;
        };
        let instructions = runs.saturating_mul(length);
        total += instructions;
        let entry = by_function.entry(name_of(start)).or_default();
        entry.0 += instructions;
        entry.1.add(runner);
    }
    let mut functions: Vec<Hotspot> = by_function
        .into_iter()
        .map(|(function, (instructions, runners))| Hotspot {
            function,
            instructions,
            runners: runners.words(),
        })
        .collect();
    functions.sort_by(|a, b| {
        b.instructions
            .cmp(&a.instructions)
            .then_with(|| a.function.cmp(&b.function))
    });
    functions.truncate(KEPT);
    Hotspots { total, functions }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_sum_by_function_busiest_first() {
        // No ELF: every block is named by its address.
        let text = "op:10 0x100 10 4\nop:2 0x100 5 4\njob:0 0x100 1 1\ninterpreter 0x200 3 2\nnot a line\n";
        let h = read(text, Path::new("/nonexistent.elf"));
        assert_eq!(h.total, 67);
        assert_eq!(h.functions[0].function, "0x100");
        assert_eq!(h.functions[0].instructions, 61);
        assert_eq!(h.functions[0].runners, ["ops 2, 10", "job 0"]);
        assert_eq!(h.functions[1].runners, ["interpreter"]);
    }
}
