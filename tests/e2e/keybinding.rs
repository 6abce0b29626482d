//! Key-bound tokens (issue 27) on the real binary over real TLS: issued, presented to warrant,
//! required by policy, reviewed, and checked by `warrant verify`. Proofs and thumbprints come
//! from Python (PyJWT and `cryptography`, see [`python_dpop`]), not from warrant's code; kubectl
//! plays the client that can only send a bearer token.

use std::path::Path;

use serde_json::{Value, json};

use crate::pki;
use crate::support::*;
use crate::tokens::OBJECTS;

const TOKEN_PATH: &str = "/api/v1/namespaces/demo/serviceaccounts/app/token";

/// `demo/app` may read `/metrics` with its own tokens, so a request to `/metrics` shows whether
/// a token authenticated; plus what the test adds.
fn policy(dir: &Path, extra: &str) -> String {
    let path = dir.join("policy.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: metrics
  subjects: [{{kind: ServiceAccount, namespace: demo, name: app}}]
  metrics: true
{extra}"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// An HTTPS client trusting the setup's CA, presenting `identity`.
fn client(w: &Warrant, identity: Option<reqwest::Identity>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(w.path("ca.crt")).unwrap()).unwrap();
    let mut builder = reqwest::Client::builder().tls_certs_only([ca]);
    if let Some(identity) = identity {
        builder = builder.identity(identity);
    }
    builder.build().unwrap()
}

struct Answer {
    code: u16,
    challenge: String,
    json: Value,
}

async fn send(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Answer {
    let mut request = client.request(method, url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request.send().await.unwrap();
    let code = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let json = response.json().await.unwrap_or(Value::Null);
    Answer {
        code,
        challenge,
        json,
    }
}

fn token_request(audiences: &[&str]) -> Option<Value> {
    let spec = if audiences.is_empty() {
        json!({})
    } else {
        json!({"audiences": audiences})
    };
    Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}))
}

fn cnf(token: &str) -> Value {
    use base64::Engine as _;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.split('.').nth(1).unwrap())
        .unwrap();
    serde_json::from_slice::<Value>(&payload).unwrap()["cnf"].clone()
}

/// A token for `demo/app` and `audiences` (none: warrant's API audiences), issued by the admin
/// with a proof made by Python with the key in `key` (made there first if missing), and that
/// key's RFC 7638 thumbprint as Python computes it.
pub(crate) async fn dpop_bound_token(
    w: &Warrant,
    key: &Path,
    audiences: &[&str],
) -> (String, String) {
    let issue = python_dpop(key, Some(("POST", &w.url(TOKEN_PATH), None)));
    let a = send(
        &client(w, None),
        reqwest::Method::POST,
        &w.url(TOKEN_PATH),
        &[
            ("authorization", &format!("Bearer {}", w.admin_token())),
            ("dpop", issue["proof"].as_str().unwrap()),
        ],
        token_request(audiences),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.json);
    let token = a.json["status"]["token"].as_str().unwrap().to_owned();
    (token, issue["jkt"].as_str().unwrap().to_owned())
}

/// A token for `demo/app` and `audiences`, bound to the client certificate `<name>.crt` in
/// `dir` (made by [`pki::client`]), asked for over a connection presenting it.
pub(crate) async fn certificate_bound_token(
    w: &Warrant,
    dir: &Path,
    name: &str,
    audiences: &[&str],
) -> String {
    let a = send(
        &client(w, Some(pki::identity(dir, name))),
        reqwest::Method::POST,
        &w.url(TOKEN_PATH),
        &[("warrant-token-binding", "client-certificate")],
        token_request(audiences),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.json);
    a.json["status"]["token"].as_str().unwrap().to_owned()
}

