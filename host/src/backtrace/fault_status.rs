//! The firmware's HardFault line in words. hilt's HardFault handler sends
//! `hard fault: pc … cfsr … hfsr … mmfar … bfar …` (the fault status
//! registers of the System Control Block, on cores that have them; an
//! ARMv6-M core has none and sends the pc alone); the host says what the
//! bits mean, as a debugger's fault analysis does.

use hilt_proto::last_words::HARD_FAULT as PREFIX;

/// `line` (the firmware's `hard fault: …`) in words, e.g. `HardFault
/// (escalated): precise data bus error at 0xf0000000`; `None` when it is
/// not such a line.
pub fn describe(line: &str) -> Option<String> {
    let fields = line.trim().strip_prefix(PREFIX)?;
    let value = |key: &str| -> Option<u32> {
        let mut words = fields.split_whitespace();
        words.find(|w| *w == key)?;
        let hex = words.next()?.strip_prefix("0x")?;
        u32::from_str_radix(hex, 16).ok()
    };
    let mut text = String::from("HardFault");
    let Some(cfsr) = value("cfsr") else {
        // ARMv6-M: no fault status registers.
        return Some(text);
    };
    let hfsr = value("hfsr").unwrap_or(0);
    if hfsr & (1 << 30) != 0 {
        text.push_str(" (escalated)");
    }
    if hfsr & (1 << 1) != 0 {
        text.push_str(" (a vector table read failed)");
    }
    let causes = causes(cfsr, value("mmfar"), value("bfar"));
    if !causes.is_empty() {
        text.push_str(": ");
        text.push_str(&causes.join(", "));
    }
    Some(text)
}

/// What the Configurable Fault Status Register's bits say, the faulting
/// address where the core recorded one.
fn causes(cfsr: u32, mmfar: Option<u32>, bfar: Option<u32>) -> Vec<String> {
    let at = |valid_bit: u32, address: Option<u32>| match address {
        Some(a) if cfsr & (1 << valid_bit) != 0 => format!(" at {a:#010x}"),
        _ => String::new(),
    };
    // (bit, words, the valid bit and address register that say where).
    type Cause<'w> = (u32, &'w str, Option<(u32, Option<u32>)>);
    let bits: [Cause<'_>; 17] = [
        (0, "instruction fetch from a protected region", None),
        (1, "data access violation", Some((7, mmfar))),
        (3, "memory fault while unstacking", None),
        (4, "memory fault while stacking", None),
        (5, "memory fault while saving FPU state", None),
        (8, "instruction bus error", None),
        (9, "precise data bus error", Some((15, bfar))),
        (10, "imprecise data bus error", None),
        (11, "bus fault while unstacking", None),
        (12, "bus fault while stacking", None),
        (13, "bus fault while saving FPU state", None),
        (16, "undefined instruction", None),
        (
            17,
            "invalid state (an instruction set change, e.g. a branch to an even address)",
            None,
        ),
        (18, "invalid exception return", None),
        (
            19,
            "no coprocessor (an FPU instruction with the FPU off)",
            None,
        ),
        (24, "unaligned access", None),
        (25, "division by zero", None),
    ];
    let mut causes: Vec<String> = bits
        .iter()
        .filter(|(bit, ..)| cfsr & (1 << bit) != 0)
        .map(|(_, words, address)| {
            let place = address.map_or_else(String::new, |(valid, a)| at(valid, a));
            format!("{words}{place}")
        })
        .collect();
    if cfsr & (1 << 20) != 0 {
        causes.push("stack overflow (the stack limit register)".into());
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bus_fault_says_where() {
        let line = "hard fault: pc 0x00001234 cfsr 0x00008200 hfsr 0x40000000 mmfar 0xe000edf8 bfar 0xf0000000";
        assert_eq!(
            describe(line).unwrap(),
            "HardFault (escalated): precise data bus error at 0xf0000000"
        );
    }

    #[test]
    fn several_causes_are_listed_and_a_v6m_line_is_a_hardfault() {
        let line = "hard fault: pc 0x00000100 cfsr 0x02010000 hfsr 0x40000000";
        assert_eq!(
            describe(line).unwrap(),
            "HardFault (escalated): undefined instruction, division by zero"
        );
        assert_eq!(describe("hard fault: pc 0x00000100").unwrap(), "HardFault");
        assert_eq!(describe("panic: at x.rs:1:1"), None);
    }
}
