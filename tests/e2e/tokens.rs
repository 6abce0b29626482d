//! `kubectl create token` against warrant: plain, pod-, secret- and node-bound tokens.

use crate::support::*;

use warrant_testkit::{NODE_UID, POD_UID, SA_UID, SECRET_UID};

/// The standard objects (the testkit's), which most tests serve.
pub(crate) const OBJECTS: &str = warrant_testkit::MANIFEST;

#[tokio::test]
async fn kubectl_creates_every_kind_of_token() {
    let w = Warrant::start(OBJECTS, &[]).await;

    let token = w.token(&["--audience", "vault"]);
    let c = claims(&token);
    assert_eq!(c.iss, w.issuer());
    assert_eq!(c.sub, "system:serviceaccount:demo:app");
    assert_eq!(c.aud, ["vault"]);
    assert_eq!(c.exp.unwrap() - c.iat.unwrap(), 3600);
    assert_eq!(c.kubernetes.serviceaccount.uid, SA_UID);
    assert!(
        c.kubernetes.pod.is_none() && c.kubernetes.secret.is_none() && c.kubernetes.node.is_none()
    );

    // Default audiences are the API audiences (the issuer).
    let c = claims(&w.token(&["--duration", "2h"]));
    assert_eq!(c.aud, [w.issuer()]);
    assert_eq!(c.exp.unwrap() - c.iat.unwrap(), 7200);

    let token = w.token(&["--bound-object-kind", "Pod", "--bound-object-name", "app-0"]);
    let k = claims(&token).kubernetes;
    assert_eq!(k.pod.unwrap().uid, POD_UID);
    let node = k.node.unwrap();
    assert_eq!(
        (node.name.as_str(), node.uid.as_str()),
        ("node-1", NODE_UID)
    );

    let token = w.token(&[
        "--bound-object-kind",
        "Secret",
        "--bound-object-name",
        "app-token",
        "--bound-object-uid",
        SECRET_UID,
    ]);
    assert_eq!(claims(&token).kubernetes.secret.unwrap().uid, SECRET_UID);

    // kubectl offers Node binding behind KUBECTL_NODE_BOUND_TOKENS in the versions that have it;
    // the API itself is exercised directly so the test does not depend on the kubectl version.
    let body = serde_json::json!({"spec": {"boundObjectRef": {"kind": "Node", "apiVersion": "v1", "name": "node-1"}}});
    let r = w
        .http
        .post(w.url("/api/v1/namespaces/demo/serviceaccounts/app/token"))
        .bearer_auth(w.admin_token())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: serde_json::Value = r.json().await.unwrap();
    let k = claims(v["status"]["token"].as_str().unwrap()).kubernetes;
    assert_eq!(k.node.unwrap().uid, NODE_UID);
    assert!(k.pod.is_none());
}

#[tokio::test]
async fn the_make_run_example_works_as_shipped() {
    // deploy/local/objects.yaml has no UIDs: warrant assigns them, and tokens bind to them.
    let w = Warrant::start(&demo_objects(), &[]).await;
    let token = w.token(&[
        "--audience",
        "vault",
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        "app-0",
    ]);
    let k = claims(&token).kubernetes;
    assert_eq!(k.pod.as_ref().unwrap().uid.len(), 36);
    assert_eq!(k.node.as_ref().unwrap().uid.len(), 36);
    let status = w.review(token.trim(), &["vault"]);
    assert_eq!(status["authenticated"], true, "{status}");
}

/// The `issued a token` line names the key a token is bound to, and says nothing of a key for a
/// token bound to none (not `bound_key=""`, which reads as a key with an empty thumbprint).
#[tokio::test]
async fn the_issued_line_names_a_bound_key_only() {
    let mut w = Warrant::start(OBJECTS, &[]).await;
    let unbound = w.token(&["--audience", "vault"]);
    let setup = tempfile::tempdir().unwrap();
    let (bound, jkt) =
        crate::keybinding::dpop_bound_token(&w, &setup.path().join("holder.key"), &["vault"]).await;
    // Stopped as a service manager stops it, so its log is written out before it is read.
    w.signal("TERM");
    assert!(w.wait_exit().success());
    let log = w.log();
    let issued = |token: &str| {
        let jti = claims(token).jti;
        log.lines()
            .find(|l| l.contains("issued a token") && l.contains(&jti))
            .unwrap_or_else(|| panic!("no issued line for {jti} in:\n{log}"))
            .to_owned()
    };
    let line = issued(&unbound);
    assert!(!line.contains("bound_key"), "{line}");
    let line = issued(&bound);
    assert!(line.contains(&format!("bound_key=\"{jkt}\"")), "{line}");
}
