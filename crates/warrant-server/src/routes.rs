//! The route table: every path warrant serves, written once, in [`ROUTES`].
//!
//! Everything that needs to know the API's paths derives from it: the dispatcher that picks a
//! handler ([`crate::router`]), authorization (a matched route with its decoded parameters
//! gives kube's attributes), metric labels, the discovery documents (`/api/v1`, `/apis/…`),
//! and the OpenAPI documents (generated from it by a test, see `openapi.rs`). Adding an
//! endpoint is one entry here and one handler. The API groups and the well-known paths it
//! serves are warrant-proto's ([`warrant_proto::groups`], [`warrant_proto::DISCOVERY_PATH`] …),
//! where warrant's clients read them too.
//!
//! A path is parsed once, by [`find`]: split at `/`, each segment `%`-decoded as Go's HTTP
//! server decodes kube-apiserver's paths, then matched against the templates. A segment that
//! does not decode makes the whole path bad (a 400 `Status`), whatever route it might have
//! matched. The parameters handlers read are the ones authorization saw.

use std::borrow::Cow;

use http::Method;
use warrant_auth::{Attributes, ResourceAttributes};
use warrant_proto::groups::{
    AUTHENTICATION_V1, AUTHENTICATION_V1BETA1, CORE_V1, GroupVersion, WARRANT_V1ALPHA1,
};
use warrant_proto::{ADMISSION_PATH, DISCOVERY_PATH, JWKS_PATH, SPIFFE_BUNDLE_PATH};
use warrant_token::path_unescape;

/// What a route serves: which handler answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `create serviceaccounts/token` in a namespace.
    TokenRequest,
    /// `create tokenreviews`, answered in the route's group-version.
    TokenReview,
    /// A pod's AdmissionReview: token injection's mutating webhook.
    Admission,
    /// `/.well-known/openid-configuration`.
    OpenIdConfiguration,
    /// `/openid/v1/jwks`.
    Jwks,
    /// `/.well-known/spiffe-bundle`: the SPIFFE trust bundle (pod certificate roots and JWT
    /// keys), while the pod certificate signer runs.
    SpiffeBundle,
    /// `/api`: the core group's versions.
    CoreVersions,
    /// `/apis`: every group of the table's [`Endpoint::Group`] routes.
    Groups,
    /// `/apis/<group>`: the group of the route's group-version.
    Group,
    /// `/api/v1`, `/apis/<group>/<version>`: the discoverable resources of that group-version.
    Resources,
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiV3Index,
    /// `/openapi/v3/<group-version>`.
    OpenApiV3,
    /// `/version`.
    Version,
    /// `/livez`.
    Livez,
    /// `/livez/{name}`: one liveness check.
    LivezCheck,
    /// `/readyz`, `/healthz`.
    Readyz,
    /// `/readyz/{name}`: one readiness check.
    ReadyzCheck,
    /// `/metrics`, which needs authorization (`get` on the path).
    Metrics,
}

/// The methods a route takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    /// GET (and HEAD, answered as GET without the body).
    Get,
    /// POST.
    Post,
}

impl Verb {
    /// The `Allow` header of a 405 on the route.
    pub(crate) fn allowed(self) -> &'static str {
        match self {
            Verb::Get => "GET,HEAD",
            Verb::Post => "POST",
        }
    }

    fn allows(self, method: &Method) -> bool {
        match self {
            Verb::Get => method == Method::GET || method == Method::HEAD,
            Verb::Post => method == Method::POST,
        }
    }
}

/// One route.
#[derive(Debug)]
pub struct Route {
    /// The template: literal segments, `{name}` for one segment, `{*name}` for one or more.
    pub path: &'static str,
    /// The method it takes.
    pub(crate) verb: Verb,
    /// What answers it.
    pub endpoint: Endpoint,
    /// The group-version the path belongs to (resource routes, a group's and a group-version's
    /// discovery).
    pub group_version: Option<GroupVersion>,
    /// Its metric label (`route`): a small fixed set.
    pub(crate) label: &'static str,
    /// For a resource that discovery lists and OpenAPI describes, its operation ID in
    /// kube-apiserver's style; `None` for a route that is served only.
    pub operation_id: Option<&'static str>,
}

