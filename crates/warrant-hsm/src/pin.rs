//! The user PIN: read from a file or an environment variable, held in a zeroizing secret, and
//! never printed (the types here have no `Display`, and errors name the source, not the value).
//!
//! **A PIN file** that every user can read or write is refused ([`PinError::Exposed`]), as ssh
//! refuses a private key file others can read; group access is allowed, since a Kubernetes
//! Secret volume with an `fsGroup` is group-readable.
//!
//! **A PIN variable is not removed from the environment once read**, and cannot soundly be:
//! `std::env::remove_var` is `unsafe` in Rust 2024 (another thread, or C code such as the
//! PKCS#11 module, may read the environment at the same moment), every warrant crate forbids
//! `unsafe` (a `forbid` no crate can lift), and the token is opened once the runtime's threads
//! run. Removal would also hide less than it seems: `/proc/PID/environ` shows the environment
//! the process started with, whatever is removed later, and only to the process's own user and
//! root, who can read its memory (and so the PIN) anyway. What removal would protect against is
//! inheritance by child processes and in-process readers of the environment; warrant starts no
//! child process and never reads or logs its environment beyond the variables it names. So the
//! variable is read once, at startup, and the file source (`pin-source=file:`) is the one the
//! documentation recommends.

use std::path::PathBuf;

use cryptoki::types::AuthPin;

/// Where the user PIN comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinSource {
    /// A file holding the PIN (one trailing newline is ignored), e.g. a mounted Secret. The
    /// URI's `pin-source=file:/path` gives this.
    File(PathBuf),
    /// An environment variable, by name (the operator gives the name, e.g. `--pkcs11-pin-env`).
    Env(String),
}

/// Why the PIN could not be read. None of these carry the PIN.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The file could not be read.
    #[error("cannot read the PIN file {path}: {cause}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        cause: std::io::Error,
    },
    /// Users other than the file's owner and group can read or write the file.
    #[error(
        "the PIN file {path} can be read or written by every user (mode {mode:o}): make it readable by warrant's user (or group) only, e.g. chmod 0400, or in Kubernetes a Secret volume's defaultMode 0400 (0440 with an fsGroup)"
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is larger than any PIN.
    #[error("the PIN file {0} is larger than 1024 bytes: it is not a PIN")]
    TooLarge(PathBuf),
    /// The environment variable is not set.
    #[error("the PIN environment variable {0} is not set")]
    EnvUnset(String),
    /// The environment variable is not UTF-8.
    #[error("the PIN environment variable {0} is not UTF-8")]
    EnvNotUtf8(String),
    /// The source holds an empty PIN.
    #[error("the PIN from {0} is empty")]
    Empty(String),
    /// The URI has `pin-source` and an environment variable was given too.
    #[error("the PIN has two sources (the URI's pin-source and an environment variable): give one")]
    TwoSources,
    /// Neither given.
    #[error(
        "no PIN: give pin-source=file:/path in the PKCS#11 URI or the name of an environment variable that holds it"
    )]
    None,
}

impl PinSource {
    /// Reads the PIN.
    pub(crate) fn read(&self) -> Result<AuthPin, PinError> {
        let (text, from) = match self {
            PinSource::File(path) => {
                let meta = std::fs::metadata(path).map_err(|cause| PinError::File {
                    path: path.clone(),
                    cause,
                })?;
                // As ssh refuses a private key file others can read: a PIN every user of the
                // machine can read protects nothing. Group access is allowed (a Secret volume
                // with an fsGroup is group-readable).
                let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777;
                if mode & 0o006 != 0 {
                    return Err(PinError::Exposed {
                        path: path.clone(),
                        mode,
                    });
                }
                if meta.len() > 1024 {
                    return Err(PinError::TooLarge(path.clone()));
                }
                let text = std::fs::read_to_string(path).map_err(|cause| PinError::File {
                    path: path.clone(),
                    cause,
                })?;
                (text, path.display().to_string())
            }
            PinSource::Env(name) => match std::env::var(name) {
                Ok(v) => (v, format!("${name}")),
                Err(std::env::VarError::NotPresent) => {
                    return Err(PinError::EnvUnset(name.clone()));
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(PinError::EnvNotUtf8(name.clone()));
                }
            },
        };
        let pin = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(&text);
        if pin.is_empty() {
            return Err(PinError::Empty(from));
        }
        Ok(AuthPin::from(pin))
    }
}
