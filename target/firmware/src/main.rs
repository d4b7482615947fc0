//! hilt's board binaries: each sets up its board, opens the wire the board
//! file names — RTT (down channel 0: commands and inputs; up channel 0:
//! results; up channel 1: a panic's message) or a UART (frames both ways,
//! the panic message as a `Log` frame) — starts the cycle counter, and hands
//! over to `hilt-agent`, which serves the host. The model chosen at build
//! time sits in flash, the arena in its own linker section (`build.rs`).

#![no_std]
#![no_main]

extern crate alloc;

mod heap;
mod timing_edit;
#[cfg(hilt_uart)]
mod uart;
mod wire;

use cortex_m_rt::entry;
#[cfg(hilt_vnpu)]
use hilt_agent::TickVnpu;
use hilt_agent::runtime::accel::vnpu::{NEGATE, NEGATE_NAME};
use hilt_agent::{Agent, Line};

/// Build-time configuration and statics (board, model, arena): `build.rs`.
mod hilt {
    include!(concat!(env!("OUT_DIR"), "/hilt.rs"));
}

/// SysTick under QEMU, where DWT's CYCCNT reads 0 but SysTick under
/// `-icount` counts instructions deterministically.
#[cfg(feature = "qemu")]
type Counter = hilt_agent::SysTickCounter;
/// DWT CYCCNT on real cores: true cycles.
#[cfg(not(feature = "qemu"))]
type Counter = hilt_agent::DwtCounter;

/// The virtual NPU the host may offload ops to (`SetOffload`): stepped by
/// SysTick, computing in PendSV. A firmware built with `HILT_ENGINE=none`
/// has none (the host asks it for no offload).
#[cfg(hilt_vnpu)]
static VNPU: TickVnpu = TickVnpu::new();

#[entry]
fn main() -> ! {
    #[cfg(feature = "edit-outside-timing")]
    timing_edit::edit_outside_timing();
    #[cfg(feature = "silent-until-power-cycled")]
    while !host_file_exists(b"hilt-power-cycled\0") {}
    let wire = wire::open();
    // After the wire opens, so that the panic's message reaches the host.
    #[cfg(feature = "flaky-first-attempt")]
    fail_first_attempt();
    let peripherals = cortex_m::Peripherals::take().unwrap_or_else(|| halt());
    #[cfg(feature = "qemu")]
    let counter = Counter::start(peripherals.SYST);
    #[cfg(not(feature = "qemu"))]
    let counter = Counter::start(peripherals.DCB, peripherals.DWT).with_tick(peripherals.SYST);
    #[cfg(hilt_vnpu)]
    VNPU.start(Counter::read);
    let agent = Agent::new(hilt::config(), wire, counter);
    #[cfg(hilt_vnpu)]
    let agent = agent.offload_engine(&VNPU);
    let agent = agent.planner(hilt::PLANNER);

    let resolver = kernels();
    // SAFETY: the only call, before anything else touches the statics.
    let parts = unsafe { hilt::take() };
    let error = match agent.start(parts, resolver) {
        Ok(mut session) => session.run(),
        Err(e) => e,
    };
    let mut line = Line::default();
    line.push("wire to the host: ").push(error.as_str());
    stop(&line)
}

/// The kernel table: every kernel, or the model's only (`kernels =
/// "model"`), and vnpu's own custom op, so a model carrying it runs (on the
/// CPU, or claimed by the engine). In a static rather than in `main`'s
/// frame, which every invoke sits on (up to 96 entries, 2.7 KiB: on a part
/// with 64 KiB of RAM that is stack the arena needs); built out of line so
/// that its temporaries leave no room in that frame either.
#[inline(never)]
fn kernels() -> &'static hilt::Resolver {
    static mut KERNELS: Option<hilt::Resolver> = None;
    let mut resolver = hilt::resolver();
    let _ = resolver.add_custom(NEGATE_NAME, NEGATE);
    let kernels = &raw mut KERNELS;
    // SAFETY: called once, from `main`, before anything reads the static.
    unsafe { (*kernels).insert(resolver) }
}

/// Counts SysTick's wraps into the counter's high word (QEMU), and grants
/// the engine its tick.
#[cortex_m_rt::exception]
fn SysTick() {
    #[cfg(feature = "qemu")]
    Counter::on_wrap();
    #[cfg(hilt_vnpu)]
    VNPU.on_tick();
}

