//! The synthetic cluster the benchmark serves tokens for, and the tokens it reviews.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use warrant_token::{Binding, Claims, NewToken, ObjectRef, SigningKey, new_jti};

/// Why the review tokens could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenFileError {
    /// Creating or writing a token file failed.
    // The benchmark prints an error's own message only: the cause is in it.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Signing a token failed.
    #[error("signing a review token: {0}")]
    Sign(#[from] warrant_token::KeyError),
    /// A signing thread panicked.
    #[error("a signing thread failed")]
    Panicked,
}

/// Namespace `bench`: `pods` pods `pod-K`, run by service accounts `sa-(K mod S)` with S a tenth
/// of the pods, on nodes `node-(K mod 50)`. UIDs are fixed so tokens can be made offline.
pub(crate) struct Cluster {
    pods: usize,
    service_accounts: usize,
}

const NODES: usize = 50;

fn uid(kind: u8, index: usize) -> String {
    format!("00000000-0000-4000-8{kind:03x}-{index:012x}")
}

impl Cluster {
    pub(crate) fn new(pods: usize) -> Cluster {
        Cluster {
            pods: pods.max(1),
            service_accounts: (pods / 10).max(1),
        }
    }

    /// The objects file.
    pub(crate) fn manifest(&self) -> String {
        let mut out = String::with_capacity(self.pods * 200);
        for i in 0..self.service_accounts {
            let _ = write!(
                out,
                "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: sa-{i}, namespace: bench, uid: {}}}\n",
                uid(1, i)
            );
        }
        for i in 0..NODES {
            let _ = write!(
                out,
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: node-{i}, uid: {}}}\n",
                uid(2, i)
            );
        }
        for i in 0..self.pods {
            let _ = write!(
                out,
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: pod-{i}, namespace: bench, uid: {}}}\nspec: {{serviceAccountName: sa-{}, nodeName: node-{}}}\n",
                uid(3, i),
                i % self.service_accounts,
                i % NODES
            );
        }
        out
    }

    /// The claims of a pod-bound token for pod `index`, as warrant would issue it, for the API
    /// audience.
    pub(crate) fn claims(&self, issuer: &str, index: usize, now: i64) -> Claims {
        let pod = index % self.pods;
        let sa = pod % self.service_accounts;
        let node = pod % NODES;
        Claims::new(NewToken {
            issuer,
            namespace: "bench",
            service_account: ObjectRef::new(format!("sa-{sa}"), uid(1, sa)),
            audiences: vec![issuer.to_owned()],
            binding: Binding::Pod {
                pod: ObjectRef::new(format!("pod-{pod}"), uid(3, pod)),
                node: Some(ObjectRef::new(format!("node-{node}"), uid(2, node))),
            },
            issued_at: now,
            expires_at: now + 3600,
            warn_after: None,
            jti: new_jti(),
        })
    }

    /// That token, signed.
    fn token(
        &self,
        key: &SigningKey,
        issuer: &str,
        index: usize,
        now: i64,
    ) -> Result<String, warrant_token::KeyError> {
        key.sign(&self.claims(issuer, index, now))
    }

    /// Writes `count` fresh tokens split over two files (`PATH.0`, `PATH.1`, one per wrk thread),
    /// signed on two threads. Every call makes new tokens (new `jti`), so no run reuses another's.
    pub(crate) fn write_review_tokens(
        &self,
        key: &SigningKey,
        issuer: &str,
        count: usize,
        path: &Path,
    ) -> Result<(), TokenFileError> {
        let now = jiff::Timestamp::now().as_second();
        let results: Vec<Result<(), TokenFileError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|part| {
                    scope.spawn(move || -> Result<(), TokenFileError> {
                        let file = path.with_extension(part.to_string());
                        let write = |source| TokenFileError::Write {
                            path: file.display().to_string(),
                            source,
                        };
                        let mut out =
                            std::io::BufWriter::new(std::fs::File::create(&file).map_err(write)?);
                        for i in (part..count.max(2)).step_by(2) {
                            let token = self.token(key, issuer, i, now)?;
                            writeln!(out, "{token}").map_err(write)?;
                        }
                        out.flush().map_err(write)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(TokenFileError::Panicked)))
                .collect()
        });
        for result in results {
            result?;
        }
        Ok(())
    }
}
