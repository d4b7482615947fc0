//! The part QEMU calls: at translation, each instruction gets an inline
//! count (instructions, and its static cost in cycles), marks get a
//! callback, loads and stores get the access check, and a block ending in
//! a conditional branch tells the next block whether it was taken.
//!
//! QEMU runs these boards' one vCPU on one thread, and translation happens
//! on that thread too, so the state is a single-threaded cell reached only
//! from callbacks (see [`state`]).

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::fs::File;
use std::io::Write;

use qemu_plugin::install::{Args, Info, Value};
use qemu_plugin::plugin::{HasCallbacks, Register};
use qemu_plugin::sys::{qemu_plugin_cb_flags, qemu_plugin_mem_rw, qemu_plugin_op};
use qemu_plugin::{Error, PluginId, TranslationBlock, VCPUIndex};

use crate::checker::{Access, Checker, Fault, Runner};
use crate::control::{Control, Mark, Plan};
use crate::hotspots::Hotspots;
use crate::ledger::{Counts, Invoke, Ledger};
use crate::restart::{Block, BlockInsn, Restarts};
use crate::timing::{self, Core};

/// The counters QEMU's inline ops add to (their addresses must not move).
struct Counters {
    instructions: UnsafeCell<u64>,
    cycles: UnsafeCell<u64>,
    /// Blocks whose last instruction ran (see [`Restarts`]).
    finished_blocks: UnsafeCell<u64>,
}

/// Everything the callbacks share.
struct State {
    control: Control,
    core: Core,
    checker: Checker,
    plan_stamp: Option<std::time::SystemTime>,
    ledger: Ledger,
    out: File,
    counters: Box<Counters>,
    /// After a block ending in a conditional branch: where it falls through
    /// to, and what taking it costs.
    pending_branch: Option<(u64, u32)>,
    /// Violations written in this QEMU run, and all seen.
    kept: usize,
    seen: u64,
    /// A flash data access's cached line (the ART's data side, simplified
    /// to a small set of recent 16-byte lines).
    flash_lines: [u64; 8],
    flash_next: usize,
    /// Instructions QEMU abandons and runs again (peripheral accesses
    /// under `-icount`), so that each is counted once.
    restarts: Restarts,
    /// Block executions for `hilt run --hotspots`, and where they go.
    hotspots: Option<(String, Hotspots)>,
}

struct Cell(UnsafeCell<Option<State>>);

// SAFETY: reached only from QEMU's callbacks, which for a single-core
// Cortex-M machine all run on its one vCPU thread (the install and at-exit
// callbacks run while no vCPU does).
unsafe impl Sync for Cell {}

static STATE: Cell = Cell(UnsafeCell::new(None));

/// The shared state.
///
/// # Safety
/// Call only from a QEMU callback, and hold no other reference from an
/// earlier call.
#[allow(clippy::mut_from_ref)]
unsafe fn state() -> Option<&'static mut State> {
    // SAFETY: see the function's contract and `Cell`'s Sync.
    unsafe { (*STATE.0.get()).as_mut() }
}

impl State {
    fn counts(&self) -> Counts {
        // SAFETY: the inline ops write these on this same thread.
        unsafe {
            Counts {
                instructions: *self.counters.instructions.get(),
                cycles: *self.counters.cycles.get(),
            }
        }
    }

    fn add_cycles(&mut self, cycles: u64) {
        // SAFETY: as in `counts`.
        unsafe { *self.counters.cycles.get() += cycles }
    }

    /// A block is entered: takes back the count of an instruction it runs
    /// again after QEMU abandoned it in the previous block, and costs its
    /// first instruction against the one that really ran before it.
    fn enter_block(&mut self, start: u64, block: Block) {
        // SAFETY: as in `counts`.
        let finished = unsafe { *self.counters.finished_blocks.get() };
        let first = block.first().map(|i| i.insn);
        let entry = self.restarts.enter(start, block, finished);
        let mut back = entry.rerun.unwrap_or(0);
        // Costed again only when the pair pipelines (every block entry runs
        // this; most first instructions are not a load after a load).
        if let (Some(first), Some(previous)) = (first, entry.previous)
            && timing::pipelines_after(&previous, &first)
        {
            let alone = u64::from(timing::cost(self.core, &first, None).cycles);
            let after = u64::from(timing::cost(self.core, &first, Some(&previous)).cycles);
            back += alone.saturating_sub(after);
        }
        // SAFETY: as in `counts`.
        unsafe {
            if entry.rerun.is_some() {
                *self.counters.instructions.get() -= 1;
            }
            *self.counters.cycles.get() -= back;
        }
    }

