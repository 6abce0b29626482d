//! `warrant credential`, the exec credential plugin, run as client-go runs it: the real binary
//! with `KUBERNETES_EXEC_INFO` in its environment and stdin closed, its stdout parsed; and by
//! kubectl itself from a kubeconfig's exec section.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::support::*;
use crate::tokens::{OBJECTS, POD_UID};

/// A server whose self-service hands `demo/app` tokens for `member-1` (and `extra` audiences),
/// and the file of app's own pod-bound token for warrant's API.
async fn setup(extra: &str) -> (Warrant, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nselfService:\n  audiences: [member-1{extra}]\n  maxExpirationSeconds: 3600\n"
        ),
    )
    .unwrap();
    let w = Warrant::start(
        OBJECTS,
        &["--authorization-policy-file", policy.to_str().unwrap()],
    )
    .await;
    let own = w.token(&["--bound-object-kind", "Pod", "--bound-object-name", "app-0"]);
    let own_file = dir.path().join("own.token");
    std::fs::write(&own_file, own).unwrap();
    (w, dir, own_file)
}

/// `warrant credential ARGS` as client-go runs it, with `exec_info` (if any) and the cache
/// in `cache` (each test its own, never the user's).
fn credential_command(exec_info: Option<&Value>, cache: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("credential")
        .args(args)
        .env_remove("KUBERNETES_EXEC_INFO")
        .env("WARRANT_CACHE_DIR", cache)
        .stdin(Stdio::null());
    if let Some(info) = exec_info {
        command.env("KUBERNETES_EXEC_INFO", info.to_string());
    }
    command
}

/// Runs [`credential_command`] with the cache under the test's directory.
fn credential(exec_info: Option<&Value>, args: &[&str]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    credential_command(exec_info, cache.path(), args)
        .output()
        .unwrap()
}

fn exec_info(version: &str, cluster: Option<Value>) -> Value {
    let mut info = json!({
        "kind": "ExecCredential",
        "apiVersion": version,
        "spec": {"interactive": false},
    });
    if let Some(cluster) = cluster {
        info["spec"]["cluster"] = cluster;
    }
    info
}

fn to_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[tokio::test]
async fn the_plugin_speaks_both_versions_with_and_without_cluster_info() {
    let (w, _dir, own) = setup("").await;
    let ca = w.path("ca.crt");
    let flags = [
        "--warrant-ca-file",
        to_str(&ca),
        "--token-file",
        to_str(&own),
    ];
    for version in [
        "client.authentication.k8s.io/v1",
        "client.authentication.k8s.io/v1beta1",
    ] {
        let cluster = json!({
            "server": "https://member-1.example:6443",
            "config": {"audience": "member-1", "warrant": w.issuer()},
        });
        let out = credential(Some(&exec_info(version, Some(cluster))), &flags);
        assert!(out.status.success(), "{}", stderr(&out));
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            stdout.lines().count(),
            1,
            "one ExecCredential, nothing else: {stdout}"
        );
        let credential: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(credential["apiVersion"], version);
        assert_eq!(credential["kind"], "ExecCredential");
        let token = credential["status"]["token"].as_str().unwrap();
        let c = claims(token);
        assert_eq!(c.aud, ["member-1"]);
        assert_eq!(c.sub, "system:serviceaccount:demo:app");
        // The own token's pod binding is passed on: the new token dies with the pod.
        assert_eq!(c.kubernetes.pod.unwrap().uid, POD_UID);
        let expires: jiff::Timestamp = credential["status"]["expirationTimestamp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(expires.as_second(), c.exp.unwrap());
    }

    // Without cluster info, flags say where and for whom.
    let out = credential(
        Some(&exec_info("client.authentication.k8s.io/v1", None)),
        &[
            &flags[..],
            &["--warrant-url", &w.issuer(), "--audience", "member-1"],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = credential(
        Some(&exec_info("client.authentication.k8s.io/v1", None)),
        &[&flags[..], &["--warrant-url", &w.issuer()]].concat(),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).starts_with("warrant: no audience"),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
}

#[tokio::test]
async fn kubectl_runs_the_plugin_from_its_kubeconfig() {
    let (w, dir, own) = setup("").await;
    // The audience defaults to the cluster's server: warrant's own API here.
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nselfService:\n  audiences: [member-1, \"{}\"]\n  maxExpirationSeconds: 3600\n",
            w.issuer()
        ),
    )
    .unwrap();
    let kubeconfig = dir.path().join("exec.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: w\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: app\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {bin}\n      args: [credential, --warrant-url, \"{server}\", --warrant-ca-file, {ca}, --token-file, {own}, --cache-dir, {cache}]\n      provideClusterInfo: true\n      interactiveMode: Never\ncontexts:\n- name: c\n  context: {{cluster: w, user: app}}\ncurrent-context: c\n",
            server = w.issuer(),
            ca = w.path("ca.crt").display(),
            bin = BIN,
            own = own.display(),
            cache = dir.path().join("cache").display(),
        ),
    )
    .unwrap();
    let mut last = None;
    w.eventually("the policy with warrant's audience to load", || {
        let out = w.kubectl_with(
            &kubeconfig,
            &[
                "create",
                "token",
                "app",
                "-n",
                "demo",
                "--audience",
                "member-1",
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                "app-0",
            ],
        );
        let ok = out.status.success();
        last = Some(out);
        ok
    })
    .await;
    // kubectl authenticated to warrant with the token the plugin minted for warrant's API, as
    // demo/app, and got the token it asked for.
    let minted = String::from_utf8(last.unwrap().stdout).unwrap();
    let c = claims(minted.trim());
    assert_eq!(c.aud, ["member-1"]);
    assert_eq!(c.sub, "system:serviceaccount:demo:app");
}

