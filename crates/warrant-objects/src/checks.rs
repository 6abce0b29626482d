//! The checks a TokenReview runs against the objects a token names (spec §3.3, kube-apiserver
//! v1.32+ order): the service account must exist with the claimed UID and not be deleted; a
//! bound secret, pod or node likewise. "Deleted" means a deletion timestamp more than
//! [`LEEWAY_SECONDS`] before `now`.
//!
//! The bound object is the one [`Claims::binding`] reads, in its one order. A node named on a
//! pod-bound token is not looked up (it is informational, as in kube). The pod's service
//! account is not re-checked either: that was checked when the token was issued. Claims that
//! name both a pod and a secret are refused (kube-apiserver would look both up; neither it nor
//! warrant ever issues such a token).
//!
//! With secret binding off ([`Objects::without_secret_binding`]), a Secret-bound token is
//! refused where its Secret would be looked up: warrant cannot tell whether that Secret still
//! exists, and passing it unchecked would let a deleted Secret's tokens live on. The message
//! follows kube's for a Node-bound token while node binding validation is off.

use jiff::{SignedDuration, Timestamp};
use warrant_token::{BoundKind, Claims, LEEWAY_SECONDS, ObjectRef, go_quote};

use crate::record::Kind;
use crate::source::{LookupError, Objects};

/// Why a token's objects do not check out. `Display` is kube-apiserver's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    /// The service account does not exist.
    #[error("serviceaccounts {} not found", go_quote(.0))]
    ServiceAccountNotFound(String),
    /// The service account was deleted and re-created since the token was issued.
    #[error("service account UID ({live}) does not match claim ({claim})")]
    ServiceAccountUid {
        /// The UID of the service account that exists now.
        live: String,
        /// The UID in the token.
        claim: String,
    },
    /// The service account is being deleted (for more than the leeway).
    #[error("service account {namespace}/{name} has been deleted")]
    ServiceAccountDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The bound secret, pod or node is gone or being deleted.
    #[error("service account token has been invalidated")]
    Invalidated,
    /// The bound object was deleted and re-created under the same name.
    #[error("{} UID ({live}) does not match service account {} ref claim ({claim})", kind_word(*.kind), kind_word(*.kind))]
    BoundUid {
        /// Secret, Pod or Node.
        kind: Kind,
        /// The UID of the object that exists now.
        live: String,
        /// The UID in the token.
        claim: String,
    },
    /// The token is bound to a Secret, and this server does not check Secrets
    /// (`--disable-secret-binding`), so it cannot tell whether the token was revoked.
    #[error("token is bound to a Secret object but secret binding is disabled on this server")]
    SecretBindingDisabled,
    /// The token names both a pod and a secret, which no issuer does.
    #[error("service account token names more than one bound object (a pod and a secret)")]
    TwoBoundObjects,
    /// An object could not be looked up at all (its source is unavailable). The token is not
    /// accepted; the message says why, so the failure is not mistaken for a revocation.
    #[error("{0}")]
    Lookup(#[from] LookupError),
}

fn kind_word(kind: Kind) -> &'static str {
    match kind {
        Kind::Secret => "secret",
        Kind::Pod => "pod",
        Kind::Node => "node",
        Kind::ServiceAccount => "service account",
    }
}

/// Checks that the objects `claims` names still exist, with the same UIDs, and are not deleted.
pub async fn check_token_objects(
    objects: &Objects,
    claims: &Claims,
    now: Timestamp,
) -> Result<(), ObjectError> {
    let cutoff = now - SignedDuration::from_secs(LEEWAY_SECONDS);
    let k = &claims.kubernetes;
    let namespace = k.namespace.as_str();
    let sa = &k.serviceaccount;

    let Some(account) = objects
        .get(Kind::ServiceAccount, namespace, &sa.name)
        .await?
    else {
        return Err(ObjectError::ServiceAccountNotFound(sa.name.clone()));
    };
    if account.uid != sa.uid {
        return Err(ObjectError::ServiceAccountUid {
            live: account.uid.clone(),
            claim: sa.uid.clone(),
        });
    }
    if account.deleted_before(cutoff) {
        return Err(ObjectError::ServiceAccountDeleted {
            namespace: namespace.to_owned(),
            name: sa.name.clone(),
        });
    }

    if claims.names_two_bound_objects() {
        return Err(ObjectError::TwoBoundObjects);
    }
    match claims.bound_object() {
        None => Ok(()),
        Some((BoundKind::Pod, pod)) => {
            check_bound(objects, Kind::Pod, namespace, pod, cutoff).await
        }
        Some((BoundKind::Secret, _)) if !objects.binds(Kind::Secret) => {
            Err(ObjectError::SecretBindingDisabled)
        }
        Some((BoundKind::Secret, secret)) => {
            check_bound(objects, Kind::Secret, namespace, secret, cutoff).await
        }
        // Nodes are cluster-scoped.
        Some((BoundKind::Node, node)) => check_bound(objects, Kind::Node, "", node, cutoff).await,
    }
}

