//! The placement rule: where in a target the two documents go for an issuer and a `jwks_uri`,
//! or why the target cannot serve them there (checked at startup; see `target` for the rule).
//!
//! A pure function of the target's kind and prefix; each refusal is a [`PlacementError`] callers
//! can match, its message saying what does not agree and what would.

use object_store::path::Path;
use url::Url;

/// Where relying parties fetch the discovery document, below the issuer.
pub const DISCOVERY_SUFFIX: &str = ".well-known/openid-configuration";

/// Where the SPIFFE trust bundle goes, beside the discovery document (with
/// `--pod-certificate-signer`; as the server serves it).
pub(crate) const SPIFFE_BUNDLE_SUFFIX: &str = ".well-known/spiffe-bundle";

/// What kind of storage a target is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// An S3 bucket (or an S3-compatible server's, with an endpoint).
    S3 {
        /// The bucket.
        bucket: String,
        /// `--publish-endpoint`: an S3-compatible server, addressed path-style.
        endpoint: Option<String>,
    },
    /// A Google Cloud Storage bucket.
    Gcs {
        /// The bucket.
        bucket: String,
    },
    /// An Azure Blob Storage container (the account comes from the environment).
    Azure {
        /// The container.
        container: String,
    },
    /// A directory served as the web root of the issuer's host.
    File {
        /// The directory.
        dir: std::path::PathBuf,
    },
    /// A directory staged for hosting elsewhere (`warrant discovery export --dir`): laid out
    /// and written as a `File` target, each document at its URL's path, except that the JWKS
    /// may be for another host than the issuer's. No activation gate reads an export back, and
    /// the operator copies each file to the host its URL names.
    Export {
        /// The directory.
        dir: std::path::PathBuf,
    },
}

/// The object keys of the two documents in one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// `<prefix>/.well-known/openid-configuration`.
    pub discovery: Path,
    /// The JWKS, where `jwks_uri` points.
    pub jwks: Path,
    /// `<prefix>/.well-known/spiffe-bundle`, beside the discovery document.
    pub spiffe_bundle: Path,
}

/// Why the issuer or `jwks_uri` cannot be where a target serves the documents.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// The issuer does not parse as a URL.
    #[error("the issuer {issuer} is not a URL: {source}")]
    IssuerNotUrl {
        /// The issuer.
        issuer: String,
        /// Why.
        #[source]
        source: url::ParseError,
    },
    /// `jwks_uri` does not parse as a URL.
    #[error("the jwks_uri {jwks_uri} is not a URL: {source}")]
    JwksUriNotUrl {
        /// The `jwks_uri`.
        jwks_uri: String,
        /// Why.
        #[source]
        source: url::ParseError,
    },
    /// The issuer is not https.
    #[error("the issuer {issuer} is not https: relying parties fetch discovery over https only")]
    IssuerNotHttps {
        /// The issuer.
        issuer: String,
    },
    /// The issuer's path does not end with the target's prefix.
    #[error(
        "the issuer {issuer} must end with the target's prefix /{prefix}: relying parties fetch <issuer>/{DISCOVERY_SUFFIX}, and this target writes it at {prefix}/{DISCOVERY_SUFFIX}"
    )]
    NotUnderPrefix {
        /// The issuer.
        issuer: String,
        /// The target's prefix.
        prefix: String,
    },
    /// The issuer is on a cloud's storage host that serves another bucket at its path.
    #[error(
        "the issuer {issuer} is on {host}, which does not serve bucket {bucket} at this path; it would be {form}"
    )]
    OtherBucket {
        /// The issuer.
        issuer: String,
        /// Its host.
        host: String,
        /// The target's bucket (or container).
        bucket: String,
        /// The issuer URL that would name the target's bucket.
        form: String,
    },
    /// `jwks_uri` is on another scheme, host or port than the issuer.
    #[error(
        "the jwks_uri {jwks_uri} is not on the issuer's host: a target serves both documents from one place (leave --service-account-jwks-uri and --external-hostname out to put it under the issuer)"
    )]
    JwksElsewhere {
        /// The `jwks_uri`.
        jwks_uri: String,
    },
    /// `jwks_uri` has a query or fragment.
    #[error("the jwks_uri {jwks_uri} has a query or fragment, which no object key can match")]
    JwksQuery {
        /// The `jwks_uri`.
        jwks_uri: String,
    },
    /// `jwks_uri`'s path is not below the base the target is served at.
    #[error("the jwks_uri {jwks_uri} is not under the bucket's base path {base:?}")]
    JwksOutsideBase {
        /// The `jwks_uri`.
        jwks_uri: String,
        /// The path the target's objects are served below.
        base: String,
    },
    /// `jwks_uri` is the discovery document's own URL.
    #[error("the jwks_uri {jwks_uri} is the discovery document's own URL")]
    JwksIsDiscovery {
        /// The `jwks_uri`.
        jwks_uri: String,
    },
    /// A path that no object key can be.
    #[error("{key} is not an object key: {source}")]
    NotAnObjectKey {
        /// The path.
        key: String,
        /// Why.
        #[source]
        source: object_store::path::Error,
    },
}

