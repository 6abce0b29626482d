//! Static bearer tokens (`--token-auth-file`), kube-apiserver's CSV: `token,user,uid[,"g1,g2"]`.
//!
//! What this trusts: the file. Whoever can read it holds every identity in it, and whoever can
//! write it can make any identity (`system:masters` included), so it belongs to the operator
//! alone. Tokens are held in memory only as SHA-256 digests, and a lookup never logs the token.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use aws_lc_rs::digest as sha;

use super::{User, Via};

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
            let user = Arc::new(User::new(field(1), field(2), groups, Via::TokenFile));
            if users.insert(digest(&token), user).is_some() {
                tracing::warn!(
                    path,
                    record = number,
                    "duplicate token in token file, the last one wins"
                );
            }
        }
        Ok(TokenFile { users })
    }

    /// The user whose token this is.
    pub(crate) fn user(&self, token: &str) -> Option<Arc<User>> {
        self.users.get(&digest(token)).cloned()
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

/// The SHA-256 of a token: how tokens are held and cached, never in the clear.
pub(crate) fn digest(token: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(sha::digest(&sha::SHA256, token.as_bytes()).as_ref());
    out
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
