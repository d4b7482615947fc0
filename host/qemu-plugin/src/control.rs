//! What the host tells the plugin, in two small text files: the control
//! file (named by the plugin's `control=` argument, written before QEMU
//! starts: the firmware's marks and memory, the core and its wait states)
//! and the plan file (written once the board has committed its arena plan,
//! before the first invoke: the arena, its buffers and each op's buffers).
//!
//! One item per line, words separated by spaces, numbers in decimal or
//! `0x` hex, `#` starting a comment. Text, not JSON: the plugin has no
//! dependencies beyond QEMU's API, and the files are read in microseconds.

use std::collections::HashMap;

/// Where a mark is and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mark {
    /// An invoke starts.
    InvokeStart,
    /// The next op's kernel (or job submission) starts.
    OpStart,
    /// The op's kernel returned.
    OpDone,
    /// The invoke ended.
    InvokeEnd,
    /// The current op's job was handed to an engine.
    JobSubmitted,
    /// The engine starts computing the job in flight.
    JobStart,
    /// The engine finished it.
    JobEnd,
    /// The job was waited and retired.
    JobRetired,
}

impl Mark {
    /// Every mark, with the symbol the firmware defines for it.
    pub const ALL: [(Mark, &'static str); 8] = [
        (Mark::InvokeStart, "hilt_mark_invoke_start"),
        (Mark::OpStart, "hilt_mark_op_start"),
        (Mark::OpDone, "hilt_mark_op_done"),
        (Mark::InvokeEnd, "hilt_mark_invoke_end"),
        (Mark::JobSubmitted, "hilt_mark_job_submitted"),
        (Mark::JobStart, "hilt_mark_job_start"),
        (Mark::JobEnd, "hilt_mark_job_end"),
        (Mark::JobRetired, "hilt_mark_job_retired"),
    ];

    fn from_symbol(name: &str) -> Option<Mark> {
        Mark::ALL.iter().find(|(_, s)| *s == name).map(|(m, _)| *m)
    }
}

/// A range of guest addresses, `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First address.
    pub start: u64,
    /// One past the last.
    pub end: u64,
}

impl Span {
    /// Whether `[addr, addr + size)` lies wholly inside.
    pub fn holds(&self, addr: u64, size: u64) -> bool {
        addr >= self.start && addr.saturating_add(size) <= self.end
    }

    /// Whether `[addr, addr + size)` meets it at all.
    pub fn meets(&self, addr: u64, size: u64) -> bool {
        addr < self.end && addr.saturating_add(size) > self.start
    }
}

/// Flash as the timing model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flash {
    /// Its addresses.
    pub span: Span,
    /// Wait states per access that misses the cache.
    pub wait_states: u32,
    /// Whether an ART-style cache sits in front of it.
    pub cache: bool,
}

/// The control file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// Where results go.
    pub out: String,
    /// Where the plan appears.
    pub plan: String,
    /// The core's name (for the timing model).
    pub core: String,
    /// Each mark's address (Thumb bit clear).
    pub marks: HashMap<u64, Mark>,
    /// Memory any op may touch besides the arena: code and read-only data,
    /// statics, peripherals.
    pub allowed: Vec<(String, Span)>,
    /// The stack's range (it grows down from `end`).
    pub stack: Option<Span>,
    /// Flash timing.
    pub flash: Option<Flash>,
    /// Whether accesses are checked (counts and cycles always are).
    pub checks: bool,
    /// Violations kept per run (the rest are only counted).
    pub max_violations: usize,
    /// Where per-block execution counts go (`hilt run --hotspots`).
    pub hotspots: Option<String>,
}

/// A line that could not be read, with its number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub problem: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.problem)
    }
}

/// A number in decimal or `0x` hex.
pub fn number(word: &str) -> Option<u64> {
    match word.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => word.parse().ok(),
    }
}

/// The words of each non-empty, non-comment line, with its number.
fn lines(text: &str) -> impl Iterator<Item = (usize, Vec<&str>)> {
    text.lines().enumerate().filter_map(|(i, l)| {
        let l = l.split('#').next().unwrap_or("").trim();
        (!l.is_empty()).then(|| (i + 1, l.split_whitespace().collect()))
    })
}

