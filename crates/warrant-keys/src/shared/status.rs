//! How a managed key store stands, as one type for both who ask: a running replica's lines in
//! `/readyz?verbose` (`key-store`, `key-lease`, `key-copy`) and `warrant keys list`'s lines and
//! JSON members (`store`, `writer`, `copy`). Each fact has two vantage points, and the variants
//! say which: a replica knows its own health, whether it leads, and the copy it keeps; the
//! operator's command reads the Secret, the Lease and the copy once. The words are written here
//! and nowhere else.

use std::path::PathBuf;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::copy::{CopyState, LocalCopy};
use crate::leader::LeaseHolder;
use crate::lifecycle::ManagedKeySet;
use crate::manager::{Seed, StoreHealth};
use crate::store::StoreError;

/// How the key store answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreStatus {
    /// As a replica's key manager sees it: its `health`, and (while the store does not answer)
    /// until when the keys sign at the latest (`deadline`, see `KeyManager::signing_deadline`).
    Served {
        /// How the store answered the key manager.
        health: StoreHealth,
        /// Until when the keys sign while it does not answer.
        deadline: Option<Timestamp>,
    },
    /// As a command read it: the store (`described`), who wrote it last, or, when it could not
    /// be read, why and the copy whose keys stand in.
    Read {
        /// The store (`KeyStore::describe`).
        described: String,
        /// Its last writer (`warrant.dev/written-by`), if it names one.
        written_by: Option<String>,
        /// Why it could not be read, and the copy listed instead.
        unreadable: Option<Unreadable>,
    },
}

/// A store a command could not read, and the local copy listed instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// Why it could not be read.
    pub error: String,
    /// The copy whose keys are listed (`LocalCopy::describe`).
    pub copy: String,
    /// When the copy was written.
    pub copy_written_at: Timestamp,
}

impl StoreStatus {
    /// The line at `now`.
    pub fn text(&self, now: Timestamp) -> String {
        match self {
            StoreStatus::Served { health, deadline } => {
                let summary = health.summary(now);
                match deadline {
                    Some(deadline) if now >= *deadline => format!(
                        "{summary}; signing nothing since {deadline}, when the store's writer may have retired the key (verifying goes on)"
                    ),
                    Some(deadline) => format!("{summary}; signs until {deadline} at the latest"),
                    None => summary,
                }
            }
            StoreStatus::Read {
                described,
                unreadable: Some(unreadable),
                ..
            } => format!(
                "{described} cannot be read ({}): the keys above are the {}'s, written at {}",
                unreadable.error, unreadable.copy, unreadable.copy_written_at
            ),
            StoreStatus::Read {
                described,
                written_by,
                unreadable: None,
            } => format!(
                "{described}, last written by {}",
                written_by.as_deref().unwrap_or("-")
            ),
        }
    }

    /// The JSON member.
    pub fn json(&self) -> Value {
        match self {
            StoreStatus::Served { health, deadline } => json!({
                "failingSince": health.failing_since.map(|t| t.to_string()),
                "error": health.last_error,
                "lastSuccess": health.last_success.map(|t| t.to_string()),
                "signsUntil": deadline.map(|t| t.to_string()),
            }),
            StoreStatus::Read {
                described,
                written_by,
                unreadable,
            } => json!({
                "name": described,
                "read": unreadable.is_none(),
                "error": unreadable.as_ref().map(|u| &u.error),
                "writtenBy": written_by,
            }),
        }
    }
}

/// Who writes a shared key Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriterStatus {
    /// A replica in the election (`LEASE as IDENTITY`): whether it leads, and when it does not,
    /// who last wrote the Secret (its `warrant.dev/written-by`, as this replica last read it:
    /// the Lease's holder, or the one before it if the holder has written nothing yet).
    Replica {
        /// `LEASE as IDENTITY`.
        election: String,
        /// Whether this replica holds the Lease.
        leading: bool,
        /// The Secret's last writer, as this replica last read it.
        last_writer: Option<String>,
    },
    /// The Lease as a command read it at `now`: its holder, or why none is known.
    Lease {
        /// `NAMESPACE/NAME`.
        lease: String,
        /// Its holder (`None`: no Lease), or why it could not be read.
        read: Result<Option<LeaseHolder>, String>,
        /// When it was read: a holder whose term ran out by then holds nothing.
        now: Timestamp,
    },
}

