//! hilt's firmware: the model chosen at build time sits in flash, the arena
//! in its own linker section; the host drives everything with hilt-proto
//! frames over the board's transport: RTT (down channel 0: commands and
//! inputs; up channel 0: results; up channel 1: a panic's message) or a
//! UART (frames both ways, the panic message as a `Log` frame).

#![no_std]
#![no_main]

extern crate alloc;

mod cycles;
mod faults;
mod heap;
mod server;
#[cfg(hilt_uart)]
mod uart;
mod wire;

use cortex_m_rt::entry;

/// Build-time configuration (board, arena size, model): see `build.rs`.
mod config {
    include!(concat!(env!("OUT_DIR"), "/config.rs"));
}

/// 16-byte alignment for the model and the arena, as kernels view constant
/// data and activations as `i32`/`f32` slices in place.
#[repr(C, align(16))]
struct Aligned<T: ?Sized>(T);

/// The model, in flash.
static MODEL: &Aligned<[u8; config::MODEL_LEN]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/model.tflite")));

/// The tensor arena, in its own section so the map file and the host's
/// canary checks can find it (`__hilt_arena_start`).
#[unsafe(link_section = ".hilt_arena")]
static mut ARENA: Aligned<[u8; config::ARENA_SIZE]> = Aligned([0; config::ARENA_SIZE]);

/// What this ELF is for, read by the host before it runs the ELF on a board.
#[unsafe(link_section = ".hilt_meta")]
#[used]
static META: [u8; META_LEN] = meta();

const META_LEN: usize = 96;

const fn meta() -> [u8; META_LEN] {
    // "hilt-meta:1;board=NAME;" padded with zeros.
    let mut out = [0u8; META_LEN];
    let parts: [&[u8]; 3] = [b"hilt-meta:1;board=", config::BOARD.as_bytes(), b";"];
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

#[entry]
fn main() -> ! {
    let wire = wire::open();
    let peripherals = cortex_m::Peripherals::take().unwrap_or_else(|| server::halt());
    #[cfg(feature = "qemu")]
    let counter = cycles::Counter::start(peripherals.SYST);
    #[cfg(not(feature = "qemu"))]
    let counter = cycles::Counter::start(peripherals.DCB, peripherals.DWT);

    // SAFETY: the only reference to the arena, taken once before anything else runs.
    let arena: &'static mut [u8] = unsafe { &mut (*(&raw mut ARENA)).0 };
    server::run(&MODEL.0, arena, counter, wire)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    server::report_panic(info)
}
