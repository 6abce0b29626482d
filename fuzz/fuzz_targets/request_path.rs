#![no_main]
//! See warrant_server::fuzzing::request_path.

libfuzzer_sys::fuzz_target!(|data: &[u8]| warrant_server::fuzzing::request_path(data));
