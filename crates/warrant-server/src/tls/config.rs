//! The rustls configuration: kube-apiserver's `--tls-min-version` and `--tls-cipher-suites`
//! with Go's meaning, the client certificates the handshake verifies, and why setting TLS up
//! can fail.

use std::sync::Arc;

use rustls::CipherSuite;
use rustls::crypto::CryptoProvider;
use warrant_auth::ClientTrust;

use super::{LOG_TARGET, ServingCertificate};

/// Why TLS could not be set up. Each names the file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the combination; `what` names the file or the part refused.
    #[error("TLS configuration: {what}: {source}")]
    Config {
        /// The key file, or the part of the configuration refused.
        what: String,
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
    /// `--tls-min-version` names a version kube-apiserver takes but rustls does not speak.
    #[error(
        "{name} is not supported: warrant's TLS library (rustls) supports only TLS 1.2 and 1.3 (use VersionTLS12 or VersionTLS13)"
    )]
    UnsupportedVersion {
        /// The value given.
        name: String,
    },
    /// `--tls-min-version` names no TLS version at all (kube-apiserver's message).
    #[error("unknown tls version {name:?}: use VersionTLS12 or VersionTLS13")]
    UnknownVersion {
        /// The value given.
        name: String,
    },
    /// `--tls-cipher-suites` names a suite kube-apiserver (Go) accepts but rustls does not
    /// implement.
    #[error(
        "--tls-cipher-suites: {name} is not implemented by warrant's TLS library (rustls implements no CBC, RC4 or 3DES suite and no RSA key exchange); supported: {SUPPORTED_NAMES}"
    )]
    UnimplementedCipherSuite {
        /// The name given.
        name: String,
    },
    /// `--tls-cipher-suites` names no cipher suite Go knows (kube-apiserver's message).
    #[error(
        "--tls-cipher-suites: cipher suite {name} not supported or doesn't exist; supported: {SUPPORTED_NAMES}"
    )]
    UnknownCipherSuite {
        /// The name given.
        name: String,
    },
    /// The TLS 1.2 suites lack the one HTTP/2 requires (RFC 7540 §9.2.2), which Go's HTTP/2
    /// server, and so kube-apiserver, refuses to start without.
    #[error(
        "--tls-cipher-suites is missing an HTTP/2-required AES_128_GCM_SHA256 cipher (need at least one of TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256), as kube-apiserver requires"
    )]
    Http2CipherSuiteMissing,
}

/// The lowest TLS version the server speaks: kube-apiserver's `--tls-min-version`, with its
/// values. kube-apiserver also takes `VersionTLS10` and `VersionTLS11`; rustls speaks neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsMinVersion {
    /// `VersionTLS12`, the default (as kube-apiserver's).
    #[default]
    Tls12,
    /// `VersionTLS13`: TLS 1.2 clients are refused at the handshake.
    Tls13,
}

impl TlsMinVersion {
    /// Reads kube-apiserver's name for a version (`VersionTLS12`, `VersionTLS13`); an empty
    /// value is the default, as for kube-apiserver.
    pub fn parse(name: &str) -> Result<TlsMinVersion, TlsError> {
        match name {
            "" | "VersionTLS12" => Ok(TlsMinVersion::Tls12),
            "VersionTLS13" => Ok(TlsMinVersion::Tls13),
            "VersionTLS10" | "VersionTLS11" => Err(TlsError::UnsupportedVersion {
                name: name.to_owned(),
            }),
            _ => Err(TlsError::UnknownVersion {
                name: name.to_owned(),
            }),
        }
    }

    /// kube-apiserver's name for it.
    pub fn name(self) -> &'static str {
        match self {
            TlsMinVersion::Tls12 => "VersionTLS12",
            TlsMinVersion::Tls13 => "VersionTLS13",
        }
    }

    fn versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        match self {
            TlsMinVersion::Tls12 => TLS12_AND_13,
            TlsMinVersion::Tls13 => TLS13_ONLY,
        }
    }
}

static TLS12_AND_13: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];
static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// Go's names (which kube-apiserver's `--tls-cipher-suites` takes) for the TLS 1.2 suites of
/// rustls's aws-lc-rs provider, with Go's older names for the ChaCha20 ones.
const TLS12_SUITES: &[(&str, CipherSuite)] = &[
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The TLS 1.3 suites. Go does not let them be configured (all are always on) and ignores
/// them in the list; so does warrant.
const TLS13_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// The suites Go knows (`tls.CipherSuites()` and `tls.InsecureCipherSuites()`, so values
/// kube-apiserver takes) that rustls does not implement: CBC, RC4, 3DES, RSA key exchange.
const UNIMPLEMENTED_SUITES: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// Every name `--tls-cipher-suites` takes, for its error messages.
const SUPPORTED_NAMES: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 (or TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305), TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 (or TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305); and, always on whether listed or not, TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256";

/// The server's TLS protocol settings: kube-apiserver's `--tls-min-version` and
/// `--tls-cipher-suites`, with their meaning in Go's crypto/tls. The suite list restricts the
/// TLS 1.2 suites only: TLS 1.3's are always on (Go does not let them be configured), and with
/// a minimum of TLS 1.3 the list has no effect. The order of the list does not matter (Go has
/// ignored it since 1.17): the client's preference decides among the suites allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    min_version: TlsMinVersion,
    /// The TLS 1.2 suites allowed; `None`: every one rustls implements (all ECDHE with AEAD).
    tls12_suites: Option<Vec<CipherSuite>>,
}

