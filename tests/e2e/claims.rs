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
            "--audit-log-path",
            "{dir}/audit.log",
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
    // The audit trail records the claims where the token was issued and where it was reviewed.
    let audit = std::fs::read_to_string(w.path("audit.log")).unwrap();
    for kind in ["TokenRequest", "TokenReview"] {
        let event: Value = audit
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} event in {audit}"));
        assert_eq!(
            event["extraClaims"]["https://example.com/cluster"], "prod-eu-1",
            "{event}"
        );
        assert_eq!(
            event["extraClaims"]["https://aws.amazon.com/tags"],
            claims["https://aws.amazon.com/tags"],
            "{event}"
        );
    }

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

/// A JWT-SVID as a SPIFFE relying party checks one (the JWT-SVID spec, §3 and §4, as go-spiffe's
/// `jwtsvid.ParseAndValidate` applies it): a JWS whose `alg` is one the spec allows and whose
/// `kid` names a `jwt-svid` key of the trust domain's bundle, signed by that key (checked with
/// openssl); `typ` absent or `JWT`/`JOSE`; `sub` a SPIFFE ID of the trust domain (no query,
/// fragment, port, user, empty, `.` or `..` segment; its characters those the ID spec allows);
/// `aud` holding the relying party's audience; `exp` present and not past. Returns the SPIFFE ID.
fn validate_jwt_svid(
    token: &str,
    bundle: &Value,
    trust_domain: &str,
    audience: &str,
    now: i64,
) -> Result<String, String> {
    let decode = |part: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|e| e.to_string())
    };
    let parts: Vec<&str> = token.trim().split('.').collect();
    let [header, body, signature] = parts[..] else {
        return Err("not a compact JWS".into());
    };
    let header: Value = serde_json::from_slice(&decode(header)?).map_err(|e| e.to_string())?;
    let alg = header["alg"].as_str().unwrap_or_default();
    let allowed = [
        "RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512",
    ];
    if !allowed.contains(&alg) {
        return Err(format!("alg {alg:?} is not one a JWT-SVID may have"));
    }
    if let Some(typ) = header.get("typ")
        && typ != "JWT"
        && typ != "JOSE"
    {
        return Err(format!("typ {typ}"));
    }
    let kid = header["kid"]
        .as_str()
        .filter(|k| !k.is_empty())
        .ok_or("no kid")?;
    let jwk = bundle["keys"]
        .as_array()
        .ok_or("the bundle has no keys")?
        .iter()
        .find(|k| k["use"] == "jwt-svid" && k["kid"] == kid)
        .ok_or_else(|| format!("no jwt-svid key {kid} in the bundle"))?;
    // The signature, checked by openssl with the bundle's key (RS256 here).
    if alg != "RS256" {
        return Err(format!("this check knows RS256 only, not {alg}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let key = warrant_token::VerifyingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("key.pem"), key.to_pem()).unwrap();
    std::fs::write(
        dir.path().join("input"),
        format!("{}.{body}", token.trim().split('.').next().unwrap()),
    )
    .unwrap();
    std::fs::write(dir.path().join("sig"), decode(signature)?).unwrap();
    let verified = std::process::Command::new("openssl")
        .args([
            "dgst",
            "-sha256",
            "-verify",
            "key.pem",
            "-signature",
            "sig",
            "input",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    if !verified.status.success() {
        return Err("the signature does not verify with the bundle's key".into());
    }
    let claims: Value = serde_json::from_slice(&decode(body)?).map_err(|e| e.to_string())?;
    let sub = claims["sub"].as_str().ok_or("no sub")?;
    let rest = sub
        .strip_prefix("spiffe://")
        .ok_or_else(|| format!("sub {sub:?} is not a SPIFFE ID"))?;
    let (domain, path) = rest
        .split_once('/')
        .ok_or_else(|| format!("sub {sub:?} has no path"))?;
    if domain != trust_domain {
        return Err(format!(
            "sub {sub:?} is not of the trust domain {trust_domain}"
        ));
    }
    for segment in path.split('/') {
        let ok = !segment.is_empty()
            && segment != "."
            && segment != ".."
            && segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !ok {
            return Err(format!("sub {sub:?}: the path segment {segment:?}"));
        }
    }
    let audiences: Vec<&str> = match &claims["aud"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => return Err("no aud".into()),
    };
    if !audiences.contains(&audience) {
        return Err(format!("aud {audiences:?} does not hold {audience}"));
    }
    if audiences.len() != 1 {
        return Err(format!("aud {audiences:?}: a JWT-SVID has one audience"));
    }
    let exp = claims["exp"].as_i64().ok_or("no exp")?;
    if exp <= now {
        return Err("expired".into());
    }
    Ok(sub.to_owned())
}

// The real binary's tokens expire against the wall clock, which the check reads.
#[allow(clippy::disallowed_methods)]
#[tokio::test]
async fn a_jwt_svid_passes_a_spiffe_relying_partys_checks() {
    const AUDIENCE: &str = "spiffe://prod.example.org/payments";
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    write(
        &policy,
        &format!(
            "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nclaims:\n- audiences: [\"{AUDIENCE}\"]\n  jwtSvid: true\n"
        ),
    );
    let w = Warrant::start(
        OBJECTS,
        &[
            "--authorization-policy-file",
            policy.to_str().unwrap(),
            "--pod-certificate-trust-domain",
            "prod.example.org",
            "--audit-log-path",
            "{dir}/audit.log",
        ],
    )
    .await;
    let token = w.token(&["--audience", AUDIENCE]);
    // Without the pod certificate signer, the SPIFFE bundle holds the JWT keys alone.
    let bundle: Value =
        serde_json::from_str(&w.get_as_admin("/.well-known/spiffe-bundle").await).unwrap();
    assert!(
        bundle["keys"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["use"] == "jwt-svid"),
        "{bundle}"
    );
    let now = jiff::Timestamp::now().as_second();
    let id = validate_jwt_svid(&token, &bundle, "prod.example.org", AUDIENCE, now).unwrap();
    assert_eq!(id, "spiffe://prod.example.org/ns/demo/sa/app");
    // The checks refuse what they should: another audience, another trust domain, a token
    // signed by a key the bundle lacks.
    assert!(validate_jwt_svid(&token, &bundle, "prod.example.org", "other", now).is_err());
    assert!(validate_jwt_svid(&token, &bundle, "cluster.local", AUDIENCE, now).is_err());
    let mut tampered = token.trim().to_owned();
    tampered.replace_range(tampered.len() - 4.., "AAAA");
    assert!(validate_jwt_svid(&tampered, &bundle, "prod.example.org", AUDIENCE, now).is_err());
    // A plain token is no JWT-SVID.
    let plain = w.token(&["--audience", "vault"]);
    assert_eq!(payload(&plain)["sub"], "system:serviceaccount:demo:app");
    assert!(validate_jwt_svid(&plain, &bundle, "prod.example.org", "vault", now).is_err());

    // The audit event records the subject the policy gave the token.
    let audit = std::fs::read_to_string(w.path("audit.log")).unwrap();
    let issued: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["subject"] == id.as_str())
        .collect();
    assert_eq!(issued.len(), 1, "{audit}");
    assert_eq!(issued[0]["audiences"], json!([AUDIENCE]));

    // TokenReview accepts the JWT-SVID as the service account's token.
    let status = w.review(&token, &[AUDIENCE]);
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["user"]["username"], "system:serviceaccount:demo:app");
    // Two audiences: refused, as a JWT-SVID has one.
    let out = w.create_token_as("app", &["--audience", AUDIENCE, "--audience", AUDIENCE]);
    assert!(stderr(&out).contains("one audience"), "{}", stderr(&out));
}
