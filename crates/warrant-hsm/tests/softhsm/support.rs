//! Each test's own SoftHSM2: a temporary token directory, a configuration, tokens made with
//! `softhsm2-util`, and independent verifiers (aws-lc, the `openssl` command, jsonwebtoken).

use std::path::{Path, PathBuf};

use warrant_hsm::{HsmError, HsmKey, HsmMetrics, Pkcs11Uri, Token, TokenConfig};
use warrant_testkit::signatures::{verify_signature, verify_with_openssl};
use warrant_testkit::softhsm::SoftHsm2;
use warrant_testkit::tools;
use warrant_token::{Algorithm, VerifyingKey};

pub(crate) use warrant_testkit::softhsm::{PIN, module};

/// Defines a test that runs in its own process with its own SoftHSM2 configuration.
macro_rules! hsm_test {
    ($(#[$m:meta])* fn $name:ident($hsm:ident) $body:block) => {
        #[test]
        $(#[$m])*
        fn $name() {
            let path = concat!(module_path!(), "::", stringify!($name));
            $crate::support::isolated(path, |$hsm: &$crate::support::SoftHsm| $body);
        }
    };
}

/// The test's SoftHSM2.
pub(crate) struct SoftHsm {
    softhsm: SoftHsm2,
}

/// In the parent: makes the test's SoftHSM2 and runs `test_path` alone in a child process of
/// this binary, with the SoftHSM2's configuration in its environment. In that child: runs
/// `body`.
pub(crate) fn isolated(test_path: &str, body: impl FnOnce(&SoftHsm)) {
    if let Some(dir) = std::env::var_os("WARRANT_HSM_TEST_DIR") {
        body(&SoftHsm {
            softhsm: SoftHsm2::at(Path::new(&dir)),
        });
        return;
    }
    tools::command("openssl", "the openssl command");
    let temp = tempfile::tempdir().unwrap();
    let softhsm = SoftHsm2::create(temp.path());
    // The test's name without this binary's crate name, for libtest's --exact filter.
    let name = test_path
        .split_once("::")
        .map_or(test_path, |(_, rest)| rest);
    let output = softhsm
        .command(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("WARRANT_HSM_TEST_DIR", softhsm.dir())
        .env("WARRANT_HSM_TEST_PIN", PIN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name} failed in its own process:\n{stdout}\n{stderr}"
    );
}

impl SoftHsm {
    /// Initializes a token labelled `label` with the user PIN [`PIN`]; returns its directory.
    pub(crate) fn init_token(&self, label: &str) -> PathBuf {
        self.softhsm.init_token(label)
    }

    /// A file holding `pin`.
    pub(crate) fn pin_file(&self, pin: &str) -> PathBuf {
        self.softhsm.pin_file(&format!("pin-{pin}"), pin)
    }

    /// The URI of token `label` with the module and a PIN file holding `pin`.
    pub(crate) fn uri_with_pin(&self, label: &str, pin: &str) -> Pkcs11Uri {
        self.softhsm
            .uri(label, &self.pin_file(pin))
            .parse()
            .unwrap()
    }

    pub(crate) fn uri(&self, label: &str) -> Pkcs11Uri {
        self.uri_with_pin(label, PIN)
    }

    pub(crate) fn open(&self, label: &str) -> Result<Token, HsmError> {
        self.open_with(label, 4, HsmMetrics::default())
    }

    pub(crate) fn open_with(
        &self,
        label: &str,
        sessions: usize,
        metrics: HsmMetrics,
    ) -> Result<Token, HsmError> {
        Token::open(
            TokenConfig::new(self.uri(label)).sessions(sessions),
            metrics,
        )
    }

    pub(crate) fn dir(&self) -> &Path {
        self.softhsm.dir()
    }

    /// Runs `pkcs11-tool` on token `label`, logged in; returns stdout.
    pub(crate) fn pkcs11_tool(&self, label: &str, args: &[&str]) -> String {
        let output = self.pkcs11_tool_output(label, true, args);
        assert!(
            output.status.success(),
            "pkcs11-tool {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Runs `pkcs11-tool` on token `label`, logged in with the user PIN or (`login` false) not:
    /// what anyone who can reach the token, but has no PIN, can do.
    pub(crate) fn pkcs11_tool_output(
        &self,
        label: &str,
        login: bool,
        args: &[&str],
    ) -> std::process::Output {
        self.softhsm
            .pkcs11_tool(label, login)
            .args(args)
            .output()
            .unwrap()
    }
}

/// Checks `signature` over `message` with aws-lc, the `openssl` command and (as a JWS)
/// jsonwebtoken, each from the public key alone.
pub(crate) fn verify_everywhere(dir: &Path, key: &VerifyingKey, message: &[u8], signature: &[u8]) {
    verify_signature(key, message, signature);
    verify_with_openssl(dir, key, message, signature);
}

/// Signs a compact JWS with `key` in the token and verifies it with jsonwebtoken against the
/// key's JWK (as warrant publishes it).
pub(crate) fn jws_verifies_with_jsonwebtoken(key: &HsmKey) {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    let header = format!(
        r#"{{"alg":"{}","kid":"{}"}}"#,
        key.verifying_key().algorithm(),
        key.kid()
    );
    let payload = r#"{"iss":"https://warrant.test","sub":"system:serviceaccount:default:x","aud":["a"],"exp":4102444800}"#;
    let input = format!("{}.{}", B64.encode(header), B64.encode(payload));
    let signature = key.sign(input.as_bytes()).unwrap();
    let token = format!("{input}.{}", B64.encode(signature));
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_str(key.verifying_key().jwk_json()).unwrap();
    let decoding = jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap();
    let alg = match key.verifying_key().algorithm() {
        Algorithm::RS256 => jsonwebtoken::Algorithm::RS256,
        Algorithm::ES256 => jsonwebtoken::Algorithm::ES256,
        Algorithm::ES384 => jsonwebtoken::Algorithm::ES384,
        Algorithm::ES512 => unreachable!("jsonwebtoken has no ES512"),
    };
    let mut validation = jsonwebtoken::Validation::new(alg);
    validation.set_audience(&["a"]);
    jsonwebtoken::decode::<serde_json::Value>(&token, &decoding, &validation)
        .expect("jsonwebtoken verifies the token signed in the HSM");
}
