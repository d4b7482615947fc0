//! Untrusted model bytes through load, every kernel's prepare and invoke
//! (the checks are in `checks/invoke.rs`, which the corpus replay shares).

#![no_main]

#[path = "../checks/invoke.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