/// RFC 8705's `x5t#S256` of the PEM certificate `path`, computed by Python's ssl and hashlib.
fn python_x5t(path: &Path) -> String {
    let out = warrant_testkit::tools::python(&[])
        .arg("-c")
        .arg(
            "import base64, hashlib, ssl, sys\n\
             der = ssl.PEM_cert_to_DER_cert(open(sys.argv[1]).read())\n\
             print(base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b'=').decode())",
        )
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "python3: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `kubectl get --raw /metrics` with only `token` as credential (kubectl sends it as a bearer
/// token, which is all client-go can do).
fn kubectl_metrics_with(w: &Warrant, token: &str) -> std::process::Output {
    w.kubectl(&["get", "--raw", "/metrics", "--token", token])
}

/// A DPoP-bound token: issued with a proof, used with one, refused as a bearer token (also from
/// kubectl), with another key's proof, and with a proof used before.
#[tokio::test]
async fn a_dpop_bound_token_works_only_with_a_fresh_proof_of_its_key() {
    let setup = tempfile::tempdir().unwrap();
    let policy = policy(setup.path(), "");
    let w = Warrant::start(OBJECTS, &["--authorization-policy-file", &policy]).await;
    let http = client(&w, None);
    let holder = setup.path().join("holder.key");
    let thief = setup.path().join("thief.key");

    let (token, jkt) = dpop_bound_token(&w, &holder, &[]).await;
    assert_eq!(cnf(&token), json!({"jkt": jkt}));

    let metrics = w.url("/metrics");
    let dpop = format!("DPoP {token}");
    let proof = python_dpop(&holder, Some(("GET", &metrics, Some(&token))));
    let proof = proof["proof"].as_str().unwrap();
    let with_proof = |proof: String| {
        let (http, metrics, dpop) = (&http, &metrics, &dpop);
        async move {
            send(
                http,
                reqwest::Method::GET,
                metrics,
                &[("authorization", dpop), ("dpop", &proof)],
                None,
            )
            .await
        }
    };
    let a = with_proof(proof.to_owned()).await;
    assert_eq!(a.code, 200, "the holder's proof: {}", a.json);

    // The same proof again: a replay.
    let a = with_proof(proof.to_owned()).await;
    assert_eq!(a.code, 401, "a replayed proof");
    assert!(
        a.challenge.starts_with("DPoP error=\"invalid_dpop_proof\""),
        "{}",
        a.challenge
    );
    // A proof of another key, for the same request and token.
    let stolen = python_dpop(&thief, Some(("GET", &metrics, Some(&token))));
    let a = with_proof(stolen["proof"].as_str().unwrap().to_owned()).await;
    assert_eq!(a.code, 401, "another key's proof");
    // As a bearer token, from reqwest and from kubectl.
    let a = send(
        &http,
        reqwest::Method::GET,
        &metrics,
        &[("authorization", &format!("Bearer {token}"))],
        None,
    )
    .await;
    assert_eq!(a.code, 401, "as a bearer token");
    assert!(a.challenge.starts_with("DPoP "), "{}", a.challenge);
    let out = kubectl_metrics_with(&w, &token);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("Unauthorized"), "{}", stderr(&out));
    // A new proof of the holder's key works again.
    let fresh = python_dpop(&holder, Some(("GET", &metrics, Some(&token))));
    let a = with_proof(fresh["proof"].as_str().unwrap().to_owned()).await;
    assert_eq!(a.code, 200, "a fresh proof: {}", a.json);
}

/// warrant with a client CA whose certificates `deployer` and `other` (in the returned
/// directory) name users of those names: the deployer may ask for any token for `demo/app`, and
/// neither may read /metrics, so a 200 there is a token's service account, a 403 a
/// certificate's user.
async fn certificate_setup() -> (tempfile::TempDir, Warrant) {
    let setup = tempfile::tempdir().unwrap();
    let dir = setup.path();
    let ca = pki::ca(dir, "client-ca");
    pki::client(dir, "client-ca", "deployer", "deployer", "");
    pki::client(dir, "client-ca", "other", "other", "");
    let policy = policy(
        dir,
        "- name: deployer
  subjects: [{kind: User, name: deployer}]
  tokens: {namespaces: [demo], audiences: ['*']}
",
    );
    let w = Warrant::start(
        OBJECTS,
        &[
            "--client-ca-file",
            ca.to_str().unwrap(),
            "--authorization-policy-file",
            &policy,
        ],
    )
    .await;
    (setup, w)
}

