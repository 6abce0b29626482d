//! Following the cluster's `kube-system/extension-apiserver-authentication` ConfigMap, where
//! kube-apiserver publishes how to recognise its front proxy (spec §7.3): the request-header
//! CA, allowed names and header names, and its client CA. An aggregated API server reads it
//! instead of being configured by hand, and follows it when kube-apiserver's certificates
//! rotate.
//!
//! What this trusts: the ConfigMap, hence whoever may write to `kube-system` (cluster
//! administrators) and the connection warrant reads it over. That is the trust kube-apiserver
//! itself places there. A value that does not parse is logged and counted, and the last good
//! configuration stays; a deleted ConfigMap removes the trust it gave.
//!
//! Flags win: `--requestheader-client-ca-file` (with the other `--requestheader-*` flags) and
//! `--client-ca-file` each replace their part of the ConfigMap.

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio_util::task::AbortOnDropHandle;

use super::frontproxy::{FrontProxy, RequestHeaders};
use super::trust::ClientTrust;
use super::x509::{CaBundle, CaError};

/// The ConfigMap's namespace.
pub(crate) const NAMESPACE: &str = "kube-system";
/// The ConfigMap's name.
pub(crate) const NAME: &str = "extension-apiserver-authentication";

/// Which parts of the ConfigMap warrant takes (the rest come from flags).
#[derive(Debug, Clone, Copy)]
pub struct Follow {
    /// `client-ca-file`: users' client certificates.
    pub client_ca: bool,
    /// `requestheader-*`: the front proxy.
    pub front_proxy: bool,
}

impl Follow {
    /// Takes the parts of `published` followed (none: the ConfigMap is gone) into `trust`.
    fn apply(self, trust: &ClientTrust, published: Option<Published>) {
        let (client_ca, front_proxy) = match published {
            Some(p) => (p.client_ca, p.front_proxy),
            None => (None, None),
        };
        if self.client_ca {
            trust.set_client_ca(client_ca);
        }
        if self.front_proxy {
            trust.set_front_proxy(front_proxy);
        }
    }

