//! Fuzz target `recording`: see fuzz/src/lib.rs, [`profile_fuzz::recording`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::recording(data));
