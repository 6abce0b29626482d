//! A loopback HTTP server that speaks the Kubernetes list/watch protocol, so warrant's watch cache
//! (and later the whole server) can be tested with kube-rs talking real HTTP, without a cluster.
//!
//! It is a test fixture, not a stand-in shipped with the product. It serves every registered
//! resource (ServiceAccounts, Pods, Secrets and Nodes out of the box; [`Cluster::register`] adds
//! more) the way kube-apiserver does:
//!
//! - paged lists (`limit`, `continue`) that report the revision they were taken at;
//! - chunked watch streams of `ADDED`/`MODIFIED`/`DELETED` lines from a `resourceVersion`, with
//!   `BOOKMARK`s on demand and `timeoutSeconds` honoured;
//! - `410 Gone` (an `ERROR` event) for a watch from a compacted `resourceVersion`, and
//!   `410 Expired` for a continue token that outlived a compaction;
//! - GET of one object, `404 NotFound` with kube's message when it is absent;
//! - `PartialObjectMetadata` and `PartialObjectMetadataList` when the client asks for them in
//!   its `Accept` header;
//! - writes (`writes` module): create, replace with its `resourceVersion` precondition, merge
//!   patches and server-side apply with field-ownership conflicts, which is what optimistic
//!   writers and leader election (a coordination.k8s.io Lease, once [`Cluster::register`]ed)
//!   need. [`Cluster::fail_writes`] and [`Cluster::before_next_write`] make them fail or lose a
//!   race, [`Cluster::hold_writes`] holds them until the test lets them through in the order it
//!   chooses; [`Cluster::get`] reads back what clients wrote.
//!
//! Tests change the cluster through [`Cluster`] (create, update, delete: each a watch event at a
//! new revision) and make the server misbehave: [`Cluster::compact`], [`Cluster::drop_watches`],
//! [`Cluster::stall`], [`Cluster::pause_watches`], [`Cluster::fail_gets`],
//! [`Cluster::inject_raw_line`], and [`Fixture::stop`]/[`Fixture::restart`] for a restart on the
//! same port. [`Cluster::requests`] and [`Cluster::request_log`] say what clients asked.
//!
//! Routes for other APIs are added with [`Fixture::start_with`]; they take precedence over the
//! generic object API and get a [`Cluster`] handle. TokenReview and SubjectAccessReview, with
//! answers the test decides, come ready-made in [`authority`]. Other resources (ConfigMaps,
//! Leases) are served once [`Cluster::register`]ed.
//!
//! Selectors (`rules`): label selectors for every resource; field selectors `metadata.name` and
//! `metadata.namespace`, plus those a resource registers with [`Cluster::register_with`]; any
//! other field label is kube's `400`, never a silently wrong answer. Per-resource [`Rules`] add a
//! `/status` subresource, a required `resourceVersion` and validation with kube's `422`.
//! [`Cluster::serve_pod_certificates`] serves PodCertificateRequests and ClusterTrustBundles that
//! way (module [`podcert`]). Discovery (`/api`, `/apis`, `/apis/GROUP/VERSION`) lists what is
//! registered.
//!
//! Unsupported on purpose: the aggregated discovery form, and authentication (the kubeconfig
//! carries a token that is not checked).

mod api;
pub mod authority;
mod cluster;
mod discovery;
pub mod objects;
pub mod podcert;
mod resource;
mod responses;
mod rules;
mod subresources;
mod write_request;
mod write_state;
mod writes;

use std::net::SocketAddr;
use std::path::Path;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

pub use cluster::{Cluster, EventType, ResourceType, Scope};
pub use rules::{Rules, Validate};

