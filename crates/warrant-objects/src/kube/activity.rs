//! Notices bookmarks. kube-runtime's watcher consumes BOOKMARK events itself (it only moves its
//! resourceVersion on), so the cache never sees them; yet a bookmark is exactly the proof that a
//! quiet watch is still alive. This wraps the client's HTTP service: every complete line that
//! arrives on a watch response (an event or a bookmark) marks its resource as heard from.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::kube::client::Body;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body::Frame;

use super::kinds::Kinds;
use crate::record::Kind;

/// A `tower::Service` in front of a `kube::Client` that marks watch activity.
#[derive(Clone)]
pub(super) struct Observed {
    pub(super) client: ::kube::Client,
    pub(super) kinds: Arc<Kinds>,
}

impl tower::Service<Request<Body>> for Observed {
    type Response = Response<ObservedBody>;
    type Error = ::kube::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The client queues requests itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let watched = watched_kind(request.uri());
        let client = self.client.clone();
        let kinds = self.kinds.clone();
        Box::pin(async move {
            let response = client.send(request).await?;
            Ok(response.map(|inner| ObservedBody {
                inner,
                watch: watched.map(|kind| (kind, kinds)),
            }))
        })
    }
}

/// The kind a watch request is for, from its path (`…/pods?…&watch=true…`).
fn watched_kind(uri: &http::Uri) -> Option<Kind> {
    let query = uri.query()?;
    if !query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1")
    {
        return None;
    }
    let resource = uri.path().rsplit('/').next()?;
    Kind::ALL.into_iter().find(|k| k.resource() == resource)
}

/// A response body that reports each frame containing the end of a line.
pub(super) struct ObservedBody {
    inner: Body,
    watch: Option<(Kind, Arc<Kinds>)>,
}

impl http_body::Body for ObservedBody {
    type Data = Bytes;
    type Error = ::kube::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let (Poll::Ready(Some(Ok(frame))), Some((kind, kinds))) = (&polled, &self.watch)
            && frame.data_ref().is_some_and(|data| data.contains(&b'\n'))
        {
            kinds.heard(*kind);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_watches_of_the_four_kinds_are_observed() {
        let kind = |s: &str| watched_kind(&s.parse().unwrap());
        assert_eq!(
            kind("/api/v1/pods?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true"),
            Some(Kind::Pod)
        );
        assert_eq!(kind("/api/v1/secrets?&watch=true"), Some(Kind::Secret));
        assert_eq!(kind("/api/v1/nodes?watch=1"), Some(Kind::Node));
        assert_eq!(kind("/api/v1/pods?&limit=500"), None);
        assert_eq!(kind("/api/v1/namespaces/a/pods/p"), None);
        assert_eq!(kind("/api/v1/configmaps?&watch=true"), None);
    }
}
