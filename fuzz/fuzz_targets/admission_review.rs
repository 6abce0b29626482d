#![no_main]
//! See warrant_server::fuzzing::admission_review.

libfuzzer_sys::fuzz_target!(|data: &[u8]| warrant_server::fuzzing::admission_review(data));