impl TlsSettings {
    /// The settings for `min_version` and the suites `cipher_suites` names (Go's names, as
    /// kube-apiserver takes them; empty entries are skipped, and no entry at all means the
    /// defaults). Refused, naming the suite: a name Go does not know, and, where TLS 1.2 is
    /// on, one rustls does not implement, or a list without the suite HTTP/2 requires (which
    /// kube-apiserver refuses too).
    pub fn new(
        min_version: TlsMinVersion,
        cipher_suites: &[String],
    ) -> Result<TlsSettings, TlsError> {
        let mut tls12 = Vec::new();
        let mut unimplemented = None;
        let mut listed = false;
        for name in cipher_suites
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
        {
            listed = true;
            if let Some((_, suite)) = TLS12_SUITES.iter().find(|(known, _)| *known == name) {
                if !tls12.contains(suite) {
                    tls12.push(*suite);
                }
            } else if UNIMPLEMENTED_SUITES.contains(&name) {
                unimplemented.get_or_insert(name);
            } else if !TLS13_SUITES.contains(&name) {
                return Err(TlsError::UnknownCipherSuite {
                    name: name.to_owned(),
                });
            }
        }
        if !listed {
            return Ok(TlsSettings {
                min_version,
                tls12_suites: None,
            });
        }
        if min_version == TlsMinVersion::Tls13 {
            tracing::warn!(
                target: LOG_TARGET,
                "--tls-cipher-suites has no effect with --tls-min-version VersionTLS13: TLS 1.3's suites are always on"
            );
            return Ok(TlsSettings {
                min_version,
                tls12_suites: None,
            });
        }
        if let Some(name) = unimplemented {
            return Err(TlsError::UnimplementedCipherSuite {
                name: name.to_owned(),
            });
        }
        if !tls12.iter().any(|suite| {
            matches!(
                suite,
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                    | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            )
        }) {
            return Err(TlsError::Http2CipherSuiteMissing);
        }
        Ok(TlsSettings {
            min_version,
            tls12_suites: Some(tls12),
        })
    }

    /// The lowest TLS version served.
    pub fn min_version(&self) -> TlsMinVersion {
        self.min_version
    }

    /// The crypto provider with the suites allowed: every TLS 1.3 suite, and the TLS 1.2 ones
    /// listed (all, with no list).
    fn provider(&self) -> CryptoProvider {
        let mut provider = rustls::crypto::aws_lc_rs::default_provider();
        if let Some(allowed) = &self.tls12_suites {
            provider.cipher_suites.retain(|suite| {
                suite.version() == &rustls::version::TLS13 || allowed.contains(&suite.suite())
            });
        }
        provider
    }
}

