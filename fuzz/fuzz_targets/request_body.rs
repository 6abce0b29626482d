#![no_main]
//! See warrant_server::fuzzing::request_body.

libfuzzer_sys::fuzz_target!(|data: &[u8]| warrant_server::fuzzing::request_body(data));
