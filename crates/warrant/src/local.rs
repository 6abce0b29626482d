//! `warrant local-setup`: everything needed to try warrant on one machine, with nothing else
//! installed. Keys and certificates are generated here; files that already exist are kept, so
//! running it again changes nothing and tokens issued earlier stay valid.
//!
//! The certificates are for local use only, and the CA's key sits next to them. The CA is
//! valid for [`CA_DAYS`] and the serving certificate for [`SERVING_DAYS`] from the day they are
//! made (from the day before, for clocks a little behind). Each run checks the serving
//! certificate: within [`RENEW_DAYS`] of its end (or past it, or unreadable) the CA, the
//! serving certificate and the kubeconfig are made anew, and the signing key and admin token
//! kept, so tokens issued earlier stay valid. To renew by hand, delete `ca.crt` and run it again.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use warrant_token::{KeyType, SigningKey};
use warrant_watch::private_file;

use crate::cli::LocalSetupArgs;

/// How long the local CA is valid.
pub(crate) const CA_DAYS: i64 = 3650;
/// How long the local serving certificate is valid.
pub(crate) const SERVING_DAYS: i64 = 365;
/// How close to its end a serving certificate is renewed.
pub(crate) const RENEW_DAYS: i64 = 30;

/// The files a local setup consists of.
#[derive(Debug, Clone)]
pub(crate) struct LocalFiles {
    pub(crate) dir: PathBuf,
}

