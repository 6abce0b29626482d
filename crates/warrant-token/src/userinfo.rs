//! The identity a valid token stands for, as kube-apiserver reports it in a TokenReview.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::claims::{Claims, service_account_username};

/// The `user.extra` key holding the bound pod's name.
pub const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
/// The `user.extra` key holding the bound pod's UID.
pub const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";
/// The `user.extra` key holding the node's name (node-bound, or a pod's node).
pub const EXTRA_NODE_NAME: &str = "authentication.kubernetes.io/node-name";
/// The `user.extra` key holding the node's UID.
pub const EXTRA_NODE_UID: &str = "authentication.kubernetes.io/node-uid";
/// The `user.extra` key holding `JTI=<jti>`, which ties audit events to the issued token.
pub const EXTRA_CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// The group every service account is in.
pub const GROUP_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// The group kube-apiserver adds to every authenticated user.
pub const GROUP_AUTHENTICATED: &str = "system:authenticated";

/// The groups kube-apiserver's service-account authenticator puts a service account of
/// `namespace` in: `system:serviceaccounts` and `system:serviceaccounts:<namespace>` (the
/// authenticator chain adds [`GROUP_AUTHENTICATED`]).
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        GROUP_SERVICE_ACCOUNTS.to_owned(),
        format!("{GROUP_SERVICE_ACCOUNTS}:{namespace}"),
    ]
}

/// A Kubernetes user: what a TokenReview's `status.user` holds. Fields serialise in the order
/// of Kubernetes' `UserInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct UserInfo {
    /// `system:serviceaccount:<namespace>:<name>`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// The service account's UID.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// `system:serviceaccounts`, `system:serviceaccounts:<namespace>`, `system:authenticated`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Pod, node and credential-ID details, each a one-element list.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The user a verified token's claims stand for, with kube-apiserver's rules for which
    /// extras appear: pod name and UID only together; node name whenever known, node UID only
    /// with it; the credential ID whenever the token has a `jti`. Secret bindings add nothing.
    /// `system:authenticated` is included, as kube-apiserver's authenticator chain adds it.
    pub fn from_claims(claims: &Claims) -> UserInfo {
        let k = &claims.kubernetes;
        let mut extra = BTreeMap::new();
        let mut put = |key: &str, value: String| {
            extra.insert(key.to_owned(), vec![value]);
        };
        if let Some(pod) = k
            .pod
            .as_ref()
            .filter(|p| !p.name.is_empty() && !p.uid.is_empty())
        {
            put(EXTRA_POD_NAME, pod.name.clone());
            put(EXTRA_POD_UID, pod.uid.clone());
        }
        if let Some(node) = k.node.as_ref().filter(|n| !n.name.is_empty()) {
            put(EXTRA_NODE_NAME, node.name.clone());
            if !node.uid.is_empty() {
                put(EXTRA_NODE_UID, node.uid.clone());
            }
        }
        if !claims.jti.is_empty() {
            put(EXTRA_CREDENTIAL_ID, format!("JTI={}", claims.jti));
        }
        UserInfo {
            username: service_account_username(&k.namespace, &k.serviceaccount.name),
            uid: k.serviceaccount.uid.clone(),
            groups: {
                let mut groups = service_account_groups(&k.namespace);
                groups.push(GROUP_AUTHENTICATED.to_owned());
                groups
            },
            extra,
        }
    }
}
