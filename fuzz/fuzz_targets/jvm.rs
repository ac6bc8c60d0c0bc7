//! Fuzz target `jvm`: see fuzz/src/lib.rs, [`profile_fuzz::jvm`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::jvm(data));
