//! Fuzz target `python`: see fuzz/src/lib.rs, [`profile_fuzz::python`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::python(data));