const fn route(path: &'static str, verb: Verb, endpoint: Endpoint, label: &'static str) -> Route {
    Route {
        path,
        verb,
        endpoint,
        group_version: None,
        label,
        operation_id: None,
    }
}

const fn in_group(
    path: &'static str,
    verb: Verb,
    endpoint: Endpoint,
    group_version: GroupVersion,
    label: &'static str,
) -> Route {
    Route {
        path,
        verb,
        endpoint,
        group_version: Some(group_version),
        label,
        operation_id: None,
    }
}

const fn resource(
    path: &'static str,
    endpoint: Endpoint,
    group_version: GroupVersion,
    label: &'static str,
    operation_id: Option<&'static str>,
) -> Route {
    Route {
        path,
        verb: Verb::Post,
        endpoint,
        group_version: Some(group_version),
        label,
        operation_id,
    }
}

/// Every route warrant serves. Order matters only for discovery and OpenAPI, which list
/// groups, resources and operations in this order.
pub(crate) static ROUTES: &[Route] = &[
    resource(
        "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        Endpoint::TokenRequest,
        CORE_V1,
        "tokenrequest",
        Some("createCoreV1NamespacedServiceAccountToken"),
    ),
    resource(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Endpoint::TokenReview,
        AUTHENTICATION_V1,
        "tokenreview",
        Some("createAuthenticationV1TokenReview"),
    ),
    // Served for webhook configurations but, as in kube-apiserver since 1.22, not part of the
    // discoverable API: neither listed nor described.
    resource(
        "/apis/authentication.k8s.io/v1beta1/tokenreviews",
        Endpoint::TokenReview,
        AUTHENTICATION_V1BETA1,
        "tokenreview",
        None,
    ),
    resource(
        "/apis/warrant.dev/v1alpha1/namespaces/{namespace}/serviceaccounts/{name}/token",
        Endpoint::TokenRequest,
        WARRANT_V1ALPHA1,
        "tokenrequest",
        Some("createWarrantDevV1alpha1NamespacedServiceAccountToken"),
    ),
    resource(
        "/apis/warrant.dev/v1alpha1/tokenreviews",
        Endpoint::TokenReview,
        WARRANT_V1ALPHA1,
        "tokenreview",
        Some("createWarrantDevV1alpha1TokenReview"),
    ),
    // Called by kube-apiserver without credentials unless an AdmissionConfiguration gives it
    // some: public, like the documents (what it answers and costs: the admission module).
    route(ADMISSION_PATH, Verb::Post, Endpoint::Admission, "admission"),
    route(
        DISCOVERY_PATH,
        Verb::Get,
        Endpoint::OpenIdConfiguration,
        "openid-configuration",
    ),
    route(JWKS_PATH, Verb::Get, Endpoint::Jwks, "jwks"),
    route(
        SPIFFE_BUNDLE_PATH,
        Verb::Get,
        Endpoint::SpiffeBundle,
        "spiffe-bundle",
    ),
    route("/api", Verb::Get, Endpoint::CoreVersions, "discovery"),
    in_group(
        "/api/v1",
        Verb::Get,
        Endpoint::Resources,
        CORE_V1,
        "discovery",
    ),
    route("/apis", Verb::Get, Endpoint::Groups, "discovery"),
    in_group(
        "/apis/authentication.k8s.io",
        Verb::Get,
        Endpoint::Group,
        AUTHENTICATION_V1,
        "discovery",
    ),
    in_group(
        "/apis/authentication.k8s.io/v1",
        Verb::Get,
        Endpoint::Resources,
        AUTHENTICATION_V1,
        "discovery",
    ),
    in_group(
        "/apis/warrant.dev",
        Verb::Get,
        Endpoint::Group,
        WARRANT_V1ALPHA1,
        "discovery",
    ),
    in_group(
        "/apis/warrant.dev/v1alpha1",
        Verb::Get,
        Endpoint::Resources,
        WARRANT_V1ALPHA1,
        "discovery",
    ),
    route("/openapi/v2", Verb::Get, Endpoint::OpenApiV2, "openapi"),
    route(
        "/openapi/v3",
        Verb::Get,
        Endpoint::OpenApiV3Index,
        "openapi",
    ),
    route(
        "/openapi/v3/{*group_version}",
        Verb::Get,
        Endpoint::OpenApiV3,
        "openapi",
    ),
    route("/version", Verb::Get, Endpoint::Version, "version"),
    route("/livez", Verb::Get, Endpoint::Livez, "health"),
    route("/livez/{name}", Verb::Get, Endpoint::LivezCheck, "health"),
    route("/readyz", Verb::Get, Endpoint::Readyz, "health"),
    route("/readyz/{name}", Verb::Get, Endpoint::ReadyzCheck, "health"),
    route("/healthz", Verb::Get, Endpoint::Readyz, "health"),
    route("/metrics", Verb::Get, Endpoint::Metrics, "metrics"),
];

