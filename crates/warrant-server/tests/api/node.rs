//! Node restriction (spec §4.6): every rule of kube's NodeRestriction for a kubelet's
//! TokenRequest, in its order, with its messages, whichever authorizer let the node in.

use std::path::Path;

use http::StatusCode;
use serde_json::{Value, json};
use warrant_auth::{Policy, PolicyFile};
use warrant_objects::{Kind, PodInfo, Record};

use crate::support::*;

/// Nodes may request tokens anywhere, and the `registry.example` audience beyond what their
/// pods name (an image credential provider's, KEP-4412).
const NODES: &str = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- subjects: [{kind: Group, name: 'system:nodes'}]
  tokens:
    namespaces: ['*']
    audiences: [registry.example]
";

const VOLUMES_UID: &str = "55555555-5555-5555-5555-555555555555";

/// The standard objects, plus pod `volumes` on node-1 whose projected token volumes name no
/// audience (the API audiences) and `vault`.
fn api_for_nodes() -> Api {
    let policy = Policy::parse(NODES, "nodes.yaml").unwrap();
    let api = api_auth(|_, authz| {
        authz.policy = Some(PolicyFile::from_policy(policy, Path::new("nodes.yaml")));
    });
    api.objects.put(
        Kind::Pod,
        "demo",
        "volumes",
        Record {
            uid: VOLUMES_UID.into(),
            deletion_timestamp: None,
            pod: Some(PodInfo {
                service_account_name: "app".into(),
                node_name: "node-1".into(),
                token_audiences: vec![String::new(), "vault".into()],
                labels: vec![],
            }),
            annotations: vec![],
        },
    );
    api
}

fn pod_ref(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid})
}

async fn refused(api: &Api, token: &str, spec: Value) -> String {
    let r = api.token_as(token, "app", spec).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
    assert_eq!(r.json["reason"], "Forbidden");
    r.json["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_node_gets_tokens_only_for_its_own_pods() {
    let api = api_for_nodes();
    let forbidden = |why: &str| format!(r#"serviceaccounts "app" is forbidden: {why}"#);

    // 1. Bound to a pod, by apiVersion v1 exactly.
    for spec in [
        json!({}),
        json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": "app-token"}}),
        json!({"boundObjectRef": {"apiVersion": "", "kind": "Pod", "name": "app-0", "uid": POD_UID}}),
        json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": ""}}),
    ] {
        assert_eq!(
            refused(&api, NODE_1, spec).await,
            forbidden("node requested token not bound to a pod")
        );
    }
    // 2. With the pod's UID.
    assert_eq!(
        refused(
            &api,
            NODE_1,
            json!({"boundObjectRef": pod_ref("app-0", "")})
        )
        .await,
        forbidden("node requested token with a pod binding without a uid")
    );
    // 3. A pod that does not exist: kube's plain 404.
    let r = api
        .token_as(
            NODE_1,
            "app",
            json!({"boundObjectRef": pod_ref("ghost", "x")}),
        )
        .await;
    assert_eq!(r.code, StatusCode::NOT_FOUND);
    assert_eq!(r.json["message"], r#"pods "ghost" not found"#);
    // 4. The UID must be the pod's.
    assert_eq!(
        refused(
            &api,
            NODE_1,
            json!({"boundObjectRef": pod_ref("app-0", "stale")})
        )
        .await,
        forbidden(
            "the UID in the bound object reference (stale) does not match the UID in record. The object might have been deleted and then recreated"
        )
    );
    // 5. The pod must be on the requesting node.
    assert_eq!(
        refused(
            &api,
            NODE_2,
            json!({"boundObjectRef": pod_ref("app-0", POD_UID)})
        )
        .await,
        forbidden("node requested token bound to a pod scheduled on a different node")
    );
    // 6. At most one audience.
    assert_eq!(
        refused(
            &api,
            NODE_1,
            json!({"audiences": ["vault", "s3"], "boundObjectRef": pod_ref("volumes", VOLUMES_UID)})
        )
        .await,
        forbidden("node may only request 0 or 1 audiences")
    );
    // 7. An audience neither the pod's volumes name nor a grant allows.
    assert_eq!(
        refused(
            &api,
            NODE_1,
            json!({"audiences": ["s3"], "boundObjectRef": pod_ref("volumes", VOLUMES_UID)})
        )
        .await,
        forbidden(
            r#"audience "s3" not found in pod spec volume, system:node:node-1 is not authorized to request tokens for this audience"#
        )
    );
    // A pod without a volume for the API audiences: no audience is the audience "".
    assert_eq!(
        refused(
            &api,
            NODE_1,
            json!({"boundObjectRef": pod_ref("app-0", POD_UID)})
        )
        .await,
        forbidden(
            r#"audience "" not found in pod spec volume, system:node:node-1 is not authorized to request tokens for this audience"#
        )
    );
}

#[tokio::test]
async fn a_node_gets_the_audiences_its_pods_name_or_it_is_granted() {
    let api = api_for_nodes();
    let issued = |spec: Value| {
        let api = &api;
        async move {
            let r = api.token_as(NODE_1, "app", spec).await;
            assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
            claims(r.json["status"]["token"].as_str().unwrap())
        }
    };
    // The kubelet's default volume: no audience.
    let c = issued(
        json!({"boundObjectRef": pod_ref("volumes", VOLUMES_UID), "expirationSeconds": 3607}),
    )
    .await;
    assert_eq!(c.aud, ["https://warrant.test"]);
    assert_eq!(c.kubernetes.pod.unwrap().uid, VOLUMES_UID);
    // A volume with an audience.
    let c =
        issued(json!({"audiences": ["vault"], "boundObjectRef": pod_ref("volumes", VOLUMES_UID)}))
            .await;
    assert_eq!(c.aud, ["vault"]);
    // An image credential provider's audience: granted by the policy, no volume names it.
    let c = issued(
        json!({"audiences": ["registry.example"], "boundObjectRef": pod_ref("app-0", POD_UID)}),
    )
    .await;
    assert_eq!(c.aud, ["registry.example"]);
}

/// Node restriction applies even to a node that an always-allowed group lets in.
#[tokio::test]
async fn node_restriction_applies_whoever_authorizes() {
    let api = api_auth(|_, authz| {
        authz.always_allow_groups.push("system:nodes".into());
    });
    let r = api.token_as(NODE_1, "app", json!({})).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        r.json["message"],
        r#"serviceaccounts "app" is forbidden: node requested token not bound to a pod"#
    );
    // Its always-allowed group also grants it any audience, as kube's authorizers would.
    let r = api
        .token_as(
            NODE_1,
            "app",
            json!({"audiences": ["s3"], "boundObjectRef": pod_ref("app-0", POD_UID)}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
}
