//! Fuzz target `gopclntab`: see fuzz/src/lib.rs, [`profile_fuzz::gopclntab`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| profile_fuzz::gopclntab(data));