impl LocalFiles {
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Why the setup could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LocalSetupError {
    /// A file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Certificate generation failed.
    #[error("generating a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// Key generation failed.
    #[error("generating a key: {0}")]
    Key(#[from] warrant_token::KeyError),
    /// Random bytes were not available.
    #[error("the system random number generator failed")]
    Random,
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LocalSetupError + '_ {
    move |source| LocalSetupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `contents` to `path` unless it exists; secrets are readable by the owner only. A
/// symbolic link at `path` is refused, never written through.
fn write_new(path: &Path, contents: &[u8], secret: bool) -> Result<bool, LocalSetupError> {
    if path.exists() {
        return Ok(false);
    }
    let mode = if secret {
        private_file::OWNER_ONLY
    } else {
        0o644
    };
    let mut file = private_file::create_new(path, mode).map_err(io_error(path))?;
    file.write_all(contents).map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))?;
    Ok(true)
}

/// Creates the setup in `args.dir` at `now`, reporting what it created.
pub(crate) fn setup(args: &LocalSetupArgs, now: Timestamp) -> Result<LocalFiles, LocalSetupError> {
    let files = LocalFiles {
        dir: args.dir.clone(),
    };
    // Owner only: it holds the CA's and the signing key's private keys and the admin token.
    private_file::create_private_dir(&args.dir).map_err(io_error(&args.dir))?;

    let (ca_cert, ca_key) = (files.path("ca.crt"), files.path("ca.key"));
    let (serving_cert, serving_key) = (files.path("serving.crt"), files.path("serving.key"));
    let complete =
        ca_cert.exists() && ca_key.exists() && serving_cert.exists() && serving_key.exists();
    if !complete {
        write_pki(&files, args.address, now)?;
    } else if let Some(why) = needs_renewal(&serving_cert, now) {
        tracing::warn!(
            dir = %files.dir.display(),
            "the local serving certificate {why}: making a new CA, serving certificate and kubeconfig (the signing key and admin token are kept)"
        );
        write_pki(&files, args.address, now)?;
    }
    if !files.path("sa.key").exists() {
        let key = SigningKey::generate(KeyType::Rsa2048)?;
        write_new(
            &files.path("sa.key"),
            key.to_pkcs8_pem()?.as_str().as_bytes(),
            true,
        )?;
    }
    let tokens = files.path("tokens.csv");
    if !tokens.exists() {
        let mut bytes = [0u8; 32];
        aws_lc_rs::rand::fill(&mut bytes).map_err(|_| LocalSetupError::Random)?;
        let token = URL_SAFE_NO_PAD.encode(bytes);
        write_new(
            &tokens,
            format!("{token},admin,admin,system:masters\n").as_bytes(),
            true,
        )?;
    }
    let kubeconfig = files.path("kubeconfig");
    if !kubeconfig.exists() {
        let token = fs::read_to_string(&tokens).map_err(io_error(&tokens))?;
        let token = token
            .split(',')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        let ca = fs::read(&ca_cert).map_err(io_error(&ca_cert))?;
        let server = match args.address {
            IpAddr::V6(ip) => format!("https://[{ip}]:{}", args.port),
            IpAddr::V4(ip) => format!("https://{ip}:{}", args.port),
        };
        write_new(
            &kubeconfig,
            kubeconfig_yaml(&server, &ca, &token).as_bytes(),
            true,
        )?;
    }
    Ok(files)
}

/// Why the serving certificate at `path` should be made anew at `now`, if it should.
fn needs_renewal(path: &Path, now: Timestamp) -> Option<String> {
    let Ok(pem) = fs::read(path) else {
        return Some("cannot be read".to_owned());
    };
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(&pem) else {
        return Some("is not PEM".to_owned());
    };
    let Ok(certificate) = pem.parse_x509() else {
        return Some("cannot be parsed".to_owned());
    };
    let not_after = certificate.validity().not_after.timestamp();
    let renew_from = not_after.saturating_sub(RENEW_DAYS * 86_400);
    if now.as_second() >= not_after {
        Some(format!("expired on {}", day(not_after)))
    } else if now.as_second() >= renew_from {
        Some(format!("expires on {}", day(not_after)))
    } else {
        None
    }
}

fn day(second: i64) -> String {
    Timestamp::from_second(second).map_or_else(
        |_| second.to_string(),
        |t| t.strftime("%Y-%m-%d").to_string(),
    )
}

/// The UTC date `days` after `now`'s (negative: before), for a certificate's validity.
fn day_after(now: Timestamp, days: i64) -> (i32, u8, u8) {
    let date = now
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .checked_add(jiff::Span::new().days(days))
        .unwrap_or(jiff::civil::Date::MAX);
    (
        i32::from(date.year()),
        u8::try_from(date.month()).unwrap_or(1),
        u8::try_from(date.day()).unwrap_or(1),
    )
}

/// Valid from midnight UTC the day before `now`'s (for clocks a little behind) to midnight
/// `days` after it.
fn set_validity(params: &mut CertificateParams, now: Timestamp, days: i64) {
    let (year, month, day) = day_after(now, -1);
    params.not_before = rcgen::date_time_ymd(year, month, day);
    let (year, month, day) = day_after(now, days);
    params.not_after = rcgen::date_time_ymd(year, month, day);
}

fn write_pki(files: &LocalFiles, address: IpAddr, now: Timestamp) -> Result<(), LocalSetupError> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    set_validity(&mut ca, now, CA_DAYS);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "warrant local CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key)?;

    let serving_key = KeyPair::generate()?;
    let mut names = vec!["localhost".to_owned(), address.to_string()];
    names.dedup();
    let mut serving = CertificateParams::new(names)?;
    set_validity(&mut serving, now, SERVING_DAYS);
    serving.distinguished_name = DistinguishedName::new();
    serving
        .distinguished_name
        .push(DnType::CommonName, "warrant");
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let issuer = Issuer::new(ca, ca_key);
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    // Rewrite all four together so they always match each other.
    for name in [
        "ca.crt",
        "ca.key",
        "serving.crt",
        "serving.key",
        "kubeconfig",
    ] {
        let path = files.path(name);
        if path.exists() {
            fs::remove_file(&path).map_err(io_error(&path))?;
        }
    }
    write_new(&files.path("ca.crt"), ca_cert.pem().as_bytes(), false)?;
    write_new(
        &files.path("ca.key"),
        issuer.key().serialize_pem().as_bytes(),
        true,
    )?;
    write_new(
        &files.path("serving.crt"),
        serving_cert.pem().as_bytes(),
        false,
    )?;
    write_new(
        &files.path("serving.key"),
        serving_key.serialize_pem().as_bytes(),
        true,
    )?;
    Ok(())
}

