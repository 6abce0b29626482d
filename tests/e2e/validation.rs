//! kubectl validates manifests against warrant's OpenAPI as it does against kube-apiserver's:
//! TokenReview has no PATCH taking `fieldValidation`, so kubectl checks the manifest itself
//! against the v2 (protobuf) schema before sending it, and rejects unknown fields.

use serde_json::json;

use crate::support::*;
use crate::tokens::OBJECTS;

#[tokio::test]
async fn kubectl_rejects_unknown_fields_as_against_kube_apiserver() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let file = w.manifest(&json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"tokn": "abc"},
    }));
    let out = w.kubectl(&["create", "-f", file.to_str().unwrap()]);
    assert!(!out.status.success());
    // Both errors, as from kube-apiserver 1.36, whose TokenReviewSpec requires `token` (and
    // so does warrant). The message is kubectl's own: the manifest never left the client.
    assert_eq!(
        stderr(&out),
        format!(
            "error: error validating \"{}\": error validating data: \
             [ValidationError(TokenReview.spec): unknown field \"tokn\" in \
             io.k8s.api.authentication.v1.TokenReviewSpec, \
             ValidationError(TokenReview.spec): missing required field \"token\" in \
             io.k8s.api.authentication.v1.TokenReviewSpec]; \
             if you choose to ignore these errors, turn validation off with --validate=false",
            file.display()
        )
    );

    // Only the unknown field wrong; in warrant's own group too, whose TokenReview has its own
    // definition (it takes the proof of a key-bound token).
    let file = w.manifest(&json!({
        "apiVersion": "warrant.dev/v1alpha1",
        "kind": "TokenReview",
        "metadata": {"labels": {"team": "a"}, "annotations": {"why": "test"}},
        "spec": {"token": "abc", "audience": ["vault"]},
    }));
    let out = w.kubectl(&["create", "-f", file.to_str().unwrap()]);
    assert_eq!(
        stderr(&out),
        format!(
            "error: error validating \"{}\": error validating data: \
             ValidationError(TokenReview.spec): unknown field \"audience\" in \
             dev.warrant.v1alpha1.TokenReviewSpec; \
             if you choose to ignore these errors, turn validation off with --validate=false",
            file.display()
        )
    );
}

#[tokio::test]
async fn a_normal_manifest_validates_in_both_groups() {
    let w = Warrant::start(OBJECTS, &[]).await;
    for api_version in ["authentication.k8s.io/v1", "warrant.dev/v1alpha1"] {
        let created = w.kubectl_create(&json!({
            "apiVersion": api_version,
            "kind": "TokenReview",
            "metadata": {
                "name": "check",
                "labels": {"app.kubernetes.io/name": "check"},
                "annotations": {"note": "from a manifest"},
            },
            "spec": {"token": "not-a-jwt", "audiences": ["vault"]},
        }));
        assert_eq!(created["apiVersion"], api_version);
        assert_eq!(
            created["metadata"]["labels"]["app.kubernetes.io/name"],
            "check"
        );
        assert_eq!(created["status"]["authenticated"], json!(null));
        assert!(created["status"]["error"].is_string(), "{created}");
    }
}

#[tokio::test]
async fn kubectl_explains_the_types() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let text = w.kubectl_ok(&["explain", "tokenreviews.spec"]);
    assert!(text.contains("GROUP:      authentication.k8s.io"), "{text}");
    assert!(text.contains("token\t<string> -required-"), "{text}");
    assert!(text.contains("audiences\t<[]string>"), "{text}");
    let text = w.kubectl_ok(&["explain", "tokenreviews.warrant.dev.spec"]);
    assert!(text.contains("GROUP:      warrant.dev"), "{text}");
}
