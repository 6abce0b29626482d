//! The front proxy: kube-apiserver's aggregator relaying a request for its caller (spec §7.2,
//! §7.3). The aggregator authenticates and authorizes the caller itself, removes the caller's
//! credentials, and names the caller in headers (`X-Remote-User`, `X-Remote-Uid`, one
//! `X-Remote-Group` per group, `X-Remote-Extra-<key>` per extra value), over TLS with its own
//! client certificate (`--proxy-client-cert-file`, CN `front-proxy-client` under kubeadm).
//!
//! What this trusts: the request-header CA (`--requestheader-client-ca-file`, or the cluster's
//! `extension-apiserver-authentication` ConfigMap) and, if `--requestheader-allowed-names` is
//! not empty, only the certificates it signed with one of those common names. Such a caller can
//! claim to be any user, in any group, `system:masters` included: that is what a front proxy
//! is. So the CA must be one that signs nothing but front-proxy certificates (kubeadm's
//! `front-proxy-ca`, never the cluster CA), and the allowed names narrow it further.
//!
//! Headers of these names from any other caller are never read, and are removed from every
//! request before it reaches a handler.

use std::sync::Arc;

use http::{HeaderMap, HeaderName};
use jiff::Timestamp;

use super::peer::Presented;
use super::x509::CaBundle;
use super::{Failure, Outcome, User, Via};

/// The header names kube-apiserver's aggregator uses, and warrant's defaults.
pub(crate) mod defaults {
    /// `--requestheader-username-headers`.
    pub(crate) const USERNAME: &str = "X-Remote-User";
    /// `--requestheader-uid-headers`.
    pub(crate) const UID: &str = "X-Remote-Uid";
    /// `--requestheader-group-headers`.
    pub(crate) const GROUP: &str = "X-Remote-Group";
    /// `--requestheader-extra-headers-prefix`.
    pub(crate) const EXTRA_PREFIX: &str = "X-Remote-Extra-";
}

/// Which headers carry the relayed identity. Names are matched case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaders {
    /// The first of these that is present and not empty is the user name.
    pub username: Vec<String>,
    /// The first of these that is present and not empty is the UID.
    pub uid: Vec<String>,
    /// Every value of these is a group.
    pub group: Vec<String>,
    /// A header starting with one of these is an extra; the rest of its name is the key.
    pub extra_prefix: Vec<String>,
}

impl Default for RequestHeaders {
    /// kube's defaults for a delegating server: `X-Remote-User`, `X-Remote-Uid`,
    /// `X-Remote-Group`, `X-Remote-Extra-`.
    fn default() -> Self {
        RequestHeaders {
            username: vec![defaults::USERNAME.to_owned()],
            uid: vec![defaults::UID.to_owned()],
            group: vec![defaults::GROUP.to_owned()],
            extra_prefix: vec![defaults::EXTRA_PREFIX.to_owned()],
        }
    }
}

/// A front proxy warrant trusts: its CA, the names its certificate may have, and its headers.
#[derive(Debug, Clone)]
pub struct FrontProxy {
    /// `--requestheader-client-ca-file`.
    pub ca: CaBundle,
    /// `--requestheader-allowed-names`; empty accepts any certificate `ca` signed.
    pub allowed_names: Vec<String>,
    /// `--requestheader-*-headers` and `--requestheader-extra-headers-prefix`.
    pub headers: RequestHeaders,
}

