#![no_main]
//! See warrant_objects::fuzzing::manifest.

libfuzzer_sys::fuzz_target!(|data: &[u8]| warrant_objects::fuzzing::manifest(data));
