//! Renders the OpenAPI documents from their model into the files under
//! `crates/warrant-server/openapi/`, which the server serves as they are.
//!
//! The model is the route table's discoverable routes (`warrant_server::tooling`) and the
//! definitions of the wire types ([`definitions`]), described once ([`schema`]) and written in
//! both OpenAPI versions ([`v2`], [`v3`]) and as gnostic protobuf ([`gnostic`]). Only tests run
//! it: [`documents_are_current`](tests::documents_are_current) fails when the committed files
//! differ from what the model renders now, so a change to the routes or the wire types cannot
//! ship with stale documents. To rewrite them:
//!
//! ```sh
//! WARRANT_WRITE_OPENAPI=1 cargo test -p warrant-server --test openapi
//! ```
//!
//! Why a test target of warrant-server rather than code in `src/` or a crate of its own: the
//! server never runs it, so it does not belong in the library; and as a test target it needs
//! only what a separate crate would (the few route-table items and the document hash
//! re-exported by the hidden `warrant_server::tooling`, as `fuzzing` is for the fuzz targets),
//! without a workspace member, a manifest or a lock-file entry. `cargo test -p warrant-server`
//! still runs the staleness test.

// Test code: a panic is how the generator fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod definitions;
mod endpoints;
mod gnostic;
mod schema;
mod v2;
mod v3;

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::{Value, json};
use warrant_server::tooling::openapi_hash;

use self::endpoints::View;
use self::schema::GroupVersionExt as _;

/// `info` for every document.
fn info() -> Value {
    json!({"title": "warrant", "version": concat!("v", env!("CARGO_PKG_VERSION"))})
}

fn to_vec(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|e| panic!("rendering OpenAPI: {e}"))
}

/// A file name for a group-version's v3 document: `v3-apis-warrant.dev-v1alpha1.json`.
fn v3_file(path: &str) -> String {
    format!("v3-{}.json", path.replace('/', "-"))
}

impl View {
    fn name(self) -> &'static str {
        match self {
            View::Direct => "direct",
            View::Aggregated => "aggregated",
        }
    }
}

/// Every file, by name: the documents, and `files.rs`, which lists them for the server.
fn render() -> Vec<(String, Vec<u8>)> {
    let catalogue = definitions::catalogue();
    let v3: Vec<(String, Vec<u8>)> = View::Direct
        .group_versions()
        .into_iter()
        .map(|gv| (gv.path(), to_vec(&v3::document(gv, &catalogue))))
        .collect();
    let mut files: Vec<(String, Vec<u8>)> = v3
        .iter()
        .map(|(path, body)| (v3_file(path), body.clone()))
        .collect();
    let mut listing = String::from(
        "// The OpenAPI documents the server serves, generated with them by\n\
         // `WARRANT_WRITE_OPENAPI=1 cargo test -p warrant-server --test openapi`\n\
         // (crates/warrant-server/tests/openapi). Do not edit.\n",
    );
    for view in [View::Direct, View::Aggregated] {
        let name = view.name();
        let v2 = v2::document(view, &catalogue);
        let protobuf =
            gnostic::encode(&v2).unwrap_or_else(|e| panic!("encoding OpenAPI v2: {e:?}"));
        let listed: Vec<String> = view.group_versions().iter().map(|gv| gv.path()).collect();
        let index = v3::index(
            v3.iter()
                .filter(|(path, _)| listed.contains(path))
                .map(|(path, body)| (path.clone(), openapi_hash(body))),
        );
        files.push((format!("v2-{name}.json"), to_vec(&v2)));
        files.push((format!("v2-{name}.pb"), protobuf));
        files.push((format!("v3-index-{name}.json"), to_vec(&index)));
        let _ = writeln!(
            listing,
            "\n/// The documents of the {name} view.\n\
             static {upper}: ViewFiles = ViewFiles {{\n    \
             v2_json: file!(\"v2-{name}.json\"),\n    \
             v2_protobuf: file!(\"v2-{name}.pb\"),\n    \
             v3_index: file!(\"v3-index-{name}.json\"),\n}};",
            upper = name.to_uppercase()
        );
    }
    listing.push_str("\n/// Each group-version's v3 document, by its path in `/openapi/v3/`.\nstatic V3: &[(&str, &[u8])] = &[\n");
    for (path, _) in &v3 {
        let _ = writeln!(listing, "    ({path:?}, file!({:?})),", v3_file(path));
    }
    listing.push_str("];\n");
    files.push(("files.rs".to_owned(), listing.into_bytes()));
    files
}

/// Where the files live.
fn directory() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openapi")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed documents are what the model renders now: regenerate them (see the module
    /// docs) after changing the routes, the wire types or the version.
    #[test]
    fn documents_are_current() {
        let write = std::env::var_os("WARRANT_WRITE_OPENAPI").is_some();
        let mut stale = Vec::new();
        for (name, rendered) in render() {
            let path = directory().join(&name);
            if write {
                std::fs::write(&path, &rendered).unwrap();
            } else if std::fs::read(&path).ok().as_deref() != Some(rendered.as_slice()) {
                stale.push(name);
            }
        }
        assert!(
            stale.is_empty(),
            "OpenAPI files out of date: {stale:?}; run WARRANT_WRITE_OPENAPI=1 cargo test -p warrant-server --test openapi"
        );
    }

    /// Each protobuf document decodes to its JSON twin.
    #[test]
    fn protobuf_decodes_to_the_json_document() {
        use prost::Message;
        let files = render();
        let file = |name: &str| {
            files
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, body)| body.clone())
                .unwrap()
        };
        for view in ["direct", "aggregated"] {
            let decoded =
                gnostic::Document::decode(file(&format!("v2-{view}.pb")).as_slice()).unwrap();
            let json: Value = serde_json::from_slice(&file(&format!("v2-{view}.json"))).unwrap();
            assert_eq!(gnostic::to_json::document(&decoded), json);
        }
    }
}
