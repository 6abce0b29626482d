//! One watch per kind, all namespaces, through kube-runtime's watcher: it lists in pages, watches
//! from the list's resourceVersion with bookmarks, resumes from the last resourceVersion when
//! the connection drops, and relists on `410 Gone`; its default backoff spaces out retries.
//! This module turns its events into records.
//!
//! Pods are watched in full (their spec holds the service account, node and token audiences) and
//! reduced to a [`Record`] at once; ServiceAccounts, Secrets and Nodes are watched as
//! `PartialObjectMetadata`, so secret data is never even sent to warrant.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ::kube::core::PartialObjectMeta;
use ::kube::runtime::WatchStreamExt;
use ::kube::runtime::watcher::{self, Event};
use ::kube::{Api, Client, Resource};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::kinds::Kinds;
use super::metrics::Metrics;
use crate::record::{Kind, PodInfo, Record};

/// What an object from the API server lacked, so that it was left out of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Missing {
    Name,
    Namespace,
    Uid,
}

impl Missing {
    pub(super) fn reason(self) -> &'static str {
        match self {
            Missing::Name => "no_name",
            Missing::Namespace => "no_namespace",
            Missing::Uid => "no_uid",
        }
    }
}

/// An object the cache can hold: where it goes and what is kept of it.
pub(super) trait Slim:
    Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static
{
    /// The pod details, for pods.
    fn pod_info(&self) -> Option<PodInfo>;

    /// Whether warrant's annotations of this kind are kept (ServiceAccounts only: a pod's, a
    /// Secret's or a Node's are never read).
    fn keeps_annotations(&self) -> bool {
        false
    }
}