/// The decoded parameters of a matched path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Params {
    /// `{namespace}`.
    pub(crate) namespace: String,
    /// `{name}`.
    pub(crate) name: String,
    /// `{*…}`: the rest of the path, its segments joined by `/`.
    pub(crate) rest: String,
}

/// What [`find`] made of a request's method and path. Stored in the request's extensions by
/// the first layer that reads the path, for the others.
#[derive(Debug, Clone)]
pub(crate) enum Routed {
    /// A route's path; `allowed` says whether it takes the method (otherwise: 405).
    Route {
        /// The route.
        route: &'static Route,
        /// Its parameters, decoded.
        params: Params,
        /// Whether the route takes the request's method.
        allowed: bool,
    },
    /// No route has this path (404).
    NotFound,
    /// A segment does not decode (400).
    BadPath,
}

impl Routed {
    /// The metric label: the route's, or `unmatched`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Routed::Route { route, .. } => route.label,
            Routed::NotFound | Routed::BadPath => "unmatched",
        }
    }
}

impl Routed {
    /// kube's authorization attributes of a protected request, from the route and its decoded
    /// parameters; `None` for a public route, and for a request that will be refused anyway (no
    /// route, or a method the route does not take).
    pub(crate) fn attributes(&self) -> Option<Attributes> {
        let Routed::Route {
            route,
            params,
            allowed: true,
        } = self
        else {
            return None;
        };
        // Every resource route has its group-version (a test checks the table); were one
        // missing, the request would still be authorized, never let through.
        let gv = route.group_version.unwrap_or(CORE_V1);
        match route.endpoint {
            Endpoint::TokenRequest => {
                Some(Attributes::Resource(ResourceAttributes::token_request(
                    gv.group,
                    gv.version,
                    &params.namespace,
                    &params.name,
                )))
            }
            Endpoint::TokenReview => Some(Attributes::Resource(ResourceAttributes::token_review(
                gv.group, gv.version,
            ))),
            Endpoint::Metrics => Some(Attributes::NonResource {
                verb: "get".to_owned(),
                path: "/metrics".to_owned(),
            }),
            Endpoint::Admission
            | Endpoint::OpenIdConfiguration
            | Endpoint::Jwks
            | Endpoint::SpiffeBundle
            | Endpoint::CoreVersions
            | Endpoint::Groups
            | Endpoint::Group
            | Endpoint::Resources
            | Endpoint::OpenApiV2
            | Endpoint::OpenApiV3Index
            | Endpoint::OpenApiV3
            | Endpoint::Version
            | Endpoint::Livez
            | Endpoint::LivezCheck
            | Endpoint::Readyz
            | Endpoint::ReadyzCheck => None,
        }
    }
}

/// [`find`], also under `issuer_path` (the path of the issuer's URL, e.g. `/tenant-a`, or empty)
/// for the routes OIDC places below the issuer: the discovery document and the JWKS its default
/// `jwks_uri` names. A relying party given the issuer `https://host/tenant-a` fetches
/// `/tenant-a/.well-known/openid-configuration`; the root paths are served too.
pub(crate) fn find_for_issuer(method: &Method, path: &str, issuer_path: &str) -> Routed {
    if !issuer_path.is_empty()
        && let Some(rest) = path.strip_prefix(issuer_path)
        && rest.starts_with('/')
    {
        let routed = find(method, rest);
        if let Routed::Route { route, .. } = &routed
            && route.under_issuer()
        {
            return routed;
        }
    }
    find(method, path)
}

impl Route {
    /// True for the routes served below the issuer's path as well as at the root.
    fn under_issuer(&self) -> bool {
        matches!(
            self.endpoint,
            Endpoint::OpenIdConfiguration | Endpoint::Jwks
        )
    }
}

