//! `warrant credential`, the exec credential plugin, run as client-go runs it: the real binary
//! with `KUBERNETES_EXEC_INFO` in its environment and stdin closed, its stdout parsed; and by
//! kubectl itself from a kubeconfig's exec section.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::support::*;
use crate::tokens::OBJECTS;
use warrant_testkit::{NODE_UID, POD_UID, SA_UID};

/// The member cluster's server URL, as its ClusterProfile gives it: the plugin's default
/// audience.
const MEMBER: &str = "https://member-1.example:6443";

/// A server whose self-service hands `demo/app` tokens for `member-1` and [`MEMBER`] (and
/// `extra` audiences), and the file of app's own pod-bound token for warrant's API.
async fn setup(extra: &str) -> (Warrant, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nselfService:\n  audiences: [member-1, \"{MEMBER}\"{extra}]\n  maxExpirationSeconds: 3600\n"
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
    let issuer = w.issuer();
    let flags = [
        "--warrant-url",
        &issuer,
        "--warrant-ca-file",
        to_str(&ca),
        "--token-file",
        to_str(&own),
    ];
    for version in [
        "client.authentication.k8s.io/v1",
        "client.authentication.k8s.io/v1beta1",
    ] {
        // A profile that names the hub's own warrant is fine (it is only checked).
        let cluster = json!({
            "server": MEMBER,
            "config": {"warrant": w.issuer()},
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
        assert_eq!(c.aud, [MEMBER], "the audience is the cluster's server URL");
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
        &[&flags[..], &["--audience", "member-1"]].concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = credential(
        Some(&exec_info("client.authentication.k8s.io/v1", None)),
        &flags,
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
        Some(json!({"server": MEMBER, "config": {}})),
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

    // --help shows where it goes: a kubeconfig user and a ClusterProfile access provider
    // (KEP-5339's name since the rename), and who controls which input.
    let help = Command::new(BIN)
        .args(["credential", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(
        help.contains("provideClusterInfo: true")
            && help.contains("accessProviders:")
            && help.contains("Who controls which input")
            && help.contains("--allow-profile-audience"),
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
        Some(json!({"server": MEMBER, "config": {}})),
    );
    let issuer = w.issuer();
    let args = [
        "--warrant-url",
        &issuer,
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
        Some(json!({"server": MEMBER, "config": {}})),
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
        (&[MEMBER.to_owned()][..], "system:serviceaccount:demo:app")
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
    use warrant_kube_fixture::{Cluster, Fixture};

    let authority = Authority::new();
    let fixture = Fixture::start_with(Cluster::new(), |_| authority.routes())
        .await
        .unwrap();
    create_standard_objects(&fixture, None);
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
            service_account: warrant_token::ObjectRef::new("app", SA_UID),
            audiences: vec![w.issuer()],
            binding: warrant_token::Binding::Pod {
                pod: warrant_token::ObjectRef::new("app-0", POD_UID),
                node: Some(warrant_token::ObjectRef::new("node-1", NODE_UID)),
            },
            issued_at: now,
            expires_at: now + 3600,
            warn_after: None,
            jti: "hub-jti-1".into(),
        }))
        .unwrap();
    let extra: BTreeMap<String, Vec<String>> = [
        ("authentication.kubernetes.io/pod-name", "app-0"),
        ("authentication.kubernetes.io/pod-uid", POD_UID),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), vec![v.to_owned()]))
    .collect();
    authority.token(
        &hub_token,
        TokenAnswer::User {
            username: "system:serviceaccount:demo:app".into(),
            uid: SA_UID.into(),
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
        Some(json!({"server": MEMBER, "config": {}})),
    );
    let ca = w.path("ca.crt");
    let out = credential(
        Some(&info),
        &[
            "--warrant-url",
            &w.issuer(),
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
    assert_eq!(c.aud, [MEMBER]);
    assert_eq!(c.sub, "system:serviceaccount:demo:app");
    assert_eq!(c.kubernetes.pod.unwrap().uid, POD_UID);
}

/// A loopback listener standing in for an attacker's server: nothing may ever connect to it.
struct Attacker(std::net::TcpListener);

impl Attacker {
    fn new() -> Attacker {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Attacker(listener)
    }

    fn url(&self, scheme: &str) -> String {
        format!(
            "{scheme}://127.0.0.1:{}",
            self.0.local_addr().unwrap().port()
        )
    }

    /// Fails if anything connected (a connection the plugin made and closed still waits in
    /// the accept queue).
    fn assert_untouched(&self, what: &str) {
        match self.0.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("{what}: the attacker's listener was reached: {other:?}"),
        }
    }
}

/// Runs the plugin for a member whose exec extension is `config`; the failure's stderr, which
/// must be one line, with nothing on stdout.
fn refused(config: Value, args: &[&str], env: &[(&str, &str)]) -> String {
    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(json!({"server": MEMBER, "config": config})),
    );
    let cache = tempfile::tempdir().unwrap();
    let mut command = credential_command(Some(&info), cache.path(), args);
    command
        .env_remove("WARRANT_URL")
        .env_remove("WARRANT_CA_FILE");
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().unwrap();
    assert!(!out.status.success(), "accepted: {}", stderr(&out));
    assert!(out.stdout.is_empty());
    let text = stderr(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    text
}

/// Issue 22 item 1: warrant's URL and CA are the hub's. A member's profile that names another
/// warrant (plain http, here a listener standing in for an attacker) or another CA is refused
/// before anything is sent; so is a warrant URL that is not https, and a flag that an appended
/// argument or environment variable would have changed.
#[tokio::test]
async fn only_the_hubs_flags_say_where_warrant_is_and_which_ca_it_has() {
    let (w, dir, own) = setup("").await;
    let ca = w.path("ca.crt");
    let issuer = w.issuer();
    let attacker = Attacker::new();
    let plain = attacker.url("http");
    let hub = [
        "--warrant-url",
        &issuer,
        "--warrant-ca-file",
        to_str(&ca),
        "--token-file",
        to_str(&own),
    ];

    // The profile alone names a warrant: not taken.
    let text = refused(
        json!({"warrant": plain}),
        &[
            "--warrant-ca-file",
            to_str(&ca),
            "--token-file",
            to_str(&own),
        ],
        &[],
    );
    assert!(
        text.starts_with("warrant: no warrant URL: give --warrant-url")
            && text.contains(&format!("the cluster's exec extension names {plain}")),
        "{text}"
    );
    attacker.assert_untouched("a profile's warrant URL");

    // The profile names another warrant than the hub's: refused, naming both.
    let text = refused(json!({"warrant": plain}), &hub, &[]);
    assert!(
        text.contains(&format!(
            "the cluster's exec extension names warrant at {plain}, but the hub's is {issuer}"
        )),
        "{text}"
    );
    attacker.assert_untouched("a profile's warrant URL beside the hub's");

    // http is refused even from the hub's own flags.
    let text = refused(
        json!({}),
        &[
            "--warrant-url",
            &plain,
            "--warrant-ca-file",
            to_str(&ca),
            "--token-file",
            to_str(&own),
        ],
        &[],
    );
    assert!(
        text.contains(&format!(
            "warrant's URL {plain} (--warrant-url, WARRANT_URL) is not https"
        )),
        "{text}"
    );
    attacker.assert_untouched("an http warrant URL");

    // A flag and its environment variable that differ (one of them appended from a profile's
    // additional-args or additional-envs): refused, either way round; a flag given twice too.
    let elsewhere = attacker.url("https");
    let text = refused(json!({}), &hub, &[("WARRANT_URL", &elsewhere)]);
    assert!(
        text.contains(&format!(
            "--warrant-url \"{issuer}\" and WARRANT_URL \"{elsewhere}\" differ"
        )),
        "{text}"
    );
    let text = refused(
        json!({}),
        &[
            "--warrant-url",
            &elsewhere,
            "--warrant-ca-file",
            to_str(&ca),
            "--token-file",
            to_str(&own),
        ],
        &[("WARRANT_URL", &issuer)],
    );
    assert!(text.contains("differ"), "{text}");
    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(json!({"server": MEMBER, "config": {}})),
    );
    let out = credential(
        Some(&info),
        &[&hub[..], &["--warrant-url", &elsewhere]].concat(),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot be used multiple times"),
        "{}",
        stderr(&out)
    );
    attacker.assert_untouched("a changed warrant URL");

    // warrant's CA: a profile's other CA is refused, naming both bundles; so is one where the
    // hub gives none; the hub's own bundle, repeated in the profile, is fine.
    let other = crate::pki::ca(dir.path(), "other-ca");
    let b64 = |path: &Path| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap())
    };
    let text = refused(json!({"warrantCA": b64(&other)}), &hub, &[]);
    assert!(
        text.contains("the cluster's exec extension names warrant's CA (warrantCA, sha256 ")
            && text.contains(&format!(
                "which differs from the hub's {} (sha256 ",
                ca.display()
            )),
        "{text}"
    );
    let text = refused(
        json!({"warrantCA": b64(&ca)}),
        &["--warrant-url", &issuer, "--token-file", to_str(&own)],
        &[],
    );
    assert!(text.contains("but the hub gives none"), "{text}");

    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(json!({"server": MEMBER,
                    "config": {"warrant": format!("{issuer}/"), "warrantCA": b64(&ca)}})),
    );
    let out = credential(Some(&info), &hub);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Issue 22 item 1: the token's audience is the member's server URL. A profile asking for
/// another (another member's) is refused unless the hub allows profile audiences; the hub's
/// own --audience wins and a profile that disagrees with it is refused.
#[tokio::test]
async fn a_members_profile_does_not_choose_the_audience() {
    let (w, _dir, own) = setup(", member-2").await;
    let ca = w.path("ca.crt");
    let issuer = w.issuer();
    let hub = [
        "--warrant-url",
        &issuer,
        "--warrant-ca-file",
        to_str(&ca),
        "--token-file",
        to_str(&own),
    ];
    let minted = |config: Value, extra: &[&str]| {
        let info = exec_info(
            "client.authentication.k8s.io/v1",
            Some(json!({"server": MEMBER, "config": config})),
        );
        let out = credential(Some(&info), &[&hub[..], extra].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
        claims(printed["status"]["token"].as_str().unwrap()).aud
    };

    assert_eq!(minted(json!({}), &[]), [MEMBER]);
    assert_eq!(minted(json!({"audience": MEMBER}), &[]), [MEMBER]);
    let text = refused(json!({"audience": "member-2"}), &hub, &[]);
    assert!(
        text.contains(&format!(
            "the cluster's exec extension asks for audience \"member-2\", not the cluster's server URL \"{MEMBER}\""
        )) && text.contains("--allow-profile-audience"),
        "{text}"
    );
    assert_eq!(
        minted(
            json!({"audience": "member-2"}),
            &["--allow-profile-audience"]
        ),
        ["member-2"]
    );

    assert_eq!(minted(json!({}), &["--audience", "member-1"]), ["member-1"]);
    assert_eq!(
        minted(json!({"audience": "member-1"}), &["--audience", "member-1"]),
        ["member-1"]
    );
    let text = refused(
        json!({"audience": "member-2"}),
        &[&hub[..], &["--audience", "member-1"]].concat(),
        &[],
    );
    assert!(
        text.contains("asks for audience \"member-2\", but the hub's --audience is \"member-1\""),
        "{text}"
    );
    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(json!({"server": MEMBER, "config": {}})),
    );
    let out = credential(
        Some(&info),
        &[
            &hub[..],
            &["--audience", "member-1", "--allow-profile-audience"],
        ]
        .concat(),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
}

/// Issue 22 item 8: a cache directory another user owns (made first, with a planted entry),
/// one that is a symbolic link, and a `.lock` that is a symbolic link are not used: the run
/// mints without the cache, says so once on stderr, and creates nothing through the links.
#[tokio::test]
async fn a_cache_that_is_not_the_users_own_is_not_used() {
    use std::collections::BTreeSet;
    use std::os::unix::fs::{chown, symlink};

    let (w, dir, own) = setup("").await;
    let ca = w.path("ca.crt");
    let issuer = w.issuer();
    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(json!({"server": MEMBER, "config": {}})),
    );
    let args = [
        "--warrant-url",
        &issuer,
        "--warrant-ca-file",
        to_str(&ca),
        "--token-file",
        to_str(&own),
    ];
    let run = |cache: &Path| {
        let out = credential_command(Some(&info), cache, &args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            printed["status"]["token"].as_str().unwrap().to_owned(),
            stderr(&out),
        )
    };
    let names = |dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    };
    let find = |dir: &Path, ext: &str| -> PathBuf {
        let found: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        let [one] = found.as_slice() else {
            panic!("one .{ext} in {}: {found:?}", dir.display());
        };
        one.clone()
    };

    // Another user's directory, holding a fresh entry for exactly this key with a planted token.
    let foreign = dir.path().join("foreign");
    let (first, quiet) = run(&foreign);
    assert!(quiet.is_empty(), "{quiet}");
    let entry = find(&foreign, "json");
    let mut planted: Value = serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    planted["token"] = json!("planted.token.value");
    std::fs::write(&entry, planted.to_string()).unwrap();
    for path in [foreign.clone(), entry.clone(), find(&foreign, "lock")] {
        chown(&path, Some(65534), Some(65534)).unwrap();
    }
    let before = names(&foreign);
    let (token, warning) = run(&foreign);
    assert_ne!(token, "planted.token.value", "a planted entry was served");
    assert_ne!(token, first);
    assert_eq!(
        warning,
        format!(
            "warrant: not using the token cache: {} is owned by uid 65534, not by this user (uid 0); minting without it",
            foreign.display()
        )
    );
    assert_eq!(names(&foreign), before, "nothing was written there");

    // A directory that is a symbolic link (to one of this user's): not followed.
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    symlink(&real, &link).unwrap();
    let (_, warning) = run(&link);
    assert_eq!(
        warning,
        format!(
            "warrant: not using the token cache: {} is a symbolic link; minting without it",
            link.display()
        )
    );
    assert!(names(&real).is_empty(), "{:?}", names(&real));

    // An entry's `.lock` replaced by a symbolic link to where a file would be created.
    let cache = dir.path().join("cache");
    run(&cache);
    let lock = find(&cache, "lock");
    std::fs::remove_file(&lock).unwrap();
    std::fs::remove_file(find(&cache, "json")).unwrap();
    let target = dir.path().join("created-through-the-link");
    symlink(&target, &lock).unwrap();
    let (_, warning) = run(&cache);
    assert_eq!(
        warning,
        format!(
            "warrant: not using the token cache: {} is a symbolic link; minting without it",
            lock.display()
        )
    );
    assert!(
        !target.exists(),
        "a file was created through the symlinked .lock"
    );
    assert!(
        names(&cache).iter().all(|n| !n.ends_with(".json")),
        "{:?}",
        names(&cache)
    );
}

/// A stand-in for warrant on loopback (TLS with the setup's serving certificate) that answers
/// every TokenRequest with `403` and the Status message `message`; its URL.
fn refusing_warrant(w: &Warrant, message: &str) -> String {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                      "message": message, "reason": "Forbidden", "code": 403})
    .to_string();
    fake_warrant(
        w,
        format!(
            "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// A stand-in for warrant on loopback (TLS with the setup's serving certificate) that answers
/// every request with `answer` (a whole HTTP/1.1 response); its URL.
fn fake_warrant(w: &Warrant, answer: String) -> String {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{Read as _, Write as _};

    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(w.path("serving.crt"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(w.path("serving.key")).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = std::sync::Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    // Serves until the test binary exits; blocked in accept, it costs nothing.
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let connection = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(connection, stream);
            // The request: its head, then as much body as it announces.
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") && tls.read(&mut byte).unwrap_or(0) == 1 {
                request.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&request).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            let mut request_body = vec![0u8; length];
            let _ = tls.read_exact(&mut request_body);
            let _ = tls.write_all(answer.as_bytes());
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    url
}

/// Issue 22 item 8: the server's message reaches stderr with its control characters escaped:
/// still one line, no terminal escape, no line that passes for the plugin's own.
#[tokio::test]
async fn a_servers_message_cannot_write_raw_control_characters() {
    let (w, _dir, own) = setup("").await;
    let ca = w.path("ca.crt");
    let fake = refusing_warrant(&w, "denied\nwarrant: all is well\u{1b}[2J\u{202e}");
    let text = refused(
        json!({}),
        &[
            "--warrant-url",
            &fake,
            "--warrant-ca-file",
            to_str(&ca),
            "--token-file",
            to_str(&own),
        ],
        &[],
    );
    assert_eq!(
        text,
        format!(
            "warrant: warrant at {fake} refused a token for demo/app (403): denied\\nwarrant: all is well\\u{{1b}}[2J\\u{{202e}}"
        )
    );
}

/// Issue 23 §5: the plugin's HTTP client is kube's. Its security properties, end to end: a
/// warrant whose certificate is not from the hub's CA is refused with a line naming the URL and
/// the cause, never the token; a redirect is not followed (the token goes to the hub's warrant
/// only), and says so; a 503 is one line too (no log line of the client's beside it).
#[tokio::test]
async fn the_plugins_client_trusts_the_hubs_ca_only_and_follows_no_redirect() {
    let (w, dir, own) = setup("").await;
    let ca = w.path("ca.crt");
    let token = std::fs::read_to_string(&own).unwrap();
    let token = token.trim();
    let run = |url: &str, ca: &Path| {
        refused(
            json!({}),
            &[
                "--warrant-url",
                url,
                "--warrant-ca-file",
                to_str(ca),
                "--token-file",
                to_str(&own),
            ],
            &[],
        )
    };

    // Another CA than the one that signed warrant's certificate: the system's roots are not
    // consulted either, and the TLS failure names the URL and why.
    let other = crate::pki::ca(dir.path(), "other-ca");
    let text = run(&w.issuer(), &other);
    assert!(
        text.starts_with(&format!(
            "warrant: cannot reach warrant at {}: ",
            w.issuer()
        )) && text.contains("invalid peer certificate")
            && text.contains("UnknownIssuer"),
        "{text}"
    );
    assert!(!text.contains(token), "{text}");

    // A redirect, to a listener standing in for an attacker: not followed.
    let attacker = Attacker::new();
    let elsewhere = format!(
        "{}/api/v1/namespaces/demo/serviceaccounts/app/token",
        attacker.url("https")
    );
    let fake = fake_warrant(
        &w,
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: {elsewhere}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ),
    );
    let text = run(&fake, &ca);
    assert_eq!(
        text,
        format!(
            "warrant: warrant at {fake} answered 307 Temporary Redirect (a redirect to {elsewhere}), which the plugin does not follow: give the URL warrant serves at"
        )
    );
    attacker.assert_untouched("a redirect from warrant");

    // Unavailable: kube's client logs server errors; the plugin's stderr is still one line.
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                      "message": "shutting down", "reason": "ServiceUnavailable", "code": 503})
    .to_string();
    let fake = fake_warrant(
        &w,
        format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert_eq!(
        run(&fake, &ca),
        format!("warrant: warrant at {fake} refused a token for demo/app (503): shutting down")
    );
}

/// Issue 27: `--key-binding dpop`. The plugin keeps a P-256 key in its cache directory (0600)
/// and gets a token whose cnf.jkt is that key's thumbprint (computed here by Python from the
/// key file); warrant's own API refuses that token as a bearer token and takes it with a proof
/// made with the stored key. The cache keeps bound and unbound tokens apart, and a hub that
/// ignores the binding is refused.
#[tokio::test]
async fn key_binding_gets_tokens_bound_to_the_plugins_own_key() {
    let (w, dir, own) = setup("").await;
    // The token's audience is warrant's own API (the cluster's server here), so that warrant
    // can be asked to take it.
    std::fs::write(
        dir.path().join("policy.yaml"),
        format!(
            "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nselfService:\n  audiences: [member-1, \"{}\"]\n  maxExpirationSeconds: 3600\n",
            w.issuer()
        ),
    )
    .unwrap();
    let cache = dir.path().join("cache");
    let ca = w.path("ca.crt");
    let issuer = w.issuer();
    let info = exec_info(
        "client.authentication.k8s.io/v1",
        Some(json!({"server": issuer, "config": {}})),
    );
    let flags = [
        "--warrant-url",
        &issuer,
        "--warrant-ca-file",
        to_str(&ca),
        "--token-file",
        to_str(&own),
    ];
    let run = |binding: &str| {
        credential_command(
            Some(&info),
            &cache,
            &[&flags[..], &["--key-binding", binding]].concat(),
        )
        .output()
        .unwrap()
    };
    let token_of = |out: &Output| {
        assert!(out.status.success(), "{}", stderr(out));
        let credential: Value = serde_json::from_slice(&out.stdout).unwrap();
        credential["status"]["token"].as_str().unwrap().to_owned()
    };
    let mut last = None;
    w.eventually("the policy with warrant's audience to load", || {
        let out = run("dpop");
        let ok = out.status.success();
        last = Some(out);
        ok
    })
    .await;
    let first = last.unwrap();
    let bound = token_of(&first);

    // One key file, the user's alone; the token names its thumbprint.
    let keys: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "key"))
        .collect();
    let [key] = keys.as_slice() else {
        panic!("one key file: {keys:?}");
    };
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let jkt = python_dpop(key, None)["jkt"].as_str().unwrap().to_owned();
    let c = claims(&bound);
    assert_eq!(
        c.cnf
            .as_ref()
            .and_then(|c| c.binding().ok()?.jkt.as_deref()),
        Some(jkt.as_str())
    );
    assert_eq!(c.aud, std::slice::from_ref(&issuer));
    // The key never reaches the output: stdout is the ExecCredential alone.
    let pem = std::fs::read_to_string(key).unwrap();
    let key_line = pem.lines().nth(1).unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&first.stdout),
        stderr(&first)
    );
    assert!(!printed.contains(key_line), "{printed}");
    assert!(!printed.contains("PRIVATE"), "{printed}");

    // warrant's API (its discovery, which any authenticated caller may read): as a bearer
    // token, refused with RFC 9449's challenge; under the DPoP scheme with a proof by the stored
    // key, served.
    let api = w.url("/api");
    let bearer = w.http.get(&api).bearer_auth(&bound).send().await.unwrap();
    assert_eq!(bearer.status(), 401);
    let challenge = bearer.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.starts_with(r#"DPoP error="invalid_dpop_proof""#),
        "{challenge}"
    );
    let proof = python_dpop(key, Some(("GET", &api, Some(&bound))));
    let with_proof = w
        .http
        .get(&api)
        .header("authorization", format!("DPoP {bound}"))
        .header("dpop", proof["proof"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    let status = with_proof.status();
    assert_eq!(status, 200, "{}", with_proof.text().await.unwrap());

    // The next run: the same key and the cached bound token.
    assert_eq!(token_of(&run("dpop")), bound);
    // Binding off, same cache: not the bound token, and an unbound one.
    let unbound = token_of(&run("none"));
    assert_ne!(unbound, bound);
    assert_eq!(claims(&unbound).cnf, None);
    // It is a bearer token: the 401 above was the binding's doing.
    let served = w.http.get(&api).bearer_auth(&unbound).send().await.unwrap();
    assert_eq!(served.status(), 200);
    assert_eq!(token_of(&run("none")), unbound);
    // Binding on again: the bound one, never the unbound.
    assert_eq!(token_of(&run("dpop")), bound);
    let keys_now = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|e| e == "key")
        })
        .count();
    assert_eq!(keys_now, 1, "the same key, not a new one per run");

    // A hub that ignores the proof (answers a token without cnf): refused, nothing printed.
    let ignoring = fake_warrant(&w, {
        let answer = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "status": {"token": unbound, "expirationTimestamp": "2099-01-01T00:00:00Z"}})
            .to_string();
        format!(
            "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        )
    });
    let out = credential_command(
        Some(&info),
        &cache,
        &[
            "--warrant-url",
            &ignoring,
            "--warrant-ca-file",
            to_str(&ca),
            "--token-file",
            to_str(&own),
            "--key-binding",
            "dpop",
            "--no-cache",
        ],
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let text = stderr(&out);
    assert!(
        text.starts_with(&format!("warrant: warrant at {ignoring} answered a token for demo/app that is not bound to the plugin's DPoP key (its cnf.jkt is absent")),
        "{text}"
    );
    assert!(!text.contains(&unbound), "never the token: {text}");

    // A profile's additional-envs cannot turn it off beside the hub's flag.
    let out = credential_command(
        Some(&info),
        &cache,
        &[&flags[..], &["--key-binding", "dpop"]].concat(),
    )
    .env("WARRANT_KEY_BINDING", "none")
    .output()
    .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--key-binding \"dpop\" and WARRANT_KEY_BINDING \"none\" differ"),
        "{}",
        stderr(&out)
    );
}
