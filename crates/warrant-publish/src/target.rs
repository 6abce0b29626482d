//! Where the documents go: a bucket and prefix (`s3://`, `gs://`, `az://`) or a directory
//! (`file://`), and the two object keys the issuer URL and `jwks_uri` put them at.
//!
//! Who controls each input: the URL, the endpoint and the credentials are the operator's own
//! (flags and the environment); nothing here comes from a relying party. How an `s3://` target
//! reaches an S3-compatible server (https, or plain HTTP only to loopback or when allowed, and
//! which CA it trusts) is `endpoint`'s. Credentials never
//! appear in a URL (one with a user, password or query is refused) and so never in a log line
//! or a metric label, which name the target by its URL.
//!
//! The placement rule (refused at startup when it cannot hold): relying parties fetch
//! `<issuer>/.well-known/openid-configuration` and then the document's `jwks_uri`. A bucket
//! target is served at some base URL (a bucket's own host, a path-style host with the bucket in
//! the path, or a CDN in front); the objects live at `<prefix>/…` under it. So the issuer's path
//! must end with the prefix (the base is what comes before it), and `jwks_uri` must be on the
//! issuer's scheme, host and port, under the base; its object key is its path after the base.
//! Where the issuer's host is a cloud's own storage host (`BUCKET.s3….amazonaws.com`,
//! `storage.googleapis.com/BUCKET`, `ACCOUNT.blob.core.windows.net/CONTAINER`), the bucket it
//! names must be the target's. A `file://` directory is the web root of the issuer's host: the
//! document goes to `DIR/<issuer path>/.well-known/…`, and nothing is written through a symbolic
//! link inside it (see `webroot`). `warrant discovery export --dir` is such a directory with one
//! rule lifted ([`Kind::Export`]): its JWKS may be for another host than the issuer's.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path;
use object_store::{
    Attributes, ClientOptions, ObjectStore, ObjectStoreExt as _, PutOptions, PutPayload,
    RetryConfig,
};
use url::Url;

use crate::endpoint::{Endpoint, EndpointError};
use crate::placement::{Kind, Placement, PlacementError, place};
use crate::webroot::{WebRoot, WebRootError};

impl Kind {
    /// True for a directory (`File` and `Export`).
    pub fn is_directory(&self) -> bool {
        matches!(self, Kind::File { .. } | Kind::Export { .. })
    }
}

/// A directory target's directory that cannot be made, as a store that refuses its
/// configuration.
fn directory_error(url: String, source: std::io::Error) -> TargetError {
    TargetError::Store {
        url,
        source: object_store::Error::Generic {
            store: "directory",
            source: Box::new(source),
        },
    }
}

/// A publish target: where to write, and the store that writes there.
#[derive(Clone)]
pub struct Target {
    url: String,
    kind: Kind,
    prefix: String,
    store: Store,
}

/// What reads and writes a target's objects.
#[derive(Clone)]
enum Store {
    /// A bucket, through object_store.
    Bucket(Arc<dyn ObjectStore>),
    /// A directory, through warrant's own walk that follows no link (object_store's
    /// `LocalFileSystem` follows them).
    Directory(WebRoot),
}

/// Why an object of a target could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The bucket's store said no.
    #[error(transparent)]
    Store(#[from] object_store::Error),
    /// The directory said no, or holds a link where a directory belongs.
    #[error(transparent)]
    Directory(#[from] WebRootError),
    /// The blocking task reading or writing the directory did not finish.
    #[error("the file system task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.url)
            .field("kind", &self.kind)
            .finish()
    }
}