    /// Reads the ConfigMap as written now into `trust`, or keeps the last good configuration
    /// if it is not usable; counted in `updates`.
    fn read(
        self,
        config_map: &ConfigMap,
        trust: &ClientTrust,
        updates: &Family<UpdateLabels, Counter>,
    ) {
        match parse(config_map) {
            Ok(published) => {
                tracing::info!(
                    front_proxy = published.front_proxy.is_some(),
                    client_ca = published.client_ca.is_some(),
                    "read {NAMESPACE}/{NAME}"
                );
                self.apply(trust, Some(published));
                updates
                    .get_or_create(&UpdateLabels { result: "success" })
                    .inc();
            }
            Err(error) => {
                tracing::error!(%error, "{NAMESPACE}/{NAME} is not usable; keeping the last good configuration");
                updates
                    .get_or_create(&UpdateLabels { result: "failure" })
                    .inc();
                trust.notify();
            }
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpdateLabels {
    result: &'static str,
}

/// What the ConfigMap says, parsed.
#[derive(Debug)]
struct Published {
    client_ca: Option<CaBundle>,
    front_proxy: Option<FrontProxy>,
}

/// Why the ConfigMap is not usable (the last good configuration is kept).
#[derive(Debug, thiserror::Error)]
enum ConfigMapError {
    /// A CA bundle in it does not parse.
    #[error(transparent)]
    Ca(#[from] CaError),
    /// A list-valued key is not a JSON list of strings.
    #[error("{key} is not a JSON list of strings: {source}")]
    List {
        /// The key.
        key: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

fn list(
    data: &std::collections::BTreeMap<String, String>,
    key: &str,
) -> Result<Vec<String>, ConfigMapError> {
    match data.get(key).map(|v| v.trim()) {
        None | Some("") | Some("null") => Ok(Vec::new()),
        Some(json) => {
            serde_json::from_str::<Vec<String>>(json).map_err(|source| ConfigMapError::List {
                key: key.to_owned(),
                source,
            })
        }
    }
}

fn parse(config_map: &ConfigMap) -> Result<Published, ConfigMapError> {
    let empty = std::collections::BTreeMap::new();
    let data = config_map.data.as_ref().unwrap_or(&empty);
    let client_ca = match data.get("client-ca-file").filter(|v| !v.trim().is_empty()) {
        Some(pem) => Some(CaBundle::from_pem(
            pem.as_bytes(),
            &format!("{NAMESPACE}/{NAME} client-ca-file"),
        )?),
        None => None,
    };
    let front_proxy = match data
        .get("requestheader-client-ca-file")
        .filter(|v| !v.trim().is_empty())
    {
        None => None,
        Some(pem) => Some(FrontProxy {
            ca: CaBundle::from_pem(
                pem.as_bytes(),
                &format!("{NAMESPACE}/{NAME} requestheader-client-ca-file"),
            )?,
            allowed_names: list(data, "requestheader-allowed-names")?,
            headers: RequestHeaders {
                username: list(data, "requestheader-username-headers")?,
                uid: list(data, "requestheader-uid-headers")?,
                group: list(data, "requestheader-group-headers")?,
                extra_prefix: list(data, "requestheader-extra-headers-prefix")?,
            },
        }),
    };
    Ok(Published {
        client_ca,
        front_proxy,
    })
}

/// Watches the ConfigMap through `client` and keeps `trust` in step with it, until the
/// returned handle is dropped (or aborted). `trust` is not ready until the first list has been read (with or
/// without the ConfigMap). Registers `warrant_extension_authentication_updates_total{result}`.
pub fn follow_extension_authentication(
    client: kube::Client,
    trust: ClientTrust,
    follow: Follow,
    registry: &mut Registry,
) -> AbortOnDropHandle<()> {
    let updates = Family::<UpdateLabels, Counter>::default();
    registry.register(
        "warrant_extension_authentication_updates",
        "Updates read from kube-system/extension-apiserver-authentication, by result (success, failure, deleted)",
        updates.clone(),
    );
    trust.set_ready(false);
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
    AbortOnDropHandle::new(tokio::spawn(async move {
        let mut events = watcher(api, config).default_backoff().boxed();
        let mut seen_in_list = false;
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    tracing::warn!(%error, "watching {NAMESPACE}/{NAME} failed; retrying");
                    continue;
                }
            };
            match event {
                watcher::Event::Init => seen_in_list = false,
                watcher::Event::InitApply(config_map) | watcher::Event::Apply(config_map) => {
                    seen_in_list = true;
                    follow.read(&config_map, &trust, &updates);
                }
                watcher::Event::Delete(_) => {
                    tracing::warn!(
                        "{NAMESPACE}/{NAME} was deleted: no front proxy is trusted until it is back"
                    );
                    follow.apply(&trust, None);
                    updates
                        .get_or_create(&UpdateLabels { result: "deleted" })
                        .inc();
                }
                watcher::Event::InitDone => {
                    if !seen_in_list {
                        tracing::warn!(
                            "{NAMESPACE}/{NAME} does not exist: no front proxy is trusted until it does"
                        );
                        follow.apply(&trust, None);
                    }
                    trust.set_ready(true);
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_kube_apiserver_writes() {
        let ca = warrant_testkit::TestCa::new("test").pem().to_owned();
        let mut data = std::collections::BTreeMap::new();
        data.insert("requestheader-client-ca-file".to_owned(), ca.clone());
        data.insert("client-ca-file".to_owned(), ca);
        data.insert(
            "requestheader-allowed-names".to_owned(),
            r#"["front-proxy-client"]"#.to_owned(),
        );
        data.insert(
            "requestheader-username-headers".to_owned(),
            r#"["X-Remote-User"]"#.to_owned(),
        );
        data.insert("requestheader-uid-headers".to_owned(), "null".to_owned());
        data.insert(
            "requestheader-group-headers".to_owned(),
            r#"["X-Remote-Group"]"#.to_owned(),
        );
        data.insert(
            "requestheader-extra-headers-prefix".to_owned(),
            r#"["X-Remote-Extra-"]"#.to_owned(),
        );
        let config_map = ConfigMap {
            data: Some(data.clone()),
            ..ConfigMap::default()
        };
        let published = parse(&config_map).unwrap();
        let proxy = published.front_proxy.unwrap();
        assert_eq!(proxy.allowed_names, ["front-proxy-client"]);
        assert_eq!(proxy.headers.username, ["X-Remote-User"]);
        assert!(proxy.headers.uid.is_empty());
        assert!(published.client_ca.is_some());

        data.insert(
            "requestheader-allowed-names".to_owned(),
            "front-proxy-client".to_owned(),
        );
        let broken = ConfigMap {
            data: Some(data),
            ..ConfigMap::default()
        };
        let error = parse(&broken).unwrap_err();
        assert!(
            matches!(&error, ConfigMapError::List { key, .. } if key == "requestheader-allowed-names"),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("requestheader-allowed-names is not a JSON list of strings: "),
            "{error}"
        );
    }
}