impl WriterStatus {
    /// Reads the Lease `namespace/name` at `now`.
    pub async fn read(client: kube::Client, namespace: &str, name: &str, now: Timestamp) -> Self {
        let read = LeaseHolder::read(client, namespace, name).await;
        WriterStatus::Lease {
            lease: format!("{namespace}/{name}"),
            read: read.map_err(|error| error.to_string()),
            now,
        }
    }

    /// The line.
    pub fn text(&self) -> String {
        let time = |t: Option<Timestamp>| t.map(|t| t.to_string()).unwrap_or_default();
        match self {
            WriterStatus::Replica {
                election,
                leading: true,
                ..
            } => format!("leading ({election}): this replica writes the keys"),
            WriterStatus::Replica {
                election,
                last_writer,
                ..
            } => {
                let writer = last_writer.as_ref().map_or_else(
                    || "the key Secret names no writer yet".to_owned(),
                    |writer| format!("the key Secret was last written by {writer}"),
                );
                format!("following ({election}): another replica writes the keys; {writer}")
            }
            WriterStatus::Lease { lease, read, now } => match read {
                Ok(Some(holder)) if !holder.expired_at(*now) => format!(
                    "{} holds the Lease {lease} (renewed at {})",
                    holder.identity.as_deref().unwrap_or("-"),
                    time(holder.renewed_at)
                ),
                Ok(Some(holder)) => format!(
                    "none: the Lease {lease} is free or ran out (last held by {}, renewed at {}); no replica writes the keys until one takes it",
                    holder.identity.as_deref().unwrap_or("-"),
                    time(holder.renewed_at)
                ),
                Ok(None) => format!("none yet: the Lease {lease} does not exist"),
                Err(error) => format!("unknown: the Lease {lease} cannot be read: {error}"),
            },
        }
    }

    /// The JSON member.
    pub fn json(&self) -> Value {
        let time = |t: Option<Timestamp>| t.map(|t| t.to_string());
        match self {
            WriterStatus::Replica {
                election,
                leading,
                last_writer,
            } => json!({"election": election, "leading": leading, "lastWriter": last_writer}),
            WriterStatus::Lease { lease, read, now } => match read {
                Ok(Some(holder)) if !holder.expired_at(*now) => {
                    json!({"lease": lease, "holder": holder.identity, "renewedAt": time(holder.renewed_at)})
                }
                Ok(Some(holder)) => {
                    json!({"lease": lease, "holder": null, "lastHolder": holder.identity})
                }
                Ok(None) => json!({"lease": lease, "holder": null}),
                Err(error) => json!({"lease": lease, "error": error}),
            },
        }
    }
}

/// How this node's local copy of the Secret stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyStatus {
    /// The copy a replica keeps in `dir`, as it last wrote it.
    Kept {
        /// The copy's directory.
        dir: PathBuf,
        /// How it stands.
        state: CopyState,
    },
    /// The copy as a command read it: when it was written and whether it holds the store's keys
    /// (`None` when the store could not be read to compare), none, or why it cannot be read.
    Read {
        /// The copy (`LocalCopy::describe`).
        described: String,
        /// Its directory.
        dir: PathBuf,
        /// When it was written and whether it holds the store's keys; `None`: no copy yet.
        read: Result<Option<(Timestamp, Option<bool>)>, String>,
    },
}

impl CopyStatus {
    /// The copy as read (`seed`), against the store's keys when they were read (`store_keys`).
    pub fn read(
        copy: &LocalCopy,
        seed: &Result<Option<Seed>, StoreError>,
        store_keys: Option<&ManagedKeySet>,
    ) -> Self {
        let read = match seed {
            Ok(Some(seed)) => Ok(Some((
                seed.written_at,
                store_keys.map(|keys| seed.keys.same_records(keys)),
            ))),
            Ok(None) => Ok(None),
            Err(error) => Err(error.to_string()),
        };
        CopyStatus::Read {
            described: copy.describe(),
            dir: copy.dir().to_owned(),
            read,
        }
    }

    /// The line at `now`.
    pub fn text(&self, now: Timestamp) -> String {
        match self {
            CopyStatus::Kept { dir, state } => format!("{} {}", dir.display(), state.summary(now)),
            CopyStatus::Read {
                described, read, ..
            } => match read {
                Ok(Some((written_at, same))) => {
                    let state = match same {
                        Some(true) => "holding the store's keys",
                        Some(false) => {
                            "holding other keys than the store's (the node's warrant replaces them at its next read of the store)"
                        }
                        None => "listed above",
                    };
                    format!(
                        "{described}: written at {written_at} ({} s ago), {state}",
                        age(*written_at, now)
                    )
                }
                Ok(None) => format!("{described}: none yet"),
                Err(error) => format!("{described}: cannot be read: {error}"),
            },
        }
    }

