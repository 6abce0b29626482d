//! A relying party's view: discovery document, then the JWKS it names, then a token verified
//! with an independent JWT library.

use jsonwebtoken::{DecodingKey, Validation, decode, jwk::JwkSet};
use serde_json::Value;

use crate::support::*;
use crate::tokens::OBJECTS;

#[tokio::test]
async fn a_relying_party_verifies_tokens_through_discovery() {
    let w = Warrant::start(OBJECTS, &[]).await;
    // Served without authentication: relying parties have no credentials.
    let r = w
        .http
        .get(w.url("/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    assert_eq!(r.headers()["cache-control"], "public, max-age=3600");
    let discovery: Value = r.json().await.unwrap();
    assert_eq!(discovery["issuer"], w.issuer());
    assert_eq!(
        discovery["id_token_signing_alg_values_supported"],
        serde_json::json!(["RS256"])
    );
    let jwks_uri = discovery["jwks_uri"].as_str().unwrap();
    assert_eq!(jwks_uri, format!("{}/openid/v1/jwks", w.issuer()));

    let r = w.http.get(jwks_uri).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/jwk-set+json");
    let jwks: JwkSet = r.json().await.unwrap();

    let token = w.token(&["--audience", "sts.example.com"]);
    let token = token.trim();
    let header = jsonwebtoken::decode_header(token).unwrap();
    let jwk = jwks
        .find(header.kid.as_deref().unwrap())
        .expect("the token's kid is in the JWKS");
    let mut validation = Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_audience(&["sts.example.com"]);
    validation.set_issuer(&[w.issuer()]);
    let verified =
        decode::<Value>(token, &DecodingKey::from_jwk(jwk).unwrap(), &validation).unwrap();
    assert_eq!(verified.claims["sub"], "system:serviceaccount:demo:app");
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
    let path = "/api/v1/namespaces/demo/serviceaccounts/app/token";
    let issue = python_dpop(&holder, Some(("POST", &w.url(path), None)));
    let reply = w
        .http
        .post(w.url(path))
        .bearer_auth(w.admin_token())
        .header("dpop", issue["proof"].as_str().unwrap())
        .json(
            &serde_json::json!({"apiVersion": "authentication.k8s.io/v1",
                                  "kind": "TokenRequest", "spec": {"audiences": ["vault"]}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 201);
    let reply: Value = reply.json().await.unwrap();
    let bound = reply["status"]["token"].as_str().unwrap().to_owned();
    let jkt = issue["jkt"].as_str().unwrap().to_owned();
    assert_eq!(claims(&bound).cnf.unwrap().jkt.unwrap(), jkt);

    let verify = |token: &str, extra: &[&std::ffi::OsStr]| {
        std::process::Command::new(BIN)
            .args([
                "verify",
                "--issuer",
                &w.issuer(),
                "--audience",
                "vault",
                "--ca-file",
            ])
            .arg(w.path("ca.crt"))
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
    let mut child = std::process::Command::new(BIN)
        .args([
            "verify",
            "--issuer",
            &w.issuer(),
            "--audience",
            "vault",
            "--ca-file",
        ])
        .arg(w.path("ca.crt"))
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
    use crate::pki;

    let setup = tempfile::tempdir().unwrap();
    let dir = setup.path();
    let ca = pki::ca(dir, "client-ca");
    pki::client(dir, "client-ca", "deployer", "deployer", "");
    pki::client(dir, "client-ca", "other", "other", "");
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nrules:\n- subjects: [{kind: User, name: deployer}]\n  tokens: {namespaces: [demo], audiences: [vault]}\n",
    )
    .unwrap();
    let w = Warrant::start(
        OBJECTS,
        &[
            "--client-ca-file",
            ca.to_str().unwrap(),
            "--authorization-policy-file",
            policy.to_str().unwrap(),
        ],
    )
    .await;
    let server_ca =
        reqwest::Certificate::from_pem(&std::fs::read(w.path("ca.crt")).unwrap()).unwrap();
    let deployer = reqwest::Client::builder()
        .tls_certs_only([server_ca])
        .identity(pki::identity(dir, "deployer"))
        .build()
        .unwrap();
    let reply = deployer
        .post(w.url("/api/v1/namespaces/demo/serviceaccounts/app/token"))
        .header("warrant-token-binding", "client-certificate")
        .json(
            &serde_json::json!({"apiVersion": "authentication.k8s.io/v1",
                                  "kind": "TokenRequest", "spec": {"audiences": ["vault"]}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 201);
    let reply: Value = reply.json().await.unwrap();
    let token = reply["status"]["token"].as_str().unwrap().to_owned();
    // The thumbprint by RFC 8705's recipe, with openssl (not warrant's code).
    let der = std::process::Command::new("openssl")
        .args(["x509", "-outform", "DER", "-in"])
        .arg(dir.join("deployer.crt"))
        .output()
        .unwrap();
    assert!(der.status.success());
    use base64::Engine as _;
    let x5t = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        &der.stdout,
    ));
    assert_eq!(
        claims(&token).cnf.unwrap().x5t_s256.as_deref(),
        Some(x5t.as_str())
    );

    let verify = |certificate: Option<&str>| {
        let mut command = std::process::Command::new(BIN);
        command
            .args([
                "verify",
                "--issuer",
                &w.issuer(),
                "--audience",
                "vault",
                "--ca-file",
            ])
            .arg(w.path("ca.crt"));
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

#[tokio::test]
async fn warrant_verify_checks_a_token_like_a_relying_party() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let token = w.token(&["--audience", "vault"]);
    let verify = |audience: &str| {
        std::process::Command::new(BIN)
            .args([
                "verify",
                "--issuer",
                &w.issuer(),
                "--audience",
                audience,
                "--ca-file",
            ])
            .arg(w.path("ca.crt"))
            .arg(token.trim())
            .output()
            .unwrap()
    };
    let out = verify("vault");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let claims: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(claims["sub"], "system:serviceaccount:demo:app");

    let out = verify("s3");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(r#"token audiences ["vault"] is invalid for the target audiences ["s3"]"#),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An issuer with a path (`https://host/tenant-a`, common for discovery hosted in a bucket):
/// discovery and the JWKS it names are served below the path (and at the root, as before),
/// `warrant verify` works against it, and `discovery export` writes the same layout.
#[tokio::test]
async fn an_issuer_with_a_path_is_discoverable_below_it() {
    let w = Warrant::start_at_issuer_path(OBJECTS, "/tenant-a").await;
    let get = |path: String| {
        let http = w.http.clone();
        let url = w.url(&path);
        async move {
            let response = http.get(url).send().await.unwrap();
            (response.status().as_u16(), response.bytes().await.unwrap())
        }
    };
    let (code, body) = get("/tenant-a/.well-known/openid-configuration".into()).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let discovery: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(discovery["issuer"], w.issuer());
    let jwks_uri = discovery["jwks_uri"].as_str().unwrap().to_owned();
    assert_eq!(jwks_uri, format!("{}/openid/v1/jwks", w.issuer()));
    let (code, jwks) = get("/tenant-a/openid/v1/jwks".into()).await;
    assert_eq!(code, 200);
    assert_eq!(get("/openid/v1/jwks".into()).await, (200, jwks.clone()));
    assert_eq!(get("/tenant-a/version".into()).await.0, 404);

    let token = w.token(&["--audience", "vault"]);
    let out = std::process::Command::new(BIN)
        .args([
            "verify",
            "--issuer",
            &w.issuer(),
            "--audience",
            "vault",
            "--ca-file",
        ])
        .arg(w.path("ca.crt"))
        .arg(token.trim())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let out_dir = w.path("export");
    let mut args: Vec<std::ffi::OsString> =
        vec!["discovery".into(), "export".into(), "--dir".into()];
    args.push(out_dir.clone().into());
    args.extend(["--service-account-issuer".into(), w.issuer().into()]);
    args.extend(static_keys(w.dir.path()));
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    w.warrant_ok(&args);
    assert_eq!(
        std::fs::read(out_dir.join("tenant-a/.well-known/openid-configuration")).unwrap(),
        body.to_vec()
    );
    assert_eq!(
        std::fs::read(out_dir.join("tenant-a/openid/v1/jwks")).unwrap(),
        jwks.to_vec()
    );
}