impl FrontProxy {
    /// The relayed user, if `chain` is a front-proxy certificate and the headers name a user.
    pub(crate) fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: &Presented,
        now: Timestamp,
    ) -> Outcome {
        if let Err(why) = peer.verify(&self.ca, now) {
            // Chained to another CA the handshake trusts (the users' CA): not the proxy.
            return if has_identity_headers(headers, Some(self)) {
                Outcome::Failed(Failure::FrontProxyCertificate(why))
            } else {
                Outcome::NotMine
            };
        }
        let common_name = peer.subject().map(|(cn, _)| cn.clone()).unwrap_or_default();
        if !self.allowed_names.is_empty() && !self.allowed_names.contains(&common_name) {
            return Outcome::Failed(Failure::NotAllowedName { common_name });
        }
        let first = |names: &[String]| {
            names.iter().find_map(|name| {
                headers
                    .get_all(name.as_str())
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .find(|v| !v.is_empty())
                    .map(str::to_owned)
            })
        };
        let Some(username) = first(&self.headers.username) else {
            // A front-proxy certificate without a user: this path authenticates nobody.
            return Outcome::NotMine;
        };
        let uid = first(&self.headers.uid).unwrap_or_default();
        let groups = self
            .headers
            .group
            .iter()
            .flat_map(|name| headers.get_all(name.as_str()).iter())
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect();
        let mut user = User::new(username, uid, groups, Via::FrontProxy);
        for (name, value) in headers {
            let Some(key) = self
                .headers
                .extra_prefix
                .iter()
                .find_map(|prefix| strip_prefix_ignore_case(name.as_str(), prefix))
            else {
                continue;
            };
            if let Ok(value) = value.to_str() {
                user.extra
                    .entry(unescape(&key.to_ascii_lowercase()))
                    .or_default()
                    .push(value.to_owned());
            }
        }
        Outcome::User(Arc::new(user))
    }
}

fn strip_prefix_ignore_case<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    let head = name.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| name.get(prefix.len()..))
        .flatten()
        .filter(|rest| !rest.is_empty())
}

/// Go's `url.PathUnescape`: `%XX` becomes the byte; a key that does not unescape (a bad escape,
/// or bytes that are not UTF-8) is kept as it came, as kube keeps it.
pub(crate) fn unescape(key: &str) -> String {
    warrant_token::path_unescape(key).unwrap_or_else(|| key.to_owned())
}

/// True if the request carries any identity header of `proxy`'s names or the defaults.
fn has_identity_headers(headers: &HeaderMap, proxy: Option<&FrontProxy>) -> bool {
    headers.keys().any(|name| is_identity_header(name, proxy))
}

fn is_identity_header(name: &HeaderName, proxy: Option<&FrontProxy>) -> bool {
    let name = name.as_str();
    let named = |n: &str| name.eq_ignore_ascii_case(n);
    let prefixed = |p: &str| strip_prefix_ignore_case(name, p).is_some();
    // kube's defaults first, without building a RequestHeaders: this runs for every header of
    // every request.
    [defaults::USERNAME, defaults::UID, defaults::GROUP]
        .into_iter()
        .any(named)
        || prefixed(defaults::EXTRA_PREFIX)
        || proxy.is_some_and(|p| {
            let h = &p.headers;
            h.username
                .iter()
                .chain(&h.uid)
                .chain(&h.group)
                .any(|n| named(n))
                || h.extra_prefix.iter().any(|p| prefixed(p))
        })
}

/// Removes every identity header (the configured names and kube's default ones) from a request.
pub(crate) fn strip_identity_headers(headers: &mut HeaderMap, proxy: Option<&FrontProxy>) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|name| is_identity_header(name, proxy))
        .cloned()
        .collect();
    for name in names {
        headers.remove(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_keys_are_lowercased_and_unescaped() {
        assert_eq!(
            unescape(&"Authentication.kubernetes.io%2fpod-Name".to_ascii_lowercase()),
            "authentication.kubernetes.io/pod-name"
        );
        assert_eq!(unescape("a%zz"), "a%zz");
        assert_eq!(unescape("100%25"), "100%");
        assert_eq!(unescape("trailing%2"), "trailing%2");
        assert_eq!(
            strip_prefix_ignore_case("x-remote-extra-scopes", "X-Remote-Extra-"),
            Some("scopes")
        );
        assert_eq!(
            strip_prefix_ignore_case("x-remote-extra-", "X-Remote-Extra-"),
            None
        );
    }

    #[test]
    fn identity_headers_are_stripped() {
        let mut headers = HeaderMap::new();
        for name in [
            "x-remote-user",
            "X-Remote-Group",
            "x-remote-extra-foo",
            "x-custom-user",
            "accept",
        ] {
            headers.insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_static("v"),
            );
        }
        strip_identity_headers(&mut headers, None);
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left.len(), 2);
        assert!(left.contains(&"accept") && left.contains(&"x-custom-user"));
    }
}