/// Parses and matches a request's method and path: the one parse of a path.
pub(crate) fn find(method: &Method, path: &str) -> Routed {
    let mut segments: Vec<Cow<'_, str>> = Vec::new();
    for raw in path.trim_start_matches('/').split('/') {
        let segment = if raw.contains('%') {
            match path_unescape(raw) {
                Some(decoded) => Cow::Owned(decoded),
                None => return Routed::BadPath,
            }
        } else {
            Cow::Borrowed(raw)
        };
        segments.push(segment);
    }
    choose(
        method,
        ROUTES
            .iter()
            .zip(templates())
            .filter_map(|(route, template)| Some((route, template.matches(&segments)?))),
    )
}

/// Of the routes whose template fits the path (in table order, with their parameters), the
/// first that takes the method; else the first of them, not allowed (405); else none (404).
fn choose(method: &Method, fitting: impl Iterator<Item = (&'static Route, Params)>) -> Routed {
    let mut path_only = None;
    for (route, params) in fitting {
        if route.verb.allows(method) {
            return Routed::Route {
                route,
                params,
                allowed: true,
            };
        }
        path_only.get_or_insert((route, params));
    }
    match path_only {
        Some((route, params)) => Routed::Route {
            route,
            params,
            allowed: false,
        },
        None => Routed::NotFound,
    }
}

/// One segment of a route's template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Matches itself only.
    Literal(&'static str),
    /// `{namespace}`: one segment.
    Namespace,
    /// `{name}`: one segment.
    Name,
    /// `{*rest}`: one or more segments, to the end.
    Rest,
}

/// A route's template, split into its parts once (every request is matched against them).
#[derive(Debug)]
struct Template(Vec<Part>);

/// The templates of [`ROUTES`], in the same order.
fn templates() -> &'static [Template] {
    static TEMPLATES: std::sync::LazyLock<Vec<Template>> = std::sync::LazyLock::new(|| {
        ROUTES
            .iter()
            .map(|route| Template::parse(route.path))
            .collect()
    });
    &TEMPLATES
}

impl Template {
    fn parse(path: &'static str) -> Self {
        Template(
            path.trim_start_matches('/')
                .split('/')
                .map(|part| match part {
                    "{namespace}" => Part::Namespace,
                    "{name}" => Part::Name,
                    wildcard if wildcard.starts_with("{*") => Part::Rest,
                    literal => Part::Literal(literal),
                })
                .collect(),
        )
    }

    /// The parameters, if `segments` (decoded) fit the template.
    fn matches(&self, segments: &[Cow<'_, str>]) -> Option<Params> {
        let mut params = Params::default();
        let mut given = segments.iter();
        for part in &self.0 {
            let segment = given.next()?;
            match part {
                Part::Literal(literal) if *literal == segment.as_ref() => {}
                Part::Literal(_) => return None,
                Part::Namespace => params.namespace = segment.to_string(),
                Part::Name => params.name = segment.to_string(),
                Part::Rest => {
                    let mut rest = segment.to_string();
                    for more in given.by_ref() {
                        rest.push('/');
                        rest.push_str(more);
                    }
                    if rest.is_empty() {
                        return None;
                    }
                    params.rest = rest;
                    return Some(params);
                }
            }
        }
        given.next().is_none().then_some(params)
    }
}

/// A discoverable resource, as `APIResource` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// `serviceaccounts/token`, `tokenreviews`.
    pub(crate) name: &'static str,
    /// Its singular name (empty for a subresource).
    pub(crate) singular: &'static str,
    /// Whether it lives in a namespace.
    pub namespaced: bool,
    /// The kind of its body.
    pub kind: &'static str,
    /// The group-version of its body's kind when it differs from the route's (a TokenRequest
    /// is an `authentication.k8s.io/v1` object wherever it is posted).
    pub kind_group_version: Option<GroupVersion>,
    /// For a subresource, the resource it belongs to, listed before it with no verbs of its
    /// own: kubectl (`create role --resource=serviceaccounts.warrant.dev/token`) and RBAC
    /// tooling find a subresource's group through its parent.
    pub(crate) parent: Option<Parent>,
}

/// The resource a subresource belongs to, as discovery lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parent {
    /// `serviceaccounts`.
    pub(crate) name: &'static str,
    /// `serviceaccount`.
    pub(crate) singular: &'static str,
    /// `ServiceAccount`.
    pub(crate) kind: &'static str,
}