/// Why a fixture operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// Binding or serving the loopback socket failed.
    #[error("fixture socket: {0}")]
    Io(#[from] std::io::Error),
    /// An object could not be turned into JSON.
    #[error("fixture could not encode an object: {0}")]
    Json(#[from] serde_json::Error),
    /// `create` of an object that exists.
    #[error("{resource} {name:?} already exists")]
    AlreadyExists {
        /// The resource plural.
        resource: &'static str,
        /// The object's name.
        name: String,
    },
    /// `update` or `delete` of an object that does not exist.
    #[error("{resource} {name:?} not found")]
    NotFound {
        /// The resource plural.
        resource: &'static str,
        /// The object's name.
        name: String,
    },
    /// An object without a name, or a namespaced one without a namespace.
    #[error("{0}: an object needs a name (and a namespace, if namespaced)")]
    Unnamed(&'static str),
    /// A resource that was never registered.
    #[error("{0} is not served by this fixture (see Cluster::register)")]
    Unregistered(&'static str),
}

/// A running fixture on `127.0.0.1`. Dropping it stops the server.
#[derive(Debug)]
pub struct Fixture {
    cluster: Cluster,
    addr: SocketAddr,
    extra: Router,
    server: Option<Server>,
    /// While stopped: a socket bound to `addr` and not listening, so the port stays ours
    /// (connections are refused, as by a dead API server) and no other process can take it
    /// before [`Fixture::restart`] listens on it again.
    reserved: Option<TcpSocket>,
}

#[derive(Debug)]
struct Server {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Fixture {
    /// Starts an empty cluster on `127.0.0.1:0`.
    pub async fn start() -> Result<Fixture, FixtureError> {
        Self::start_with(Cluster::new(), |_| Router::new()).await
    }

    /// Starts `cluster` on `127.0.0.1:0`, with `routes` (built with a handle on the cluster)
    /// served before the generic object API.
    pub async fn start_with(
        cluster: Cluster,
        routes: impl FnOnce(Cluster) -> Router,
    ) -> Result<Fixture, FixtureError> {
        let extra = routes(cluster.clone());
        let socket = reusable(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let addr = socket.local_addr()?;
        let server = serve(socket.listen(1024)?, cluster.clone(), extra.clone());
        Ok(Fixture {
            cluster,
            addr,
            extra,
            server: Some(server),
            reserved: None,
        })
    }

    /// The objects and controls.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig that points at this fixture (context `fixture`, a bearer token that is not
    /// checked), for `warrant --kubeconfig` and kubectl.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: fixture
  cluster:
    server: {url}
contexts:
- name: fixture
  context:
    cluster: fixture
    user: fixture
    namespace: default
current-context: fixture
users:
- name: fixture
  user:
    token: fixture-token
",
            url = self.url()
        )
    }

    /// Writes [`Fixture::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), FixtureError> {
        std::fs::write(path, self.kubeconfig())?;
        Ok(())
    }

    /// Stops serving: the listener closes and every connection is cut, as when the API server
    /// process dies. The objects are kept for [`Fixture::restart`].
    pub async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            // Hold the port before the listener goes (both sockets allow port reuse; only a
            // listening one gets connections).
            self.reserved = reusable(self.addr).ok();
            server.stop.cancel();
            let _ = server.task.await;
        }
    }

    /// Serves again on the same address, with the same objects and history.
    pub async fn restart(&mut self) -> Result<(), FixtureError> {
        self.stop().await;
        let socket = match self.reserved.take() {
            Some(socket) => socket,
            None => reusable(self.addr)?,
        };
        let listener = socket.listen(1024)?;
        self.server = Some(serve(listener, self.cluster.clone(), self.extra.clone()));
        Ok(())
    }
}

impl std::ops::Deref for Fixture {
    type Target = Cluster;

    /// Tests mostly talk to the cluster: `fixture.create(&pod)`.
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(server) = &self.server {
            server.stop.cancel();
            server.task.abort();
        }
    }
}

/// A socket bound to `addr` with SO_REUSEPORT, not yet listening.
fn reusable(addr: SocketAddr) -> std::io::Result<TcpSocket> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// Accepts connections until stopped, then drops the listener and every connection at once, as
/// a dying API server process would (no graceful end for watches in flight).
fn serve(listener: TcpListener, cluster: Cluster, extra: Router) -> Server {
    let stop = CancellationToken::new();
    let app = api::router(cluster, extra);
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                () = stopped.cancelled() => break,
                accepted = listener.accept() => {
                    let stream = match accepted {
                        Ok((stream, _)) => stream,
                        Err(error) => {
                            tracing::warn!(%error, "fixture accept failed");
                            continue;
                        }
                    };
                    // As kube-apiserver (Go sets TCP_NODELAY on every connection): without it
                    // a watch event written while the previous one is unacknowledged waits
                    // for the client's delayed ACK, about 40 ms.
                    let _ = stream.set_nodelay(true);
                    let service = TowerToHyperService::new(app.clone());
                    connections.spawn(async move {
                        let _ = auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(listener);
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    });
    Server { stop, task }
}
