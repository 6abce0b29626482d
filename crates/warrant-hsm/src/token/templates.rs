//! What every object warrant creates in a token looks like: its label, which names the key
//! and its purpose, and the attributes of its public and private halves. Creating keys
//! (`create.rs`) writes them, vouching for keys (`ownership.rs`) reads them back.

use cryptoki::object::Attribute;
use warrant_keys::KeyPurpose;

/// The `CKA_LABEL` warrant gives both objects of key `kid`, kept for `purpose`: the kid alone for
/// a token key, the purpose's name, `:` and the kid otherwise (a kid is base64url, so no label of
/// one purpose is another's).
pub fn object_label(purpose: KeyPurpose, kid: &str) -> String {
    match purpose {
        KeyPurpose::Tokens => kid.to_owned(),
        other => format!("{}:{kid}", other.name()),
    }
}

/// Attributes of every public key warrant creates. `CKA_PRIVATE`: only a logged-in session
/// (one with the PIN) can create, see or destroy it, which is what makes it the token's proof
/// that warrant holds the key (see `ownership.rs`); it verifies and does nothing else.
pub(crate) fn public_template(id: &[u8], label: &str) -> Vec<Attribute> {
    vec![
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Verify(true),
        Attribute::Encrypt(false),
        Attribute::Wrap(false),
        Attribute::Id(id.to_vec()),
        Attribute::Label(label.as_bytes().to_vec()),
    ]
}

/// Attributes of every private key warrant creates: it stays in the token, and it signs and does
/// nothing else (SoftHSM2 and others let a generated key decrypt, unwrap and derive by default).
pub(crate) fn private_template(id: &[u8], label: &str) -> Vec<Attribute> {
    vec![
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Sign(true),
        Attribute::Decrypt(false),
        Attribute::Unwrap(false),
        Attribute::Derive(false),
        Attribute::Id(id.to_vec()),
        Attribute::Label(label.as_bytes().to_vec()),
    ]
}