#[tokio::test]
async fn failures_are_one_line_on_stderr() {
    let (w, _dir, own) = setup("").await;
    let ca = w.path("ca.crt");
    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(
            json!({"server": "https://member-1.example:6443", "config": {"audience": "member-1"}}),
        ),
    );
    let run = |url: &str, token: &Path, audience: Option<&str>| {
        let mut args = vec![
            "--warrant-url",
            url,
            "--warrant-ca-file",
            to_str(&ca),
            "--token-file",
            to_str(token),
        ];
        if let Some(audience) = audience {
            args.extend(["--audience", audience]);
        }
        let out = credential(Some(&info), &args);
        assert!(!out.status.success());
        assert!(out.stdout.is_empty());
        let text = stderr(&out);
        assert_eq!(text.lines().count(), 1, "{text}");
        text
    };

    // Nothing listens.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let text = run(&url, &own, None);
    assert!(
        text.starts_with(&format!("warrant: cannot reach warrant at {url}")),
        "{text}"
    );

    // The policy does not allow the audience.
    let text = run(&w.issuer(), &own, Some("s3"));
    assert!(
        text.starts_with(&format!(
            "warrant: warrant at {} refused a token for demo/app (403): ",
            w.issuer()
        )) && text.contains("not a self-service audience"),
        "{text}"
    );

    // The own token has expired (signed by the server's key an hour ago, valid for ten minutes).
    let key =
        warrant_token::signing_key_from_pem(&std::fs::read(w.path("sa.key")).unwrap()).unwrap();
    let mut old = claims(&std::fs::read_to_string(&own).unwrap());
    old.exp = old.exp.map(|e| e - 7200);
    old.iat = old.iat.map(|i| i - 7200);
    old.nbf = old.nbf.map(|n| n - 7200);
    let expired = own.with_file_name("expired.token");
    std::fs::write(&expired, key.sign(&old).unwrap()).unwrap();
    let text = run(&w.issuer(), &expired, None);
    assert!(
        text.starts_with(&format!(
            "warrant: warrant at {} refused a token for demo/app (401): ",
            w.issuer()
        )),
        "{text}"
    );

    // --help shows where it goes: a kubeconfig user and a ClusterProfile provider.
    let help = Command::new(BIN)
        .args(["credential", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(
        help.contains("provideClusterInfo: true") && help.contains("credentialProviders:"),
        "{help}"
    );

    // Not run by client-go.
    let out = Command::new(BIN)
        .args(["credential", "--token-file", to_str(&own)])
        .env_remove("KUBERNETES_EXEC_INFO")
        .output()
        .unwrap();
    assert!(stderr(&out).starts_with("warrant: KUBERNETES_EXEC_INFO is not set"));
}

/// Tokens warrant has issued so far (every binding).
async fn issued(w: &Warrant) -> f64 {
    w.metrics_text()
        .await
        .lines()
        .filter(|l| l.starts_with("warrant_tokens_issued_total"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn tokens_are_reused_from_the_cache_until_four_fifths_of_their_life() {
    let (w, dir, own) = setup("").await;
    let cache = dir.path().join("cache");
    let ca = w.path("ca.crt");
    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(json!({"server": "https://member-1.example:6443",
                    "config": {"audience": "member-1", "warrant": w.issuer()}})),
    );
    let args = [
        "--warrant-ca-file",
        to_str(&ca),
        "--token-file",
        to_str(&own),
    ];
    let run = || {
        let out = credential_command(Some(&info), &cache, &args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let credential: Value = serde_json::from_slice(&out.stdout).unwrap();
        credential["status"]["token"].as_str().unwrap().to_owned()
    };
    let before = issued(&w).await;
    let first = run();
    assert_eq!(issued(&w).await, before + 1.0);
    // Within its lifetime: the same token, and warrant is not asked.
    assert_eq!(run(), first);
    assert_eq!(issued(&w).await, before + 1.0);
    let entries: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    let [entry] = entries.as_slice() else {
        panic!("one cache entry: {entries:?}");
    };
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&cache), mode(entry)), (0o700, 0o600));

    // Past 80 % of its lifetime (the entry says it was issued long ago): a new token.
    let mut aged: Value = serde_json::from_slice(&std::fs::read(entry).unwrap()).unwrap();
    let expires: jiff::Timestamp = aged["expirationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    aged["issuedAt"] = json!((expires - jiff::SignedDuration::from_secs(36_000)).to_string());
    std::fs::write(entry, aged.to_string()).unwrap();
    let second = run();
    assert_ne!(second, first);
    assert_eq!(issued(&w).await, before + 2.0);

    // A damaged entry is replaced, not an error.
    std::fs::write(entry, b"{\"token\": 12").unwrap();
    let third = run();
    assert_ne!(third, second);
    assert_eq!(issued(&w).await, before + 3.0);
    assert_eq!(run(), third);

    // Two runs at once for a fresh entry mint one token between them.
    std::fs::remove_file(entry).unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            credential_command(Some(&info), &cache, &args)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let tokens: Vec<String> = children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success());
            let credential: Value = serde_json::from_slice(&out.stdout).unwrap();
            credential["status"]["token"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(tokens[0], tokens[1]);
    assert_eq!(issued(&w).await, before + 4.0);
}

/// CI and people call warrant with a kubeconfig instead of a workload token: its server, CA and
/// user (here the setup's admin), for a named service account.
#[tokio::test]
async fn a_kubeconfig_can_stand_in_for_the_workload_token() {
    let (w, _dir, _own) = setup("").await;
    let kubeconfig = w.path("kubeconfig");
    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(
            json!({"server": "https://member-1.example:6443", "config": {"audience": "member-1"}}),
        ),
    );
    let out = credential(
        Some(&info),
        &[
            "--kubeconfig",
            to_str(&kubeconfig),
            "--service-account",
            "demo/app",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = claims(printed["status"]["token"].as_str().unwrap());
    assert_eq!(
        (c.aud.as_slice(), c.sub.as_str()),
        (
            &["member-1".to_owned()][..],
            "system:serviceaccount:demo:app"
        )
    );
    assert!(
        c.kubernetes.pod.is_none(),
        "an unbound caller mints unbound tokens"
    );

    // Without a service account to name, it says what to give.
    let out = credential(Some(&info), &["--kubeconfig", to_str(&kubeconfig)]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).starts_with("warrant: with --kubeconfig, name the service account"),
        "{}",
        stderr(&out)
    );
    // warrant's refusals come through the kubeconfig path too.
    let out = credential(
        Some(&info),
        &[
            "--kubeconfig",
            to_str(&kubeconfig),
            "--service-account",
            "demo/missing",
        ],
    );
    assert!(
        stderr(&out).starts_with(&format!(
            "warrant: warrant at {} refused a token for demo/missing (404): ",
            w.issuer()
        )),
        "{}",
        stderr(&out)
    );
}

/// The own token may come from the hub's kube-apiserver instead of warrant: warrant has it
/// reviewed by kube-apiserver (delegated authentication) and asks kube-apiserver whether the
/// service account may have a token (delegated authorization); the pod binding still passes on.
// Multi-threaded: the fixture serves while the plugin runs on the test thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The real binary checks the own token's exp against the real clock, so it is dated by it.
#[allow(clippy::disallowed_methods)]
async fn an_own_token_from_the_hubs_kube_apiserver_works_through_delegation() {
    use std::collections::BTreeMap;

    use warrant_kube_fixture::authority::{AccessAnswer, Authority, TokenAnswer};
    use warrant_kube_fixture::objects::{node, pod, service_account};
    use warrant_kube_fixture::{Cluster, Fixture};

    let authority = Authority::new();
    let fixture = Fixture::start_with(Cluster::new(), |_| authority.routes())
        .await
        .unwrap();
    fixture
        .create(&service_account("demo", "app", "sa-1"))
        .unwrap();
    fixture.create(&node("node-1", "node-uid-1")).unwrap();
    fixture
        .create(&pod("demo", "app-0", "pod-1", "app", "node-1", None))
        .unwrap();
    // No front proxy here: skip reading its configuration from the cluster.
    let w = Warrant::start_cluster(
        &fixture,
        &[
            "--delegate-authentication",
            "--authentication-skip-lookup",
            "--delegate-authorization",
        ],
    )
    .await;

    // A projected token as the hub's kube-apiserver would issue it (another issuer and key:
    // warrant cannot verify it, and hands it to kube-apiserver).
    let hub_key = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let now = jiff::Timestamp::now().as_second();
    let hub_token = hub_key
        .sign(&warrant_token::Claims::new(warrant_token::NewToken {
            issuer: "https://kubernetes.default.svc.cluster.local",
            namespace: "demo",
            service_account: warrant_token::ObjectRef::new("app", "sa-1"),
            audiences: vec![w.issuer()],
            binding: warrant_token::Binding::Pod {
                pod: warrant_token::ObjectRef::new("app-0", "pod-1"),
                node: Some(warrant_token::ObjectRef::new("node-1", "node-uid-1")),
            },
            issued_at: now,
            expires_at: now + 3600,
            warn_after: None,
            jti: "hub-jti-1".into(),
        }))
        .unwrap();
    let extra: BTreeMap<String, Vec<String>> = [
        ("authentication.kubernetes.io/pod-name", "app-0"),
        ("authentication.kubernetes.io/pod-uid", "pod-1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), vec![v.to_owned()]))
    .collect();
    authority.token(
        &hub_token,
        TokenAnswer::User {
            username: "system:serviceaccount:demo:app".into(),
            uid: "sa-1".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:demo".into(),
            ],
            extra,
        },
    );
    authority.access(|spec| {
        let r = spec.resource_attributes.clone().unwrap_or_default();
        let own = spec.user.as_deref() == Some("system:serviceaccount:demo:app")
            && r.resource.as_deref() == Some("serviceaccounts")
            && r.subresource.as_deref() == Some("token")
            && r.name.as_deref() == Some("app");
        if own {
            AccessAnswer::Allow("RBAC: the fleet controller may mint for itself".into())
        } else {
            AccessAnswer::NoOpinion
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("hub.token");
    std::fs::write(&token_file, &hub_token).unwrap();
    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(json!({"server": "https://member-1.example:6443",
                    "config": {"audience": "member-1", "warrant": w.issuer()}})),
    );
    let ca = w.path("ca.crt");
    let out = credential(
        Some(&info),
        &[
            "--warrant-ca-file",
            to_str(&ca),
            "--token-file",
            to_str(&token_file),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = claims(printed["status"]["token"].as_str().unwrap());
    assert_eq!(c.iss, w.issuer(), "minted by warrant");
    assert_eq!(c.aud, ["member-1"]);
    assert_eq!(c.sub, "system:serviceaccount:demo:app");
    assert_eq!(c.kubernetes.pod.unwrap().uid, "pod-1");
}
