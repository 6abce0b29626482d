//! What a managed key set's keys are for: signing service account tokens, or being the pod
//! certificate CA. A key set has one purpose, recorded in its store (`keys.json`'s `purpose`,
//! absent for token keys, which is how every store written before there were two reads), and
//! each key held outside the store is marked with it in its holder (a PKCS#11 label, a KMS tag),
//! where the holder checks it before vouching for the key.
//!
//! Why the holder checks it: token keys and CA keys may live in one holder (one token, one KMS
//! store name), and the store holds nothing secret, so whoever can write the token keys' store
//! could otherwise list a CA key there and have warrant sign tokens with it, or the reverse.
//! The purpose recorded in the store only says which marking the holder must find; the marking
//! is what only warrant can make (see `KeyHolder::vouch`).

use std::fmt;

/// What a key set's keys are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum KeyPurpose {
    /// Signing service account tokens (and what the JWKS publishes).
    #[default]
    Tokens,
    /// Signing pod certificates: each key is a root CA (`--pod-certificate-ca-key-*`).
    PodCertificateCa,
}

impl KeyPurpose {
    /// Every purpose.
    pub const ALL: [KeyPurpose; 2] = [KeyPurpose::Tokens, KeyPurpose::PodCertificateCa];

    /// The purpose's name as stores and holders record it: `tokens`, `pod-certificate-ca`.
    pub fn name(self) -> &'static str {
        match self {
            KeyPurpose::Tokens => "tokens",
            KeyPurpose::PodCertificateCa => "pod-certificate-ca",
        }
    }

    /// The purpose named `name` ([`name`](Self::name)'s inverse).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The keys in a phrase, for messages: `service account token keys`.
    pub fn keys(self) -> &'static str {
        match self {
            KeyPurpose::Tokens => "service account token keys",
            KeyPurpose::PodCertificateCa => "pod certificate CA keys",
        }
    }
}

impl fmt::Display for KeyPurpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_unknown_ones_do_not() {
        for purpose in KeyPurpose::ALL {
            assert_eq!(KeyPurpose::from_name(purpose.name()), Some(purpose));
        }
        assert_eq!(KeyPurpose::from_name("Tokens"), None);
        assert_eq!(KeyPurpose::from_name(""), None);
        assert_eq!(KeyPurpose::default(), KeyPurpose::Tokens);
    }
}