    /// The JSON member at `now`.
    pub fn json(&self, now: Timestamp) -> Value {
        match self {
            CopyStatus::Kept { dir, state } => json!({
                "dir": dir,
                "writtenAt": state.written_at.map(|t| t.to_string()),
                "inStep": state.in_step,
                "error": state.last_error,
            }),
            CopyStatus::Read { dir, read, .. } => match read {
                Ok(Some((written_at, same))) => json!({
                    "dir": dir,
                    "writtenAt": written_at.to_string(),
                    "ageSeconds": age(*written_at, now),
                    "sameAsStore": same,
                }),
                Ok(None) => json!({"dir": dir, "writtenAt": null}),
                Err(error) => json!({"dir": dir, "error": error}),
            },
        }
    }
}

/// Whole seconds from `t` to `now`.
fn age(t: Timestamp, now: Timestamp) -> i64 {
    now.as_second().saturating_sub(t.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn a_store_that_stopped_answering_says_until_when_keys_sign() {
        let health = StoreHealth {
            failing_since: Some(at(1_000)),
            last_error: Some("connection refused".into()),
            last_success: Some(at(900)),
        };
        let before = StoreStatus::Served {
            health: health.clone(),
            deadline: Some(at(2_000)),
        };
        let text = before.text(at(1_500));
        assert!(text.starts_with("stale since "), "{text}");
        assert!(
            text.ends_with("; signs until 1970-01-01T00:33:20Z at the latest"),
            "{text}"
        );
        let after = StoreStatus::Served {
            health,
            deadline: Some(at(2_000)),
        };
        assert!(
            after
                .text(at(2_000))
                .contains("; signing nothing since 1970-01-01T00:33:20Z,")
        );
    }

    #[test]
    fn a_lease_whose_term_ran_out_names_no_writer() {
        let holder = LeaseHolder {
            identity: Some("node-a".into()),
            renewed_at: Some(at(100)),
            duration_seconds: Some(15),
        };
        let read = |now| WriterStatus::Lease {
            lease: "kube-system/warrant-keys-leader".into(),
            read: Ok(Some(holder.clone())),
            now: at(now),
        };
        assert_eq!(
            read(114).text(),
            "node-a holds the Lease kube-system/warrant-keys-leader (renewed at 1970-01-01T00:01:40Z)"
        );
        assert_eq!(read(114).json()["holder"], "node-a");
        assert!(read(115).text().starts_with("none: the Lease kube-system/warrant-keys-leader is free or ran out (last held by node-a,"));
        assert_eq!(read(115).json()["holder"], Value::Null);
        assert_eq!(read(115).json()["lastHolder"], "node-a");
    }

    #[test]
    fn a_follower_names_the_secrets_last_writer() {
        let following = WriterStatus::Replica {
            election: "ns/lease as node-b".into(),
            leading: false,
            last_writer: None,
        };
        assert_eq!(
            following.text(),
            "following (ns/lease as node-b): another replica writes the keys; the key Secret names no writer yet"
        );
        let leading = WriterStatus::Replica {
            election: "ns/lease as node-a".into(),
            leading: true,
            last_writer: Some("node-a".into()),
        };
        assert_eq!(
            leading.text(),
            "leading (ns/lease as node-a): this replica writes the keys"
        );
    }

    #[test]
    fn a_copy_read_by_a_command_is_compared_with_the_store() {
        let read = |same| CopyStatus::Read {
            described: "local copy /var/lib/warrant/keys".into(),
            dir: "/var/lib/warrant/keys".into(),
            read: Ok(Some((at(100), same))),
        };
        assert_eq!(
            read(Some(true)).text(at(142)),
            "local copy /var/lib/warrant/keys: written at 1970-01-01T00:01:40Z (42 s ago), holding the store's keys"
        );
        assert!(
            read(Some(false))
                .text(at(142))
                .contains("holding other keys than the store's")
        );
        assert!(read(None).text(at(142)).ends_with(", listed above"));
        assert_eq!(read(Some(false)).json(at(142))["sameAsStore"], false);
        assert_eq!(read(None).json(at(142))["ageSeconds"], 42);
    }
}