/// A target that cannot be used. The message starts with the target's URL; the caller names
/// where the URL came from (`serve`'s `--publish-discovery`, `discovery publish`'s arguments).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Not a URL.
    #[error("{url}: not a URL: {source}")]
    Url {
        /// The URL as given.
        url: String,
        /// Why.
        #[source]
        source: url::ParseError,
    },
    /// A scheme other than s3, gs, az and file.
    #[error(
        "{url}: unsupported scheme {scheme:?} (use s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX or file:///DIR)"
    )]
    Scheme {
        /// The URL.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A URL carrying credentials, a query or a fragment.
    #[error(
        "{scheme}://…: credentials, queries and fragments do not belong in the URL (each cloud's credentials come from the environment)"
    )]
    Extras {
        /// The scheme.
        scheme: String,
    },
    /// No bucket or container.
    #[error("{url}: names no bucket")]
    NoBucket {
        /// The URL.
        url: String,
    },
    /// `--publish-endpoint` (or its other flags) for a target that is not S3.
    #[error("--publish-endpoint applies to s3:// targets only, not {url}")]
    EndpointNotS3 {
        /// The URL.
        url: String,
    },
    /// The endpoint's flags cannot be used.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The object store refused its configuration.
    #[error("{url}: {source}")]
    Store {
        /// The URL.
        url: String,
        /// What the store said.
        #[source]
        source: object_store::Error,
    },
    /// A `file://` URL that is not an absolute local path.
    #[error("{url}: a file:// target must be an absolute local path (file:///DIR)")]
    NotAbsolute {
        /// The URL.
        url: String,
    },
    /// The issuer or `jwks_uri` cannot be where this target serves the documents.
    #[error("{url}: {why}")]
    Placement {
        /// The URL.
        url: String,
        /// What does not agree, and what would.
        #[source]
        why: Box<PlacementError>,
    },
}

/// How a target's store talks to its server: few, quick retries (the publisher retries on its
/// own schedule, and a round must not hang behind one unreachable bucket).
fn retry() -> RetryConfig {
    RetryConfig {
        max_retries: 2,
        retry_timeout: Duration::from_secs(10),
        ..RetryConfig::default()
    }
}

fn client(allow_http: bool) -> ClientOptions {
    ClientOptions::new()
        .with_timeout(Duration::from_secs(20))
        .with_connect_timeout(Duration::from_secs(5))
        .with_allow_http(allow_http)
}