impl Slim for Pod {
    fn pod_info(&self) -> Option<PodInfo> {
        let spec = self.spec.as_ref();
        let service_account_name = spec
            .and_then(|s| s.service_account_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let node_name = spec.and_then(|s| s.node_name.clone()).unwrap_or_default();
        let token_audiences = spec
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|v| v.projected.as_ref()?.sources.as_ref())
            .flatten()
            .filter_map(|source| source.service_account_token.as_ref())
            .map(|token| token.audience.clone().unwrap_or_default())
            .collect();
        let labels = self
            .metadata
            .labels
            .iter()
            .flatten()
            .filter(|(key, _)| crate::is_warrant_annotation(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        Some(PodInfo {
            service_account_name,
            node_name,
            token_audiences,
            labels,
        })
    }
}

impl<K> Slim for PartialObjectMeta<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    fn pod_info(&self) -> Option<PodInfo> {
        None
    }

    fn keeps_annotations(&self) -> bool {
        K::kind(&()) == crate::Kind::ServiceAccount.name()
    }
}

/// Where an object goes: `(namespace, name)`, namespace empty for nodes.
pub(super) fn key(kind: Kind, meta: &ObjectMeta) -> Result<(&str, &str), Missing> {
    let name = meta
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or(Missing::Name)?;
    let namespace = if kind.namespaced() {
        meta.namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .ok_or(Missing::Namespace)?
    } else {
        ""
    };
    Ok((namespace, name))
}

/// What the cache keeps of an object.
pub(super) fn record<K: Slim>(object: &K) -> Result<Record, Missing> {
    let meta = object.meta();
    let uid = meta
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or(Missing::Uid)?;
    let annotations = match &meta.annotations {
        Some(all) if object.keeps_annotations() => all
            .iter()
            .filter(|(key, _)| crate::is_warrant_annotation(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        _ => Vec::new(),
    };
    Ok(Record {
        uid,
        deletion_timestamp: meta.deletion_timestamp.as_ref().map(|t| t.0),
        pod: object.pod_info(),
        annotations,
    })
}

/// Everything a watch task needs.
pub(super) struct Watch {
    pub(super) kind: Kind,
    pub(super) kinds: Arc<Kinds>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) cancel: CancellationToken,
    pub(super) config: watcher::Config,
}

impl Watch {
    /// Runs the watch for this kind until cancelled.
    pub(super) async fn run(self, client: Client) {
        match self.kind {
            Kind::Pod => self.follow(Api::<Pod>::all(client)).await,
            Kind::ServiceAccount => {
                use k8s_openapi::api::core::v1::ServiceAccount;
                self.follow(Api::<PartialObjectMeta<ServiceAccount>>::all(client))
                    .await;
            }
            Kind::Secret => {
                use k8s_openapi::api::core::v1::Secret;
                self.follow(Api::<PartialObjectMeta<Secret>>::all(client))
                    .await;
            }
            Kind::Node => {
                use k8s_openapi::api::core::v1::Node;
                self.follow(Api::<PartialObjectMeta<Node>>::all(client))
                    .await;
            }
        }
    }

    async fn follow<K>(self, api: Api<K>)
    where
        K: Slim,
        K::DynamicType: Default,
    {
        let stream = watcher::watcher(api, self.config.clone()).default_backoff();
        let mut stream = std::pin::pin!(stream);
        let mut lists = 0u64;
        loop {
            let next = tokio::select! {
                () = self.cancel.cancelled() => return,
                next = stream.next() => next,
            };
            let Some(next) = next else {
                // The watcher never ends on its own; if it did, there is nothing to follow.
                tracing::error!(resource = self.kind.resource(), "watch stream ended");
                return;
            };
            match next {
                Ok(event) => {
                    self.apply(event, &mut lists);
                    // After applying, so a waiter woken by it sees the change.
                    self.kinds.heard(self.kind);
                }
                Err(error) => {
                    self.failed(&error);
                    self.kinds.changed();
                }
            }
        }
    }

    fn apply<K: Slim>(&self, event: Event<K>, lists: &mut u64) {
        let state = self.kinds.get(self.kind);
        match event {
            Event::Init => {
                if *lists > 0 {
                    self.metrics.relist(self.kind);
                    tracing::info!(resource = self.kind.resource(), "relisting");
                }
                *lists += 1;
                state.store.begin_list();
            }
            Event::InitApply(object) | Event::Apply(object) => self.upsert(&object),
            Event::Delete(object) => match key(self.kind, object.meta()) {
                Ok((namespace, name)) => state.store.remove(namespace, name),
                Err(skip) => self.skip(&object, skip),
            },
            Event::InitDone => {
                let dropped = state.store.finish_list();
                if !state.synced.swap(true, Ordering::Relaxed) {
                    tracing::info!(
                        resource = self.kind.resource(),
                        objects = state.store.len(),
                        "initial list complete"
                    );
                } else if dropped > 0 {
                    tracing::info!(
                        resource = self.kind.resource(),
                        dropped,
                        "relist complete; dropped objects deleted meanwhile"
                    );
                }
            }
        }
    }

    fn upsert<K: Slim>(&self, object: &K) {
        let placed = key(self.kind, object.meta()).and_then(|k| Ok((k, record(object)?)));
        match placed {
            Ok(((namespace, name), record)) => {
                self.kinds
                    .get(self.kind)
                    .store
                    .upsert(namespace, name, record);
            }
            Err(skip) => self.skip(object, skip),
        }
    }

    fn skip<K: Slim>(&self, object: &K, skip: Missing) {
        let meta = object.meta();
        tracing::warn!(
            resource = self.kind.resource(),
            namespace = meta.namespace.as_deref().unwrap_or_default(),
            name = meta.name.as_deref().unwrap_or_default(),
            reason = skip.reason(),
            "object from the API server skipped"
        );
        self.metrics.skipped(self.kind, skip.reason());
    }

    fn failed(&self, error: &watcher::Error) {
        let label = match error {
            watcher::Error::InitialListFailed(_) => "list",
            watcher::Error::WatchStartFailed(_) => "watch_start",
            watcher::Error::WatchError(_) => "watch_event",
            watcher::Error::WatchFailed(::kube::Error::SerdeError(_)) => "decode",
            watcher::Error::WatchFailed(_) => "stream",
            watcher::Error::NoResourceVersion => "no_resource_version",
        };
        tracing::warn!(
            resource = self.kind.resource(),
            error = %error,
            kind = label,
            "watch error; the watcher recovers after a backoff"
        );
        self.metrics.watch_error(self.kind, label);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        PodSpec, ProjectedVolumeSource, ServiceAccountTokenProjection, Volume, VolumeProjection,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn token(audience: Option<&str>) -> VolumeProjection {
        VolumeProjection {
            service_account_token: Some(ServiceAccountTokenProjection {
                audience: audience.map(Into::into),
                path: "token".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_pod_is_reduced_to_what_tokens_need() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u-1".into()),
                deletion_timestamp: Some(Time(
                    jiff::Timestamp::from_second(1_800_000_000).unwrap(),
                )),
                ..Default::default()
            },
            spec: Some(PodSpec {
                service_account_name: Some("app".into()),
                node_name: Some("n1".into()),
                volumes: Some(vec![
                    Volume {
                        name: "plain".into(),
                        ..Default::default()
                    },
                    Volume {
                        name: "kube-api-access".into(),
                        projected: Some(ProjectedVolumeSource {
                            sources: Some(vec![token(None), VolumeProjection::default()]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    Volume {
                        name: "vault".into(),
                        projected: Some(ProjectedVolumeSource {
                            sources: Some(vec![token(Some("vault"))]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(key(Kind::Pod, &pod.metadata), Ok(("ns", "p")));
        let record = record(&pod).unwrap();
        assert_eq!(record.uid, "u-1");
        assert_eq!(
            record.deletion_timestamp,
            Some(jiff::Timestamp::from_second(1_800_000_000).unwrap())
        );
        let info = record.pod.unwrap();
        assert_eq!(info.service_account_name, "app");
        assert_eq!(info.node_name, "n1");
        assert_eq!(
            info.token_audiences,
            vec![String::new(), "vault".to_owned()]
        );
    }

    #[test]
    fn a_pod_without_a_service_account_name_runs_as_default() {
        let pod = Pod {
            metadata: ObjectMeta {
                uid: Some("u".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let info = record(&pod).unwrap().pod.unwrap();
        assert_eq!(info.service_account_name, "default");
        assert_eq!(info.node_name, "");
    }

    #[test]
    fn malformed_objects_are_skipped_with_a_reason() {
        use k8s_openapi::api::core::v1::Node;
        let meta =
            |name: Option<&str>, ns: Option<&str>, uid: Option<&str>| PartialObjectMeta::<Node> {
                types: None,
                metadata: ObjectMeta {
                    name: name.map(Into::into),
                    namespace: ns.map(Into::into),
                    uid: uid.map(Into::into),
                    ..Default::default()
                },
                _phantom: std::marker::PhantomData,
            };
        let no_uid = meta(Some("n"), None, None);
        assert_eq!(record(&no_uid), Err(Missing::Uid));
        let empty_uid = meta(Some("n"), None, Some(""));
        assert_eq!(record(&empty_uid), Err(Missing::Uid));
        assert_eq!(
            key(Kind::Node, &meta(None, None, Some("u")).metadata),
            Err(Missing::Name)
        );
        assert_eq!(
            key(Kind::Secret, &meta(Some("s"), None, Some("u")).metadata),
            Err(Missing::Namespace)
        );
        // Nodes are cluster-scoped: a namespace on one is ignored.
        assert_eq!(
            key(Kind::Node, &meta(Some("n"), Some("x"), Some("u")).metadata),
            Ok(("", "n"))
        );
        assert!(
            record(&meta(Some("n"), None, Some("u")))
                .unwrap()
                .pod
                .is_none()
        );
    }

    /// A ServiceAccount keeps warrant's annotations and nothing else; other kinds keep none,
    /// whatever they carry.
    #[test]
    fn only_a_service_accounts_warrant_annotations_are_kept() {
        use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
        use std::collections::BTreeMap;
        let annotations = BTreeMap::from([
            (
                "aws.warrant.dev/role-arn".to_owned(),
                "arn:aws:iam::111122223333:role/r".to_owned(),
            ),
            (
                "eks.amazonaws.com/role-arn".to_owned(),
                "arn:aws:iam::111122223333:role/r".to_owned(),
            ),
            (
                "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
                "{\"data\":\"c2VjcmV0\"}".to_owned(),
            ),
            ("warrant.dev/audience".to_owned(), "vault".to_owned()),
        ]);
        let metadata = ObjectMeta {
            name: Some("x".into()),
            namespace: Some("ns".into()),
            uid: Some("u".into()),
            annotations: Some(annotations),
            ..Default::default()
        };
        let account = PartialObjectMeta::<ServiceAccount> {
            types: None,
            metadata: metadata.clone(),
            _phantom: std::marker::PhantomData,
        };
        assert_eq!(
            record(&account).unwrap().annotations,
            vec![
                (
                    "aws.warrant.dev/role-arn".to_owned(),
                    "arn:aws:iam::111122223333:role/r".to_owned()
                ),
                ("warrant.dev/audience".to_owned(), "vault".to_owned()),
            ]
        );
        let secret = PartialObjectMeta::<Secret> {
            types: None,
            metadata: metadata.clone(),
            _phantom: std::marker::PhantomData,
        };
        assert!(record(&secret).unwrap().annotations.is_empty());
        let pod = Pod {
            metadata,
            ..Default::default()
        };
        assert!(record(&pod).unwrap().annotations.is_empty());
    }
}
