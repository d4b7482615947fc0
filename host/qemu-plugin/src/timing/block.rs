//! Costing an instruction in context: the per-core base cost plus load/store pipelining with
//! the previous instruction of the same straight-line block.

use super::core::Core;
use super::cores::base_cost;
use super::insn::{Class, Insn, NO_REG};

/// What an instruction costs on a core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cost {
    /// Cycles when executed; for a conditional branch, the NOT-taken cost.
    pub cycles: u32,
    /// Extra cycles when a conditional branch is taken (0 for everything else; unconditional
    /// branches, calls, returns and other PC writes include their pipeline refill in `cycles`).
    pub taken_extra: u32,
}

/// What `insn` costs on `core`, given the instruction before it in the same block.
///
/// Pipelining (M3, M4, M33, M7, M55 only; the M0+ has none): a single load or store costs 1
/// instead of 2 when [`pipelines_after`] holds for it and `previous`.
pub fn cost(core: Core, insn: &Insn, previous: Option<&Insn>) -> Cost {
    let (mut cycles, taken_extra) = base_cost(core, insn);
    if core != Core::M0Plus && previous.is_some_and(|prev| pipelines_after(prev, insn)) {
        cycles = cycles.saturating_sub(1).max(1);
    }
    Cost {
        cycles,
        taken_extra,
    }
}

/// Costs of a straight-line block, in order; each instruction is costed with its predecessor
/// in the block (the first one with none).
pub fn block_costs(core: Core, insns: &[Insn]) -> Vec<Cost> {
    insns
        .iter()
        .enumerate()
        .map(|(i, insn)| cost(core, insn, i.checked_sub(1).map(|p| &insns[p])))
        .collect()
}

/// The exact pipelining condition the model applies (M3/M4 family).
///
/// Sources: M4 TRM (ARM DDI 0439) Table 3-1 footnote on loads/stores: neighbouring load and
/// store single instructions can pipeline their address and data phases; and M4 TRM / M3 TRM
/// (ARM DDI 0337) section "Load/store timings", which refines it: one cycle is removed from
/// an LDR/STR that follows an LDR when the first one's destination is not used to compute the
/// second one's address; LDREX/STREX pipeline like LDR; LDRD/STRD do not pipeline; nothing
/// pipelines after an STR with a register offset; LDR PC is blocking.
///
/// So `current` costs one cycle less when all of these hold:
/// 1. `current` is a single load or store (LDR*/STR*/LDREX*/STREX*, any addressing mode),
///    and does not write the PC;
/// 2. `previous` is a single load or store that does not write the PC (not LDRD/STRD,
///    LDM/STM, FP loads, TBB/TBH);
/// 3. `previous` is not a store with a register offset;
/// 4. the register `previous` loaded (or the STREX status register) is neither the base nor
///    the offset register of `current`.
///
/// Not modelled: the extra cycle an address dependent on the preceding data-processing result
/// costs, and the possible fetch contention of PC-relative (literal) loads.
pub fn pipelines_after(previous: &Insn, current: &Insn) -> bool {
    let single = |i: &Insn| matches!(i.class, Class::Load | Class::Store) && !i.writes_pc;
    if !single(previous) || !single(current) {
        return false;
    }
    if previous.class == Class::Store && previous.register_offset() {
        return false;
    }
    let dep = previous.dest;
    dep == NO_REG || (dep != current.base && dep != current.offset)
}