impl Target {
    /// Parses `url` and opens its store with the cloud's credential chain from the environment
    /// (`AWS_*` and instance or web identity; `GOOGLE_*` and workload identity; `AZURE_*` and
    /// managed identity). `endpoint` is how `s3://` targets reach an S3-compatible server
    /// (`--publish-endpoint` and its flags). `options` are extra object-store settings by their
    /// config key (`aws_access_key_id`, …), for tests and embedding.
    pub fn open(
        url: &str,
        endpoint: &Endpoint,
        options: &[(String, String)],
    ) -> Result<Target, TargetError> {
        let parsed = parse_url(url, endpoint)?;
        let scheme = parsed.scheme().to_owned();
        let bucket = parsed.host_str().unwrap_or_default().to_owned();
        let prefix = parsed.path().trim_matches('/').to_owned();
        let bucket_url = format!("{scheme}://{bucket}");
        let (kind, store) = match scheme.as_str() {
            "s3" => s3_bucket(bucket, bucket_url, endpoint, options)?,
            "gs" => (
                Kind::Gcs { bucket },
                bucket_store(
                    GoogleCloudStorageBuilder::from_env(),
                    bucket_url,
                    client(false),
                    options,
                ),
            ),
            "az" => (
                Kind::Azure { container: bucket },
                bucket_store(
                    MicrosoftAzureBuilder::from_env(),
                    bucket_url,
                    client(false),
                    options,
                ),
            ),
            "file" => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|()| TargetError::NotAbsolute {
                        url: url.to_owned(),
                    })?;
                return Target::directory(url.to_owned(), dir, false);
            }
            _ => {
                return Err(TargetError::Scheme {
                    url: url.to_owned(),
                    scheme,
                });
            }
        };
        Ok(Target {
            url: url.to_owned(),
            kind,
            prefix,
            store: Store::Bucket(store.map_err(|source| TargetError::Store {
                url: url.to_owned(),
                source,
            })?),
        })
    }

    /// `warrant discovery export --dir DIR`: a directory target written as `file:///DIR` is,
    /// staged for hosting elsewhere ([`Kind::Export`]). Named by its `file://` URL; created if
    /// missing.
    pub fn export_dir(dir: &std::path::Path) -> Result<Target, TargetError> {
        let absolute = std::path::absolute(dir)
            .map_err(|e| directory_error(format!("file://{}", dir.display()), e))?;
        let url = Url::from_file_path(&absolute)
            .map_or_else(|()| format!("file://{}", absolute.display()), String::from);
        Target::directory(url, dir.to_owned(), true)
    }

    /// A directory target at `dir`, created if missing: the web root of the issuer's host, or
    /// an export (`staged`).
    fn directory(
        url: String,
        dir: std::path::PathBuf,
        staged: bool,
    ) -> Result<Target, TargetError> {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return Err(directory_error(url, e));
        }
        let root = WebRoot::new(dir.clone());
        Ok(Target {
            url,
            store: Store::Directory(root),
            kind: if staged {
                Kind::Export { dir }
            } else {
                Kind::File { dir }
            },
            // The directory is the web root: the issuer's path decides the prefix.
            prefix: String::new(),
        })
    }

    /// The target as given (no credentials: see [`TargetError::Extras`]).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What kind of storage it is.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// True for a directory, whose files carry no headers of their own (the web server
    /// serving them sets the content type and caching).
    pub fn is_file(&self) -> bool {
        self.kind.is_directory()
    }

    /// A bucket target's store (`None` for a directory).
    pub fn store(&self) -> Option<&Arc<dyn ObjectStore>> {
        match &self.store {
            Store::Bucket(store) => Some(store),
            Store::Directory(_) => None,
        }
    }

    /// The object at `path` and its headers, or `None` if there is none. An object over
    /// `max_bytes` is not downloaded: it reads as empty bytes (not the document, whatever it is).
    pub(crate) async fn get(
        &self,
        path: &Path,
        max_bytes: u64,
    ) -> Result<Option<(Bytes, Attributes)>, ObjectError> {
        match &self.store {
            Store::Bucket(store) => {
                let got = match store.get(path).await {
                    Ok(got) => got,
                    Err(object_store::Error::NotFound { .. }) => return Ok(None),
                    Err(error) => return Err(error.into()),
                };
                let attributes = got.attributes.clone();
                if got.meta.size > max_bytes {
                    return Ok(Some((Bytes::new(), attributes)));
                }
                Ok(Some((got.bytes().await?, attributes)))
            }
            Store::Directory(root) => {
                let (root, key) = (root.clone(), path.to_string());
                let read =
                    tokio::task::spawn_blocking(move || root.read(&key, max_bytes)).await??;
                Ok(read.map(|bytes| (bytes, Attributes::new())))
            }
        }
    }

    /// Writes `body` at `path` with `attributes` (a directory keeps none).
    pub(crate) async fn put(
        &self,
        path: &Path,
        body: Bytes,
        attributes: Attributes,
    ) -> Result<(), ObjectError> {
        match &self.store {
            Store::Bucket(store) => {
                let options = PutOptions {
                    attributes,
                    ..PutOptions::default()
                };
                store
                    .put_opts(path, PutPayload::from_bytes(body), options)
                    .await?;
                Ok(())
            }
            Store::Directory(root) => {
                let (root, key) = (root.clone(), path.to_string());
                tokio::task::spawn_blocking(move || root.write(&key, &body)).await??;
                Ok(())
            }
        }
    }

    /// Where the two documents go for `issuer` and `jwks_uri`, or why this target cannot serve
    /// them there (see the module's placement rule).
    pub fn placement(&self, issuer: &str, jwks_uri: &str) -> Result<Placement, TargetError> {
        place(&self.kind, &self.prefix, issuer, jwks_uri).map_err(|why| TargetError::Placement {
            url: self.url.clone(),
            why: Box::new(why),
        })
    }
}

/// The calls warrant makes on every cloud's store builder: object_store's three builders have
/// these methods but share no trait, and [`bucket_store`] is the one path through them.
trait BucketBuilder: Sized {
    /// The builder's configuration keys (`aws_access_key_id`, …).
    type Key: std::str::FromStr<Err = object_store::Error>;
    fn with_url(self, url: String) -> Self;
    fn with_retry(self, retry: RetryConfig) -> Self;
    fn with_client_options(self, options: ClientOptions) -> Self;
    fn with_config(self, key: Self::Key, value: &str) -> Self;
    fn build_store(self) -> object_store::Result<Arc<dyn ObjectStore>>;
}

macro_rules! bucket_builder {
    ($builder:ty, $key:ty) => {
        impl BucketBuilder for $builder {
            type Key = $key;
            fn with_url(self, url: String) -> Self {
                <$builder>::with_url(self, url)
            }
            fn with_retry(self, retry: RetryConfig) -> Self {
                <$builder>::with_retry(self, retry)
            }
            fn with_client_options(self, options: ClientOptions) -> Self {
                <$builder>::with_client_options(self, options)
            }
            fn with_config(self, key: $key, value: &str) -> Self {
                <$builder>::with_config(self, key, value)
            }
            fn build_store(self) -> object_store::Result<Arc<dyn ObjectStore>> {
                Ok(Arc::new(self.build()?))
            }
        }
    };
}

