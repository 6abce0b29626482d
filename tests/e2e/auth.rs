//! Who may ask, through the real binary over TLS: kube-apiserver's aggregator as a front proxy,
//! kube-apiserver as a webhook client, the policy file, delegation to a cluster (the loopback
//! fixture's TokenReview, SubjectAccessReview and extension-apiserver-authentication
//! ConfigMap), and a serving certificate rotated under a running server.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};
use warrant_kube_fixture::authority::{AccessAnswer, Authority, TokenAnswer};
use warrant_kube_fixture::objects::{config_map, service_account};
use warrant_kube_fixture::{Cluster, Fixture, ResourceType};

use crate::pki;
use crate::support::*;
use crate::tokens::OBJECTS;

const POLICY: &str = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: kube-apiserver
  subjects: [{kind: User, name: kube-apiserver}]
  reviews: true
";

impl Warrant {
    /// An HTTPS client that trusts the local setup's CA and presents `identity`.
    fn client_with(&self, identity: Option<reqwest::Identity>) -> reqwest::Client {
        let ca =
            reqwest::Certificate::from_pem(&std::fs::read(self.path("ca.crt")).unwrap()).unwrap();
        let mut builder = reqwest::Client::builder().tls_certs_only([ca]);
        if let Some(identity) = identity {
            builder = builder.identity(identity);
        }
        builder.build().unwrap()
    }
}

async fn send(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> (u16, Value) {
    let mut request = client.request(method, url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body);
    }
    let response = request.send().await.unwrap();
    let code = response.status().as_u16();
    let json = response.json().await.unwrap_or(Value::Null);
    (code, json)
}

const RELAYED_ADMIN: [(&str, &str); 2] = [
    ("X-Remote-User", "jane"),
    ("X-Remote-Group", "system:masters"),
];

#[tokio::test]
async fn kube_apiserver_as_front_proxy_and_webhook_client() {
    let pki = tempfile::tempdir().unwrap();
    let dir = pki.path();
    let proxy_ca = pki::ca(dir, "front-proxy-ca");
    pki::client(
        dir,
        "front-proxy-ca",
        "aggregator",
        "front-proxy-client",
        "",
    );
    pki::client(dir, "front-proxy-ca", "impostor", "someone-else", "");
    let users_ca = pki::ca(dir, "client-ca");
    pki::client(dir, "client-ca", "apiserver", "kube-apiserver", "");
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    let w = Warrant::start(
        OBJECTS,
        &[
            "--requestheader-client-ca-file",
            proxy_ca.to_str().unwrap(),
            "--requestheader-allowed-names",
            "front-proxy-client",
            "--client-ca-file",
            users_ca.to_str().unwrap(),
            "--authorization-policy-file",
            dir.join("policy.yaml").to_str().unwrap(),
        ],
    )
    .await;
    let aggregator = w.client_with(Some(pki::identity(dir, "aggregator")));
    let token_url = w.url("/apis/warrant.dev/v1alpha1/namespaces/demo/serviceaccounts/app/token");
    let token_request = || Some(json!({"spec": {"audiences": ["vault"]}}).to_string());

    // The availability check and legacy discovery.
    let (code, list) = send(
        &aggregator,
        reqwest::Method::GET,
        w.url("/apis/warrant.dev/v1alpha1"),
        &[
            ("X-Remote-User", "system:kube-aggregator"),
            ("X-Remote-Group", "system:masters"),
        ],
        None,
    )
    .await;
    assert_eq!(
        (code, list["kind"].as_str()),
        (200, Some("APIResourceList"))
    );
    // OpenAPI as the aggregator fetches it: warrant's group only.
    let (code, v3) = send(
        &aggregator,
        reqwest::Method::GET,
        w.url("/openapi/v3"),
        &[("X-Remote-User", "system:aggregator")],
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(v3["paths"].as_object().unwrap().len(), 1);

    // A relayed cluster admin gets a token.
    let (code, issued) = send(
        &aggregator,
        reqwest::Method::POST,
        token_url.clone(),
        &RELAYED_ADMIN,
        token_request(),
    )
    .await;
    assert_eq!(code, 201, "{issued}");
    // The same headers from a certificate not in the allowed names, or without one: refused.
    let impostor = w.client_with(Some(pki::identity(dir, "impostor")));
    let anonymous = w.client_with(None);
    for client in [&impostor, &anonymous] {
        let (code, _) = send(
            client,
            reqwest::Method::POST,
            token_url.clone(),
            &RELAYED_ADMIN,
            token_request(),
        )
        .await;
        assert_eq!(code, 401);
    }

    // kube-apiserver as webhook client, with its certificate: the exact v1beta1 body.
    let token = issued["status"]["token"].as_str().unwrap();
    let apiserver = w.client_with(Some(pki::identity(dir, "apiserver")));
    let body = format!(
        r#"{{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1beta1","metadata":{{"creationTimestamp":null}},"spec":{{"token":"{token}","audiences":["vault"]}},"status":{{"user":{{}}}}}}"#
    );
    let (code, review) = send(
        &apiserver,
        reqwest::Method::POST,
        w.url("/apis/authentication.k8s.io/v1beta1/tokenreviews"),
        &[],
        Some(body),
    )
    .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(review["apiVersion"], "authentication.k8s.io/v1beta1");
    assert_eq!(review["status"]["authenticated"], true);
    assert_eq!(
        review["status"]["user"]["username"],
        "system:serviceaccount:demo:app"
    );
    // The policy grants kube-apiserver reviews, not tokens.
    let (code, refused) = send(
        &apiserver,
        reqwest::Method::POST,
        token_url,
        &[],
        token_request(),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        refused["message"],
        r#"serviceaccounts.warrant.dev "app" is forbidden: User "kube-apiserver" cannot create resource "serviceaccounts/token" in API group "warrant.dev" in the namespace "demo""#
    );
}

#[tokio::test]
async fn the_serving_certificate_rotates_without_a_restart() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let pki = tempfile::tempdir().unwrap();
    let dir = pki.path();
    let new_ca = pki::ca(dir, "rotated-ca");
    pki::issue(
        dir,
        "rotated-ca",
        "serving",
        "/CN=warrant",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    );
    let trusting_new = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&std::fs::read(&new_ca).unwrap()).unwrap()])
        .build()
        .unwrap();
    assert!(trusting_new.get(w.url("/readyz")).send().await.is_err());
    // As a Secret volume updates: each file replaced whole.
    for file in ["serving.key", "serving.crt"] {
        let staged = w.path(&format!("{file}.new"));
        std::fs::copy(dir.join(file), &staged).unwrap();
        std::fs::rename(&staged, w.path(file)).unwrap();
    }
    let url = w.url("/readyz");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Ok(r) = trusting_new.get(&url).send().await
            && r.status().is_success()
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the rotated certificate was not served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

