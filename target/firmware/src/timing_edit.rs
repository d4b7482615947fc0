//! An edit for the gate's own test (feature `edit-outside-timing`, never
//! in a release build): code and work outside every timed region. The
//! faults a test injects are the agent's (`fault-injection`).

/// An edit that touches no timed code: a CRC table built at start-up, its
/// code placed before everything else the firmware runs, so every later
/// address moves and the core executes a few thousand more instructions
/// before the first invoke. The gate's latency figures must not change.
#[cfg(feature = "edit-outside-timing")]
#[inline(never)]
pub(crate) fn edit_outside_timing() {
    let mut table = [0u32; 256];
    for (i, entry) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *entry = c;
    }
    core::hint::black_box(&table);
}
