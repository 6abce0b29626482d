//! Token injection on the real binary, beside a cluster (the loopback Kubernetes fixture) where
//! warrant is not the signer: kube-apiserver's captured AdmissionReview goes to `serve`'s
//! webhook, kubectl applies the patch it answers, and the agent the patch adds is run as the
//! kubelet would run it (its environment from the patched pod, the pod's own kube token, which
//! kube-apiserver vouches for). A relying party (PyJWT, not warrant's code) then verifies the
//! tokens the agent wrote through warrant's discovery document, as an SDK's cloud would.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use warrant_kube_fixture::authority::{Authority, TokenAnswer};
use warrant_kube_fixture::objects::{node, pod, service_account};
use warrant_kube_fixture::{Cluster, Fixture};

use crate::support::*;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/admission");
const POD_UID: &str = "7f0c3a52-8f1e-4a8e-9d36-3f7c1b2a9e01";
const SA_UID: &str = "a1b2c3d4-0000-4000-8000-000000000001";

fn vector(name: &str) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(format!("{VECTORS}/admissionreview-{name}.json")).unwrap(),
    )
    .unwrap()
}

/// The cluster: `apps/s3-reader` annotated for AWS and Azure (as the captured reviews'
/// service account, with warrant's prefix), `apps/bad` with a role ARN that is not one, the
/// pod `apps/app` of s3-reader on `node-1`.
async fn cluster(authority: &Authority) -> Fixture {
    let fixture = Fixture::start_with(Cluster::new(), |_| authority.routes())
        .await
        .unwrap();
    let annotated = |name: &str, uid: &str, annotations: &[(&str, &str)]| {
        let mut account = service_account("apps", name, uid);
        account.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        account
    };
    fixture
        .create(&annotated(
            "s3-reader",
            SA_UID,
            &[
                warrant_testkit::INJECTED_ANNOTATIONS[0],
                warrant_testkit::INJECTED_ANNOTATIONS[1],
                warrant_testkit::INJECTED_ANNOTATIONS[2],
                // Others' annotations are not warrant's concern (and never kept).
                (
                    "eks.amazonaws.com/role-arn",
                    "arn:aws:iam::111122223333:role/s3-reader",
                ),
            ],
        ))
        .unwrap();
    fixture
        .create(&annotated(
            "bad",
            "a1b2c3d4-0000-4000-8000-000000000003",
            &[("aws.warrant.dev/role-arn", "s3-reader")],
        ))
        .unwrap();
    fixture.create(&node("node-1", "node-uid-1")).unwrap();
    fixture
        .create(&pod("apps", "app", POD_UID, "s3-reader", "node-1", None))
        .unwrap();
    fixture
}

/// Posts `review` to the webhook, anonymously as kube-apiserver does.
async fn admit(w: &Warrant, review: &Value) -> Value {
    let reply = w
        .http
        .post(w.url("/mutate/pods"))
        .json(review)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let answer: Value = reply.json().await.unwrap();
    answer["response"].clone()
}

/// The pod `object` with the response's patch applied by kubectl.
fn patched(object: &Value, response: &Value) -> Value {
    let patch = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("a patch"))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.json");
    std::fs::write(&file, object.to_string()).unwrap();
    let out = Command::new("kubectl")
        .env("KUBECONFIG", dir.path().join("none"))
        .args(["patch", "--local", "--type=json", "-o", "json", "-f"])
        .arg(&file)
        .arg("-p")
        .arg(String::from_utf8(patch).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "kubectl patch: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A container's variables, with downward API references resolved as the kubelet would for
/// pod `apps/app`, and warrant's paths moved under `root`.
fn environment(container: &Value, root: &Path) -> BTreeMap<String, String> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|var| {
            let name = var["name"].as_str().unwrap().to_owned();
            let value = match var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.name") => "app".to_owned(),
                Some("metadata.uid") => POD_UID.to_owned(),
                Some(other) => panic!("{name} refers to {other}"),
                None => var["value"].as_str().unwrap().to_owned(),
            };
            let value = value.replace(
                "/var/run/secrets/warrant.dev",
                &root.join("warrant.dev").display().to_string(),
            );
            (name, value)
        })
        .collect()
}