/// The rustls configuration: `certificate` for the server, client certificates as `trust`
/// has them (read afresh on every handshake), versions and cipher suites as `settings` allow.
pub fn server_config(
    certificate: &ServingCertificate,
    trust: &ClientTrust,
    settings: &TlsSettings,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(settings.provider()))
        .with_protocol_versions(settings.min_version.versions())
        .map_err(|source| TlsError::Config {
            what: "protocol versions".to_owned(),
            source,
        })?
        .with_client_cert_verifier(trust.handshake_verifier())
        .with_cert_resolver(Arc::new(certificate.clone()));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    fn tls12_allowed(settings: &TlsSettings) -> Vec<CipherSuite> {
        settings
            .provider()
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS12)
            .map(|s| s.suite())
            .collect()
    }

    fn tls13_allowed(settings: &TlsSettings) -> usize {
        settings
            .provider()
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .count()
    }

    #[test]
    fn min_versions_have_kube_apiservers_names() {
        assert_eq!(
            TlsMinVersion::parse("VersionTLS12").unwrap(),
            TlsMinVersion::Tls12
        );
        assert_eq!(
            TlsMinVersion::parse("VersionTLS13").unwrap(),
            TlsMinVersion::Tls13
        );
        assert_eq!(TlsMinVersion::parse("").unwrap(), TlsMinVersion::Tls12);
        assert_eq!(TlsMinVersion::default().name(), "VersionTLS12");
        for old in ["VersionTLS10", "VersionTLS11"] {
            let error = TlsMinVersion::parse(old).unwrap_err().to_string();
            assert_eq!(
                error,
                format!(
                    "{old} is not supported: warrant's TLS library (rustls) supports only TLS 1.2 and 1.3 (use VersionTLS12 or VersionTLS13)"
                )
            );
        }
        for wrong in ["1.2", "TLS12", "versiontls12", "VersionTLS14"] {
            let error = TlsMinVersion::parse(wrong).unwrap_err().to_string();
            assert_eq!(
                error,
                format!("unknown tls version \"{wrong}\": use VersionTLS12 or VersionTLS13")
            );
        }
    }

    #[test]
    fn versions_follow_the_minimum() {
        assert_eq!(TlsMinVersion::Tls12.versions().len(), 2);
        assert_eq!(
            TlsMinVersion::Tls13.versions(),
            &[&rustls::version::TLS13][..]
        );
    }

    #[test]
    fn no_list_allows_every_suite_rustls_has() {
        for list in [names(&[]), names(&[""]), names(&["", " "])] {
            let settings = TlsSettings::new(TlsMinVersion::Tls12, &list).unwrap();
            assert_eq!(settings, TlsSettings::default());
            assert_eq!(tls12_allowed(&settings).len(), 6);
            assert_eq!(tls13_allowed(&settings), 3);
        }
    }

    #[test]
    fn a_list_restricts_tls12_and_leaves_tls13_alone() {
        let settings = TlsSettings::new(
            TlsMinVersion::Tls12,
            &names(&[
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                " TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
                "TLS_AES_128_GCM_SHA256",
            ]),
        )
        .unwrap();
        let mut allowed = tls12_allowed(&settings);
        allowed.sort_by_key(|s| u16::from(*s));
        assert_eq!(
            allowed,
            [
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ]
        );
        // Listing one TLS 1.3 suite does not turn the others off, as in Go.
        assert_eq!(tls13_allowed(&settings), 3);
    }

    #[test]
    fn every_go_name_for_a_rustls_suite_is_taken() {
        for (name, suite) in TLS12_SUITES {
            let list = names(&[name, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
            let settings = TlsSettings::new(TlsMinVersion::Tls12, &list).unwrap();
            assert!(tls12_allowed(&settings).contains(suite), "{name}");
            assert!(SUPPORTED_NAMES.contains(name), "{name}");
        }
        // Each is one rustls implements.
        let all = rustls::crypto::aws_lc_rs::default_provider().cipher_suites;
        for (name, suite) in TLS12_SUITES {
            assert!(all.iter().any(|s| s.suite() == *suite), "{name}");
        }
    }

    #[test]
    fn suites_rustls_lacks_are_refused_by_name() {
        for name in UNIMPLEMENTED_SUITES {
            let list = names(&["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", name]);
            let error = TlsSettings::new(TlsMinVersion::Tls12, &list)
                .unwrap_err()
                .to_string();
            assert_eq!(
                error,
                format!(
                    "--tls-cipher-suites: {name} is not implemented by warrant's TLS library (rustls implements no CBC, RC4 or 3DES suite and no RSA key exchange); supported: {SUPPORTED_NAMES}"
                )
            );
        }
    }

    #[test]
    fn unknown_suites_are_refused_as_kube_apiserver_does() {
        for name in [
            "TLS_FALLBACK_SCSV",
            "ECDHE-RSA-AES128-GCM-SHA256",
            "tls_aes_128_gcm_sha256",
        ] {
            let error = TlsSettings::new(TlsMinVersion::Tls13, &names(&[name]))
                .unwrap_err()
                .to_string();
            assert_eq!(
                error,
                format!(
                    "--tls-cipher-suites: cipher suite {name} not supported or doesn't exist; supported: {SUPPORTED_NAMES}"
                )
            );
        }
    }

    #[test]
    fn tls12_needs_the_suite_http2_requires() {
        for list in [
            names(&["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]),
            names(&["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384"]),
        ] {
            let error = TlsSettings::new(TlsMinVersion::Tls12, &list).unwrap_err();
            assert!(
                matches!(error, TlsError::Http2CipherSuiteMissing),
                "{list:?}: {error}"
            );
        }
        for required in [
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ] {
            TlsSettings::new(TlsMinVersion::Tls12, &names(&[required])).unwrap();
        }
    }

    #[test]
    fn with_tls13_the_list_has_no_effect_but_is_read() {
        let list = names(&[
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "TLS_RSA_WITH_AES_128_CBC_SHA",
        ]);
        let settings = TlsSettings::new(TlsMinVersion::Tls13, &list).unwrap();
        assert_eq!(settings.min_version(), TlsMinVersion::Tls13);
        assert_eq!(tls13_allowed(&settings), 3);
    }
}
