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

    // A kubeconfig that presents only the certificate (no token).
    let with_cert = |name: &str| {
        let kubeconfig = pki.path().join(format!("{name}.kubeconfig"));
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: w\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: c\n  context: {{cluster: w, user: u}}\ncurrent-context: c\n",
            w.issuer(),
            w.path("ca.crt").display(),
            pki.path().join(format!("{name}.crt")).display(),
            pki.path().join(format!("{name}.key")).display(),
        );
        std::fs::write(&kubeconfig, yaml).unwrap();
        w.kubectl_with(&kubeconfig, &["create", "token", "app", "-n", "demo"])
    };
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
