//! Cache maintenance: what the CPU must do so that an engine behind its
//! data cache sees the bytes the CPU wrote, and the CPU sees the bytes the
//! engine wrote.
//!
//! On a core with a data cache (Cortex-M7, M55, M85) and an engine that
//! reads memory directly, a buffer the CPU wrote is *cleaned* (written back)
//! before the engine reads it, and a buffer the engine wrote is
//! *invalidated* (dropped from the cache) before the CPU reads it. Both act
//! on whole cache lines, which is why the plan gives every buffer an engine
//! touches whole lines of its own: invalidating a line shared with a
//! CPU-written neighbour would throw the neighbour's bytes away.

/// Clean / invalidate by address range (a hardware seam: the core's cache
/// operations on a target, a no-op on coherent systems, vnpu's shadow copy
/// in its non-coherent mode).
pub trait CacheMaintenance {
    /// Cache line size in bytes (a power of two; 1 when there is no cache).
    fn line_size(&self) -> u32;
    /// Writes the lines covering `[address, address + len)` back to memory,
    /// so that an engine reading memory sees the CPU's writes.
    fn clean(&self, address: usize, len: usize);
    /// Drops the lines covering `[address, address + len)` from the cache,
    /// so that the CPU's next reads fetch what the engine wrote.
    fn invalidate(&self, address: usize, len: usize);
}

/// Coherent memory (no data cache between CPU and engine, or hardware
/// coherency): every operation is a no-op.
#[derive(Debug, Clone, Copy, Default)]
pub struct Coherent;

impl CacheMaintenance for Coherent {
    fn line_size(&self) -> u32 {
        1
    }
    fn clean(&self, _address: usize, _len: usize) {}
    fn invalidate(&self, _address: usize, _len: usize) {}
}

/// The whole lines of size `line` (a power of two) that cover
/// `[address, address + len)`: `(first byte, length)`.
pub const fn line_span(address: usize, len: usize, line: usize) -> (usize, usize) {
    let start = address & !(line - 1);
    let end = (address + len + line - 1) & !(line - 1);
    (start, end - start)
}
