//! The standard objects: as a manifest (what `warrant serve --objects-file` reads), as the
//! stores hold them (single records), and a crowd of pods for benchmarks.

use warrant_objects::{Kind, MemorySource, PodInfo, Record};
use warrant_token::{Binding, NewToken, ObjectRef, new_jti};

/// The standard objects as a manifest (a `List`, as `--objects-file` and `kubectl` read it):
/// ServiceAccount `demo/app` ([`SA_UID`](crate::SA_UID)); its Pod `demo/app-0`
/// ([`POD_UID`](crate::POD_UID)) on Node `node-1` ([`NODE_UID`](crate::NODE_UID)); Pod
/// `demo/web-0` of a ServiceAccount `web` that does not exist, not scheduled; Secret
/// `demo/app-token` ([`SECRET_UID`](crate::SECRET_UID)).
pub const MANIFEST: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ServiceAccount
  metadata: {name: app, namespace: demo, uid: 11111111-1111-1111-1111-111111111111}
- apiVersion: v1
  kind: Pod
  metadata: {name: app-0, namespace: demo, uid: 22222222-2222-2222-2222-222222222222}
  spec: {serviceAccountName: app, nodeName: node-1}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-0, namespace: demo, uid: 55555555-5555-5555-5555-555555555555}
  spec: {serviceAccountName: web}
- apiVersion: v1
  kind: Node
  metadata: {name: node-1, uid: 33333333-3333-3333-3333-333333333333}
- apiVersion: v1
  kind: Secret
  metadata: {name: app-token, namespace: demo, uid: 44444444-4444-4444-4444-444444444444}
  data: {token: c2VjcmV0}
"#;

/// A record of an object other than a pod (a ServiceAccount, Node or Secret) with `uid`.
pub fn record(uid: &str) -> Record {
    Record {
        uid: uid.into(),
        deletion_timestamp: None,
        pod: None,
        annotations: vec![],
    }
}

/// A pod with `uid` running as `service_account` on `node` (`""`: not scheduled yet).
pub fn pod(uid: &str, service_account: &str, node: &str) -> Record {
    Record {
        uid: uid.into(),
        deletion_timestamp: None,
        pod: Some(PodInfo {
            service_account_name: service_account.into(),
            node_name: node.into(),
            token_audiences: vec![],
            labels: vec![],
        }),
        annotations: vec![],
    }
}

/// A namespace `bench` of many pods on one node, as the benchmarks look objects up in: pod
/// `pod-{i}` (UID `pod-uid-{i}`) runs as ServiceAccount `sa-{i mod pods/10}` (UID
/// `sa-uid-…`) on Node `node-1` (UID `node-uid`).
#[derive(Debug, Clone, Copy)]
pub struct Crowd {
    pods: usize,
}

impl Crowd {
    /// The namespace of every object.
    pub const NAMESPACE: &'static str = "bench";

    /// A crowd of `pods` pods (at least 10), a tenth as many service accounts.
    pub const fn new(pods: usize) -> Crowd {
        assert!(pods >= 10, "a crowd has at least 10 pods");
        Crowd { pods }
    }

    fn service_accounts(&self) -> usize {
        self.pods / 10
    }

    /// Puts the crowd's service accounts, node and pods in `source`.
    pub fn fill(&self, source: &MemorySource) {
        for i in 0..self.service_accounts() {
            source.put(
                Kind::ServiceAccount,
                Self::NAMESPACE,
                &format!("sa-{i}"),
                record(&format!("sa-uid-{i}")),
            );
        }
        source.put(Kind::Node, "", "node-1", record("node-uid"));
        for i in 0..self.pods {
            source.put(
                Kind::Pod,
                Self::NAMESPACE,
                &format!("pod-{i}"),
                pod(
                    &format!("pod-uid-{i}"),
                    &format!("sa-{}", i % self.service_accounts()),
                    "node-1",
                ),
            );
        }
    }

    /// The claims of a token for the service account of pod `i` (modulo the crowd), bound to
    /// that pod and its node, for `audiences`, from `issued_at` to `expires_at`.
    pub fn token<'a>(
        &self,
        issuer: &'a str,
        i: usize,
        audiences: Vec<String>,
        issued_at: i64,
        expires_at: i64,
    ) -> NewToken<'a> {
        let sa = i % self.service_accounts();
        let pod = i % self.pods;
        NewToken {
            issuer,
            namespace: Self::NAMESPACE,
            service_account: ObjectRef::new(format!("sa-{sa}"), format!("sa-uid-{sa}")),
            audiences,
            binding: Binding::Pod {
                pod: ObjectRef::new(format!("pod-{pod}"), format!("pod-uid-{pod}")),
                node: Some(ObjectRef::new("node-1", "node-uid")),
            },
            issued_at,
            expires_at,
            warn_after: None,
            jti: new_jti(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MANIFEST;
    use crate::{NODE_UID, POD_UID, SA_UID, SECRET_UID};

    #[test]
    fn the_manifest_names_the_standard_uids() {
        for (object, uid) in [
            ("name: app, namespace: demo", SA_UID),
            ("name: app-0, namespace: demo", POD_UID),
            ("name: node-1", NODE_UID),
            ("name: app-token, namespace: demo", SECRET_UID),
        ] {
            assert!(
                MANIFEST.contains(&format!("{{{object}, uid: {uid}}}")),
                "{object}: {uid}"
            );
        }
    }
}
