//! `warrant local-setup`: everything needed to try warrant on one machine, with nothing else
//! installed. Keys and certificates are generated here; files that already exist are kept, so
//! running it again changes nothing and tokens issued earlier stay valid.
//!
//! The certificates are for local use only: they are valid from 1975 to 4096 (no clock is read
//! to pick dates) and the CA's key sits next to them.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use warrant_token::{KeyType, SigningKey};

use crate::cli::LocalSetupArgs;

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

/// Writes `contents` to `path` unless it exists; secrets are readable by the owner only.
fn write_new(path: &Path, contents: &[u8], secret: bool) -> Result<bool, LocalSetupError> {
    if path.exists() {
        return Ok(false);
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if secret { 0o600 } else { 0o644 });
    }
    let mut file = options.open(path).map_err(io_error(path))?;
    file.write_all(contents).map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))?;
    Ok(true)
}

/// Creates the setup in `args.dir`, reporting what it created.
pub(crate) fn setup(args: &LocalSetupArgs) -> Result<LocalFiles, LocalSetupError> {
    let files = LocalFiles {
        dir: args.dir.clone(),
    };
    // Owner only: it holds the CA's and the signing key's private keys and the admin token.
    let mut dir = fs::DirBuilder::new();
    dir.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        dir.mode(0o700);
    }
    dir.create(&args.dir).map_err(io_error(&args.dir))?;

    let (ca_cert, ca_key) = (files.path("ca.crt"), files.path("ca.key"));
    let (serving_cert, serving_key) = (files.path("serving.crt"), files.path("serving.key"));
    if !ca_cert.exists() || !ca_key.exists() || !serving_cert.exists() || !serving_key.exists() {
        write_pki(&files, args.address)?;
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

fn write_pki(files: &LocalFiles, address: IpAddr) -> Result<(), LocalSetupError> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
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
