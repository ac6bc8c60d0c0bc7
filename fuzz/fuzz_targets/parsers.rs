//! Fuzz target `parsers`: see fuzz/src/lib.rs, [`profile_fuzz::parsers`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::parsers(data));
