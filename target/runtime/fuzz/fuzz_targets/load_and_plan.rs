//! Untrusted model bytes through the whole set-up path (the checks are in
//! `checks/load_and_plan.rs`, which the seed replay test shares).

#![no_main]

#[path = "../checks/load_and_plan.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
