//! Fuzz target `v8`: see fuzz/src/lib.rs, [`profile_fuzz::v8`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::v8(data));