impl Endpoint {
    /// What discovery says of a resource endpoint.
    pub fn resource(self) -> Option<Resource> {
        match self {
            Endpoint::TokenRequest => Some(Resource {
                name: "serviceaccounts/token",
                singular: "",
                namespaced: true,
                kind: "TokenRequest",
                kind_group_version: Some(AUTHENTICATION_V1),
                parent: Some(Parent {
                    name: "serviceaccounts",
                    singular: "serviceaccount",
                    kind: "ServiceAccount",
                }),
            }),
            Endpoint::TokenReview => Some(Resource {
                name: "tokenreviews",
                singular: "tokenreview",
                namespaced: false,
                kind: "TokenReview",
                kind_group_version: None,
                parent: None,
            }),
            _ => None,
        }
    }
}

/// The discoverable routes (those with an operation ID), in table order.
pub fn discoverable() -> impl Iterator<Item = &'static Route> {
    ROUTES.iter().filter(|r| r.operation_id.is_some())
}

/// For the `request_path` fuzz target: [`find`] on any path, checked against the plain reading
/// of the route table it replaced (each template split and compared on every request), and
/// what the layers after it do with the result. Panics when they disagree.
pub(crate) fn check_find(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    // hyper hands over paths from their leading `/`.
    let path = format!("/{}", text.trim_start_matches('/'));
    for method in [Method::GET, Method::POST, Method::DELETE] {
        let routed = find(&method, &path);
        assert_eq!(
            outline(&routed),
            outline(&find_by_reading(&method, &path)),
            "{method} {path}"
        );
        if !path.contains('%') {
            assert!(!matches!(routed, Routed::BadPath), "{path}");
        }
        let _ = routed.attributes();
        let _ = routed.label();
        let _ = find_for_issuer(&method, &path, "/tenant-a").attributes();
    }
}

/// A [`Routed`] as plain data, to compare two.
fn outline(routed: &Routed) -> (&'static str, Option<Params>, Option<bool>) {
    match routed {
        Routed::Route {
            route,
            params,
            allowed,
        } => (route.path, Some(params.clone()), Some(*allowed)),
        Routed::NotFound => ("not found", None, None),
        Routed::BadPath => ("bad path", None, None),
    }
}

