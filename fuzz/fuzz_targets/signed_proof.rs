#![no_main]
//! See warrant_token::fuzzing::signed_proof.

libfuzzer_sys::fuzz_target!(|data: &[u8]| warrant_token::fuzzing::signed_proof(data));
