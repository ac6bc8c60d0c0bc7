//! Fuzz target `perfdata`: see fuzz/src/lib.rs, [`profile_fuzz::perfdata`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::perfdata(data));
