//! ARMv6-M cores (Cortex-M0/M0+/M1) have no DWT cycle counter: there the
//! `cortex-m` feature offers SysTick only.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(hilt_no_cyccnt)");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.starts_with("thumbv6m") {
        println!("cargo::rustc-cfg=hilt_no_cyccnt");
    }
}