/// Where the documents of `issuer` and `jwks_uri` go in a target of `kind` whose objects live
/// below `prefix` (empty for a directory, the web root of the issuer's host).
pub(crate) fn place(
    kind: &Kind,
    prefix: &str,
    issuer: &str,
    jwks_uri: &str,
) -> Result<Placement, PlacementError> {
    let is_file = kind.is_directory();
    let issuer_url = Url::parse(issuer).map_err(|source| PlacementError::IssuerNotUrl {
        issuer: issuer.to_owned(),
        source,
    })?;
    let jwks_url = Url::parse(jwks_uri).map_err(|source| PlacementError::JwksUriNotUrl {
        jwks_uri: jwks_uri.to_owned(),
        source,
    })?;
    if issuer_url.scheme() != "https" {
        return Err(PlacementError::IssuerNotHttps {
            issuer: issuer.to_owned(),
        });
    }
    let issuer_path = issuer_url.path().trim_end_matches('/');
    let base = base_path(is_file, prefix, issuer, issuer_path)?;
    check_host(kind, prefix, &issuer_url, base)?;
    let jwks_key = jwks_key(kind, &issuer_url, &jwks_url, jwks_uri, base)?;
    let discovery_key = if is_file {
        format!("{}/{DISCOVERY_SUFFIX}", issuer_path.trim_start_matches('/'))
    } else if prefix.is_empty() {
        DISCOVERY_SUFFIX.to_owned()
    } else {
        format!("{prefix}/{DISCOVERY_SUFFIX}")
    };
    let discovery_key = discovery_key.trim_start_matches('/');
    if discovery_key == jwks_key {
        return Err(PlacementError::JwksIsDiscovery {
            jwks_uri: jwks_uri.to_owned(),
        });
    }
    let spiffe_key = discovery_key
        .strip_suffix(DISCOVERY_SUFFIX)
        .map(|dir| format!("{dir}{SPIFFE_BUNDLE_SUFFIX}"))
        .unwrap_or_else(|| SPIFFE_BUNDLE_SUFFIX.to_owned());
    Ok(Placement {
        discovery: object_key(discovery_key)?,
        jwks: object_key(jwks_key)?,
        spiffe_bundle: object_key(&spiffe_key)?,
    })
}

/// The path of the base URL the target is served at: the issuer's path without `/prefix` (a
/// directory is the web root of the issuer's host; a bucket without a prefix is served at the
/// issuer's path).
fn base_path<'a>(
    is_file: bool,
    prefix: &str,
    issuer: &str,
    issuer_path: &'a str,
) -> Result<&'a str, PlacementError> {
    if prefix.is_empty() {
        return Ok(if is_file { "" } else { issuer_path });
    }
    issuer_path
        .strip_suffix(&format!("/{prefix}"))
        .ok_or_else(|| PlacementError::NotUnderPrefix {
            issuer: issuer.to_owned(),
            prefix: prefix.to_owned(),
        })
}

