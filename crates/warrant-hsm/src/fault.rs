//! Failure injection for this crate's own tests (feature `fault-injection`, which only the
//! crate's dev-dependency on itself turns on): makes the next key creation fail after its
//! objects exist in the token, so the test can check that nothing is left behind.

use std::sync::atomic::{AtomicBool, Ordering};

static FAIL_AFTER_CREATE: AtomicBool = AtomicBool::new(false);

/// Makes the next [`crate::Token::generate`] or [`crate::Token::import_pem`] fail after the
/// token created the key's objects.
pub fn fail_next_key_creation() {
    FAIL_AFTER_CREATE.store(true, Ordering::SeqCst);
}

pub(crate) fn fail_after_create() -> bool {
    FAIL_AFTER_CREATE.swap(false, Ordering::SeqCst)
}
