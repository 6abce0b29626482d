// The OpenAPI documents the server serves, generated with them by
// `WARRANT_WRITE_OPENAPI=1 cargo test -p warrant-server --test openapi`
// (crates/warrant-server/tests/openapi). Do not edit.

/// The documents of the direct view.
static DIRECT: ViewFiles = ViewFiles {
    v2_json: file!("v2-direct.json"),
    v2_protobuf: file!("v2-direct.pb"),
    v3_index: file!("v3-index-direct.json"),
};

/// The documents of the aggregated view.
static AGGREGATED: ViewFiles = ViewFiles {
    v2_json: file!("v2-aggregated.json"),
    v2_protobuf: file!("v2-aggregated.pb"),
    v3_index: file!("v3-index-aggregated.json"),
};

/// Each group-version's v3 document, by its path in `/openapi/v3/`.
static V3: &[(&str, &[u8])] = &[
    ("api/v1", file!("v3-api-v1.json")),
    ("apis/authentication.k8s.io/v1", file!("v3-apis-authentication.k8s.io-v1.json")),
    ("apis/warrant.dev/v1alpha1", file!("v3-apis-warrant.dev-v1alpha1.json")),
];