async fn check_bound(
    objects: &Objects,
    kind: Kind,
    namespace: &str,
    claim: &ObjectRef,
    cutoff: Timestamp,
) -> Result<(), ObjectError> {
    let Some(record) = objects.get(kind, namespace, &claim.name).await? else {
        return Err(ObjectError::Invalidated);
    };
    if record.uid != claim.uid {
        return Err(ObjectError::BoundUid {
            kind,
            live: record.uid.clone(),
            claim: claim.uid.clone(),
        });
    }
    if record.deleted_before(cutoff) {
        return Err(ObjectError::Invalidated);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use warrant_token::{Binding, NewToken};

    use super::*;
    use crate::record::Record;
    use crate::source::{LiveLookup, ObjectSource};

    /// An in-memory source whose live lookups can be made to fail.
    #[derive(Default)]
    struct MapSource {
        records: Mutex<HashMap<(Kind, String, String), Arc<Record>>>,
        unavailable: Mutex<Option<Kind>>,
    }

    impl MapSource {
        fn put(&self, kind: Kind, ns: &str, name: &str, uid: &str, deleted: Option<i64>) {
            let record = Record {
                uid: uid.into(),
                deletion_timestamp: deleted.map(|s| Timestamp::from_second(s).unwrap()),
                pod: None,
                annotations: vec![],
            };
            self.records
                .lock()
                .unwrap()
                .insert((kind, ns.into(), name.into()), Arc::new(record));
        }

        fn remove(&self, kind: Kind, ns: &str, name: &str) {
            self.records
                .lock()
                .unwrap()
                .remove(&(kind, ns.into(), name.into()));
        }
    }

    impl ObjectSource for MapSource {
        fn cached(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Record>> {
            let key = (kind, namespace.to_owned(), name.to_owned());
            self.records.lock().unwrap().get(&key).cloned()
        }
        fn live<'a>(&'a self, kind: Kind, _: &'a str, _: &'a str) -> LiveLookup<'a> {
            let down = *self.unavailable.lock().unwrap() == Some(kind);
            Box::pin(std::future::ready(if down {
                Err(LookupError::Live {
                    kind,
                    namespace: "ns".into(),
                    name: "x".into(),
                    cause: crate::LiveError::Timeout(std::time::Duration::from_secs(1)),
                })
            } else {
                Ok(None)
            }))
        }
        fn not_ready(&self) -> Option<String> {
            None
        }
        fn count(&self, _: Kind) -> usize {
            0
        }
    }

    const NOW: i64 = 1_800_000_000;

    fn claims(binding: Binding) -> Claims {
        Claims::new(NewToken {
            issuer: "https://i",
            namespace: "ns",
            service_account: ObjectRef::new("app", "sa-1"),
            audiences: vec!["a".into()],
            binding,
            issued_at: NOW,
            expires_at: NOW + 3600,
            warn_after: None,
            jti: "j".into(),
        })
    }

    fn setup() -> (Arc<MapSource>, Objects) {
        let source = Arc::new(MapSource::default());
        source.put(Kind::ServiceAccount, "ns", "app", "sa-1", None);
        source.put(Kind::Pod, "ns", "p", "pod-1", None);
        source.put(Kind::Secret, "ns", "s", "sec-1", None);
        source.put(Kind::Node, "", "n", "node-1", None);
        (source.clone(), Objects::new(source))
    }

    async fn check(objects: &Objects, binding: Binding) -> Result<(), String> {
        let now = Timestamp::from_second(NOW).unwrap();
        check_token_objects(objects, &claims(binding), now)
            .await
            .map_err(|e| e.to_string())
    }

    fn pod() -> Binding {
        Binding::Pod {
            pod: ObjectRef::new("p", "pod-1"),
            node: Some(ObjectRef::new("gone", "x")),
        }
    }

    #[tokio::test]
    async fn every_binding_checks_out_while_its_objects_exist() {
        let (_, objects) = setup();
        for binding in [
            Binding::None,
            pod(),
            Binding::Secret(ObjectRef::new("s", "sec-1")),
            Binding::Node(ObjectRef::new("n", "node-1")),
        ] {
            assert_eq!(check(&objects, binding).await, Ok(()));
        }
    }

    #[tokio::test]
    async fn service_account_rules_and_messages() {
        let (source, objects) = setup();
        source.put(Kind::ServiceAccount, "ns", "app", "sa-2", None);
        assert_eq!(
            check(&objects, Binding::None).await.unwrap_err(),
            "service account UID (sa-2) does not match claim (sa-1)"
        );
        source.put(Kind::ServiceAccount, "ns", "app", "sa-1", Some(NOW - 60));
        assert_eq!(check(&objects, Binding::None).await, Ok(()));
        source.put(Kind::ServiceAccount, "ns", "app", "sa-1", Some(NOW - 61));
        assert_eq!(
            check(&objects, Binding::None).await.unwrap_err(),
            "service account ns/app has been deleted"
        );
        source.remove(Kind::ServiceAccount, "ns", "app");
        assert_eq!(
            check(&objects, Binding::None).await.unwrap_err(),
            r#"serviceaccounts "app" not found"#
        );
    }

    #[tokio::test]
    async fn bound_object_rules_and_messages() {
        let cases = [
            (
                Kind::Pod,
                "ns",
                "p",
                pod(),
                "pod UID (other) does not match service account pod ref claim (pod-1)",
            ),
            (
                Kind::Secret,
                "ns",
                "s",
                Binding::Secret(ObjectRef::new("s", "sec-1")),
                "secret UID (other) does not match service account secret ref claim (sec-1)",
            ),
            (
                Kind::Node,
                "",
                "n",
                Binding::Node(ObjectRef::new("n", "node-1")),
                "node UID (other) does not match service account node ref claim (node-1)",
            ),
        ];
        for (kind, ns, name, binding, uid_message) in cases {
            let (source, objects) = setup();
            let uid = source.cached(kind, ns, name).unwrap().uid.clone();
            source.put(kind, ns, name, "other", None);
            assert_eq!(
                check(&objects, binding.clone()).await.unwrap_err(),
                uid_message
            );
            source.put(kind, ns, name, &uid, Some(NOW - 60));
            assert_eq!(
                check(&objects, binding.clone()).await,
                Ok(()),
                "{kind:?} within leeway"
            );
            source.put(kind, ns, name, &uid, Some(NOW - 61));
            let invalidated = "service account token has been invalidated";
            assert_eq!(
                check(&objects, binding.clone()).await.unwrap_err(),
                invalidated
            );
            source.remove(kind, ns, name);
            assert_eq!(
                check(&objects, binding.clone()).await.unwrap_err(),
                invalidated
            );
            // A source that cannot answer fails the review with its reason, never passes it.
            *source.unavailable.lock().unwrap() = Some(kind);
            let why = check(&objects, binding).await.unwrap_err();
            let object = if kind.namespaced() { "ns/x" } else { "x" };
            assert_eq!(
                why,
                format!(
                    "could not look up {} {object}: no answer within 1s",
                    kind.resource()
                )
            );
        }
    }

    #[tokio::test]
    async fn the_node_of_a_pod_bound_token_is_not_looked_up() {
        let (source, objects) = setup();
        source.remove(Kind::Node, "", "n");
        *source.unavailable.lock().unwrap() = Some(Kind::Node);
        assert_eq!(check(&objects, pod()).await, Ok(()));
    }

    /// With secret binding off, a Secret-bound token is refused even though its Secret exists
    /// (warrant may not be watching Secrets); the Secret is not looked up. Other bindings pass,
    /// and the service account is still checked first, as kube orders its checks.
    #[tokio::test]
    async fn secret_bound_tokens_are_refused_with_secret_binding_off() {
        let (source, objects) = setup();
        let objects = objects.without_secret_binding();
        *source.unavailable.lock().unwrap() = Some(Kind::Secret);
        let secret = Binding::Secret(ObjectRef::new("s", "sec-1"));
        assert_eq!(
            check(&objects, secret.clone()).await.unwrap_err(),
            "token is bound to a Secret object but secret binding is disabled on this server"
        );
        for binding in [
            Binding::None,
            pod(),
            Binding::Node(ObjectRef::new("n", "node-1")),
        ] {
            assert_eq!(check(&objects, binding).await, Ok(()));
        }
        assert!(matches!(
            objects.get(Kind::Secret, "ns", "s").await,
            Err(LookupError::SecretBindingDisabled)
        ));
        assert_eq!(
            LookupError::SecretBindingDisabled.to_string(),
            crate::SECRET_BINDING_DISABLED
        );
        source.remove(Kind::ServiceAccount, "ns", "app");
        assert_eq!(
            check(&objects, secret).await.unwrap_err(),
            r#"serviceaccounts "app" not found"#
        );
    }

    /// No issuer binds a token to a pod and a secret at once; such claims are refused rather
    /// than reviewed by one of the two.
    #[tokio::test]
    async fn a_token_naming_a_pod_and_a_secret_is_refused() {
        let (_, objects) = setup();
        let mut claims = claims(pod());
        claims.kubernetes.secret = Some(ObjectRef::new("s", "sec-1"));
        let now = Timestamp::from_second(NOW).unwrap();
        assert_eq!(
            check_token_objects(&objects, &claims, now).await,
            Err(ObjectError::TwoBoundObjects)
        );
    }
}
