//! Extra claims from the policy file, through the real binary: kubectl asks for a token for an
//! audience the policy gives AWS session tags and a claim of its own, the claims decode as the
//! policy says from the pod's label, the service account's annotation, the namespace and
//! `--cluster-name`; TokenReview accepts the token; kube's own audience gets none; a policy
//! that does not load is refused on reload, naming its line, the last good one kept (at
//! startup the same check refuses it: `Policy::parse`'s tests).

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::*;

const OBJECTS: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ServiceAccount
  metadata:
    name: app
    namespace: demo
    uid: 11111111-1111-1111-1111-111111111111
    annotations:
      abac.warrant.dev/cost-center: "cc-42"
      eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/app
- apiVersion: v1
  kind: Pod
  metadata:
    name: app-0
    namespace: demo
    uid: 22222222-2222-2222-2222-222222222222
    labels: {abac.warrant.dev/team: blue, team: red}
  spec: {serviceAccountName: app, nodeName: node-1}
- apiVersion: v1
  kind: Node
  metadata: {name: node-1, uid: 33333333-3333-3333-3333-333333333333}
"#;

const POLICY: &str = r#"apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
claims:
- audiences: [sts.amazonaws.com]
  annotationPrefix: abac.warrant.dev/
  labelPrefix: abac.warrant.dev/
  set:
    https://example.com/cluster: ${cluster}
  awsSessionTags:
    principalTags:
      kubernetes-namespace: ${namespace}
      team: ${pod.labels.team}
      cost-center: ${serviceAccount.annotations.cost-center}
    transitiveTagKeys: [kubernetes-namespace]
"#;

fn payload(token: &str) -> Value {
    let part = token.trim().split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn write(path: &std::path::Path, text: &str) {
    let staged = path.with_extension("new");
    std::fs::write(&staged, text).unwrap();
    std::fs::rename(&staged, path).unwrap();
}

#[tokio::test]
async fn kubectl_gets_the_policys_claims_for_its_audience() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    write(&policy, POLICY);
    let mut w = Warrant::start(
        OBJECTS,
        &[
            "--authorization-policy-file",
            policy.to_str().unwrap(),
            "--cluster-name",
            "prod-eu-1",
        ],
    )
    .await;
    let pod_bound = ["--bound-object-kind", "Pod", "--bound-object-name", "app-0"];
    let mut args = vec!["--audience", "sts.amazonaws.com"];
    args.extend(pod_bound);
    let token = w.token(&args);
    let claims = payload(&token);
    assert_eq!(
        claims["https://aws.amazon.com/tags"],
        json!({
            "principal_tags": {
                "cost-center": ["cc-42"],
                "kubernetes-namespace": ["demo"],
                "team": ["blue"],
            },
            "transitive_tag_keys": ["kubernetes-namespace"],
        })
    );
    assert_eq!(claims["https://example.com/cluster"], "prod-eu-1");
    assert_eq!(claims["sub"], "system:serviceaccount:demo:app");
    // TokenReview accepts it, and says what it says of any token (status.user has no place
    // for other claims).
    let status = w.review(&token, &["sts.amazonaws.com"]);
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["user"]["username"], "system:serviceaccount:demo:app");

    // kube's own audience (and any the policy does not name) gets kube's claims only.
    let mut args = vec!["--audience", "vault"];
    args.extend(pod_bound);
    let plain = payload(&w.token(&args));
    let mut names: Vec<&str> = plain
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "aud",
            "exp",
            "iat",
            "iss",
            "jti",
            "kubernetes.io",
            "nbf",
            "sub"
        ]
    );
    // A token for both is refused: vault would see claims it does not expect.
    let mut args = vec!["--audience", "sts.amazonaws.com", "--audience", "vault"];
    args.extend(pod_bound);
    let out = w.create_token_as("app", &args);
    assert!(
        stderr(&out).contains("request a token for each apart"),
        "{}",
        stderr(&out)
    );
    // A token bound to no pod has no label: the policy refuses it (its default).
    let out = w.create_token_as("app", &["--audience", "sts.amazonaws.com"]);
    assert!(
        stderr(&out)
            .contains("from ${pod.labels.team}, which this token (bound to no pod) does not have"),
        "{}",
        stderr(&out)
    );

    // A reload that does not parse keeps the last good policy, and says which line.
    write(
        &policy,
        &POLICY.replace("${pod.labels.team}", "${pod.label.team}"),
    );
    let line = w
        .log_line("reloading the authorization policy failed")
        .await;
    assert!(line.contains("line 12"), "{line}");
    let mut args = vec!["--audience", "sts.amazonaws.com"];
    args.extend(pod_bound);
    assert_eq!(
        payload(&w.token(&args))["https://aws.amazon.com/tags"]["principal_tags"]["team"],
        json!(["blue"])
    );
}
