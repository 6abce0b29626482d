//! Objects as a real cluster holds them, for tests and the benchmark: a pod looks like one that
//! admission and the scheduler have filled in (service account, node, the projected token
//! volume, status), so clients parse realistic sizes.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, ContainerStatus, Node, NodeSpec, Pod, PodCondition,
    PodSpec, PodStatus, ProjectedVolumeSource, ResourceRequirements, Secret, ServiceAccount,
    ServiceAccountTokenProjection, Toleration, Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::{Cluster, FixtureError};

fn meta(namespace: Option<&str>, name: &str, uid: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        uid: (!uid.is_empty()).then(|| uid.to_owned()),
        creation_timestamp: Some(Time(Timestamp::UNIX_EPOCH)),
        ..ObjectMeta::default()
    }
}

/// A ServiceAccount. An empty `uid` leaves it out.
pub fn service_account(namespace: &str, name: &str, uid: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(Some(namespace), name, uid),
        ..ServiceAccount::default()
    }
}

/// A ConfigMap with string data (register `ResourceType::of::<ConfigMap>()` to serve it).
pub fn config_map(namespace: &str, name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: meta(Some(namespace), name, ""),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

/// A Node. An empty `uid` leaves it out.
pub fn node(name: &str, uid: &str) -> Node {
    let mut labels = BTreeMap::new();
    labels.insert("kubernetes.io/hostname".to_owned(), name.to_owned());
    labels.insert("kubernetes.io/os".to_owned(), "linux".to_owned());
    Node {
        metadata: ObjectMeta {
            labels: Some(labels),
            ..meta(None, name, uid)
        },
        spec: Some(NodeSpec {
            pod_cidr: Some("10.244.0.0/24".to_owned()),
            ..NodeSpec::default()
        }),
        ..Node::default()
    }
}

/// A Secret with some data (which a metadata-only client must never receive).
pub fn secret(namespace: &str, name: &str, uid: &str) -> Secret {
    let mut data = BTreeMap::new();
    data.insert(
        "password".to_owned(),
        ByteString(b"fixture-secret-value-never-in-warrant".to_vec()),
    );
    Secret {
        metadata: meta(Some(namespace), name, uid),
        type_: Some("Opaque".to_owned()),
        data: Some(data),
        ..Secret::default()
    }
}

/// A scheduled, running pod of `service_account` on `node`, with the projected token volume that
/// the ServiceAccount admission plugin adds (no audience: the API audiences) and one more with
/// `audience`, if given. An empty `uid` leaves it out.
pub fn pod(
    namespace: &str,
    name: &str,
    uid: &str,
    service_account: &str,
    node: &str,
    audience: Option<&str>,
) -> Pod {
    let token = |path: &str, audience: Option<&str>, seconds: i64| VolumeProjection {
        service_account_token: Some(ServiceAccountTokenProjection {
            audience: audience.map(str::to_owned),
            expiration_seconds: Some(seconds),
            path: path.to_owned(),
        }),
        ..VolumeProjection::default()
    };
    let mut volumes = vec![Volume {
        name: "kube-api-access-x7k2p".to_owned(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(420),
            sources: Some(vec![token("token", None, 3607)]),
        }),
        ..Volume::default()
    }];
    if let Some(audience) = audience {
        volumes.push(Volume {
            name: "workload-identity".to_owned(),
            projected: Some(ProjectedVolumeSource {
                default_mode: Some(420),
                sources: Some(vec![token("token", Some(audience), 3600)]),
            }),
            ..Volume::default()
        });
    }
    let mut labels = BTreeMap::new();
    labels.insert(
        "app".to_owned(),
        name.split('-').next().unwrap_or(name).to_owned(),
    );
    labels.insert("pod-template-hash".to_owned(), "6d4cf56db6".to_owned());
    let mut requests = BTreeMap::new();
    requests.insert("cpu".to_owned(), Quantity("100m".to_owned()));
    requests.insert("memory".to_owned(), Quantity("128Mi".to_owned()));
    let condition = |type_: &str| PodCondition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        last_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
        ..PodCondition::default()
    };
    Pod {
        metadata: ObjectMeta {
            labels: Some(labels),
            generate_name: Some(format!("{name}-")),
            ..meta(Some(namespace), name, uid)
        },
        spec: Some(PodSpec {
            service_account_name: Some(service_account.to_owned()),
            node_name: (!node.is_empty()).then(|| node.to_owned()),
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some("registry.example/app:1.4.2".to_owned()),
                ports: Some(vec![ContainerPort {
                    container_port: 8080,
                    protocol: Some("TCP".to_owned()),
                    ..ContainerPort::default()
                }]),
                resources: Some(ResourceRequirements {
                    requests: Some(requests),
                    ..ResourceRequirements::default()
                }),
                volume_mounts: Some(vec![VolumeMount {
                    name: "kube-api-access-x7k2p".to_owned(),
                    mount_path: "/var/run/secrets/kubernetes.io/serviceaccount".to_owned(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                }]),
                termination_message_path: Some("/dev/termination-log".to_owned()),
                image_pull_policy: Some("IfNotPresent".to_owned()),
                ..Container::default()
            }],
            volumes: Some(volumes),
            restart_policy: Some("Always".to_owned()),
            termination_grace_period_seconds: Some(30),
            dns_policy: Some("ClusterFirst".to_owned()),
            scheduler_name: Some("default-scheduler".to_owned()),
            tolerations: Some(vec![Toleration {
                key: Some("node.kubernetes.io/not-ready".to_owned()),
                operator: Some("Exists".to_owned()),
                effect: Some("NoExecute".to_owned()),
                toleration_seconds: Some(300),
                ..Toleration::default()
            }]),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".to_owned()),
            host_ip: Some("10.0.0.7".to_owned()),
            pod_ip: Some("10.244.3.17".to_owned()),
            start_time: Some(Time(Timestamp::UNIX_EPOCH)),
            conditions: Some(vec![
                condition("Initialized"),
                condition("Ready"),
                condition("ContainersReady"),
                condition("PodScheduled"),
            ]),
            container_statuses: Some(vec![ContainerStatus {
                name: "app".to_owned(),
                image: "registry.example/app:1.4.2".to_owned(),
                image_id: "registry.example/app@sha256:4f1e9c0a2b7d".to_owned(),
                container_id: Some("containerd://9b1f2e7c4d".to_owned()),
                ready: true,
                restart_count: 0,
                started: Some(true),
                ..ContainerStatus::default()
            }]),
            qos_class: Some("Burstable".to_owned()),
            ..PodStatus::default()
        }),
    }
}

