//! Fuzz target `ruby`: see fuzz/src/lib.rs, [`profile_fuzz::ruby`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::ruby(data));
