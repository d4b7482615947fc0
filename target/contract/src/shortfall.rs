//! What does not fit a board's memory, by how much: the answer of a
//! board's budget check (`Board::check_budget`) and what
//! [`ConfigError::Budget`](crate::ConfigError::Budget) carries, with the
//! byte counts grouped for reading.
//!
//! Both the board (which checks) and the error type (which reports) name
//! it, so it is a leaf below both.

/// What does not fit one of a board's memories, by how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MemoryShortfall {
    /// The arena and the least stack exceed `RAM` (which also holds the
    /// firmware's data).
    #[error(
        "arena {} B + stack {} B do not fit RAM {} B (by {} B)",
        grouped(*arena),
        grouped(*stack),
        grouped(*ram),
        grouped(arena + stack - ram)
    )]
    Ram {
        /// Arena bytes.
        arena: u64,
        /// The least stack.
        stack: u64,
        /// `RAM`'s bytes.
        ram: u64,
    },
    /// The arena exceeds the board's `ARENA` region.
    #[error(
        "arena {} B does not fit the ARENA region {} B (by {} B)",
        grouped(*arena),
        grouped(*region),
        grouped(arena - region)
    )]
    ArenaRegion {
        /// Arena bytes.
        arena: u64,
        /// The region's bytes.
        region: u64,
    },
    /// The least stack exceeds `RAM` (the arena lives elsewhere).
    #[error("stack {} B does not fit RAM {} B", grouped(*stack), grouped(*ram))]
    Stack {
        /// The least stack.
        stack: u64,
        /// `RAM`'s bytes.
        ram: u64,
    },
    /// The model's slot leaves no `FLASH` for the code.
    #[error(
        "model slot {} B (the model and its {}-byte header) leaves no room for the code in \
         FLASH {} B (over by at least {} B)",
        grouped(*slot),
        hilt_proto::model_slot::HEADER,
        grouped(*flash),
        grouped(slot + 1 - flash)
    )]
    ModelSlot {
        /// The least slot holding the model.
        slot: u64,
        /// `FLASH`'s bytes.
        flash: u64,
    },
}

/// `1,000,000`: a byte count people read at a glance.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(131_072), "131,072");
        assert_eq!(grouped(1_000_000), "1,000,000");
    }

    #[test]
    fn shortfalls_say_what_does_not_fit_by_how_much() {
        let ram = MemoryShortfall::Ram {
            arena: 1_000_000,
            stack: 16_384,
            ram: 131_072,
        };
        assert_eq!(
            ram.to_string(),
            "arena 1,000,000 B + stack 16,384 B do not fit RAM 131,072 B (by 885,312 B)"
        );
        let slot = MemoryShortfall::ModelSlot {
            slot: 1_048_640,
            flash: 1_048_576,
        };
        assert_eq!(
            slot.to_string(),
            "model slot 1,048,640 B (the model and its 64-byte header) leaves no room for the \
             code in FLASH 1,048,576 B (over by at least 65 B)"
        );
    }
}