    /// Reads the plan file when it is new or changed (the host writes it
    /// before the invoke that uses it).
    fn refresh_plan(&mut self) {
        let Ok(stamp) = std::fs::metadata(&self.control.plan).and_then(|m| m.modified()) else {
            return;
        };
        if self.plan_stamp == Some(stamp) {
            return;
        }
        self.plan_stamp = Some(stamp);
        match std::fs::read_to_string(&self.control.plan).map(|t| Plan::parse(&t)) {
            Ok(Ok(plan)) => self.checker = Checker::new(&self.control, Some(&plan)),
            Ok(Err(e)) => self.write(&format!("error plan {e}")),
            Err(e) => self.write(&format!("error plan {e}")),
        }
    }

    fn write(&mut self, line: &str) {
        // Unbuffered: the host reads the file as soon as the guest answers.
        let _ = writeln!(self.out, "{line}");
    }

    fn on_mark(&mut self, mark: Mark) {
        if mark == Mark::InvokeStart {
            self.refresh_plan();
        }
        let now = self.counts();
        if let Some(invoke) = self.ledger.mark(mark, now) {
            self.report(&invoke);
        }
    }

    fn report(&mut self, invoke: &Invoke) {
        let top = self.checker.stack().map(|s| s.end);
        let mut text = String::new();
        let mut deepest = 0;
        for (i, op) in invoke.ops.iter().enumerate() {
            let stack = match (top, op.stack_low) {
                (Some(top), Some(low)) => top.saturating_sub(low),
                _ => 0,
            };
            deepest = deepest.max(stack);
            text.push_str(&format!(
                "op invoke={} index={i} instructions={} cycles={} stack={stack}\n",
                invoke.number, op.counts.instructions, op.counts.cycles
            ));
        }
        text.push_str(&format!(
            "invoke invoke={} instructions={} cycles={} ops={} stack={deepest} violations={} engine_instructions={} engine_cycles={}",
            invoke.number,
            invoke.counts.instructions,
            invoke.counts.cycles,
            invoke.ops.len(),
            self.seen,
            invoke.engine.instructions,
            invoke.engine.cycles
        ));
        self.write(&text);
        self.write_hotspots();
    }

    /// Rewrites the hotspots file with the totals so far (QEMU may be
    /// stopped at any point after an invoke, so each invoke leaves it
    /// whole).
    fn write_hotspots(&mut self) {
        let Some((path, hotspots)) = &self.hotspots else {
            return;
        };
        let written = File::create(path).and_then(|mut f| {
            hotspots.write(&mut f)?;
            f.flush()
        });
        if let Err(e) = written {
            self.write(&format!("hotspots-error {e}"));
        }
    }

    fn on_access(&mut self, pc: u64, via_sp: bool, addr: u64, size: u64, store: bool) {
        if let Some(flash) = self.control.flash
            && !store
            && flash.span.holds(addr, 1)
        {
            let cycles = self.flash_data_wait(addr, flash.wait_states, flash.cache);
            self.add_cycles(cycles);
        }
        if !self.ledger.in_invoke() {
            return;
        }
        if let Some(stack) = self.checker.stack()
            && stack.holds(addr, size)
        {
            self.ledger.note_stack(addr);
        }
        if !self.control.checks {
            return;
        }
        let access = Access {
            addr,
            size,
            store,
            via_sp,
        };
        let runner = self.ledger.runner();
        if let Some(fault) = self.checker.check(runner, self.ledger.in_flight(), &access) {
            self.violation(fault, runner, &access, pc);
        }
    }

