//! The rotation scenario every key holder runs (warrant-testkit's `rotation`), with the keys'
//! private halves in a holder in memory.

use warrant_testkit::MemoryHolder;
use warrant_testkit::rotation::keys_rotate_in_the_holder;

#[test]
fn keys_rotate_in_a_holder_in_memory() {
    keys_rotate_in_the_holder(&MemoryHolder::default());
}
