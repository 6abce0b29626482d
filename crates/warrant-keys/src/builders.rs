//! The builders every key store has alike, written once: what its reads expect (the purpose
//! its keys are for) and who holds its private keys. A store using them has the fields
//! `purpose: Option<KeyPurpose>` and `holder: Option<Held>`; the expectation itself is checked
//! in one place, [`decode`](crate::decode).

/// Expands, inside a store's `impl`, to `for_purpose`, `of_any_purpose` and `with_holder`;
/// `$records` ends `with_holder`'s documentation: what the store records of held keys.
macro_rules! store_builders {
    ($records:literal) => {
        /// The store holds keys for `purpose` (by default,
        /// [`KeyPurpose::Tokens`](crate::KeyPurpose::Tokens)): a key set recorded for another is
        /// refused ([`StoreError::OtherPurpose`](crate::StoreError::OtherPurpose)).
        pub fn for_purpose(mut self, purpose: crate::KeyPurpose) -> Self {
            self.purpose = Some(purpose);
            self
        }

        /// The store is read whatever its keys are for, and its holder asked about each key for
        /// the purpose the store records: for `warrant keys`, which works on either kind of
        /// store.
        pub fn of_any_purpose(mut self) -> Self {
            self.purpose = None;
            self
        }

        #[doc = concat!("The store's private keys are held by `holder` (an HSM, a KMS); ", $records)]
        pub fn with_holder(mut self, holder: std::sync::Arc<dyn crate::KeyHolder>) -> Self {
            self.holder = Some(crate::holder::Held::new(holder));
            self
        }
    };
}
