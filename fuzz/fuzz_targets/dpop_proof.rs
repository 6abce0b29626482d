#![no_main]
//! See warrant_token::fuzzing::dpop_proof.

libfuzzer_sys::fuzz_target!(|data: &[u8]| warrant_token::fuzzing::dpop_proof(data));
