//! Fuzz target `hotspot`: see fuzz/src/lib.rs, [`profile_fuzz::hotspot`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::hotspot(data));
