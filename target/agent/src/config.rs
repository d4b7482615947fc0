//! What the agent says about itself in its Hello, how it lays out the
//! arena, and what a firmware ELF must carry for the host to accept it.

use hilt_runtime::allocation::AllocOptions;

/// The facts of one firmware image: `hilt-firmware-build` writes a
/// `config()` from the board file and the scenario (the model's name and
/// CRC-32 read from the model slot, which the host rewrites per model), so
/// the host's Hello check and the firmware agree.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The board name, as in `boards/NAME.toml` (the host checks it).
    pub board: &'static str,
    /// The embedded model's file name (start-up log only).
    pub model_name: &'static str,
    /// CRC-32 of the embedded model: the host refuses a board running
    /// another model than the scenario's.
    pub model_hash: u32,
    /// Core clock in Hz, so the host can turn cycles into time.
    pub clock_hz: u32,
    /// Activation alignment and canary mode for the arena plan.
    pub alloc: AllocOptions,
}

/// 64-byte alignment for the model and the arena: kernels view constant
/// data and activations as `i32`/`f32` slices in place, and an engine's
/// buffers are placed in whole cache lines by absolute address, so the
/// arena starts on a line boundary on every build (the plan, tail included,
/// is then the same whatever else the firmware holds, and the host's
/// `hilt layout` for the board gives it byte for byte).
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Aligned<T: ?Sized>(pub T);

/// Bytes of the `.hilt_meta` record.
pub const META_LEN: usize = 96;

/// The `.hilt_meta` record, `hilt-meta:1;board=NAME;` padded with zeros:
/// the host reads it from the ELF before it runs the image on a board, so a
/// firmware built for another board is refused before it is flashed. A
/// name longer than the record is cut (board names are short).
pub const fn meta(board: &str) -> [u8; META_LEN] {
    let mut out = [0u8; META_LEN];
    let parts: [&[u8]; 3] = [b"hilt-meta:1;board=", board.as_bytes(), b";"];
    let mut at = 0;
    let mut p = 0;
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() && at < META_LEN {
            out[at] = parts[p][i];
            at += 1;
            i += 1;
        }
        p += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn meta_names_the_board_and_pads_with_zeros() {
        let m = super::meta("qemu-x");
        assert_eq!(&m[..25], b"hilt-meta:1;board=qemu-x;");
        assert!(m[25..].iter().all(|&b| b == 0));
    }
}
