//! The policy's extra claims through the router: a pod-bound TokenRequest for an audience the
//! policy names gets the claims made of the pod's labels, the service account's annotations and
//! the namespace; the audit event records them; TokenReview accepts the token; a token for an
//! audience the policy does not name is kube's; and a policy reloaded with a reserved claim
//! keeps the last good one.

use http::StatusCode;
use serde_json::{Value, json};
use warrant_objects::Kind;

use crate::support::*;

const POLICY: &str = r#"apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
claims:
- audiences: ["sts.amazonaws.com"]
  annotationPrefix: abac.warrant.dev/
  labelPrefix: abac.warrant.dev/
  set:
    node: ${pod.node}
  awsSessionTags:
    principalTags:
      Namespace: ${namespace}
      Team: ${pod.labels.team}
      CostCenter: ${serviceAccount.annotations.cost-center}
    transitiveTagKeys: [Namespace]
"#;

fn payload(token: &str) -> Value {
    use base64::Engine as _;
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap(),
    )
    .unwrap()
}

fn label_the_objects(api: &Api) {
    let mut account = warrant_testkit::record(SA_UID);
    account.annotations = vec![("abac.warrant.dev/cost-center".into(), "cc-42".into())];
    api.objects
        .put(Kind::ServiceAccount, "demo", "app", account);
    let mut pod = warrant_testkit::pod(POD_UID, "app", "node-1");
    if let Some(info) = &mut pod.pod {
        info.labels = vec![("abac.warrant.dev/team".into(), "blue".into())];
    }
    api.objects.put(Kind::Pod, "demo", "app-0", pod);
}

fn with_policy(
    dir: &tempfile::TempDir,
) -> impl FnOnce(&mut warrant_auth::Authenticator, &mut warrant_auth::Authorizer) {
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, POLICY).unwrap();
    move |_, authz| {
        authz.policy = Some(warrant_auth::PolicyFile::load(&path).unwrap());
    }
}

const POD: &str = "app-0";

fn spec(audiences: &[&str]) -> Value {
    json!({"audiences": audiences,
           "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": POD}})
}

#[tokio::test]
async fn a_named_audience_gets_the_claims_and_the_audit_records_them() {
    let policy_dir = tempfile::tempdir().unwrap();
    let (api, writer, dir) = api_audited_with(with_policy(&policy_dir));
    label_the_objects(&api);
    let reply = api.token("app", spec(&["sts.amazonaws.com"])).await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    let token = reply.json["status"]["token"].as_str().unwrap().to_owned();
    let claims = payload(&token);
    let tags = json!({
        "principal_tags": {"CostCenter": ["cc-42"], "Namespace": ["demo"], "Team": ["blue"]},
        "transitive_tag_keys": ["Namespace"],
    });
    assert_eq!(claims["https://aws.amazon.com/tags"], tags);
    assert_eq!(claims["node"], "node-1");
    // TokenReview accepts it and reports the same user as for any token.
    let review = api
        .review("authentication.k8s.io/v1", &token, &["sts.amazonaws.com"])
        .await;
    let status = review.assert_authenticated();
    assert_eq!(status["user"]["username"], "system:serviceaccount:demo:app");

    // A token for another audience is kube's.
    let plain = api.token("app", spec(&["vault"])).await;
    let plain = payload(plain.json["status"]["token"].as_str().unwrap());
    assert!(plain.get("https://aws.amazon.com/tags").is_none() && plain.get("node").is_none());

    writer.finish().await;
    let text = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let issued: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "TokenRequest")
        .collect();
    assert_eq!(issued.len(), 2, "{text}");
    assert_eq!(
        issued[0]["extraClaims"],
        json!({"https://aws.amazon.com/tags": tags, "node": "node-1"})
    );
    assert!(issued[1].get("extraClaims").is_none(), "{}", issued[1]);
}

#[tokio::test]
async fn refusals_name_the_claim_and_the_fact() {
    let policy_dir = tempfile::tempdir().unwrap();
    let api = api_auth(with_policy(&policy_dir));
    label_the_objects(&api);
    // Bound to no pod: no label, no node; the entry refuses.
    let reply = api
        .token("app", json!({"audiences": ["sts.amazonaws.com"]}))
        .await;
    assert_eq!(reply.code, StatusCode::FORBIDDEN, "{}", reply.text);
    assert_eq!(
        reply.json["message"],
        "serviceaccounts \"app\" is forbidden: the authorization policy sets the claim \"node\" for the audience \"sts.amazonaws.com\" from ${pod.node}, which this token (bound to no pod) does not have"
    );
    // A label whose value AWS would refuse.
    let mut pod = warrant_testkit::pod(POD_UID, "app", "node-1");
    if let Some(info) = &mut pod.pod {
        info.labels = vec![("abac.warrant.dev/team".into(), "blue,red".into())];
    }
    api.objects.put(Kind::Pod, "demo", POD, pod);
    let reply = api.token("app", spec(&["sts.amazonaws.com"])).await;
    assert_eq!(reply.code, StatusCode::FORBIDDEN, "{}", reply.text);
    assert!(
        reply.json["message"]
            .as_str()
            .unwrap()
            .contains("the value of session tag \"Team\" holds ','"),
        "{}",
        reply.text
    );
    // Two audiences, one of them not named.
    let reply = api
        .token("app", spec(&["sts.amazonaws.com", "vault"]))
        .await;
    assert_eq!(reply.code, StatusCode::FORBIDDEN, "{}", reply.text);
}

#[tokio::test]
async fn a_reload_with_a_reserved_claim_keeps_the_last_good_policy() {
    let policy_dir = tempfile::tempdir().unwrap();
    let api = api_auth(with_policy(&policy_dir));
    label_the_objects(&api);
    let path = policy_dir.path().join("policy.yaml");
    std::fs::write(
        &path,
        POLICY.replace("node: ${pod.node}", "jti: ${pod.uid}"),
    )
    .unwrap();
    let file = api.state.authorizer().policy.clone().unwrap();
    let err = file.reload().unwrap_err().to_string();
    assert!(
        err.contains("line 8: claims[0].set[\"jti\"]: \"jti\" is a registered claim"),
        "{err}"
    );
    let reply = api.token("app", spec(&["sts.amazonaws.com"])).await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    let claims = payload(reply.json["status"]["token"].as_str().unwrap());
    assert_eq!(claims["node"], "node-1");
    assert_ne!(claims["jti"], POD_UID);
}
