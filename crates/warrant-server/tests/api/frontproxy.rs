//! Front-proxy authentication (spec §7.2–§7.3): identity headers are honoured only from a
//! client certificate of the request-header CA, with the client-auth usage and an allowed
//! common name, and the aggregator's availability and discovery requests get through.

use http::{Method, StatusCode};
use serde_json::json;
use warrant_auth::{FrontProxy, RequestHeaders};

use crate::support::*;
use warrant_testkit::TestCa;

struct Setup {
    api: Api,
    proxy_ca: TestCa,
    users_ca: TestCa,
}

fn setup() -> Setup {
    let proxy_ca = TestCa::new("front-proxy-ca");
    let users_ca = TestCa::new("client-ca");
    let api = api_auth(|authn, _| {
        authn.trust.set_client_ca(Some(users_ca.bundle()));
        authn.trust.set_front_proxy(Some(FrontProxy {
            ca: proxy_ca.bundle(),
            allowed_names: vec!["front-proxy-client".into()],
            headers: RequestHeaders::default(),
        }));
    });
    Setup {
        api,
        proxy_ca,
        users_ca,
    }
}

const TOKEN_PATH: &str = "/apis/warrant.dev/v1alpha1/namespaces/demo/serviceaccounts/app/token";

fn token_request() -> serde_json::Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
}

/// What the aggregator relays for a cluster admin.
const ADMIN_HEADERS: [(&str, &str); 3] = [
    ("x-remote-user", "jane"),
    ("x-remote-group", "system:masters"),
    ("x-remote-group", "ops"),
];

#[tokio::test]
async fn a_proxy_certificate_makes_the_headers_the_user() {
    let s = setup();
    let aggregator = s.proxy_ca.issue_client("front-proxy-client", &[]);
    let r = s
        .api
        .send_with_peer(
            Method::POST,
            TOKEN_PATH,
            Some(aggregator.peer()),
            &ADMIN_HEADERS,
            Some(token_request()),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
}

#[tokio::test]
async fn the_same_headers_from_anyone_else_are_ignored() {
    let s = setup();
    let forbidden_as = |r: &Reply, user: &str| {
        assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
        assert!(
            r.json["message"]
                .as_str()
                .unwrap()
                .contains(&format!("User \"{user}\" cannot create")),
            "{}",
            r.text
        );
    };
    let send = |peer| {
        s.api.send_with_peer(
            Method::POST,
            TOKEN_PATH,
            peer,
            &ADMIN_HEADERS,
            Some(token_request()),
        )
    };

    // A user certificate (the client CA): the certificate's user, not the headers'.
    let r = send(Some(s.users_ca.issue_client("mallory", &["dev"]).peer())).await;
    forbidden_as(&r, "mallory");
    // A certificate from a CA nobody trusts.
    let stranger = TestCa::new("stranger");
    let r = send(Some(
        stranger.issue_client("front-proxy-client", &[]).peer(),
    ))
    .await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);
    // The proxy CA, but a common name not in the allowed list.
    let r = send(Some(s.proxy_ca.issue_client("someone-else", &[]).peer())).await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);
    // The proxy CA and name, but without the client-auth usage.
    let r = send(Some(
        s.proxy_ca.issue_server(&["front-proxy-client"]).peer(),
    ))
    .await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);
    // No certificate at all.
    let r = send(None).await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);
    // With a bearer token as well, the token decides, and the headers still do not.
    let r = s
        .api
        .send_with_peer(
            Method::POST,
            TOKEN_PATH,
            None,
            &[
                ("authorization", &format!("Bearer {BOB}")),
                ("x-remote-user", "jane"),
                ("x-remote-group", "system:masters"),
            ],
            Some(token_request()),
        )
        .await;
    forbidden_as(&r, "bob");
}

/// Client and front-proxy certificates are checked against the server's clock (2027-01-15 in
/// these tests): an expired one and a not-yet-valid one are refused, and the same certificate
/// is accepted once the clock is inside its validity (so the refusal is the dates' doing).
#[tokio::test]
async fn certificates_outside_their_validity_are_refused() {
    let s = setup();
    let expired = (2025, 1, 1)..(2026, 1, 1);
    let not_yet = (2027, 6, 1)..(2028, 1, 1);
    let certificates = |range: &std::ops::Range<(i32, u8, u8)>| {
        [
            (
                "front proxy",
                s.proxy_ca
                    .issue_client_valid("front-proxy-client", &[], range.start, range.end),
            ),
            (
                "client",
                s.users_ca
                    .issue_client_valid("mallory", &[], range.start, range.end),
            ),
        ]
    };
    let send = |peer| {
        s.api.send_with_peer(
            Method::POST,
            TOKEN_PATH,
            Some(peer),
            &ADMIN_HEADERS,
            Some(token_request()),
        )
    };
    for (when, range) in [("expired", &expired), ("not yet valid", &not_yet)] {
        for (what, certificate) in certificates(range) {
            let r = send(certificate.peer()).await;
            assert_eq!(
                r.code,
                StatusCode::UNAUTHORIZED,
                "{when} {what}: {}",
                r.text
            );
            assert_eq!(r.json["reason"], "Unauthorized", "{when} {what}");
        }
    }
    // Inside the not-yet-valid certificates' validity, they are accepted: the front proxy's
    // headers make the admin, the client certificate is mallory (and forbidden).
    s.api.set_now(1_820_000_000); // 2027-09-03
    let [(_, proxy), (_, client)] = certificates(&not_yet);
    let r = send(proxy.peer()).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let r = send(client.peer()).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
}

