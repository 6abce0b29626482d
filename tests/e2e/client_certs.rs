//! Client-certificate authentication (`--client-ca-file`): CN is the user, O the groups.

use crate::pki;
use crate::support::*;
use crate::tokens::OBJECTS;

/// A CA `<prefix>-ca`, and a client certificate `<prefix>` for `cn` in organisation `o`
/// signed by it.
fn client_pki(dir: &std::path::Path, prefix: &str, cn: &str, o: &str) {
    let ca = format!("{prefix}-ca");
    pki::ca(dir, &ca);
    pki::client(dir, &ca, prefix, cn, o);
}

#[tokio::test]
async fn client_certificates_authenticate() {
    let pki = tempfile::tempdir().unwrap();
    client_pki(pki.path(), "trusted", "alice", "dev");
    client_pki(pki.path(), "stranger", "mallory", "dev");
    let ca = pki.path().join("trusted-ca.crt");
    // Group `dev` may request tokens in `demo`: authentication alone grants nothing.
    let policy = pki.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nrules:\n- subjects: [{kind: Group, name: dev}]\n  tokens: {namespaces: [demo], audiences: ['https://*']}\n",
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

    let with_cert = |name: &str| create_token_with_cert(&w, pki.path(), name);
    let out = with_cert("trusted");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        claims(&String::from_utf8(out.stdout).unwrap()).sub,
        "system:serviceaccount:demo:app"
    );

    // A certificate from another CA does not get through the handshake.
    let out = with_cert("stranger");
    assert!(!out.status.success());
}

/// Client certificates outside their validity are refused through a real TLS connection, with
/// kubectl: an expired one and a not-yet-valid one, from the trusted CA, for a member of
/// `system:masters`; the same CA's current certificate gets the token.
#[tokio::test]
// The real binary checks certificates against the real clock, so they are dated by it.
#[allow(clippy::disallowed_methods)]
async fn client_certificates_outside_their_validity_are_refused() {
    let pki = tempfile::tempdir().unwrap();
    let ca = warrant_testkit::TestCa::new("dated-ca");
    std::fs::write(pki.path().join("ca.crt"), ca.pem()).unwrap();
    let now = jiff::Timestamp::now().as_second();
    let date = |offset_days: i64| {
        let t = jiff::Timestamp::from_second(now + offset_days * 86_400)
            .unwrap()
            .to_zoned(jiff::tz::TimeZone::UTC);
        (i32::from(t.year()), t.month() as u8, t.day() as u8)
    };
    for (name, from, to) in [
        ("expired", -30, -2),
        ("not-yet-valid", 2, 30),
        ("current", -2, 30),
    ] {
        let cert = ca.issue_client_valid("admin", &["system:masters"], date(from), date(to));
        std::fs::write(pki.path().join(format!("{name}.crt")), cert.pem()).unwrap();
        std::fs::write(pki.path().join(format!("{name}.key")), cert.key_pem()).unwrap();
    }
    let ca = pki.path().join("ca.crt");
    let w = Warrant::start(OBJECTS, &["--client-ca-file", ca.to_str().unwrap()]).await;
    let with_cert = |name: &str| create_token_with_cert(&w, pki.path(), name);
    for refused in ["expired", "not-yet-valid"] {
        let out = with_cert(refused);
        assert!(!out.status.success(), "{refused}: {}", stderr(&out));
    }
    let out = with_cert("current");
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `kubectl create token app -n demo` through a kubeconfig that presents only the client
/// certificate `<pki>/<name>.crt` (and its key), no token.
fn create_token_with_cert(w: &Warrant, pki: &std::path::Path, name: &str) -> std::process::Output {
    let kubeconfig = pki.join(format!("{name}.kubeconfig"));
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: w\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: c\n  context: {{cluster: w, user: u}}\ncurrent-context: c\n",
        w.issuer(),
        w.path("ca.crt").display(),
        pki.join(format!("{name}.crt")).display(),
        pki.join(format!("{name}.key")).display(),
    );
    std::fs::write(&kubeconfig, yaml).unwrap();
    w.kubectl_with(&kubeconfig, &["create", "token", "app", "-n", "demo"])
}
