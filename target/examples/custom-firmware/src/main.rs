//! A product's own firmware with hilt inside: its own start-up, its own
//! UART driver and heap, its own planner choice — and `hilt-agent`, so that
//! `hilt run --board qemu-mps2-an386-custom` tests this very binary (built
//! from here because the board file says `firmware =
//! "target/examples/custom-firmware"`).
//!
//! What hilt needs from it is the few lines marked `hilt:` below; the rest
//! is what any firmware has. With the `defmt` feature it also logs with
//! defmt over RTT (the lines marked `defmt:`), and `hilt run` shows the
//! decoded log per board.

#![no_std]
#![no_main]

extern crate alloc;

#[cfg(feature = "defmt")]
mod clock;
mod heap;
#[cfg(feature = "npu-driver")]
mod npu;
mod uart;

// defmt: the global logger, on RTT up channel "defmt" (hilt reads it by
// that name while the session runs over the UART), and the timestamp of
// every line: microseconds since boot, from TIMER0 (SysTick is hilt's
// cycle counter, which the agent restarts before each timed invoke).
#[cfg(feature = "defmt")]
use defmt_rtt as _;
#[cfg(feature = "defmt")]
defmt::timestamp!("{=u64:us}", clock::micros());

use core::fmt::Write as _;

use cortex_m_rt::{entry, exception};
#[cfg(not(any(feature = "port-first-fit", feature = "port-broken")))]
use hilt_agent::PlannerKind;
#[cfg(not(feature = "npu-driver"))]
use hilt_agent::TickVnpu;
use hilt_agent::{Agent, Line, NoPin, SysTickCounter, WireError};

use crate::uart::CmsdkUart;

// hilt: the board, model and arena `hilt run` asked for (build.rs).
mod hilt {
    include!(concat!(env!("OUT_DIR"), "/hilt.rs"));
}

/// The MPS2 AN386's UART0 and its clock.
const UART0: usize = 0x4000_4000;
const UART_CLOCK_HZ: u32 = 25_000_000;
const BAUD: u32 = 115_200;

// hilt: the virtual NPU the host may offload ops to (`--accelerator vnpu`);
// a product with a real NPU hands the agent its own driver instead, as the
// feature `npu-driver` does (src/npu.rs).
#[cfg(not(feature = "npu-driver"))]
static VNPU: TickVnpu = TickVnpu::new();
#[cfg(feature = "npu-driver")]
use npu::NPU as VNPU;

#[entry]
fn main() -> ! {
    // The product's own start-up.
    let peripherals = cortex_m::Peripherals::take().unwrap_or_else(|| stop());
    // SAFETY: UART0 is this firmware's, and only this driver touches it.
    let uart = unsafe { CmsdkUart::new(UART0, UART_CLOCK_HZ, BAUD) };

    // hilt: a counter (SysTick: the one that counts under QEMU), the
    // kernels, the statics, and the agent on the product's UART.
    let counter = SysTickCounter::start(peripherals.SYST);
    #[cfg(feature = "defmt")]
    {
        clock::start();
        defmt::info!(
            "custom-firmware up: board {=str}, core clock {=u32} Hz, hilt over UART0 at {=u32} baud",
            hilt::config().board,
            hilt::config().clock_hz,
            BAUD
        );
    }
    #[cfg(not(feature = "npu-driver"))]
    VNPU.start(SysTickCounter::read);
    #[cfg(feature = "npu-driver")]
    npu::start();
    let resolver = hilt::resolver();
    // SAFETY: the only call.
    let parts = unsafe { hilt::take() };
    let agent = Agent::new(hilt::config(), uart, counter);
    // hilt: the product's planner (an allocator port, by feature).
    #[cfg(feature = "port-broken")]
    let agent = agent.custom_planner(hilt_allocator_ports::BrokenFirstFit);
    #[cfg(all(feature = "port-first-fit", not(feature = "port-broken")))]
    let agent = agent.custom_planner(hilt_allocator_ports::FirstFit);
    #[cfg(not(any(feature = "port-first-fit", feature = "port-broken")))]
    let agent = agent.planner(PlannerKind::Greedy);
    let mut session = match agent
        .timestamp_pin(NoPin)
        .offload_engine(&VNPU)
        .start(parts, &resolver)
    {
        Ok(session) => session,
        Err(e) => panic!("hilt: {e}"),
    };
    // The product's main loop: hilt's requests are served between its own
    // tasks (an invoke, once started, runs to its end).
    loop {
        match session.poll_ready() {
            Ok(true) => {}
            Ok(false) => product_tasks(),
            // A lost byte spoils one frame, which the agent answers with a
            // BAD_FRAME error: the host reports it; keep serving.
            Err(WireError::Read(_)) => {}
            Err(e) => panic!("hilt: {e}"),
        }
    }
}

/// Where the product's own work would run between requests (this example
/// has none but keeping its log's clock: see `clock::keep`).
fn product_tasks() {
    #[cfg(feature = "defmt")]
    clock::keep();
}

// hilt: SysTick's wraps make the counter's high word, and tick the engine.
#[exception]
fn SysTick() {
    SysTickCounter::on_wrap();
    #[cfg(not(feature = "npu-driver"))]
    VNPU.on_tick();
    #[cfg(feature = "npu-driver")]
    npu::on_tick();
}

// hilt: the engine computes in PendSV, below every other interrupt (with
// `npu-driver`, PendSV is also the NPU's interrupt vector).
#[exception]
fn PendSV() {
    // SAFETY: this is the PendSV handler.
    #[cfg(not(feature = "npu-driver"))]
    unsafe {
        VNPU.on_pendsv()
    }
    #[cfg(feature = "npu-driver")]
    npu::on_pendsv();
}

fn stop() -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}

/// The product reports a panic on its console, which here is the UART the
/// host reads: as a `Log` frame, so the host shows it with the run's error.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let mut line = Line::default();
    let _ = write!(line, "panic: {info}");
    // SAFETY: the panic handler runs last; nothing else uses the UART after it.
    let mut uart = unsafe { CmsdkUart::new(UART0, UART_CLOCK_HZ, BAUD) };
    let _ = hilt_agent::send_log(&mut uart, line.as_str());
    stop()
}