#[tokio::test]
async fn an_empty_allowed_list_takes_any_certificate_of_the_ca() {
    let proxy_ca = TestCa::new("front-proxy-ca");
    let api = api_auth(|authn, _| {
        authn.trust.set_front_proxy(Some(FrontProxy {
            ca: proxy_ca.bundle(),
            allowed_names: vec![],
            headers: RequestHeaders::default(),
        }));
    });
    let r = api
        .send_with_peer(
            Method::POST,
            TOKEN_PATH,
            Some(proxy_ca.issue_client("any-name", &[]).peer()),
            &ADMIN_HEADERS,
            Some(token_request()),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    // Without a user header, the proxy's certificate authenticates nobody.
    let r = api
        .send_with_peer(
            Method::POST,
            TOKEN_PATH,
            Some(proxy_ca.issue_client("any-name", &[]).peer()),
            &[("x-remote-group", "system:masters")],
            Some(token_request()),
        )
        .await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);
}

/// Configured header names replace the defaults; the defaults are still stripped.
#[tokio::test]
async fn configured_header_names() {
    let proxy_ca = TestCa::new("front-proxy-ca");
    let api = api_auth(|authn, _| {
        authn.trust.set_front_proxy(Some(FrontProxy {
            ca: proxy_ca.bundle(),
            allowed_names: vec![],
            headers: RequestHeaders {
                username: vec!["X-Proxy-User".into(), "X-Remote-User".into()],
                uid: vec![],
                group: vec!["X-Proxy-Group".into()],
                extra_prefix: vec!["X-Proxy-Extra-".into()],
            },
        }));
    });
    let peer = || Some(proxy_ca.issue_client("p", &[]).peer());
    let r = api
        .send_with_peer(
            Method::POST,
            TOKEN_PATH,
            peer(),
            &[
                ("x-proxy-user", "jane"),
                ("x-proxy-group", "system:masters"),
            ],
            Some(token_request()),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    // X-Remote-Group is not a group header here.
    let r = api
        .send_with_peer(
            Method::POST,
            TOKEN_PATH,
            peer(),
            &[
                ("x-remote-user", "jane"),
                ("x-remote-group", "system:masters"),
            ],
            Some(token_request()),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
}

/// kube-apiserver's aggregator: the availability check (as `system:kube-aggregator` in
/// `system:masters`), legacy discovery (no groups), and the OpenAPI fetch (`system:aggregator`).
#[tokio::test]
async fn the_aggregators_requests() {
    let s = setup();
    let aggregator = || Some(s.proxy_ca.issue_client("front-proxy-client", &[]).peer());
    let check = s
        .api
        .send_with_peer(
            Method::GET,
            "/apis/warrant.dev/v1alpha1",
            aggregator(),
            &[
                ("x-remote-user", "system:kube-aggregator"),
                ("x-remote-group", "system:masters"),
                (
                    "accept",
                    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                ),
            ],
            None,
        )
        .await;
    assert_eq!(check.code, StatusCode::OK);
    let discovery = s
        .api
        .send_with_peer(
            Method::GET,
            "/apis/warrant.dev/v1alpha1",
            aggregator(),
            &[
                ("x-remote-user", "system:kube-aggregator"),
                ("accept", "application/json"),
            ],
            None,
        )
        .await;
    assert_eq!(discovery.code, StatusCode::OK);
    assert_eq!(discovery.json["kind"], "APIResourceList");
    assert_eq!(discovery.json["groupVersion"], "warrant.dev/v1alpha1");
    let names: Vec<&str> = discovery.json["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["serviceaccounts", "serviceaccounts/token", "tokenreviews"]
    );
    for path in [
        "/openapi/v2",
        "/openapi/v3",
        "/openapi/v3/apis/warrant.dev/v1alpha1",
    ] {
        let r = s
            .api
            .send_with_peer(
                Method::GET,
                path,
                aggregator(),
                &[
                    ("x-remote-user", "system:aggregator"),
                    ("accept", "application/json"),
                ],
                None,
            )
            .await;
        assert_eq!(r.code, StatusCode::OK, "{path}");
    }
}
