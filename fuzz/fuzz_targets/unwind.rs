//! Fuzz target `unwind`: see fuzz/src/lib.rs, [`profile_fuzz::unwind`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::unwind(data));