bucket_builder!(AmazonS3Builder, AmazonS3ConfigKey);
bucket_builder!(GoogleCloudStorageBuilder, GoogleConfigKey);
bucket_builder!(MicrosoftAzureBuilder, AzureConfigKey);

/// `url` parsed and checked before anything opens: no user, password, query or fragment (a
/// credential must not ride in a URL), `endpoint` only for `s3://`, a bucket unless `file://`.
fn parse_url(url: &str, endpoint: &Endpoint) -> Result<Url, TargetError> {
    let parsed = Url::parse(url).map_err(|source| TargetError::Url {
        url: url.to_owned(),
        source,
    })?;
    let scheme = parsed.scheme().to_owned();
    if !parsed.username().is_empty()
        || parsed.password().is_some()
        || parsed.query().is_some()
        || parsed.fragment().is_some()
    {
        return Err(TargetError::Extras { scheme });
    }
    if scheme != "s3" && endpoint.is_set() {
        return Err(TargetError::EndpointNotS3 {
            url: url.to_owned(),
        });
    }
    if scheme != "file" && parsed.host_str().unwrap_or_default().is_empty() {
        return Err(TargetError::NoBucket {
            url: url.to_owned(),
        });
    }
    Ok(parsed)
}

/// An `s3://` target's kind and store: AWS's own endpoints, or `endpoint` when it is set
/// (path-style requests, with its CA and plain-HTTP rule).
fn s3_bucket(
    bucket: String,
    bucket_url: String,
    endpoint: &Endpoint,
    options: &[(String, String)],
) -> Result<(Kind, object_store::Result<Arc<dyn ObjectStore>>), TargetError> {
    let checked = endpoint.check()?;
    let mut s3 = AmazonS3Builder::from_env();
    let client = match &checked {
        Some(checked) => {
            s3 = s3
                .with_endpoint(&checked.url)
                .with_virtual_hosted_style_request(false);
            checked.client_options(client(checked.http))
        }
        None => client(false),
    };
    let store = bucket_store(s3, bucket_url, client, options);
    let endpoint = checked.map(|c| c.url);
    Ok((Kind::S3 { bucket, endpoint }, store))
}

