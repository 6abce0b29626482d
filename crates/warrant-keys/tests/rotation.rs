//! The rotation scenario every key holder runs (warrant-testkit's `rotation`), with the keys'
//! private halves in a holder in memory.

use std::sync::Arc;

use warrant_testkit::MemoryHolder;
use warrant_testkit::purposes::keys_of_one_purpose_serve_no_other;
use warrant_testkit::rotation::keys_rotate_in_the_holder;

#[test]
fn keys_rotate_in_a_holder_in_memory() {
    keys_rotate_in_the_holder(&MemoryHolder::default());
}

#[test]
fn a_holder_in_memory_keeps_token_and_ca_keys_apart() {
    keys_of_one_purpose_serve_no_other(Arc::new(MemoryHolder::default()));
}
