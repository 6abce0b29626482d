//! Entry points for the fuzz targets (`fuzz/`) and their corpus replay; not an API.
#![allow(clippy::panic)]

use std::collections::HashSet;

use crate::Kind;
use crate::manifest;

/// Parses `data` as an objects file and checks what must hold for any input: no panic; every
/// object read has a name, a namespace exactly when its kind is namespaced, and appears once;
/// and an error's message starts with the file's path, as an operator reads it.
pub fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match manifest::parse("objects.yaml", text) {
        Ok(entries) => {
            let mut seen = HashSet::new();
            for e in &entries {
                assert!(!e.name.is_empty(), "an object without a name: {e:?}");
                assert_eq!(
                    e.namespace.is_empty(),
                    e.kind == Kind::Node,
                    "namespace and kind disagree: {e:?}"
                );
                assert!(
                    seen.insert((e.kind, e.namespace.as_str(), e.name.as_str())),
                    "an object read twice: {e:?}"
                );
            }
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.starts_with("objects.yaml: "), "{message}");
        }
    }
}