/// [`find`] as it was before the templates were split once: the oracle of [`check_find`]. Only
/// the matching of templates differs; the choice among fitting routes is shared.
fn find_by_reading(method: &Method, path: &str) -> Routed {
    let mut segments = Vec::new();
    for raw in path.trim_start_matches('/').split('/') {
        if raw.contains('%') {
            match path_unescape(raw) {
                Some(decoded) => segments.push(decoded),
                None => return Routed::BadPath,
            }
        } else {
            segments.push(raw.to_owned());
        }
    }
    let fits = |template: &str| -> Option<Params> {
        let mut params = Params::default();
        let mut parts = template.trim_start_matches('/').split('/');
        let mut given = segments.iter();
        loop {
            match (parts.next(), given.next()) {
                (None, None) => return Some(params),
                (Some(part), Some(segment)) if part.starts_with("{*") => {
                    let rest: Vec<&str> = std::iter::once(segment)
                        .chain(given)
                        .map(String::as_str)
                        .collect();
                    let rest = rest.join("/");
                    return (!rest.is_empty()).then_some(Params { rest, ..params });
                }
                (Some("{namespace}"), Some(segment)) => params.namespace = segment.clone(),
                (Some("{name}"), Some(segment)) => params.name = segment.clone(),
                (Some(literal), Some(segment)) if literal == segment => {}
                _ => return None,
            }
        }
    };
    choose(
        method,
        ROUTES
            .iter()
            .filter_map(|route| Some((route, fits(route.path)?))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(method: Method, path: &str) -> (Option<Endpoint>, Params, bool) {
        match find(&method, path) {
            Routed::Route {
                route,
                params,
                allowed,
            } => (Some(route.endpoint), params, allowed),
            Routed::NotFound => (None, Params::default(), false),
            Routed::BadPath => panic!("bad path {path}"),
        }
    }

    #[test]
    fn paths_match_with_decoded_parameters() {
        let (endpoint, params, allowed) = found(
            Method::POST,
            "/api/v1/namespaces/d%65mo/serviceaccounts/a%2Fb/token",
        );
        assert_eq!(endpoint, Some(Endpoint::TokenRequest));
        assert_eq!(
            (params.namespace.as_str(), params.name.as_str()),
            ("demo", "a/b")
        );
        assert!(allowed);
        let (endpoint, params, _) = found(Method::GET, "/openapi/v3/apis/warrant.dev/v1alpha1");
        assert_eq!(endpoint, Some(Endpoint::OpenApiV3));
        assert_eq!(params.rest, "apis/warrant.dev/v1alpha1");
        // HEAD is GET without the body; a path with the wrong method is still its route.
        assert!(found(Method::HEAD, "/metrics").2);
        let (endpoint, _, allowed) = found(Method::GET, "/apis/warrant.dev/v1alpha1/tokenreviews");
        assert_eq!(endpoint, Some(Endpoint::TokenReview));
        assert!(!allowed);
    }

    #[test]
    fn near_misses_are_not_routes() {
        for path in [
            "/",
            "/metrics/",
            "/api/v1/pods",
            "/api//v1",
            "/openapi/v3/",
            "/apis/authentication.k8s.io/v2/tokenreviews",
            "/api/v1/namespaces/a/serviceaccounts/b/token/extra",
        ] {
            assert!(
                matches!(find(&Method::GET, path), Routed::NotFound),
                "{path}"
            );
            assert_eq!(find(&Method::GET, path).label(), "unmatched");
        }
        assert!(matches!(
            find(
                &Method::POST,
                "/api/v1/namespaces/de%zz/serviceaccounts/b/token"
            ),
            Routed::BadPath
        ));
    }

    #[test]
    fn labels_come_from_the_table() {
        let label = |path: &str| find(&Method::POST, path).label();
        assert_eq!(
            label("/api/v1/namespaces/a/serviceaccounts/b/token"),
            "tokenrequest"
        );
        assert_eq!(
            label("/apis/authentication.k8s.io/v1beta1/tokenreviews"),
            "tokenreview"
        );
        assert_eq!(label("/apis/warrant.dev/v1alpha1"), "discovery");
        assert_eq!(label("/openid/v1/jwks"), "jwks");
        assert_eq!(label("/openapi/v3/api/v1"), "openapi");
        assert_eq!(label("/random/path"), "unmatched");
    }

    /// Resource routes are the protected ones: each has the group-version its attributes name,
    /// and every route that is not public says so by its endpoint.
    #[test]
    fn resource_routes_carry_their_group_version() {
        for route in ROUTES {
            if route.endpoint.resource().is_some() {
                assert!(route.group_version.is_some(), "{}", route.path);
                assert_eq!(route.verb, Verb::Post, "{}", route.path);
            }
        }
        let attributes = find(
            &Method::POST,
            "/apis/warrant.dev/v1alpha1/namespaces/ns/serviceaccounts/sa/token",
        )
        .attributes();
        assert_eq!(
            attributes,
            Some(Attributes::Resource(ResourceAttributes::token_request(
                "warrant.dev",
                "v1alpha1",
                "ns",
                "sa"
            )))
        );
        assert_eq!(find(&Method::GET, "/openid/v1/jwks").attributes(), None);
        assert_eq!(
            find(&Method::GET, "/apis/warrant.dev/v1alpha1/tokenreviews").attributes(),
            None,
            "a method the route does not take is refused (405), not authorized"
        );
    }

    /// Discovery and the JWKS are served below an issuer's path too; nothing else is.
    #[test]
    fn discovery_is_served_below_the_issuers_path() {
        let endpoint = |path: &str| match find_for_issuer(&Method::GET, path, "/tenant-a") {
            Routed::Route { route, .. } => Some(route.endpoint),
            _ => None,
        };
        assert_eq!(
            endpoint("/tenant-a/.well-known/openid-configuration"),
            Some(Endpoint::OpenIdConfiguration)
        );
        assert_eq!(endpoint("/tenant-a/openid/v1/jwks"), Some(Endpoint::Jwks));
        assert_eq!(endpoint("/openid/v1/jwks"), Some(Endpoint::Jwks));
        assert_eq!(endpoint("/tenant-a/version"), None);
        assert_eq!(endpoint("/tenant-ab/openid/v1/jwks"), None);
        assert_eq!(endpoint("/tenant-a"), None);
    }
}