// Multi-threaded: kubectl runs synchronously on the test thread while the fixture serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_a_cluster_authentication_and_authorization_are_delegated() {
    let pki = tempfile::tempdir().unwrap();
    let dir = pki.path();
    let proxy_ca = pki::ca(dir, "front-proxy-ca");
    pki::client(
        dir,
        "front-proxy-ca",
        "aggregator",
        "front-proxy-client",
        "",
    );

    let authority = Authority::new();
    let cluster = Cluster::new();
    cluster.register(ResourceType::of::<ConfigMap>());
    let fixture = Fixture::start_with(cluster, |_| authority.routes())
        .await
        .unwrap();
    create_standard_objects(&fixture, Some("vault"));
    let proxy_pem = std::fs::read_to_string(&proxy_ca).unwrap();
    fixture
        .create(&config_map(
            "kube-system",
            "extension-apiserver-authentication",
            &[
                ("requestheader-client-ca-file", &proxy_pem),
                ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
                ("requestheader-username-headers", r#"["X-Remote-User"]"#),
                ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
                (
                    "requestheader-extra-headers-prefix",
                    r#"["X-Remote-Extra-"]"#,
                ),
            ],
        ))
        .unwrap();
    authority.token("developer-token", TokenAnswer::user("dev", &["devs"]));
    authority.access(|spec| {
        let r = spec.resource_attributes.clone().unwrap_or_default();
        match (spec.user.as_deref(), r.name.as_deref()) {
            (Some("dev"), Some("app")) => AccessAnswer::Allow(String::new()),
            (Some("dev"), _) => AccessAnswer::Deny("no RoleBinding".into()),
            _ => AccessAnswer::NoOpinion,
        }
    });
    let w = Warrant::start_cluster(
        &fixture,
        &["--delegate-authentication", "--delegate-authorization"],
    )
    .await;

    // kubectl with a token only kube-apiserver knows, allowed by its RBAC.
    let kubeconfig = w.path("developer.kubeconfig");
    let admin = std::fs::read_to_string(w.path("kubeconfig")).unwrap();
    let admin_token = w.admin_token();
    std::fs::write(&kubeconfig, admin.replace(&admin_token, "developer-token")).unwrap();
    let out = w.kubectl_with(&kubeconfig, &["create", "token", "app", "-n", "demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        claims(&String::from_utf8(out.stdout).unwrap()).sub,
        "system:serviceaccount:demo:app"
    );
    // Refused by kube-apiserver, in kube's words.
    fixture
        .create(&service_account("demo", "other", "sa-2"))
        .unwrap();
    let out = w.kubectl_with(&kubeconfig, &["create", "token", "other", "-n", "demo"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            r#"serviceaccounts "other" is forbidden: User "dev" cannot create resource "serviceaccounts/token" in API group "" in the namespace "demo": no RoleBinding"#
        ),
        "{}",
        stderr(&out)
    );
    // Unknown to kube-apiserver: 401.
    std::fs::write(&kubeconfig, admin.replace(&admin_token, "stolen-token")).unwrap();
    let out = w.kubectl_with(&kubeconfig, &["create", "token", "app", "-n", "demo"]);
    assert!(stderr(&out).contains("Unauthorized"), "{}", stderr(&out));

    // The front proxy that the cluster's ConfigMap describes.
    let aggregator = w.client_with(Some(pki::identity(dir, "aggregator")));
    let (code, issued) = send(
        &aggregator,
        reqwest::Method::POST,
        w.url("/apis/warrant.dev/v1alpha1/namespaces/demo/serviceaccounts/app/token"),
        &RELAYED_ADMIN,
        Some(json!({"spec": {}}).to_string()),
    )
    .await;
    assert_eq!(code, 201, "{issued}");
}

/// The getting-started example: a service account trades its own warrant token for a token to
/// Vault, within what the policy file's self-service allows; the policy reloads on change.
#[tokio::test]
async fn a_service_account_requests_tokens_for_itself() {
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = policy_dir.path().join("policy.yaml");
    let write_policy = |audiences: &str| {
        let text = format!(
            "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nselfService:\n  audiences: [{audiences}]\n  maxExpirationSeconds: 3600\n"
        );
        let staged = policy.with_extension("new");
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, &policy).unwrap();
    };
    write_policy("vault");
    let w = Warrant::start(
        &demo_objects(),
        &["--authorization-policy-file", policy.to_str().unwrap()],
    )
    .await;
    let own = w.token(&[]);
    let as_app = |audience: &str| {
        w.kubectl(&[
            "--token",
            &own,
            "create",
            "token",
            "app",
            "-n",
            "demo",
            "--audience",
            audience,
        ])
    };
    let out = as_app("vault");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        claims(&String::from_utf8(out.stdout).unwrap()).aud,
        ["vault"]
    );
    let out = as_app("s3");
    assert!(
        stderr(&out).contains(
            r#"serviceaccounts "app" is forbidden: User "system:serviceaccount:demo:app" cannot request a token for itself for the audience "s3": not a self-service audience"#
        ),
        "{}",
        stderr(&out)
    );
    // Only for itself.
    let out = w.kubectl(&["--token", &own, "create", "token", "web", "-n", "demo"]);
    assert!(stderr(&out).contains("forbidden"), "{}", stderr(&out));

    write_policy("vault, s3");
    w.eventually("the policy to reload", || as_app("s3").status.success())
        .await;
}

/// kubectl's RBAC commands find warrant's TokenRequest subresource through discovery, in
/// warrant's group and the core group: the Role they write is the one a delegated authorizer
/// (or kube-apiserver in front of warrant) checks.
#[tokio::test]
async fn kubectl_rbac_commands_know_warrants_resources() {
    let w = Warrant::start(OBJECTS, &[]).await;
    for (resource, group) in [
        ("serviceaccounts.warrant.dev/token", "warrant.dev"),
        ("serviceaccounts/token", ""),
    ] {
        let role = w.kubectl_ok(&[
            "create",
            "role",
            "token-minter",
            "-n",
            "demo",
            "--verb=create",
            &format!("--resource={resource}"),
            "--dry-run=client",
            "-o",
            "json",
        ]);
        let role: serde_json::Value = serde_json::from_str(&role).unwrap();
        assert_eq!(
            role["rules"][0]["apiGroups"],
            serde_json::json!([group]),
            "{role}"
        );
        assert_eq!(
            role["rules"][0]["resources"],
            serde_json::json!(["serviceaccounts/token"]),
            "{role}"
        );
    }
}
