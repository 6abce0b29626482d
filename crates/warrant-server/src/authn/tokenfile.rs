//! Who is calling: kube-apiserver's client-certificate and static-token authentication.
//!
//! - A client certificate that verifies against `--client-ca-file` (checked during the TLS
//!   handshake) authenticates as its subject: CN is the user name, each O a group.
//! - A bearer token from `--token-auth-file` (kube-apiserver's CSV: `token,user,uid[,"g1,g2"]`)
//!   authenticates as its user. Tokens are held only as SHA-256 digests.
//!
//! A bearer token that matches nothing is refused with 401, never downgraded to anonymous (as
//! kube-apiserver does). Every authenticated user is also in `system:authenticated`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use aws_lc_rs::digest;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::AUTHORIZATION;
use warrant_token::GROUP_AUTHENTICATED;

use crate::error::ApiError;
use crate::state::AppState;

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The user name (`admin`, `system:node:n1`, …).
    pub name: String,
    /// The user's UID, if the authenticator knows one.
    pub uid: String,
    /// Groups, including `system:authenticated`.
    pub groups: Vec<String>,
}

impl User {
    fn new(name: String, uid: String, mut groups: Vec<String>) -> Self {
        if !groups.iter().any(|g| g == GROUP_AUTHENTICATED) {
            groups.push(GROUP_AUTHENTICATED.to_owned());
        }
        User { name, uid, groups }
    }
}

/// Who made a request, as seen by handlers.
#[derive(Debug, Clone)]
pub enum Caller {
    /// No credentials were presented.
    Anonymous,
    /// A verified identity.
    User(Arc<User>),
}

impl Caller {
    /// The user, or 401 for an anonymous caller.
    pub fn require(&self) -> Result<&User, ApiError> {
        match self {
            Caller::User(user) => Ok(user),
            Caller::Anonymous => Err(ApiError::unauthorized()),
        }
    }
}

/// The identity in a connection's verified client certificate, attached to each request on it.
#[derive(Debug, Clone, Default)]
pub struct PeerIdentity(pub Option<Arc<User>>);

impl PeerIdentity {
    /// The user named by a client certificate (DER) that rustls has already verified against the
    /// client CA: CN is the name, each O a group. A certificate without a CN names nobody.
    pub fn from_certificate(der: &[u8]) -> PeerIdentity {
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
            return PeerIdentity(None);
        };
        let subject = cert.subject();
        let name = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok());
        let groups = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_owned))
            .collect();
        PeerIdentity(
            name.filter(|n| !n.is_empty())
                .map(|n| Arc::new(User::new(n.to_owned(), String::new(), groups))),
        )
    }
}

/// Why the token file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("failed to read token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not valid CSV.
    #[error("token file {path}: {message}")]
    Csv {
        /// The file.
        path: String,
        /// Where and what (never the token).
        message: String,
    },
    /// A record has fewer than three columns (kube-apiserver's message).
    #[error(
        "token file '{path}' must have at least 3 columns (token, user name, user uid), found {found}"
    )]
    Columns {
        /// The file.
        path: String,
        /// How many columns the record had.
        found: usize,
    },
}

/// Static bearer tokens, by SHA-256 of the token.
#[derive(Debug, Default)]
pub struct TokenFile {
    users: HashMap<[u8; 32], Arc<User>>,
}

impl TokenFile {
    /// Reads kube-apiserver's token CSV. Empty tokens are skipped and a duplicate token keeps its
    /// last record, both with a warning naming the record number, as kube-apiserver does.
    pub fn load(path: &Path) -> Result<TokenFile, TokenFileError> {
        let shown = path.display().to_string();
        let data = std::fs::read(path).map_err(|source| TokenFileError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&data, &shown)
    }

    /// Parses token CSV; `path` names its origin in errors.
    pub fn parse(data: &[u8], path: &str) -> Result<TokenFile, TokenFileError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .comment(Some(b'#'))
            .from_reader(data);
        let mut users = HashMap::new();
        for (index, record) in reader.records().enumerate() {
            let number = index + 1;
            let record = record.map_err(|e| TokenFileError::Csv {
                path: path.to_owned(),
                message: match e.position() {
                    Some(p) => format!("record {number} (line {}) is not valid CSV", p.line()),
                    None => format!("record {number} is not valid CSV"),
                },
            })?;
            if record.len() < 3 {
                return Err(TokenFileError::Columns {
                    path: path.to_owned(),
                    found: record.len(),
                });
            }
            let field = |i: usize| record.get(i).unwrap_or_default().to_owned();
            let token = field(0);
            if token.is_empty() {
                tracing::warn!(path, record = number, "empty token in token file, skipped");
                continue;
            }
            let groups = match record.get(3) {
                Some(g) if !g.is_empty() => g.split(',').map(str::to_owned).collect(),
                _ => Vec::new(),
            };
            let user = Arc::new(User::new(field(1), field(2), groups));
            if users.insert(hash(&token), user).is_some() {
                tracing::warn!(
                    path,
                    record = number,
                    "duplicate token in token file, the last one wins"
                );
            }
        }
        Ok(TokenFile { users })
    }

    fn user(&self, token: &str) -> Option<Arc<User>> {
        self.users.get(&hash(token)).cloned()
    }

    /// How many tokens the file holds.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// True when the file holds no tokens.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

fn hash(token: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, token.as_bytes()).as_ref());
    out
}

/// The bearer authenticators configured.
#[derive(Debug, Default)]
pub struct Authenticator {
    /// `--token-auth-file`.
    pub token_file: Option<TokenFile>,
}

impl Authenticator {
    /// The caller of a request: its bearer token if it has one (which must be valid), else its
    /// client certificate, else anonymous.
    pub fn authenticate(&self, request: &Request) -> Result<Caller, ApiError> {
        if let Some(value) = request.headers().get(AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .ok_or_else(ApiError::unauthorized)?;
            return self
                .token_file
                .as_ref()
                .and_then(|f| f.user(token))
                .map(Caller::User)
                .ok_or_else(ApiError::unauthorized);
        }
        match request.extensions().get::<PeerIdentity>() {
            Some(PeerIdentity(Some(user))) => Ok(Caller::User(user.clone())),
            _ => Ok(Caller::Anonymous),
        }
    }
}

/// Middleware: attaches the [`Caller`] to the request, or answers 401 for bad credentials.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    match state.authenticator().authenticate(&request) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_format() {
        let csv =
            b"# comment\nt1,alice,uid-a\nt2,bob,uid-b,\"dev,ops\"\n,nobody,x\nt1,alice2,uid-a2\n";
        let file = TokenFile::parse(csv, "tokens.csv").unwrap();
        assert_eq!(file.len(), 2);
        let alice = file.user("t1").unwrap();
        assert_eq!(
            (alice.name.as_str(), alice.uid.as_str()),
            ("alice2", "uid-a2")
        );
        assert_eq!(alice.groups, ["system:authenticated"]);
        assert_eq!(
            file.user("t2").unwrap().groups,
            ["dev", "ops", "system:authenticated"]
        );
        assert!(file.user("t3").is_none());
        assert!(file.user("").is_none());
    }

    #[test]
    fn token_file_errors_never_show_tokens() {
        let err = TokenFile::parse(b"secret-token,alice\n", "t.csv")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "token file 't.csv' must have at least 3 columns (token, user name, user uid), found 2"
        );
        let err = TokenFile::parse(b"\"secret-token,alice,x\n", "t.csv")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("secret"), "{err}");
    }
}