/// Marks an object as being deleted at `at` (as a graceful delete does before the object goes).
pub fn deleting<K>(mut object: K, at: Timestamp) -> K
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    object.metadata_mut().deletion_timestamp = Some(Time(at));
    object
}

/// The size of a synthetic cluster.
#[derive(Debug, Clone, Copy)]
pub struct Synthetic {
    /// Namespaces the namespaced objects are spread over.
    pub namespaces: usize,
    /// ServiceAccounts.
    pub service_accounts: usize,
    /// Pods, each on a node, each with a service account of its namespace.
    pub pods: usize,
    /// Secrets.
    pub secrets: usize,
    /// Nodes.
    pub nodes: usize,
}

/// A UID in UUID form, unique per `(tag, index)`.
pub fn synthetic_uid(tag: u32, index: usize) -> String {
    format!("{tag:08x}-0000-4000-8000-{index:012x}")
}

impl Synthetic {
    /// Adds the objects to `cluster`. Names are `sa-N`, `pod-N`, `secret-N` in namespace
    /// `ns-(N mod namespaces)`, and `node-N`; UIDs come from [`synthetic_uid`]. A tenth of
    /// the pods also project a token for `vault`.
    pub fn load(&self, cluster: &Cluster) -> Result<(), FixtureError> {
        let namespaces = self.namespaces.max(1);
        let ns = |i: usize| format!("ns-{}", i % namespaces);
        for i in 0..self.nodes {
            cluster.create(&node(&format!("node-{i}"), &synthetic_uid(4, i)))?;
        }
        let accounts_per_ns = (self.service_accounts / namespaces).max(1);
        for i in 0..self.service_accounts {
            cluster.create(&service_account(
                &ns(i),
                &format!("sa-{i}"),
                &synthetic_uid(1, i),
            ))?;
        }
        for i in 0..self.pods {
            // A service account in the pod's own namespace: sa-j with j ≡ i (mod namespaces).
            let account = (i % namespaces) + namespaces * (i / namespaces % accounts_per_ns);
            cluster.create(&pod(
                &ns(i),
                &format!("pod-{i}"),
                &synthetic_uid(2, i),
                &format!("sa-{account}"),
                &format!("node-{}", i % self.nodes.max(1)),
                (i % 10 == 0).then_some("vault"),
            ))?;
        }
        for i in 0..self.secrets {
            cluster.create(&secret(
                &ns(i),
                &format!("secret-{i}"),
                &synthetic_uid(3, i),
            ))?;
        }
        Ok(())
    }
}