    /// Wait states of a data load from flash: none when the line is in the
    /// cache's data side, else the flash's.
    fn flash_data_wait(&mut self, addr: u64, wait_states: u32, cache: bool) -> u64 {
        if !cache {
            return u64::from(wait_states);
        }
        let line = addr >> 4;
        if self.flash_lines.contains(&line) {
            return 0;
        }
        self.flash_lines[self.flash_next] = line;
        self.flash_next = (self.flash_next + 1) % self.flash_lines.len();
        u64::from(wait_states)
    }

    fn violation(&mut self, fault: Fault, runner: Runner, a: &Access, pc: u64) {
        self.seen += 1;
        if self.kept >= self.control.max_violations {
            return;
        }
        self.kept += 1;
        let runner = match runner {
            Runner::Op(op) => format!("op:{op}"),
            Runner::Job(op) => format!("job:{op}"),
            Runner::Interpreter => "interpreter".into(),
        };
        let in_flight = self
            .ledger
            .in_flight()
            .map_or_else(|| "-".to_string(), |op| op.to_string());
        let line = format!(
            "violation invoke={} fault={} runner={runner} in_flight={in_flight} access={} addr={:#x} size={} pc={pc:#x}",
            self.ledger.invoke_number(),
            fault.word(),
            if a.store { "store" } else { "load" },
            a.addr,
            a.size
        );
        self.write(&line);
    }
}

/// The plugin QEMU installs.
#[derive(Debug, Default)]
pub struct Hilt;

impl Register for Hilt {
    fn register(&mut self, id: PluginId, args: &Args, _info: &Info) -> Result<(), Error> {
        let path = match args.parsed.get("control") {
            Some(Value::String(p)) => p.clone(),
            _ => return Err(Error::PluginInstanceSetError),
        };
        let fail = |why: String| {
            eprintln!("hilt-qemu-plugin: {path}: {why}");
            Error::PluginInstanceSetError
        };
        let text = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
        let control = Control::parse(&text).map_err(|e| fail(e.to_string()))?;
        let core = Core::parse(&control.core)
            .ok_or_else(|| fail(format!("unknown core `{}`", control.core)))?;
        let out = File::create(&control.out).map_err(|e| fail(format!("{}: {e}", control.out)))?;
        let checker = Checker::new(&control, None);
        let hotspots = control.hotspots.clone().map(|p| (p, Hotspots::default()));
        let fresh = State {
            control,
            core,
            checker,
            plan_stamp: None,
            ledger: Ledger::default(),
            out,
            counters: Box::new(Counters {
                instructions: UnsafeCell::new(0),
                cycles: UnsafeCell::new(0),
                finished_blocks: UnsafeCell::new(0),
            }),
            pending_branch: None,
            kept: 0,
            seen: 0,
            flash_lines: [u64::MAX; 8],
            flash_next: 0,
            restarts: Restarts::default(),
            hotspots,
        };
        // SAFETY: installation runs before any vCPU does.
        unsafe { *STATE.0.get() = Some(fresh) };
        qemu_plugin::qemu_plugin_register_atexit_cb(id, |_| {
            // SAFETY: at exit no vCPU runs.
            if let Some(s) = unsafe { state() } {
                let _ = s.out.flush();
            }
        })?;
        Ok(())
    }
}

impl HasCallbacks for Hilt {
    fn on_translation_block_translate(
        &mut self,
        _id: PluginId,
        tb: TranslationBlock,
    ) -> Result<(), Error> {
        // SAFETY: translation runs on the vCPU thread, between callbacks.
        let Some(s) = (unsafe { state() }) else {
            return Ok(());
        };
        translate(s, &tb)
    }
}

const INLINE_ADD: qemu_plugin_op = qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64;
const NO_REGS: qemu_plugin_cb_flags = qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS;