fn need<'a>(words: &[&'a str], i: usize, line: usize, what: &str) -> Result<&'a str, ParseError> {
    words.get(i).copied().ok_or_else(|| ParseError {
        line,
        problem: format!("`{}` needs {what}", words[0]),
    })
}

fn num(words: &[&str], i: usize, line: usize, what: &str) -> Result<u64, ParseError> {
    let w = need(words, i, line, what)?;
    number(w).ok_or_else(|| ParseError {
        line,
        problem: format!("{what} `{w}` is not a number"),
    })
}

fn span(words: &[&str], i: usize, line: usize) -> Result<Span, ParseError> {
    let start = num(words, i, line, "a start address")?;
    let len = num(words, i + 1, line, "a length")?;
    Ok(Span {
        start,
        end: start.saturating_add(len),
    })
}

impl Control {
    /// Reads the control file's text.
    pub fn parse(text: &str) -> Result<Control, ParseError> {
        let mut c = Control {
            out: String::new(),
            plan: String::new(),
            core: "cortex-m4".into(),
            marks: HashMap::new(),
            allowed: Vec::new(),
            stack: None,
            flash: None,
            checks: true,
            max_violations: 16,
            hotspots: None,
        };
        for (line, w) in lines(text) {
            match w[0] {
                "out" => c.out = need(&w, 1, line, "a path")?.into(),
                "plan" => c.plan = need(&w, 1, line, "a path")?.into(),
                "core" => c.core = need(&w, 1, line, "a core name")?.into(),
                "checks" => c.checks = need(&w, 1, line, "on or off")? == "on",
                "max_violations" => c.max_violations = num(&w, 1, line, "a count")? as usize,
                "hotspots" => c.hotspots = Some(need(&w, 1, line, "a path")?.into()),
                "mark" => {
                    let name = need(&w, 1, line, "a symbol")?;
                    let mark = Mark::from_symbol(name).ok_or_else(|| ParseError {
                        line,
                        problem: format!("unknown mark `{name}`"),
                    })?;
                    let at = num(&w, 2, line, "an address")? & !1;
                    if let Some(other) = c.marks.insert(at, mark) {
                        return Err(ParseError {
                            line,
                            problem: format!(
                                "`{name}` shares address {at:#x} with {other:?}: the firmware's marks were merged"
                            ),
                        });
                    }
                }
                "region" => {
                    let name = need(&w, 1, line, "a name")?.to_string();
                    c.allowed.push((name, span(&w, 2, line)?));
                }
                "stack" => c.stack = Some(span(&w, 1, line)?),
                "flash" => {
                    c.flash = Some(Flash {
                        span: span(&w, 1, line)?,
                        wait_states: num(&w, 3, line, "wait states")? as u32,
                        cache: need(&w, 4, line, "cache or nocache")? == "cache",
                    })
                }
                other => {
                    return Err(ParseError {
                        line,
                        problem: format!("unknown item `{other}`"),
                    });
                }
            }
        }
        if c.out.is_empty() {
            return Err(ParseError {
                line: 0,
                problem: "no `out` path".into(),
            });
        }
        Ok(c)
    }
}

/// One planned buffer: where it is in the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buffer {
    /// Offset from the arena's base.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
    /// The first and last op (step) it is live at, when the plan says.
    pub live: Option<(u64, u64)>,
}

/// What one op may touch in the arena's planned head: its buffers, and
/// which of them it writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpBuffers {
    /// Buffer numbers it reads or writes.
    pub uses: Vec<usize>,
    /// Of those, the ones it writes (a job in flight holds these).
    pub writes: Vec<usize>,
}

/// The plan file: the committed arena.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The arena's address and length.
    pub arena: Option<Span>,
    /// Bytes of the planned head (from the arena's base).
    pub head: u64,
    /// Buffers by number.
    pub buffers: Vec<Buffer>,
    /// Per op.
    pub ops: Vec<OpBuffers>,
}

fn list(words: &[&str], from: usize, line: usize) -> Result<Vec<usize>, ParseError> {
    let Some(w) = words.get(from) else {
        return Ok(Vec::new());
    };
    if *w == "-" {
        return Ok(Vec::new());
    }
    w.split(',')
        .map(|n| {
            n.parse().map_err(|_| ParseError {
                line,
                problem: format!("buffer number `{n}` is not a number"),
            })
        })
        .collect()
}

