#![no_main]
//! The Go-duration parser of warrant's flags. It lives in the `warrant` binary crate, which a
//! fuzz target cannot depend on, so the file itself is compiled in here.

#[path = "../../crates/warrant/src/duration.rs"]
#[allow(dead_code)]
mod duration;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        duration::check(text);
    }
});