/// A bucket's store from `builder` (the cloud's credential chain from the environment, and what
/// the scheme adds): the target's bucket, warrant's retries, `client`, then the caller's extra
/// `options` by their config key.
fn bucket_store<B: BucketBuilder>(
    builder: B,
    bucket_url: String,
    client: ClientOptions,
    options: &[(String, String)],
) -> object_store::Result<Arc<dyn ObjectStore>> {
    let mut builder = builder
        .with_url(bucket_url)
        .with_retry(retry())
        .with_client_options(client);
    for (key, value) in options {
        builder = builder.with_config(key.parse()?, value);
    }
    builder.build_store()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        Target::open(
            url,
            &Endpoint::default(),
            &[("aws_region".into(), "us-east-1".into())],
        )
        .or_else(|_| Target::open(url, &Endpoint::default(), &[]))
        .unwrap()
    }

    fn keys(t: &Target, issuer: &str, jwks: &str) -> Result<(String, String), String> {
        t.placement(issuer, jwks)
            .map(|p| (p.discovery.to_string(), p.jwks.to_string()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_issuer_must_end_with_the_prefix_and_the_jwks_sit_beside_it() {
        let s3 = Target::open(
            "s3://oidc/cluster-a",
            &Endpoint::at("http://127.0.0.1:9"),
            &[],
        )
        .unwrap();
        assert_eq!(
            keys(
                &s3,
                "https://minio.example/oidc/cluster-a",
                "https://minio.example/oidc/cluster-a/openid/v1/jwks"
            )
            .unwrap(),
            (
                "cluster-a/.well-known/openid-configuration".into(),
                "cluster-a/openid/v1/jwks".into()
            )
        );
        let wrong = keys(
            &s3,
            "https://minio.example/oidc/cluster-b",
            "https://minio.example/oidc/cluster-b/openid/v1/jwks",
        )
        .unwrap_err();
        assert!(
            wrong.contains("must end with the target's prefix /cluster-a"),
            "{wrong}"
        );
        let elsewhere = keys(
            &s3,
            "https://minio.example/oidc/cluster-a",
            "https://other.example/oidc/cluster-a/openid/v1/jwks",
        )
        .unwrap_err();
        assert!(
            elsewhere.contains("not on the issuer's host"),
            "{elsewhere}"
        );
        assert!(matches!(
            s3.placement(
                "https://minio.example/oidc/cluster-a",
                "https://other.example/oidc/cluster-a/openid/v1/jwks"
            ),
            Err(TargetError::Placement { why, .. }) if matches!(*why, PlacementError::JwksElsewhere { .. })
        ));
        let outside = keys(
            &s3,
            "https://minio.example/oidc/cluster-a",
            "https://minio.example/jwks",
        )
        .unwrap_err();
        assert!(
            outside.contains("not under the bucket's base path"),
            "{outside}"
        );
        let http = keys(
            &s3,
            "http://minio.example/oidc/cluster-a",
            "http://minio.example/oidc/cluster-a/j",
        )
        .unwrap_err();
        assert!(http.contains("not https"), "{http}");
    }

    #[test]
    fn cloud_storage_hosts_must_name_the_target_bucket() {
        let s3 = target("s3://oidc-bucket/cluster-a");
        let ok = |t: &Target, issuer: &str| keys(t, issuer, &format!("{issuer}/openid/v1/jwks"));
        assert!(
            ok(
                &s3,
                "https://oidc-bucket.s3.us-east-1.amazonaws.com/cluster-a"
            )
            .is_ok()
        );
        assert!(
            ok(
                &s3,
                "https://s3.us-east-1.amazonaws.com/oidc-bucket/cluster-a"
            )
            .is_ok()
        );
        assert!(ok(&s3, "https://d111.cloudfront.net/cluster-a").is_ok());
        let other = ok(&s3, "https://another.s3.us-east-1.amazonaws.com/cluster-a").unwrap_err();
        assert!(
            other.contains("does not serve bucket oidc-bucket"),
            "{other}"
        );

        let gcs = target("gs://oidc-bucket/cluster-a");
        assert!(ok(&gcs, "https://storage.googleapis.com/oidc-bucket/cluster-a").is_ok());
        assert!(ok(&gcs, "https://storage.googleapis.com/other/cluster-a").is_err());

        let file = target("file:///tmp/warrant-publish-target-test");
        assert_eq!(
            keys(
                &file,
                "https://issuer.example/tenant",
                "https://issuer.example/tenant/openid/v1/jwks"
            )
            .unwrap(),
            (
                "tenant/.well-known/openid-configuration".into(),
                "tenant/openid/v1/jwks".into()
            )
        );
    }

    /// An export is laid out as a `file://` target, and only the rule that the JWKS be on the
    /// issuer's host is lifted.
    #[test]
    fn an_export_is_a_directory_target_whose_jwks_may_be_on_another_host() {
        let dir = tempfile::tempdir().unwrap();
        let file = target(&format!("file://{}", dir.path().display()));
        let export = Target::export_dir(dir.path()).unwrap();
        assert!(export.is_file());
        assert_eq!(export.url(), format!("file://{}", dir.path().display()));
        let issuer = "https://issuer.example/tenant";
        for jwks in [
            "https://issuer.example/tenant/openid/v1/jwks",
            "https://issuer.example/keys.json",
        ] {
            assert_eq!(
                keys(&file, issuer, jwks),
                keys(&export, issuer, jwks),
                "{jwks}"
            );
        }
        let cdn = "https://keys.example.net/tenant/jwks";
        assert!(
            keys(&file, issuer, cdn)
                .unwrap_err()
                .contains("not on the issuer's host")
        );
        assert_eq!(
            keys(&export, issuer, cdn).unwrap(),
            (
                "tenant/.well-known/openid-configuration".into(),
                "tenant/jwks".into()
            )
        );
        for refused in [
            "https://keys.example.net/",
            "https://keys.example.net/jwks?v=1",
            "https://keys.example.net/tenant/.well-known/openid-configuration",
        ] {
            assert!(keys(&export, issuer, refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn urls_with_credentials_or_other_schemes_are_refused() {
        let e = Target::open("s3://key:secret@bucket/p", &Endpoint::default(), &[]).unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
        assert!(matches!(e, TargetError::Extras { .. }));
        assert!(matches!(
            Target::open("https://bucket/p", &Endpoint::default(), &[]).unwrap_err(),
            TargetError::Scheme { .. }
        ));
        assert!(matches!(
            Target::open("gs://bucket/p", &Endpoint::at("http://x"), &[]).unwrap_err(),
            TargetError::EndpointNotS3 { .. }
        ));
    }
}