fn translate(s: &mut State, tb: &TranslationBlock) -> Result<(), Error> {
    let insns: Vec<_> = tb.instructions().collect();
    let decoded: Vec<_> = insns.iter().map(|i| timing::decode(&i.data())).collect();
    let costs = timing::block_costs(s.core, &decoded);
    let fetch_wait = fetch_wait_states(s, tb.vaddr());
    let instructions = s.counters.instructions.get() as *mut c_void;
    let cycles = s.counters.cycles.get() as *mut c_void;
    let start = tb.vaddr();
    let finished_blocks = s.counters.finished_blocks.get() as *mut c_void;
    let block = block_of(&insns, &costs, &decoded, fetch_wait);
    let length = insns.len() as u64;
    // Was the last block's conditional branch taken? Known only now, from
    // where execution went. And was the last block abandoned mid-way?
    tb.register_execute_callback_flags(
        move |_: VCPUIndex| {
            // SAFETY: an execution callback on the vCPU thread.
            if let Some(s) = unsafe { state() } {
                if s.hotspots.is_some() && s.ledger.in_invoke() {
                    let runner = s.ledger.runner();
                    if let Some((_, hotspots)) = &mut s.hotspots {
                        hotspots.enter(runner, start, length);
                    }
                }
                s.enter_block(start, block.clone());
                if let Some((fallthrough, extra)) = s.pending_branch.take()
                    && start != fallthrough
                {
                    s.add_cycles(u64::from(extra));
                }
            }
        },
        NO_REGS,
    );
    if let Some(last) = insns.last() {
        qemu_plugin::qemu_plugin_register_vcpu_insn_exec_inline(
            last.clone(),
            INLINE_ADD,
            finished_blocks,
            1,
        );
    }
    for ((insn, d), cost) in insns.iter().zip(&decoded).zip(&costs) {
        let pc = insn.vaddr();
        qemu_plugin::qemu_plugin_register_vcpu_insn_exec_inline(
            insn.clone(),
            INLINE_ADD,
            instructions,
            1,
        );
        let static_cycles = u64::from(cost.cycles) + fetch_wait;
        qemu_plugin::qemu_plugin_register_vcpu_insn_exec_inline(
            insn.clone(),
            INLINE_ADD,
            cycles,
            static_cycles,
        );
        if let Some(&mark) = s.control.marks.get(&pc) {
            insn.register_execute_callback_flags(
                move |_: VCPUIndex| {
                    // SAFETY: an execution callback on the vCPU thread.
                    if let Some(s) = unsafe { state() } {
                        s.on_mark(mark);
                    }
                },
                NO_REGS,
            );
        }
        if d.is_conditional_branch() && cost.taken_extra > 0 {
            let fallthrough = pc + u64::from(d.size());
            let extra = cost.taken_extra;
            insn.register_execute_callback_flags(
                move |_: VCPUIndex| {
                    // SAFETY: as above.
                    if let Some(s) = unsafe { state() } {
                        s.pending_branch = Some((fallthrough, extra));
                    }
                },
                NO_REGS,
            );
        }
        // Every instruction: QEMU calls back only for those that do access
        // memory, so no decoding mistake can leave a load unchecked.
        {
            let via_sp = crate::sp_access::via_sp(&insn.data());
            insn.register_memory_access_callback_flags(
                move |_: VCPUIndex, info: qemu_plugin::MemoryInfo<'_>, addr: u64| {
                    // SAFETY: as above.
                    if let Some(s) = unsafe { state() } {
                        let size = 1u64 << info.size_shift();
                        s.on_access(pc, via_sp, addr, size, info.is_store());
                    }
                },
                qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW,
                NO_REGS,
            );
        }
    }
    Ok(())
}

/// The block's instructions as [`Restarts`] needs them: address, the
/// cycles charged at its start, decoding.
fn block_of(
    insns: &[qemu_plugin::Instruction<'_>],
    costs: &[timing::Cost],
    decoded: &[timing::Insn],
    fetch_wait: u64,
) -> Block {
    insns
        .iter()
        .zip(costs)
        .zip(decoded)
        .map(|((insn, cost), d)| BlockInsn {
            pc: insn.vaddr(),
            cycles: u64::from(cost.cycles) + fetch_wait,
            insn: *d,
        })
        .collect()
}

/// Flash wait states each instruction of a block at `start` pays for its
/// fetch: none with a cache in front of the flash (the ART's instruction
/// side and prefetch hide them for loop code), else the flash's, spread
/// over the two 16-bit instructions a 32-bit fetch brings.
fn fetch_wait_states(s: &State, start: u64) -> u64 {
    match s.control.flash {
        Some(f) if !f.cache && f.span.holds(start, 1) => u64::from(f.wait_states).div_ceil(2),
        _ => 0,
    }
}

qemu_plugin::register!(Hilt);
