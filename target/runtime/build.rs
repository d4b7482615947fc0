//! Tells the kernels whether the build optimises for size: Cargo hands a
//! build script its profile's `opt-level` as `OPT_LEVEL`, and a firmware
//! built with `optimize = "size"` (`opt-level = "s"` or `"z"`) gets
//! `cfg(hilt_compact)`, under which the kernels keep their smaller loops
//! (no stack-widened operands, one requantising loop of the general form).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(hilt_compact)");
    println!("cargo::rerun-if-env-changed=OPT_LEVEL");
    let level = std::env::var("OPT_LEVEL").unwrap_or_default();
    if level == "s" || level == "z" {
        println!("cargo::rustc-cfg=hilt_compact");
    }
}
