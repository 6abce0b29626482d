//! The API groups and versions warrant serves, each written once: the route table serves them,
//! the discovery documents list them, and a body's `apiVersion` ([`crate::wire`]) names them.

/// An API group and version.
///
/// Only this crate makes one (`#[non_exhaustive]`), so an `apiVersion` is always its group and
/// version joined; other crates read its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupVersion {
    /// The group; empty for the core group.
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// `group/version`, or the version alone for the core group: an object's `apiVersion`.
    pub api_version: &'static str,
}

/// A [`GroupVersion`] from literals, its `apiVersion` joined at compile time.
macro_rules! group_version {
    ($version:literal) => {
        GroupVersion {
            group: "",
            version: $version,
            api_version: $version,
        }
    };
    ($group:literal, $version:literal) => {
        GroupVersion {
            group: $group,
            version: $version,
            api_version: concat!($group, "/", $version),
        }
    };
}

/// The core group, where the TokenRequest subresource of service accounts lives.
pub const CORE_V1: GroupVersion = group_version!("v1");
/// `authentication.k8s.io/v1`: TokenReview, and the kind of every TokenRequest body.
pub const AUTHENTICATION_V1: GroupVersion = group_version!("authentication.k8s.io", "v1");
/// `authentication.k8s.io/v1beta1`: TokenReview for older webhook configurations.
pub const AUTHENTICATION_V1BETA1: GroupVersion = group_version!("authentication.k8s.io", "v1beta1");
/// warrant's own group, for serving behind kube-apiserver's aggregator.
pub const WARRANT_V1ALPHA1: GroupVersion = group_version!("warrant.dev", "v1alpha1");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_versions_join_their_api_version() {
        assert_eq!(CORE_V1.api_version, "v1");
        assert_eq!(AUTHENTICATION_V1.api_version, "authentication.k8s.io/v1");
    }
}
