//! Fuzz target `symbolize`: see fuzz/src/lib.rs, [`profile_fuzz::symbolize`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::symbolize(data));