/// PyJWT as a relying party: fetches discovery from `issuer` and the JWKS it names (trusting
/// `ca`), and verifies `token` for `audience`; the claims.
fn relying_party(issuer: &str, ca: &Path, token: &str, audience: &str) -> Value {
    const SCRIPT: &str = r#"
import json, ssl, sys, urllib.request
import jwt
issuer, ca, token, audience = sys.argv[1:5]
context = ssl.create_default_context(cafile=ca)
with urllib.request.urlopen(issuer + "/.well-known/openid-configuration", context=context) as r:
    config = json.load(r)
assert config["issuer"] == issuer, config
key = jwt.PyJWKClient(config["jwks_uri"], ssl_context=context).get_signing_key_from_jwt(token)
claims = jwt.decode(token, key.key, algorithms=config["id_token_signing_alg_values_supported"],
                    audience=audience, issuer=issuer, options={"require": ["exp", "iat", "sub"]})
print(json.dumps(claims))
"#;
    let out = warrant_testkit::tools::python(&["jwt", "cryptography"])
        .arg("-c")
        .arg(SCRIPT)
        .args([issuer, ca.to_str().unwrap(), token, audience])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "PyJWT refused the token: {}",
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn an_injected_pods_agent_keeps_tokens_a_relying_party_verifies() {
    let authority = Authority::new();
    let fixture = cluster(&authority).await;
    let policy = tempfile::tempdir().unwrap();
    let policy_file = policy.path().join("policy.yaml");
    std::fs::write(
        &policy_file,
        "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nselfService:\n  audiences: [sts.amazonaws.com, 'api://AzureADTokenExchange']\n",
    )
    .unwrap();
    let w = Warrant::start_cluster(
        &fixture,
        &[
            "--delegate-authentication",
            "--authentication-skip-lookup",
            "--authorization-policy-file",
            policy_file.to_str().unwrap(),
            "--injection-agent-image",
            "ghcr.io/warrant-dev/warrant:v0.1.0",
            "--injection-warrant-url",
            "https://127.0.0.1:{port}",
            "--injection-ca-file",
            "{dir}/ca.crt",
            // The fixture's "kube-apiserver" calls without a certificate.
            "--injection-allow-anonymous",
        ],
    )
    .await;
    let ca = std::fs::read_to_string(w.path("ca.crt")).unwrap();

    // The captured review: the pod as the expected vector has it, with this server's URL and
    // CA in the agent's environment.
    let review = vector("pod-annotated-sa");
    let response = admit(&w, &review).await;
    assert_eq!(response["allowed"], true, "{response}");
    let pod = patched(&review["request"]["object"], &response);
    let mut expected: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{VECTORS}/expected/annotated-sa-aws-azure.json"))
            .unwrap(),
    )
    .unwrap();
    for var in expected["spec"]["initContainers"][0]["env"]
        .as_array_mut()
        .unwrap()
    {
        match var["name"].as_str() {
            Some("WARRANT_URL") => var["value"] = json!(w.issuer()),
            Some("WARRANT_CA_DATA") => var["value"] = json!(ca),
            _ => {}
        }
    }
    assert_eq!(pod, expected);

    // A malformed annotation refuses the pod, naming it.
    let mut bad = review.clone();
    bad["request"]["object"]["spec"]["serviceAccountName"] = json!("bad");
    let refused = admit(&w, &bad).await;
    assert_eq!(refused["allowed"], false);
    assert!(
        refused["status"]["message"]
            .as_str()
            .unwrap()
            .contains("aws.warrant.dev/role-arn is \"s3-reader\", not an IAM role ARN"),
        "{refused}"
    );

    // The kubelet's part: the pod's own kube token (kube-apiserver's, bound to the pod; warrant
    // asks kube-apiserver about it), projected where the agent reads it, for the audience the
    // pod's volume names: warrant's, never kube-apiserver's API audiences.
    let projected: Vec<&Value> = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["name"] == "warrant-kube-token")
        .flat_map(|v| v["projected"]["sources"].as_array().unwrap())
        .collect();
    assert_eq!(projected.len(), 1);
    let agent_audience = projected[0]["serviceAccountToken"]["audience"]
        .as_str()
        .expect("the agent's pod token names an audience");
    assert_eq!(agent_audience, "warrant.dev/token-agent");
    let root = tempfile::tempdir().unwrap();
    let kube_key = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let now = warrant_clock::Clock::System.now().as_second();
    let kube_token = kube_key
        .sign(&warrant_token::Claims::new(warrant_token::NewToken {
            issuer: "https://kubernetes.default.svc.cluster.local",
            namespace: "apps",
            service_account: warrant_token::ObjectRef::new("s3-reader", SA_UID),
            audiences: vec![agent_audience.into()],
            binding: warrant_token::Binding::Pod {
                pod: warrant_token::ObjectRef::new("app", POD_UID),
                node: Some(warrant_token::ObjectRef::new("node-1", "node-uid-1")),
            },
            issued_at: now,
            expires_at: now + 3600,
            warn_after: None,
            jti: "kube-jti-1".into(),
        }))
        .unwrap();
    authority.token(
        &kube_token,
        TokenAnswer::User {
            username: "system:serviceaccount:apps:s3-reader".into(),
            uid: SA_UID.into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:apps".into(),
            ],
            extra: [
                ("authentication.kubernetes.io/pod-name", "app"),
                ("authentication.kubernetes.io/pod-uid", POD_UID),
                ("authentication.kubernetes.io/node-name", "node-1"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), vec![v.to_owned()]))
            .collect(),
        },
    );
    let warrant_dir = root.path().join("warrant.dev");
    std::fs::create_dir_all(warrant_dir.join("kube")).unwrap();
    std::fs::create_dir_all(warrant_dir.join("tokens")).unwrap();
    std::fs::write(warrant_dir.join("kube/token"), &kube_token).unwrap();

    // The agent, as the pod runs it: its args and environment from the patched pod.
    let agent = &pod["spec"]["initContainers"][0];
    assert_eq!(agent["name"], "warrant-token-agent");
    let env = environment(agent, root.path());
    let args: Vec<&str> = agent["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let mut running = Command::new(BIN)
        .args(&args)
        .env_clear()
        .envs(&env)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its startup probe, as the kubelet runs it, until the first tokens are there.
    let probe: Vec<&str> = agent["startupProbe"]["exec"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|a| a.as_str().unwrap())
        .collect();
    let ready = || {
        Command::new(BIN)
            .args(&probe)
            .env_clear()
            .envs(&env)
            .output()
            .unwrap()
            .status
            .success()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !ready() {
        if let Some(status) = running.try_wait().unwrap() {
            let mut log = String::new();
            std::io::Read::read_to_string(running.stderr.as_mut().unwrap(), &mut log).unwrap();
            panic!("the agent exited with {status}: {log}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no token within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // warrant asked kube-apiserver about the agent's pod token for that audience alone.
    let asked: Vec<_> = authority
        .token_reviews()
        .into_iter()
        .filter(|review| review.spec.token == kube_token)
        .collect();
    assert!(!asked.is_empty());
    for review in asked {
        assert_eq!(review.spec.audiences, Some(vec![agent_audience.to_owned()]));
    }

    // The app container reads the files its variables name; a relying party verifies each
    // token through warrant's discovery.
    let app = environment(&pod["spec"]["containers"][0], root.path());
    for (variable, audience) in [
        ("AWS_WEB_IDENTITY_TOKEN_FILE", "sts.amazonaws.com"),
        ("AZURE_FEDERATED_TOKEN_FILE", "api://AzureADTokenExchange"),
    ] {
        let token = std::fs::read_to_string(&app[variable]).unwrap();
        let claims = relying_party(&w.issuer(), &w.path("ca.crt"), &token, audience);
        assert_eq!(claims["sub"], "system:serviceaccount:apps:s3-reader");
        assert_eq!(claims["iss"], w.issuer());
        assert_eq!(
            claims["kubernetes.io"]["pod"]["uid"], POD_UID,
            "bound to the pod"
        );
        assert_eq!(
            claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
            3600
        );
    }
    assert_eq!(
        app["AWS_ROLE_ARN"],
        "arn:aws:iam::111122223333:role/s3-reader"
    );

    // SIGTERM (the kubelet stopping the sidecar after the app): exit 0, files left in place.
    let status = Command::new("kill")
        .arg(running.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let exit = running.wait().unwrap();
    assert!(exit.success(), "{exit}");
    assert!(ready());

    // A renewed CA bundle (cert-manager rewrites the Secret's ca.crt) reaches the pods created
    // after it, without a restart.
    let renewed = warrant_testkit::TestCa::new("renewed warrant CA");
    let staged = w.path("ca.crt.new");
    std::fs::write(&staged, renewed.pem()).unwrap();
    std::fs::rename(&staged, w.path("ca.crt")).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let pod = patched(&review["request"]["object"], &admit(&w, &review).await);
        let env = environment(&pod["spec"]["initContainers"][0], root.path());
        if env["WARRANT_CA_DATA"] == renewed.pem() {
            break;
        }
        assert_eq!(
            env["WARRANT_CA_DATA"], ca,
            "neither the old bundle nor the new"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "the renewed CA never reached the pods"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A policy file in `dir` letting each pod's agent ask for the annotated audiences.
fn policy(dir: &Path) -> String {
    let file = dir.join("policy.yaml");
    std::fs::write(
        &file,
        "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nselfService:\n  audiences: [sts.amazonaws.com, 'api://AzureADTokenExchange']\n",
    )
    .unwrap();
    file.display().to_string()
}

/// The annotated pod's captured review, for the pod `name` of the ServiceAccount `account`.
fn review_for(account: &str, name: &str) -> Value {
    let mut review = vector("pod-annotated-sa");
    review["request"]["uid"] = json!(format!("uid-{name}"));
    review["request"]["object"]["metadata"]["name"] = json!(name);
    review["request"]["object"]["spec"]["serviceAccountName"] = json!(account);
    review
}

/// What warrant logs at startup when the webhook answers anonymous callers.
const ANONYMOUS_WARNING: &str = "token injection answers anonymous callers";

/// Issue 43: each anonymous review naming an unknown ServiceAccount cost an authenticated GET
/// to kube-apiserver; under a flood of them, a legitimate pod's review and a TokenRequest for
/// a pod created a moment earlier were refused with 503. Now an anonymous review is answered
/// from warrant's cache alone: the flood costs kube-apiserver nothing, the legitimate pod in
/// the middle of it is mutated, and the TokenRequest's own lookup (a live GET: the pod's watch
/// event is held back) gets through while the flood runs. Anonymous callers are answered only
/// because the flag says so, and warrant says at startup what they can learn.
// Multi-threaded: kubectl runs synchronously (on a blocking thread) while the fixture answers
// warrant's live GET. On the single thread of a plain `#[tokio::test]`, a blocked kubectl kept
// the fixture from answering, and the TokenRequest timed out (the live GET's 5 s): the
// artefact that once took this assertion out of the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anonymous_flood_of_unknown_service_accounts_costs_no_lookup() {
    let authority = Authority::new();
    let fixture = cluster(&authority).await;
    let dir = tempfile::tempdir().unwrap();
    let mut w = Warrant::start_cluster(
        &fixture,
        &[
            "--authorization-policy-file",
            &policy(dir.path()),
            "--injection-agent-image",
            "ghcr.io/warrant-dev/warrant:v0.1.0",
            "--injection-warrant-url",
            "https://127.0.0.1:{port}",
            "--injection-allow-anonymous",
            // The flood is about lookups: 50 at a time stay within the reviews in flight.
            "--injection-max-reviews-in-flight",
            "64",
        ],
    )
    .await;
    let warning = w.log_line(ANONYMOUS_WARNING).await;
    assert!(
        warning.contains("role ARNs") && warning.contains("--injection-allowed-names"),
        "{warning}"
    );
    assert_eq!(w.metric("warrant_admission_anonymous_allowed").await, 1.0);
    let cluster = fixture.cluster();
    // A pod warrant's watch has not told it about: only a live GET finds it.
    cluster.pause_watches(true);
    cluster
        .create(&pod(
            "apps",
            "fresh",
            "fresh-uid",
            "s3-reader",
            "node-1",
            None,
        ))
        .unwrap();

    // 400 reviews, 50 at a time, the legitimate one in the middle, and with it the
    // TokenRequest for the fresh pod.
    let mut answers: Vec<(usize, u16, Value)> = Vec::new();
    let mut token_request = None;
    for wave in 0..8 {
        let mut running = tokio::task::JoinSet::new();
        for i in wave * 50..(wave + 1) * 50 {
            let review = if i == 200 {
                review_for("s3-reader", "legitimate")
            } else {
                review_for(&format!("unknown-{i}"), &format!("flood-{i}"))
            };
            let (http, url) = (w.http.clone(), w.url("/mutate/pods"));
            running.spawn(async move {
                let reply = http.post(url).json(&review).send().await.unwrap();
                let code = reply.status().as_u16();
                (i, code, reply.json::<Value>().await.unwrap_or(Value::Null))
            });
        }
        if wave == 4 {
            let kubectl = w.kubectl_command(&[
                "create",
                "token",
                "s3-reader",
                "-n",
                "apps",
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                "fresh",
            ]);
            token_request = Some(tokio::task::spawn_blocking(move || {
                let mut kubectl = kubectl;
                kubectl.output().unwrap()
            }));
        }
        answers.extend(running.join_all().await);
    }
    let out = token_request.unwrap().await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let token = String::from_utf8(out.stdout).unwrap();
    let fresh = claims(token.trim()).kubernetes.pod.unwrap();
    assert_eq!(
        (fresh.name.as_str(), fresh.uid.as_str()),
        ("fresh", "fresh-uid")
    );
    cluster.pause_watches(false);

    for (i, code, answer) in &answers {
        assert_eq!(*code, 200, "review {i}: {answer}");
        let response = &answer["response"];
        assert_eq!(response["allowed"], true, "review {i}: {answer}");
        if *i == 200 {
            assert!(
                response["patch"].is_string(),
                "the legitimate pod: {answer}"
            );
        } else {
            assert!(response["patch"].is_null(), "review {i}: {answer}");
        }
    }
    let looked_up: Vec<String> = cluster
        .request_log()
        .into_iter()
        .filter(|line| line.contains("/serviceaccounts/unknown-"))
        .collect();
    assert!(
        looked_up.is_empty(),
        "{} GETs for the flood's ServiceAccounts: {:?}",
        looked_up.len(),
        &looked_up[..looked_up.len().min(3)]
    );
}

/// Issue 43: the webhook answered anyone, from its cache, unless told otherwise: an anonymous
/// caller read the role ARN of any cached ServiceAccount it named. Now injection without a
/// choice of callers does not start, and the message names both choices; both at once (the
/// injection component's variable left on beside the names) contradict.
#[test]
fn injection_without_a_choice_of_callers_does_not_start() {
    let injection = [
        "--injection-agent-image",
        "ghcr.io/warrant-dev/warrant:v0.1.0",
        "--injection-warrant-url",
        "https://warrant.warrant.svc",
    ];
    let out = serve_refusing(&injection, &[]);
    assert!(!out.status.success());
    let message = stderr(&out);
    for flag in ["--injection-allowed-names", "--injection-allow-anonymous"] {
        assert!(message.contains(flag), "{flag}: {message}");
    }
    assert!(message.contains("Who may call"), "{message}");

    let names = [
        &injection[..],
        &["--injection-allowed-names", "kube-apiserver-admission"],
    ]
    .concat();
    let both = serve_refusing(&names, &[("WARRANT_INJECTION_ALLOW_ANONYMOUS", "true")]);
    assert!(!both.status.success());
    assert!(stderr(&both).contains("contradict"), "{}", stderr(&both));

    // Anonymous callers with no webhook to answer them: a mistake said at once.
    let stray = serve_refusing(&["--injection-allow-anonymous"], &[]);
    assert!(!stray.status.success());
    assert!(
        stderr(&stray).contains("off without --injection-agent-image"),
        "{}",
        stderr(&stray)
    );
}

/// A client with `identity`, trusting the setup's CA.
fn client_with(w: &Warrant, identity: Option<reqwest::Identity>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(w.path("ca.crt")).unwrap()).unwrap();
    let mut builder = reqwest::Client::builder().tls_certs_only([ca]);
    if let Some(identity) = identity {
        builder = builder.identity(identity);
    }
    builder.build().unwrap()
}

/// Issue 43: the webhook answered anyone who reached the port. With
/// `--injection-allowed-names`, it answers kube-apiserver's client certificate (the identity
/// an AdmissionConfiguration's kubeconfig gives it) and refuses everyone else over real TLS:
/// no certificate 401, another user's 403; kube-apiserver's reviews look a ServiceAccount
/// that is not in the cache up live, and past a bound get a `Status` naming it.
#[tokio::test]
async fn client_certificate_mode_answers_kube_apiserver_only() {
    let authority = Authority::new();
    let fixture = cluster(&authority).await;
    let pki = tempfile::tempdir().unwrap();
    let ca = warrant_testkit::TestCa::new("cluster client CA");
    std::fs::write(pki.path().join("client-ca.crt"), ca.pem()).unwrap();
    let identity = |cn: &str| {
        let issued = ca.issue_client(cn, &[]);
        reqwest::Identity::from_pem(format!("{}{}", issued.pem(), issued.key_pem()).as_bytes())
            .unwrap()
    };
    let mut w = Warrant::start_cluster(
        &fixture,
        &[
            "--authorization-policy-file",
            &policy(pki.path()),
            "--client-ca-file",
            pki.path().join("client-ca.crt").to_str().unwrap(),
            "--injection-agent-image",
            "ghcr.io/warrant-dev/warrant:v0.1.0",
            "--injection-warrant-url",
            "https://127.0.0.1:{port}",
            "--injection-allowed-names",
            "kube-apiserver-admission",
            "--injection-max-containers",
            "8",
        ],
    )
    .await;
    let post = |client: reqwest::Client, review: Value| {
        let url = w.url("/mutate/pods");
        async move {
            let reply = client.post(url).json(&review).send().await.unwrap();
            let code = reply.status().as_u16();
            (code, reply.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let review = vector("pod-annotated-sa");

    let (code, status) = post(client_with(&w, None), review.clone()).await;
    assert_eq!(code, 401, "{status}");
    assert_eq!(status["kind"], "Status");
    let (code, status) = post(client_with(&w, Some(identity("mallory"))), review.clone()).await;
    assert_eq!(code, 403, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("--injection-allowed-names"),
        "{status}"
    );

    assert_eq!(w.metric("warrant_admission_anonymous_allowed").await, 0.0);

    let apiserver = client_with(&w, Some(identity("kube-apiserver-admission")));
    let (code, answer) = post(apiserver.clone(), review.clone()).await;
    assert_eq!(code, 200, "{answer}");
    assert!(answer["response"]["patch"].is_string(), "{answer}");

    // A ServiceAccount created a moment ago (not yet in warrant's cache) is looked up live for
    // kube-apiserver; an unknown one is remembered as absent, not asked again at once.
    fixture.cluster().pause_watches(true);
    let mut fresh = service_account("apps", "fresh", "a1b2c3d4-0000-4000-8000-000000000009");
    fresh.metadata.annotations = Some(
        [warrant_testkit::INJECTED_ANNOTATIONS[0]]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    fixture.create(&fresh).unwrap();
    let (code, answer) = post(apiserver.clone(), review_for("fresh", "p1")).await;
    assert_eq!(code, 200, "{answer}");
    assert!(answer["response"]["patch"].is_string(), "{answer}");
    for _ in 0..3 {
        let (code, answer) = post(apiserver.clone(), review_for("nobody", "p2")).await;
        assert_eq!(code, 200, "{answer}");
        assert!(answer["response"]["patch"].is_null(), "{answer}");
    }
    assert_eq!(
        fixture
            .cluster()
            .requests("/api/v1/namespaces/apps/serviceaccounts/nobody"),
        1
    );
    fixture.cluster().pause_watches(false);

    // Past a bound: a `Status` naming it.
    let mut big = review.clone();
    big["request"]["object"]["spec"]["containers"] = json!(
        (0..9)
            .map(|i| json!({"name": format!("c{i}")}))
            .collect::<Vec<_>>()
    );
    let (code, status) = post(apiserver, big).await;
    assert_eq!(code, 413, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("more than the 8"),
        "{status}"
    );
    assert!(!w.log().contains(ANONYMOUS_WARNING));
}

/// Issue 43: a 3 MiB `apiVersion` was quoted whole in the answer and in the log (20 requests:
/// +63 MB of log). Now neither the answer nor the log carries more than 256 characters of it.
#[tokio::test]
async fn a_huge_api_version_is_cut_in_the_answer_and_the_log() {
    let authority = Authority::new();
    let fixture = cluster(&authority).await;
    let mut w = Warrant::start_cluster(
        &fixture,
        &[
            "--injection-agent-image",
            "ghcr.io/warrant-dev/warrant:v0.1.0",
            "--injection-warrant-url",
            "https://127.0.0.1:{port}",
            "--injection-max-review-bytes",
            "4000000",
            "--injection-allow-anonymous",
        ],
    )
    .await;
    let mut review = vector("pod-annotated-sa");
    review["apiVersion"] = json!("v".repeat(3 * 1024 * 1024));
    let reply = w
        .http
        .post(w.url("/mutate/pods"))
        .json(&review)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 400);
    let text = reply.text().await.unwrap();
    assert!(text.len() < 1024, "{} bytes", text.len());
    assert!(text.contains(&"v".repeat(256)), "{text}");
    let line = w.log_line("admission review not answered").await;
    assert!(line.len() < 2048, "{} bytes: {}", line.len(), &line[..300]);
    assert!(!w.log().contains(&"v".repeat(257)));
}

/// The captured review of a pod with an init container and two containers, as a mesh's webhook
/// (called before warrant's: kube-apiserver orders the configurations by name) leaves it with
/// Istio's CNI: its validator, then its proxy as a native sidecar, both in kube-apiserver's
/// defaulted shape, ahead of the pod's own `migrate`.
fn meshed_review() -> Value {
    let mut review = vector("pod-init-containers-env-volumes");
    let pod = &mut review["request"]["object"];
    let defaulted = |name: &str, image: &str| {
        json!({
            "name": name,
            "image": image,
            "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        })
    };
    let mut proxy = defaulted("istio-proxy", "docker.io/istio/proxyv2:1.24.0");
    proxy["args"] = json!(["proxy", "sidecar"]);
    proxy["restartPolicy"] = json!("Always");
    proxy["startupProbe"] = json!({"httpGet": {"path": "/healthz/ready", "port": 15021}});
    let validation = defaulted("istio-validation", "docker.io/istio/proxyv2:1.24.0");
    let init = pod["spec"]["initContainers"].as_array_mut().unwrap();
    init.splice(0..0, [validation, proxy]);
    review
}

/// Issue 45: the agent went first, ahead of a mesh's native-sidecar proxy, which (with the
/// mesh's CNI) it needed to reach warrant, while the proxy waited for its startup probe. Now
/// the patch, applied by kubectl, puts it after the proxy, before `migrate`; the containers
/// `warrant.dev/skip-containers` names get nothing, and a typo there refuses the pod; a pod
/// labelled `warrant.dev/inject: "required"` is never admitted without its agent.
#[tokio::test]
async fn the_agent_follows_a_meshs_proxy_and_skipped_containers_get_nothing() {
    let authority = Authority::new();
    let fixture = cluster(&authority).await;
    fixture
        .create(&service_account(
            "apps",
            "plain",
            "a1b2c3d4-0000-4000-8000-000000000002",
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let w = Warrant::start_cluster(
        &fixture,
        &[
            "--authorization-policy-file",
            &policy(dir.path()),
            "--injection-agent-image",
            "ghcr.io/warrant-dev/warrant:v0.1.0",
            "--injection-warrant-url",
            "https://127.0.0.1:{port}",
            "--injection-allow-anonymous",
        ],
    )
    .await;
    let mut review = meshed_review();
    review["request"]["object"]["metadata"]["annotations"] =
        json!({"warrant.dev/skip-containers": "istio-proxy, sidecar"});
    let response = admit(&w, &review).await;
    assert_eq!(response["allowed"], true, "{response}");
    let pod = patched(&review["request"]["object"], &response);
    let init = pod["spec"]["initContainers"].as_array().unwrap().iter();
    let names: Vec<&Value> = init.map(|c| &c["name"]).collect();
    let want = [
        "istio-validation",
        "istio-proxy",
        "warrant-token-agent",
        "migrate",
    ];
    assert_eq!(names, want);
    for (field, index, injected) in [
        ("initContainers", 0, true),
        ("initContainers", 1, false),
        ("initContainers", 3, true),
        ("containers", 0, true),
        ("containers", 1, false),
    ] {
        let container = &pod["spec"][field][index];
        let has = |list: &str, name: &str| {
            let mut items = container[list].as_array().into_iter().flatten();
            items.any(|item| item["name"] == name)
        };
        let got = [
            has("env", "AZURE_FEDERATED_TOKEN_FILE"),
            has("volumeMounts", "warrant-tokens"),
        ];
        assert_eq!(got, [injected; 2], "{container}");
    }
    // The validator runs before the agent: said, by name.
    let warnings = response["warnings"].to_string();
    assert!(
        warnings
            .contains(r#"init container \"istio-validation\" runs before warrant's token agent"#),
        "{warnings}"
    );
    // kube-apiserver's second call, after the other webhooks: nothing more.
    let mut again = review.clone();
    again["request"]["object"] = pod;
    let second = admit(&w, &again).await;
    assert_eq!(second["allowed"], true);
    assert!(second["patch"].is_null(), "{second}");

    // A name that is no container of the pod.
    let mut typo = meshed_review();
    typo["request"]["object"]["metadata"]["annotations"] =
        json!({"warrant.dev/skip-containers": "istio-prxy"});
    let refused = admit(&w, &typo).await;
    assert_eq!(
        (&refused["allowed"], &refused["status"]["code"]),
        (&json!(false), &json!(400))
    );
    let says = r#"names \"istio-prxy\", which is not a container of the pod"#;
    assert!(refused.to_string().contains(says), "{refused}");

    // Labelled required: a ServiceAccount not in warrant's cache (this caller is answered from
    // the cache only) is a 503, not an unchanged pod; one without warrant's annotations is
    // refused, saying why.
    let required = |account: &str| {
        let mut review = review_for(account, "must-have-tokens");
        review["request"]["object"]["metadata"]["labels"] =
            json!({"warrant.dev/inject": "required"});
        review
    };
    let reply = w
        .http
        .post(w.url("/mutate/pods"))
        .json(&required("not-yet-created"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 503);
    let status = reply.text().await.unwrap();
    let says = "labelled warrant.dev/inject=required: not admitted without its tokens";
    assert!(status.contains(says), "{status}");
    let refused = admit(&w, &required("plain")).await;
    assert_eq!(refused["allowed"], false, "{refused}");
    let says = "carries none of the annotations that turn token injection on";
    assert!(refused.to_string().contains(says), "{refused}");
    // The same pod unlabelled is admitted as it is.
    let unlabelled = admit(&w, &review_for("plain", "p")).await;
    assert_eq!(unlabelled["allowed"], true);
    assert!(unlabelled["patch"].is_null(), "{unlabelled}");
}
