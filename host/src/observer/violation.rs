//! An access violation in words: who made it (op and kind, or a job),
//! what (load or store, address, size), where in the code (the PC's
//! function), and which buffer the address belongs to with its lifetime,
//! e.g. "2 bytes past buffer 7 (tensor 12 `dw/out`, live 2..3), not a
//! buffer of op 3".

use std::path::Path;

use crate::model_file::ModelFile;
pub use crate::outcome::AccessViolation;
use crate::outcome::PlannedBuffer;

use super::results::RawViolation;

/// What the describer needs of the run.
#[derive(Debug)]
pub struct Context<'a> {
    /// The firmware ELF (for the PC's function).
    pub elf: &'a Path,
    /// The model (op and tensor names).
    pub model: &'a ModelFile,
    /// The committed plan.
    pub plan: &'a [PlannedBuffer],
    /// The arena's address range.
    pub arena: (u32, u32),
    /// The head's start, bytes from the arena's.
    pub head_start: u32,
    /// The head's end (its last buffer's guard included), bytes from the
    /// arena's: as the plan file tells the plugin.
    pub head_end: u32,
    /// The stack's range, if known.
    pub stack: Option<(u32, u32)>,
}

fn op_words(model: &ModelFile, op: u32) -> String {
    format!("op {op} ({})", model.op_name(op as usize))
}

impl Context<'_> {
    /// `raw` in words.
    pub fn describe(&self, raw: &RawViolation) -> AccessViolation {
        let runner_op = |prefix: &str| {
            raw.runner
                .strip_prefix(prefix)
                .and_then(|n| n.parse::<u32>().ok())
        };
        let (by, op) = if let Some(op) = runner_op("op:") {
            (op_words(self.model, op), Some(op))
        } else if let Some(op) = runner_op("job:") {
            (format!("the job of {}", op_words(self.model, op)), Some(op))
        } else {
            ("the interpreter".to_string(), None)
        };
        AccessViolation {
            invoke: raw.invoke,
            fault: raw.fault.clone(),
            by,
            store: raw.store,
            address: raw.addr,
            size: raw.size,
            pc: raw.pc,
            function: crate::elf::function_at(self.elf, raw.pc),
            place: self.place(raw, op),
        }
    }

    fn buffer_words(&self, n: usize) -> String {
        let b = &self.plan[n];
        let what = if b.kind == "tensor" {
            let name = self
                .model
                .tensor_names()
                .get(usize::from(b.index))
                .map_or("?", String::as_str);
            format!("tensor {} `{name}`", b.index)
        } else {
            format!("scratch of op {}", b.index)
        };
        format!(
            "buffer {n} ({what}, {} bytes, live {}..{})",
            b.size, b.first_step, b.last_step
        )
    }

    fn place(&self, raw: &RawViolation, op: Option<u32>) -> String {
        let addr = raw.addr;
        if raw.fault == "stack-overflow" {
            return match self.stack {
                Some((bottom, _)) if addr < bottom => format!(
                    "a stack access {} bytes below the stack's end ({bottom:#010x}): the stack overflowed{}",
                    bottom - addr,
                    if addr >= self.arena.0 && addr < self.arena.1 {
                        " into the arena"
                    } else {
                        ""
                    }
                ),
                _ => "a stack access outside the stack".to_string(),
            };
        }
        if addr < self.arena.0 || addr >= self.arena.1 {
            return "outside every section of the firmware and the peripheral windows".to_string();
        }
        let offset = addr - self.arena.0;
        let at = |b: &PlannedBuffer| self.head_start + b.offset;
        let relation = |n: usize| -> String {
            match (raw.fault.as_str(), op) {
                ("writes-input", Some(op)) => {
                    format!(", an input of op {op}: it may read it, not store into it")
                }
                ("held-by-job", _) => raw.in_flight.map_or_else(
                    || ", held by the job in flight".to_string(),
                    |j| format!(", held by the job of {} in flight", op_words(self.model, j)),
                ),
                (_, Some(op)) => {
                    let b = &self.plan[n];
                    let live = u32::from(b.first_step) <= op && op <= u32::from(b.last_step);
                    format!(
                        ", not a buffer of op {op}{}",
                        if live { "" } else { " (and not live then)" }
                    )
                }
                _ => String::new(),
            }
        };
        // Inside a buffer: the one live at the op if any (buffers that
        // reuse bytes share addresses).
        let mut inside: Vec<usize> = (0..self.plan.len())
            .filter(|&n| {
                let b = &self.plan[n];
                offset >= at(b) && offset < at(b) + b.size
            })
            .collect();
        if let Some(op) = op {
            inside.sort_by_key(|&n| {
                let b = &self.plan[n];
                !(u32::from(b.first_step) <= op && op <= u32::from(b.last_step))
            });
        }
        if raw.fault == "overwrites-live-buffer"
            && let (Some(op), [first, second, ..]) = (op, inside.as_slice())
        {
            // The plan put two buffers live at the op on the same bytes.
            return format!(
                "byte {} of {} and byte {} of {}: both live at op {op}, sharing these bytes (the plan overlaps them)",
                offset - at(&self.plan[*first]),
                self.buffer_words(*first),
                offset - at(&self.plan[*second]),
                self.buffer_words(*second),
            );
        }
        if let Some(&n) = inside.first() {
            let into = offset - at(&self.plan[n]);
            return format!("byte {into} of {}{}", self.buffer_words(n), relation(n));
        }
        // Past the end of the nearest buffer below.
        let below = (0..self.plan.len())
            .filter(|&n| at(&self.plan[n]) + self.plan[n].size <= offset)
            .max_by_key(|&n| at(&self.plan[n]) + self.plan[n].size);
        match below {
            Some(n) if offset < self.head_end => {
                let past = offset - (at(&self.plan[n]) + self.plan[n].size) + 1;
                // The buffer below may be the op's own (a kernel running
                // off its end): what counts is where the byte is.
                let relation = match (raw.fault.as_str(), op) {
                    ("not-its-buffer", Some(op)) => format!(", outside every buffer of op {op}"),
                    _ => relation(n),
                };
                format!(
                    "{past} byte{} past the end of {}{relation}",
                    if past == 1 { "" } else { "s" },
                    self.buffer_words(n),
                )
            }
            _ if offset < self.head_start => "in the arena's start guard".to_string(),
            _ => "in the arena's tail".to_string(),
        }
    }
}