fn kubeconfig_yaml(server: &str, ca_pem: &[u8], token: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "apiVersion: v1
kind: Config
clusters:
- name: warrant
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: admin
  user:
    token: {token}
contexts:
- name: warrant
  context:
    cluster: warrant
    user: admin
current-context: warrant
",
        ca = STANDARD.encode(ca_pem),
    );
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn args(dir: &Path) -> LocalSetupArgs {
        LocalSetupArgs {
            dir: dir.to_owned(),
            address: "127.0.0.1".parse().unwrap(),
            port: 8443,
        }
    }

    fn validity(path: &Path) -> (i64, i64) {
        let pem = fs::read(path).unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let certificate = pem.parse_x509().unwrap();
        let validity = certificate.validity();
        (
            validity.not_before.timestamp(),
            validity.not_after.timestamp(),
        )
    }

    const DAY: i64 = 86_400;

    /// Bounded validity from the day of the setup, and a renewal near the end that keeps the
    /// signing key and the admin token (so tokens issued earlier stay valid).
    #[test]
    fn certificates_are_bounded_and_renewed_near_their_end() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        setup(&args(dir.path()), t0).unwrap();
        let at = |days: i64| Timestamp::from_second(t0.as_second() + days * DAY).unwrap();
        let (ca_from, ca_until) = validity(&dir.path().join("ca.crt"));
        let (from, until) = validity(&dir.path().join("serving.crt"));
        assert!(ca_from <= t0.as_second() && from <= t0.as_second());
        assert!(t0.as_second() - from < 2 * DAY, "backdated a day at most");
        assert!((until - t0.as_second()) / DAY <= SERVING_DAYS);
        assert!((until - t0.as_second()) / DAY >= SERVING_DAYS - 1);
        assert!((ca_until - t0.as_second()) / DAY <= CA_DAYS);

        let kept = |name: &str| fs::read(dir.path().join(name)).unwrap();
        let (sa, tokens, serving) = (kept("sa.key"), kept("tokens.csv"), kept("serving.crt"));
        // Well before the end: nothing changes.
        setup(&args(dir.path()), at(SERVING_DAYS - RENEW_DAYS - 2)).unwrap();
        assert_eq!(kept("serving.crt"), serving);
        // Within the renewal window: a new CA, serving certificate and kubeconfig.
        setup(&args(dir.path()), at(SERVING_DAYS - RENEW_DAYS + 1)).unwrap();
        assert_ne!(kept("serving.crt"), serving);
        let (_, renewed_until) = validity(&dir.path().join("serving.crt"));
        assert!(renewed_until > until);
        let kubeconfig = String::from_utf8(kept("kubeconfig")).unwrap();
        let ca = STANDARD.encode(kept("ca.crt"));
        assert!(kubeconfig.contains(&ca), "the kubeconfig trusts the new CA");
        assert_eq!((kept("sa.key"), kept("tokens.csv")), (sa, tokens));
    }

    /// A symbolic link planted at a key's path is refused with an error that names the path,
    /// and nothing is written where it points.
    #[test]
    fn a_link_at_a_keys_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("stolen.key");
        let link = dir.path().join("ca.key");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let error = setup(&args(dir.path()), t0).unwrap_err().to_string();
        assert!(error.starts_with(&link.display().to_string()), "{error}");
        assert!(error.contains("is a symbolic link"), "{error}");
        assert!(error.contains("remove the link"), "{error}");
        assert!(!target.exists(), "a key was written through the link");
    }
}