impl Plan {
    /// Reads the plan file's text: `arena ADDR LEN head BYTES`, then
    /// `buffer OFFSET SIZE [FIRST LAST]` lines (numbered from 0 in order;
    /// the steps it is live at, inclusive) and
    /// `op USES WRITES` lines (comma-separated buffer numbers, `-` for
    /// none; numbered from 0 in order).
    pub fn parse(text: &str) -> Result<Plan, ParseError> {
        let mut p = Plan::default();
        for (line, w) in lines(text) {
            match w[0] {
                "arena" => {
                    p.arena = Some(span(&w, 1, line)?);
                    p.head = num(&w, 4, line, "the head's bytes")?;
                }
                "buffer" => p.buffers.push(Buffer {
                    offset: num(&w, 1, line, "an offset")?,
                    size: num(&w, 2, line, "a size")?,
                    live: match w.len() {
                        3 => None,
                        _ => Some((
                            num(&w, 3, line, "a first step")?,
                            num(&w, 4, line, "a last step")?,
                        )),
                    },
                }),
                "op" => {
                    let uses = list(&w, 1, line)?;
                    let writes = list(&w, 2, line)?;
                    if let Some(&bad) = uses.iter().chain(&writes).find(|&&b| b >= p.buffers.len())
                    {
                        return Err(ParseError {
                            line,
                            problem: format!(
                                "op names buffer {bad}, which is not listed before it"
                            ),
                        });
                    }
                    p.ops.push(OpBuffers { uses, writes });
                }
                other => {
                    return Err(ParseError {
                        line,
                        problem: format!("unknown item `{other}`"),
                    });
                }
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_file_names_marks_regions_and_flash() {
        let c = Control::parse(
            "out /tmp/o\nplan /tmp/p\ncore cortex-m0plus\n\
             mark hilt_mark_op_start 0x1235 # thumb bit\n\
             region code 0x0 0x1000\nstack 0x20000000 0x800\n\
             flash 0x0 0x400000 5 cache\nchecks off\nhotspots /tmp/hot\n",
        )
        .unwrap();
        assert_eq!(c.hotspots.as_deref(), Some("/tmp/hot"));
        assert_eq!(c.marks.get(&0x1234), Some(&Mark::OpStart));
        assert_eq!(c.core, "cortex-m0plus");
        assert_eq!(c.stack.unwrap().end, 0x2000_0800);
        assert_eq!(c.flash.unwrap().wait_states, 5);
        assert!(c.flash.unwrap().cache);
        assert!(!c.checks);
    }

    #[test]
    fn two_marks_at_one_address_are_refused() {
        let e =
            Control::parse("out o\nmark hilt_mark_op_start 0x100\nmark hilt_mark_op_done 0x101\n")
                .unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.problem.contains("merged"), "{e}");
    }

    #[test]
    fn unknown_items_and_bad_numbers_are_named_with_their_line() {
        assert!(
            Control::parse("out o\nfrob 1\n")
                .unwrap_err()
                .problem
                .contains("`frob`")
        );
        let e = Control::parse("out o\nregion x 0xzz 4\n").unwrap_err();
        assert_eq!(
            (e.line, e.problem.as_str()),
            (2, "a start address `0xzz` is not a number")
        );
        assert!(
            Control::parse("core m4\n")
                .unwrap_err()
                .problem
                .contains("out")
        );
    }

    #[test]
    fn a_plan_lists_buffers_then_ops() {
        let p = Plan::parse(
            "arena 0x20001000 0x1000 head 0x200\nbuffer 0 64 0 1\nbuffer 64 32\nop 0,1 1\nop 1 -\n",
        )
        .unwrap();
        assert_eq!(p.arena.unwrap().start, 0x2000_1000);
        assert_eq!(p.head, 0x200);
        assert_eq!(p.ops[0].uses, vec![0, 1]);
        assert_eq!(p.ops[0].writes, vec![1]);
        assert!(p.ops[1].writes.is_empty());
        assert_eq!((p.buffers[0].live, p.buffers[1].live), (Some((0, 1)), None));
        let e = Plan::parse("buffer 0 4\nop 0,3 -\n").unwrap_err();
        assert!(e.problem.contains("buffer 3"), "{e}");
    }
}
