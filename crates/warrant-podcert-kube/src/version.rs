//! Which `certificates.k8s.io` version serves PodCertificateRequests (see the crate doc).

use kube::Client;
use kube::core::ApiResource;

use crate::Error;

/// The group of PodCertificateRequests and ClusterTrustBundles.
pub(crate) const GROUP: &str = "certificates.k8s.io";

/// A version that serves PodCertificateRequests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcrVersion {
    /// `certificates.k8s.io/v1` (Kubernetes 1.37 and later).
    V1,
    /// `certificates.k8s.io/v1beta1` (1.35, 1.36; deprecated in 1.37).
    V1beta1,
}

impl PcrVersion {
    /// `v1` or `v1beta1`.
    pub fn version(self) -> &'static str {
        match self {
            PcrVersion::V1 => "v1",
            PcrVersion::V1beta1 => "v1beta1",
        }
    }

    /// The dynamic type kube's client addresses PCRs with.
    pub fn api_resource(self) -> ApiResource {
        ApiResource {
            group: GROUP.to_owned(),
            version: self.version().to_owned(),
            api_version: format!("{GROUP}/{}", self.version()),
            kind: "PodCertificateRequest".to_owned(),
            plural: "podcertificaterequests".to_owned(),
        }
    }
}

/// Asks discovery which version to use: `v1` where served, else `v1beta1`, else
/// [`Error::NotServed`]. A version that discovery does not know (`404`) counts as not served;
/// any other failure is returned, so that warrant does not settle on v1beta1 because the API
/// server was briefly unreachable.
pub async fn choose_version(client: &Client) -> Result<PcrVersion, Error> {
    for version in [PcrVersion::V1, PcrVersion::V1beta1] {
        let group_version = format!("{GROUP}/{}", version.version());
        match client.list_api_group_resources(&group_version).await {
            Ok(list) => {
                if list
                    .resources
                    .iter()
                    .any(|r| r.name == "podcertificaterequests")
                {
                    return Ok(version);
                }
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(Error::Kube(error)),
        }
    }
    Err(Error::NotServed)
}