/// The engine: steps the job and runs its kernel when its time is up.
#[cfg(hilt_vnpu)]
#[cortex_m_rt::exception]
fn PendSV() {
    // SAFETY: this is the PendSV handler.
    unsafe { VNPU.on_pendsv() }
}

/// Whether `name` (NUL-terminated) is a file in QEMU's working folder, read
/// through semihosting (SYS_OPEN's mode 0 is "r").
#[cfg(any(feature = "flaky-first-attempt", feature = "silent-until-power-cycled"))]
fn host_file_exists(name: &[u8]) -> bool {
    use cortex_m_semihosting::syscall;
    // SAFETY: semihosting calls on a NUL-terminated name of `len` bytes.
    let handle = unsafe { syscall!(OPEN, name.as_ptr(), 0, name.len() - 1) } as isize;
    if handle >= 0 {
        // SAFETY: closes the handle just opened.
        unsafe { syscall!(CLOSE, handle) };
    }
    handle >= 0
}

/// The `flaky-first-attempt` feature: panics unless the marker file is in
/// QEMU's working folder, creating it first, so the first run in a folder
/// fails and every later one runs.
#[cfg(feature = "flaky-first-attempt")]
fn fail_first_attempt() {
    use cortex_m_semihosting::syscall;
    const MARKER: &[u8] = b"hilt-flaky-first-attempt\0";
    if host_file_exists(MARKER) {
        return;
    }
    // SAFETY: semihosting calls on a NUL-terminated name; mode 4 is "w".
    let created = unsafe { syscall!(OPEN, MARKER.as_ptr(), 4, MARKER.len() - 1) } as isize;
    if created >= 0 {
        // SAFETY: closes the handle just opened.
        unsafe { syscall!(CLOSE, created) };
    }
    panic!("flaky-first-attempt: the first run in this folder fails");
}

/// Stops here for good (the host sees no more frames and times out).
fn halt() -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}

/// Reports where the firmware panicked, without `core::fmt` (so a size
/// build links none of it): the place, and the message when it is a fixed
/// text (a formatted one, such as an index out of bounds, is known by its
/// place).
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let mut line = Line::default();
    line.push(hilt_agent::proto::last_words::PANIC)
        .push("panicked at ");
    if let Some(at) = info.location() {
        line.push(at.file())
            .push(":")
            .push_decimal(at.line())
            .push(":")
            .push_decimal(at.column());
    }
    line.push(":\n")
        .push(info.message().as_str().unwrap_or("(a formatted message)"));
    stop(&line)
}

/// A HardFault (a wild pointer, an undefined instruction, any fault
/// escalated because its own handler is off): the pc it happened at and
/// the fault status registers (ARMv7-M and ARMv8-M.main have them; the
/// host says what their bits mean) go to the host as the firmware's last
/// line, then the core stops here, its stack as the fault left it, for the
/// host to read and unwind into a backtrace.
#[cortex_m_rt::exception]
unsafe fn HardFault(frame: &cortex_m_rt::ExceptionFrame) -> ! {
    let mut line = Line::default();
    line.push(hilt_agent::proto::last_words::HARD_FAULT)
        .push("pc ")
        .push_hex(frame.pc());
    #[cfg(hilt_fault_status)]
    {
        let status = [
            (" cfsr ", 0xE000_ED28usize),
            (" hfsr ", 0xE000_ED2C),
            (" mmfar ", 0xE000_ED34),
            (" bfar ", 0xE000_ED38),
        ];
        for (name, address) in status {
            // SAFETY: a read of a System Control Block register.
            let value = unsafe { core::ptr::read_volatile(address as *const u32) };
            line.push(name).push_hex(value);
        }
    }
    stop(&line)
}

/// Sends the firmware's last line, and stops: the core waits where it is,
/// for the host to read its registers and stack (a backtrace), and to end
/// the run. Only a firmware that could not say anything (no wire open yet)
/// ends QEMU itself, failed, so that the host sees that at once.
fn stop(line: &Line) -> ! {
    let said = wire::report_panic_line(line.as_str());
    #[cfg(feature = "qemu")]
    if !said {
        cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    }
    #[cfg(not(feature = "qemu"))]
    let _ = said;
    halt()
}