/// A certificate-bound token: asked for over a client certificate, usable only on a connection
/// presenting that certificate.
#[tokio::test]
async fn a_certificate_bound_token_works_only_over_its_certificate() {
    let (setup, w) = certificate_setup().await;
    let dir = setup.path();
    let token = certificate_bound_token(&w, dir, "deployer", &[]).await;
    assert_eq!(
        cnf(&token),
        json!({"x5t#S256": python_x5t(&dir.join("deployer.crt"))})
    );

    let bearer = format!("Bearer {token}");
    let metrics = w.url("/metrics");
    let deployer = client(&w, Some(pki::identity(dir, "deployer")));
    let a = send(
        &deployer,
        reqwest::Method::GET,
        &metrics,
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert_eq!(a.code, 200, "over its certificate: {}", a.json);
    let other = client(&w, Some(pki::identity(dir, "other")));
    let a = send(
        &other,
        reqwest::Method::GET,
        &metrics,
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert_eq!(a.code, 401, "over another certificate of the same CA");
    let out = kubectl_metrics_with(&w, &token);
    assert!(!out.status.success(), "without a certificate");
    assert!(stderr(&out).contains("Unauthorized"), "{}", stderr(&out));
}

/// `requireKeyBinding`: kubectl (which cannot bind) is refused a token for a listed audience
/// with the reason; the same request with a proof is issued a bound token.
#[tokio::test]
async fn the_policy_refuses_unbound_tokens_for_a_listed_audience() {
    let setup = tempfile::tempdir().unwrap();
    let policy = policy(
        setup.path(),
        "requireKeyBinding:\n  audiences: ['https://payments.*']\n",
    );
    let w = Warrant::start(OBJECTS, &["--authorization-policy-file", &policy]).await;
    let out = w.create_token_as("app", &["--audience", "https://payments.internal"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "cannot request an unbound token for the audience \"https://payments.internal\": the authorization policy requires tokens for it to be bound to a key"
        ),
        "{}",
        stderr(&out)
    );
    // Other audiences are not held to it.
    w.token(&["--audience", "vault"]);

    let key = setup.path().join("workload.key");
    let (token, jkt) = dpop_bound_token(&w, &key, &["https://payments.internal"]).await;
    assert_eq!(cnf(&token), json!({"jkt": jkt}));
}

/// `--dpop-htu-origin`: proofs must name the origin clients know warrant by, whatever host the
/// connection addressed (here 127.0.0.1, as a proxy that rewrites `Host` would leave it); a
/// proof for the address itself is refused. A bad origin stops the server with the reason.
#[tokio::test]
async fn proofs_name_the_configured_origin() {
    let setup = tempfile::tempdir().unwrap();
    let origin = "https://warrant.example.com";
    let w = Warrant::start(OBJECTS, &["--dpop-htu-origin", origin]).await;
    let key = setup.path().join("workload.key");
    let ask = |htu: String| {
        let (w, key) = (&w, &key);
        async move {
            let proof = python_dpop(key, Some(("POST", &htu, None)));
            send(
                &client(w, None),
                reqwest::Method::POST,
                &w.url(TOKEN_PATH),
                &[
                    ("authorization", &format!("Bearer {}", w.admin_token())),
                    ("dpop", proof["proof"].as_str().unwrap()),
                ],
                token_request(&["vault"]),
            )
            .await
        }
    };
    let a = ask(format!("{origin}{TOKEN_PATH}")).await;
    assert_eq!(a.code, 201, "{}", a.json);
    let a = ask(w.url(TOKEN_PATH)).await;
    assert_eq!(a.code, 400, "{}", a.json);
    assert_eq!(
        a.json["message"],
        "invalid DPoP proof: DPoP proof htu does not match the request URI"
    );

    let out = serve_refusing(&["--dpop-htu-origin", "http://warrant.example.com"], &[]);
    assert!(
        stderr(&out).contains(
            "'http://warrant.example.com' for '--dpop-htu-origin <URL>': must be https:// with a host"
        ),
        "{}",
        stderr(&out)
    );
}

/// Reviews of a DPoP-bound token, with kubectl as a relying party's client: kube's TokenReview
/// (no place for a proof) refuses it and points to warrant.dev's; warrant.dev's with the proof
/// the relying party received authenticates it and says which key was proven, once; without
/// the proof it is refused.
#[tokio::test]
async fn a_review_authenticates_a_key_bound_token_only_with_its_proof() {
    let setup = tempfile::tempdir().unwrap();
    let w = Warrant::start(OBJECTS, &[]).await;
    let key = setup.path().join("workload.key");
    let relying_party = "https://payments.example/charge";
    let (token, jkt) = dpop_bound_token(&w, &key, &["payments"]).await;

    let kube = w.review(&token, &["payments"]);
    assert_eq!(kube["authenticated"], Value::Null, "{kube}");
    assert!(
        kube["error"]
            .as_str()
            .unwrap()
            .contains("/apis/warrant.dev/v1alpha1/tokenreviews"),
        "{kube}"
    );

    // What the relying party received: the token and a proof for its own request.
    let proof = python_dpop(&key, Some(("POST", relying_party, Some(&token))));
    let review = |dpop: Option<&str>| {
        let mut spec = json!({"token": token, "audiences": ["payments"]});
        if let Some(proof) = dpop {
            spec["dpop"] = json!({"proof": proof, "method": "POST", "uri": relying_party});
        }
        w.kubectl_create(
            &json!({"apiVersion": "warrant.dev/v1alpha1", "kind": "TokenReview",
                                 "spec": spec}),
        )["status"]
            .clone()
    };
    let with_proof = review(proof["proof"].as_str());
    assert_eq!(with_proof["authenticated"], true, "{with_proof}");
    assert_eq!(
        with_proof["user"]["username"],
        "system:serviceaccount:demo:app"
    );
    assert_eq!(
        with_proof["keyBinding"],
        json!({"method": "DPoP", "thumbprint": jkt})
    );
    let replayed = review(proof["proof"].as_str());
    assert_eq!(replayed["authenticated"], Value::Null, "{replayed}");
    assert!(
        replayed["error"]
            .as_str()
            .unwrap()
            .contains("already been used"),
        "{replayed}"
    );
    let without = review(None);
    assert_eq!(without["authenticated"], Value::Null, "{without}");
    assert!(
        without["error"].as_str().unwrap().contains("spec.dpop"),
        "{without}"
    );
}

/// Issue 27: `warrant verify` on a DPoP-bound token (issued by the real server for a proof made
/// by Python from a key file): refused without a proof, naming the binding and the flags and
/// never the token; accepted with a proof by the bound key for the request; refused with
/// another key's proof; an unbound token given a proof or a certificate is refused as not bound.
#[tokio::test]
async fn warrant_verify_checks_the_key_binding_of_a_token() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let keys = tempfile::tempdir().unwrap();
    let (holder, thief) = (
        keys.path().join("holder.key"),
        keys.path().join("thief.key"),
    );
    let (bound, jkt) = dpop_bound_token(&w, &holder, &["vault"]).await;
    assert_eq!(
        claims(&bound)
            .cnf
            .unwrap()
            .binding()
            .unwrap()
            .jkt
            .clone()
            .unwrap(),
        jkt
    );

    let verify = |token: &str, extra: &[&std::ffi::OsStr]| {
        w.verify_command("vault")
            .args(extra)
            .arg(token)
            .output()
            .unwrap()
    };
    let login = "https://vault.example/v1/auth/jwt/login";
    let proof_flags = |proof: &str| -> Vec<std::ffi::OsString> {
        [
            "--dpop-proof",
            proof,
            "--dpop-method",
            "POST",
            "--dpop-uri",
            login,
        ]
        .iter()
        .map(Into::into)
        .collect()
    };
    let run = |token: &str, flags: Vec<std::ffi::OsString>| {
        let flags: Vec<&std::ffi::OsStr> = flags.iter().map(|f| f.as_os_str()).collect();
        verify(token, &flags)
    };

    // As a bearer token: refused, naming the binding and the way to give a proof.
    let out = run(&bound, vec![]);
    assert!(!out.status.success());
    let text = stderr(&out);
    assert_eq!(
        text,
        format!(
            "warrant: the token is bound to a DPoP key (cnf.jkt {jkt}) and is not valid as a bearer token: give the proof that came with it (--dpop-proof, --dpop-method, --dpop-uri)"
        )
    );
    assert!(out.stdout.is_empty());

    // With the holder's proof for this request and this token: valid, claims printed.
    let good = python_dpop(&holder, Some(("POST", login, Some(&bound))));
    let out = run(&bound, proof_flags(good["proof"].as_str().unwrap()));
    assert!(out.status.success(), "{}", stderr(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["cnf"]["jkt"], jkt.as_str());
    // The proof read from standard input works the same.
    let mut child = w
        .verify_command("vault")
        .args([
            "--dpop-proof",
            "-",
            "--dpop-method",
            "POST",
            "--dpop-uri",
            login,
            &bound,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(good["proof"].as_str().unwrap().as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    // Another key's proof, otherwise right: refused.
    let stolen = python_dpop(&thief, Some(("POST", login, Some(&bound))));
    let out = run(&bound, proof_flags(stolen["proof"].as_str().unwrap()));
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "warrant: the DPoP proof is not valid for this token: DPoP proof key does not match the key the token is bound to (cnf.jkt)"
    );
    // The holder's proof for another request: refused.
    let mut elsewhere = proof_flags(good["proof"].as_str().unwrap());
    elsewhere[5] = "https://other.example/v1/auth/jwt/login".into();
    let out = run(&bound, elsewhere);
    assert!(!out.status.success());
    assert!(
        stderr(&out).ends_with("DPoP proof htu does not match the request URI"),
        "{}",
        stderr(&out)
    );

    // An unbound token with a proof or a certificate: not bound, so refused.
    let unbound = w.token(&["--audience", "vault"]);
    let proof = python_dpop(&holder, Some(("POST", login, Some(&unbound))));
    let out = run(&unbound, proof_flags(proof["proof"].as_str().unwrap()));
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "warrant: --dpop-proof was given, but the token is not bound to a DPoP key (it has no cnf.jkt)"
    );
    let out = run(
        &unbound,
        vec!["--client-certificate".into(), w.path("serving.crt").into()],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the token is not bound to a certificate"),
        "{}",
        stderr(&out)
    );
    // And alone it is valid, as before.
    assert!(run(&unbound, vec![]).status.success());
}

/// Issue 27: `warrant verify` on a certificate-bound token (RFC 8705; issued by the real server
/// over a client certificate): refused without the certificate, naming its thumbprint; valid
/// with that certificate; refused with another of the same CA.
#[tokio::test]
async fn warrant_verify_checks_the_certificate_of_a_certificate_bound_token() {
    let (setup, w) = certificate_setup().await;
    let dir = setup.path();
    let token = certificate_bound_token(&w, dir, "deployer", &["vault"]).await;
    // The thumbprint by RFC 8705's recipe, with Python's ssl and hashlib (not warrant's code).
    let x5t = python_x5t(&dir.join("deployer.crt"));
    assert_eq!(
        claims(&token)
            .cnf
            .unwrap()
            .binding()
            .unwrap()
            .x5t_s256
            .as_deref(),
        Some(x5t.as_str())
    );

    let verify = |certificate: Option<&str>| {
        let mut command = w.verify_command("vault");
        if let Some(name) = certificate {
            command
                .arg("--client-certificate")
                .arg(dir.join(format!("{name}.crt")));
        }
        command.arg(&token).output().unwrap()
    };
    let out = verify(None);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "warrant: the token is bound to a client certificate (cnf x5t#S256 {x5t}) and is not valid as a bearer token: give the certificate of the connection it came over (--client-certificate)"
        )
    );
    let out = verify(Some("deployer"));
    assert!(out.status.success(), "{}", stderr(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["cnf"]["x5t#S256"], x5t.as_str());
    let out = verify(Some("other"));
    assert!(!out.status.success());
    assert!(
        stderr(&out).ends_with(&format!(
            "is not the one the token is bound to (cnf x5t#S256 {x5t})"
        )),
        "{}",
        stderr(&out)
    );
}
