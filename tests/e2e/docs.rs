//! Recipes of the docs that run without a cluster, run as written (with the paths and the host
//! moved where a test may write and listen): docs/keys.md's SoftHSM2 setup for a non-root
//! warrant, docs/tokens.md's DPoP recipe.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::deploy::sh_blocks;
use crate::support::*;
use crate::tokens::OBJECTS;

const KEYS_MD: &str = include_str!("../../docs/keys.md");
const TOKENS_MD: &str = include_str!("../../docs/tokens.md");

/// The uid and gid the setup's `warrant` user becomes (the image's user).
const WARRANT_ID: &str = "65532";

/// The fenced `sh` block of `doc` holding `marker`.
fn block(doc: &str, marker: &str) -> String {
    sh_blocks(doc)
        .into_iter()
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("no sh block with {marker}"))
}

/// docs/keys.md's SoftHSM2 setup, as root, for warrant as a user of its own: the user is uid
/// 65532 here (as root; without root, the test's own user, so only the paths are checked), the
/// paths under a scratch root, the package install left out, and the final `warrant serve …`
/// replaced by `warrant keys generate` with the same key flags: warrant, not root, opens the
/// token and makes its first key there.
#[test]
fn the_softhsm_setup_works_for_a_non_root_warrant() {
    warrant_testkit::tools::require_file(
        Path::new("/usr/lib/softhsm/libsofthsm2.so"),
        "SoftHSM2's PKCS#11 module",
        "softhsm2",
    );
    warrant_testkit::tools::command("softhsm2-util", "SoftHSM2 (softhsm2-util)");
    let as_root = rustix::process::geteuid().is_root();
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().to_str().unwrap().to_owned();
    // The user must reach its files under the scratch root, as it reaches /var/lib on a host.
    std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(format!("{root}/bin")).unwrap();
    std::os::unix::fs::symlink(BIN, format!("{root}/bin/warrant")).unwrap();

    let doc = block(KEYS_MD, "softhsm2-util --init-token");
    let (user, group, run_as) = if as_root {
        (
            WARRANT_ID.to_owned(),
            WARRANT_ID.to_owned(),
            format!("setpriv --reuid={WARRANT_ID} --regid={WARRANT_ID} --clear-groups --"),
        )
    } else {
        (
            rustix::process::geteuid().as_raw().to_string(),
            rustix::process::getegid().as_raw().to_string(),
            String::new(),
        )
    };
    let script = doc
        .replace("\\\n", " ")
        .lines()
        .filter(|l| !l.starts_with("apt-get "))
        .map(|l| {
            l.replace("/etc/warrant", &format!("{root}/etc/warrant"))
                .replace("/var/lib/warrant", &format!("{root}/var/lib/warrant"))
                .replace("-o warrant -g warrant", &format!("-o {user} -g {group}"))
                .replace("-o warrant", &format!("-o {user}"))
                .replace("runuser -u warrant --", &run_as)
                .replace(
                    "warrant serve ...",
                    "warrant keys generate --key-algorithm ES256",
                )
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(script.contains("keys generate"), "{script}");
    std::fs::create_dir_all(format!("{root}/var/lib")).unwrap();
    let path = format!("{root}/bin:{}", std::env::var("PATH").unwrap());
    let out = Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{script}")])
        .current_dir(&root)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}\n{}", stderr(&out));

    // The key directory is the user's, and records a key held in the token, not a PEM key.
    let keys = format!("{root}/var/lib/warrant/keys");
    let index = std::fs::read_to_string(format!("{keys}/keys.json")).unwrap();
    assert!(index.contains("pkcs11:token=warrant"), "{index}");
    use std::os::unix::fs::MetadataExt as _;
    assert_eq!(
        std::fs::metadata(&keys).unwrap().uid().to_string(),
        user,
        "the key directory is warrant's"
    );
    for entry in std::fs::read_dir(&keys).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        assert!(!text.contains("PRIVATE KEY"), "a private key on disk");
    }
}

/// docs/tokens.md's DPoP recipe against a running warrant: the token it prints is bound to the
/// recipe's key. Without PyJWT, it fails saying so, and sends no request: no unbound token.
#[tokio::test]
async fn the_dpop_recipe_binds_the_token_or_asks_for_none() {
    warrant_testkit::tools::python(&["jwt", "cryptography"]);
    warrant_testkit::tools::command("curl", "curl");
    let w = Warrant::start(OBJECTS, &[]).await;
    let scratch = tempfile::tempdir().unwrap();
    std::fs::copy(w.path("ca.crt"), scratch.path().join("ca.crt")).unwrap();
    let recipe = block(TOKENS_MD, "dpop+jwt").replace(
        "https://warrant.example:8443",
        &format!("https://127.0.0.1:{}", w.port),
    );
    assert!(recipe.contains(&w.url("/api/v1/")), "{recipe}");
    let run = |env: &[(&str, &Path)]| {
        let mut command = Command::new("bash");
        command
            .args(["-c", &recipe])
            .current_dir(scratch.path())
            .env("CALLER_TOKEN", w.admin_token());
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    };

    let out = run(&[]);
    assert!(out.status.success(), "{recipe}\n{}", stderr(&out));
    let response: Value = serde_json::from_slice(&out.stdout).unwrap();
    let token = response["status"]["token"].as_str().unwrap();
    let jkt = python_dpop(&scratch.path().join("dpop.key"), None)["jkt"].clone();
    let payload = token.split('.').nth(1).unwrap();
    use base64::Engine as _;
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["cnf"]["jkt"], jkt, "{claims}");

    // PyJWT missing: a `jwt` module first on Python's path that fails to import.
    let issued = w
        .metric(r#"warrant_tokens_issued_total{binding="none"}"#)
        .await;
    let shadow = scratch.path().join("no-pyjwt");
    std::fs::create_dir(&shadow).unwrap();
    std::fs::write(
        shadow.join("jwt.py"),
        "raise ImportError('No module named jwt')\n",
    )
    .unwrap();
    let out = run(&[("PYTHONPATH", &shadow)]);
    assert!(!out.status.success(), "the recipe went on without a proof");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr(&out).contains("no DPoP proof"), "{}", stderr(&out));
    assert_eq!(
        w.metric(r#"warrant_tokens_issued_total{binding="none"}"#)
            .await,
        issued,
        "a token was issued"
    );
}