/// The JWKS's object key: `jwks_url`'s path after `base`, once `jwks_url` is on the issuer's
/// scheme, host and port (an export's may be elsewhere) and has no query or fragment.
fn jwks_key<'a>(
    kind: &Kind,
    issuer_url: &Url,
    jwks_url: &'a Url,
    jwks_uri: &str,
    base: &str,
) -> Result<&'a str, PlacementError> {
    let same_origin = (
        jwks_url.scheme(),
        jwks_url.host_str(),
        jwks_url.port_or_known_default(),
    ) == (
        issuer_url.scheme(),
        issuer_url.host_str(),
        issuer_url.port_or_known_default(),
    );
    // An export's JWKS may be for another host: it is written at its URL's path all the same.
    if !same_origin && !matches!(kind, Kind::Export { .. }) {
        return Err(PlacementError::JwksElsewhere {
            jwks_uri: jwks_uri.to_owned(),
        });
    }
    if jwks_url.query().is_some() || jwks_url.fragment().is_some() {
        return Err(PlacementError::JwksQuery {
            jwks_uri: jwks_uri.to_owned(),
        });
    }
    jwks_url
        .path()
        .strip_prefix(base)
        .filter(|rest| rest.starts_with('/'))
        .map(|rest| rest.trim_matches('/'))
        .filter(|rest| !rest.is_empty())
        .ok_or_else(|| PlacementError::JwksOutsideBase {
            jwks_uri: jwks_uri.to_owned(),
            base: base.to_owned(),
        })
}

fn object_key(key: &str) -> Result<Path, PlacementError> {
    Path::parse(key).map_err(|source| PlacementError::NotAnObjectKey {
        key: key.to_owned(),
        source,
    })
}

/// Where the issuer's host is the cloud's own storage host, that it names the target's bucket at
/// `base`. Other hosts (a CDN, a custom domain, an S3-compatible server) cannot be checked.
fn check_host(kind: &Kind, prefix: &str, issuer: &Url, base: &str) -> Result<(), PlacementError> {
    let host = issuer.host_str().unwrap_or_default();
    let expect = |bucket: &str, ok: bool, form: String| {
        if ok {
            Ok(())
        } else {
            Err(PlacementError::OtherBucket {
                issuer: issuer.to_string(),
                host: host.to_owned(),
                bucket: bucket.to_owned(),
                form,
            })
        }
    };
    match kind {
        Kind::S3 {
            bucket,
            endpoint: None,
        } if host.ends_with(".amazonaws.com") => {
            let virtual_hosted = host.starts_with(&format!("{bucket}.s3."))
                || host.starts_with(&format!("{bucket}.s3-"));
            let path_style = host.starts_with("s3.") || host.starts_with("s3-");
            let form = format!("https://{bucket}.s3.REGION.amazonaws.com/{prefix}");
            if virtual_hosted {
                expect(bucket, base.is_empty(), form)
            } else {
                expect(bucket, path_style && base == format!("/{bucket}"), form)
            }
        }
        Kind::Gcs { bucket } if host.ends_with("googleapis.com") => {
            let form = format!("https://storage.googleapis.com/{bucket}/{prefix}");
            if host == format!("{bucket}.storage.googleapis.com") {
                expect(bucket, base.is_empty(), form)
            } else {
                expect(
                    bucket,
                    host == "storage.googleapis.com" && base == format!("/{bucket}"),
                    form,
                )
            }
        }
        Kind::Azure { container } if host.ends_with(".blob.core.windows.net") => expect(
            container,
            base == format!("/{container}"),
            format!("https://ACCOUNT.blob.core.windows.net/{container}/{prefix}"),
        ),
        _ => Ok(()),
    }
}
