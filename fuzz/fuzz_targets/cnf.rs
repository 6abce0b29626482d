#![no_main]
//! See warrant_token::fuzzing::cnf.

libfuzzer_sys::fuzz_target!(|data: &[u8]| warrant_token::fuzzing::cnf(data));
