//! TokenRequest (spec §4): defaults, lifetimes, bindings, and every error with kube's code and
//! message.

use http::StatusCode;
use serde_json::{Value, json};
use warrant_token::{ExpirationPolicy, Verifier};

use crate::support::*;

#[tokio::test]
async fn plain_token_with_defaults() {
    let api = api();
    let r = api.token("app", json!({})).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let body = &r.json;
    assert_eq!(body["kind"], "TokenRequest");
    assert_eq!(body["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(body["metadata"]["name"], "app");
    assert_eq!(body["metadata"]["namespace"], "demo");
    assert_eq!(body["metadata"]["uid"], SA_UID);
    assert_eq!(
        body["metadata"]["creationTimestamp"],
        "2027-01-15T08:00:00Z"
    );
    assert_eq!(body["spec"]["audiences"], json!([ISSUER]));
    assert_eq!(body["spec"]["expirationSeconds"], 3600);
    assert_eq!(
        body["status"]["expirationTimestamp"],
        "2027-01-15T09:00:00Z"
    );

    let token = body["status"]["token"].as_str().unwrap();
    let c = claims(token);
    assert_eq!(c.iss, ISSUER);
    assert_eq!(c.sub, "system:serviceaccount:demo:app");
    assert_eq!(c.aud, [ISSUER]);
    assert_eq!(
        (c.iat, c.nbf, c.exp),
        (Some(NOW), Some(NOW), Some(NOW + 3600))
    );
    assert_eq!(c.kubernetes.serviceaccount.uid, SA_UID);
    assert!(
        c.kubernetes.pod.is_none()
            && c.kubernetes.node.is_none()
            && c.kubernetes.warnafter.is_none()
    );
    assert_eq!(c.jti.len(), 36);

    // The token verifies with the published key.
    let verifier = Verifier::new(
        vec![ISSUER.into()],
        vec![ISSUER.into()],
        vec![key().verifying_key().clone()],
    );
    verifier
        .verify(token, &[], jiff::Timestamp::from_second(NOW).unwrap())
        .unwrap();
}

#[tokio::test]
async fn same_api_in_warrants_group() {
    let api = api();
    let r = api
        .post(
            "/apis/warrant.dev/v1alpha1/namespaces/demo/serviceaccounts/app/token",
            json!({"spec": {"audiences": ["vault"]}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        claims(r.json["status"]["token"].as_str().unwrap()).aud,
        ["vault"]
    );
}

#[tokio::test]
async fn pod_binding_embeds_pod_and_node() {
    let api = api();
    let r = api
        .token("app", json!({"audiences": ["vault"], "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "app-0"}}))
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    // The reference is echoed as sent (no UID was given).
    assert_eq!(
        r.json["spec"]["boundObjectRef"],
        json!({"kind": "Pod", "apiVersion": "v1", "name": "app-0"})
    );
    let c = claims(r.json["status"]["token"].as_str().unwrap());
    let pod = c.kubernetes.pod.unwrap();
    assert_eq!((pod.name.as_str(), pod.uid.as_str()), ("app-0", POD_UID));
    let node = c.kubernetes.node.unwrap();
    assert_eq!(
        (node.name.as_str(), node.uid.as_str()),
        ("node-1", NODE_UID)
    );

    // A node that does not exist: its name without a UID. An unscheduled pod: no node.
    let r = api
        .token(
            "app",
            json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "orphan"}}),
        )
        .await;
    let node = claims(r.json["status"]["token"].as_str().unwrap())
        .kubernetes
        .node
        .unwrap();
    assert_eq!((node.name.as_str(), node.uid.as_str()), ("node-gone", ""));
    let r = api
        .token(
            "app",
            json!({"boundObjectRef": {"kind": "Pod", "name": "pending"}}),
        )
        .await;
    assert!(
        claims(r.json["status"]["token"].as_str().unwrap())
            .kubernetes
            .node
            .is_none()
    );
}

#[tokio::test]
async fn secret_and_node_bindings() {
    let api = api();
    let r = api
        .token("app", json!({"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "app-token", "uid": SECRET_UID}}))
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let c = claims(r.json["status"]["token"].as_str().unwrap());
    assert_eq!(c.kubernetes.secret.unwrap().uid, SECRET_UID);
    let r = api
        .token(
            "app",
            json!({"boundObjectRef": {"kind": "Node", "apiVersion": "v1", "name": "node-1"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let c = claims(r.json["status"]["token"].as_str().unwrap());
    assert_eq!(c.kubernetes.node.unwrap().uid, NODE_UID);
    assert!(c.kubernetes.pod.is_none());
}

#[tokio::test]
async fn extension_of_the_kubelet_default_token() {
    let api = api();
    let pod = json!({"kind": "Pod", "apiVersion": "v1", "name": "app-0"});
    // 3607 s, pod-bound, API audiences (defaulted): a year, warnafter at 3607, status says 3607.
    let r = api
        .token(
            "app",
            json!({"expirationSeconds": 3607, "boundObjectRef": pod}),
        )
        .await;
    assert_eq!(r.json["spec"]["expirationSeconds"], 3607);
    assert_eq!(
        r.json["status"]["expirationTimestamp"],
        "2027-01-15T09:00:07Z"
    );
    let c = claims(r.json["status"]["token"].as_str().unwrap());
    assert_eq!(c.exp, Some(NOW + 31_536_000));
    assert_eq!(c.kubernetes.warnafter, Some(NOW + 3607));

    // Not for another audience, not for a secret binding, not for another duration.
    for spec in [
        json!({"expirationSeconds": 3607, "boundObjectRef": pod, "audiences": ["vault"]}),
        json!({"expirationSeconds": 3607, "boundObjectRef": {"kind": "Secret", "name": "app-token"}}),
        json!({"expirationSeconds": 3600, "boundObjectRef": pod}),
    ] {
        let r = api.token("app", spec.clone()).await;
        let c = claims(r.json["status"]["token"].as_str().unwrap());
        let asked = spec["expirationSeconds"].as_i64().unwrap();
        assert_eq!(
            (c.exp, c.kubernetes.warnafter),
            (Some(NOW + asked), None),
            "{spec}"
        );
    }

    // Nor when the operator turned it off.
    let api = api_with(ExpirationPolicy {
        extend: false,
        ..ExpirationPolicy::default()
    });
    let r = api
        .token(
            "app",
            json!({"expirationSeconds": 3607, "boundObjectRef": pod}),
        )
        .await;
    assert_eq!(
        claims(r.json["status"]["token"].as_str().unwrap()).exp,
        Some(NOW + 3607)
    );
}

#[tokio::test]
async fn max_expiration_caps_with_a_warning() {
    let api = api_with(ExpirationPolicy {
        max_seconds: Some(7200),
        ..ExpirationPolicy::default()
    });
    let r = api.token("app", json!({"expirationSeconds": 86400})).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert_eq!(r.json["spec"]["expirationSeconds"], 7200);
    assert_eq!(
        r.headers["warning"],
        "299 - \"requested expiration of 86400 seconds shortened to 7200 seconds\""
    );
    assert_eq!(
        claims(r.json["status"]["token"].as_str().unwrap()).exp,
        Some(NOW + 7200)
    );
    let r = api.token("app", json!({"expirationSeconds": 3600})).await;
    assert!(r.headers.get("warning").is_none());
}

#[tokio::test]
async fn expiration_bounds() {
    let api = api();
    assert_eq!(
        api.token("app", json!({"expirationSeconds": 600}))
            .await
            .code,
        StatusCode::CREATED
    );
    assert_eq!(
        api.token("app", json!({"expirationSeconds": 4294967296i64}))
            .await
            .code,
        StatusCode::CREATED
    );
    let r = api.token("app", json!({"expirationSeconds": 599})).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        r.json,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes",
            "reason":"Invalid",
            "details":{"group":"authentication.k8s.io","kind":"TokenRequest","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: 599: may not specify a duration less than 10 minutes","field":"spec.expirationSeconds"}]},
            "code":422})
    );
    let r = api
        .token("app", json!({"expirationSeconds": 4294967297i64}))
        .await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        r.json["message"],
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds"
    );
}

/// Every error of spec §4.2–§4.3: (name, service account, body, code, reason, message).
#[tokio::test]
async fn errors_match_kube() {
    let api = api();
    let cases: Vec<(&str, &str, Value, u16, &str, &str)> = vec![
        ("missing SA", "ghost", json!({}), 404, "NotFound", r#"serviceaccounts "ghost" not found"#),
        ("name mismatch", "app", json!({"metadata": {"name": "other"}}), 422, "Invalid",
         r#"TokenRequest.authentication.k8s.io "app" is invalid: metadata.name: Invalid value: "other": must match the service account name if specified"#),
        ("namespace mismatch", "app", json!({"metadata": {"namespace": "prod"}}), 422, "Invalid",
         r#"TokenRequest.authentication.k8s.io "app" is invalid: metadata.namespace: Invalid value: "prod": must match the service account namespace if specified"#),
        ("SA UID mismatch", "app", json!({"metadata": {"uid": "stale"}}), 409, "Conflict",
         &*Box::leak(format!(r#"Operation cannot be fulfilled on TokenRequest.authentication.k8s.io "app": the UID in the token request (stale) does not match the UID of the service account ({SA_UID})"#).into_boxed_str())),
        ("missing pod", "app", json!({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "nope"}}}), 404, "NotFound", r#"pods "nope" not found"#),
        ("missing secret", "app", json!({"spec": {"boundObjectRef": {"kind": "Secret", "name": "nope"}}}), 404, "NotFound", r#"secrets "nope" not found"#),
        ("missing node", "app", json!({"spec": {"boundObjectRef": {"kind": "Node", "name": "nope"}}}), 404, "NotFound", r#"nodes "nope" not found"#),
        ("pod of another SA", "app", json!({"spec": {"boundObjectRef": {"kind": "Pod", "name": "other-0"}}}), 400, "BadRequest",
         r#"cannot bind token for serviceaccount "app" to pod running with different serviceaccount name."#),
        ("unsupported kind", "app", json!({"spec": {"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1", "name": "c"}}}), 400, "BadRequest",
         "cannot bind token to object of type /v1, Kind=ConfigMap"),
        ("wrong group", "app", json!({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "apps/v1", "name": "app-0"}}}), 400, "BadRequest",
         "cannot bind token to object of type apps/v1, Kind=Pod"),
        ("no name", "app", json!({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1"}}}), 400, "BadRequest", "Name parameter required."),
        ("pod UID mismatch", "app", json!({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "app-0", "uid": "old"}}}), 409, "Conflict",
         r#"Operation cannot be fulfilled on Pod "app-0": the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated"#),
        ("secret UID mismatch", "app", json!({"spec": {"boundObjectRef": {"kind": "Secret", "name": "app-token", "uid": "old"}}}), 409, "Conflict",
         r#"Operation cannot be fulfilled on Secret "app-token": the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated"#),
        ("node UID mismatch", "app", json!({"spec": {"boundObjectRef": {"kind": "Node", "name": "node-1", "uid": "old"}}}), 409, "Conflict",
         r#"Operation cannot be fulfilled on Node "node-1": the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated"#),
    ];
    for (name, sa, body, code, reason, message) in cases {
        let mut request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"});
        for (k, v) in body.as_object().unwrap() {
            request[k] = v.clone();
        }
        let r = api
            .post(
                &format!("/api/v1/namespaces/demo/serviceaccounts/{sa}/token"),
                request,
            )
            .await;
        assert_eq!(r.code.as_u16(), code, "{name}: {}", r.text);
        assert_eq!(r.json["kind"], "Status", "{name}");
        assert_eq!(r.json["reason"], reason, "{name}");
        assert_eq!(r.json["message"], message, "{name}");
        assert_eq!(r.json["code"], code, "{name}");
    }
}

#[tokio::test]
async fn kubectls_null_fields_are_accepted() {
    // What kubectl create token actually sends.
    let api = api();
    let r = api
        .post(
            "/api/v1/namespaces/demo/serviceaccounts/app/token",
            json!({"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1","metadata":{"creationTimestamp":null},
                   "spec":{"audiences":null,"expirationSeconds":null,"boundObjectRef":null},
                   "status":{"token":"","expirationTimestamp":null}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
}

#[tokio::test]
async fn callers_must_authenticate() {
    let api = api();
    let request = |auth: Option<&str>| {
        let mut b = http::Request::builder()
            .method("POST")
            .uri("/api/v1/namespaces/demo/serviceaccounts/app/token")
            .header("content-type", "application/json");
        if let Some(auth) = auth {
            b = b.header("authorization", auth);
        }
        b.body(axum::body::Body::from("{}")).unwrap()
    };
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Basic YWRtaW46YWRtaW4="),
        Some("Bearer "),
    ] {
        let r = api.send(request(auth)).await;
        assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(r.json["reason"], "Unauthorized");
    }
    let r = api.send(request(Some(&format!("Bearer {ADMIN}")))).await;
    assert_eq!(r.code, StatusCode::CREATED);
}

/// Audiences are bounded on both sides (kube sets no limit): at most 100 of at most 1024 bytes
/// each per TokenRequest and TokenReview, and a token too big for TokenReview to read is never
/// issued. The shape the probe used (thousands against hundreds of thousands, which took 38 s)
/// is refused at once.
#[tokio::test]
async fn audiences_are_bounded_and_no_unreviewable_token_is_issued() {
    let api = api();
    let many: Vec<String> = (0..101).map(|i| format!("aud-{i}")).collect();
    let r = api.token("app", json!({"audiences": many})).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(
        r.json["message"],
        r#"TokenRequest.authentication.k8s.io "app" is invalid: spec.audiences: Invalid value: 101: 101 audiences, more than the 100 allowed"#
    );
    let r = api
        .token("app", json!({"audiences": ["a".repeat(1025)]}))
        .await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    // 100 audiences of 200 bytes: within the list limits, but the token would be over 16 KiB.
    let long: Vec<String> = (0..100)
        .map(|i| format!("{i:03}{}", "a".repeat(197)))
        .collect();
    let r = api.token("app", json!({"audiences": long})).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert!(
        r.json["message"]
            .as_str()
            .unwrap()
            .contains("more than the 16384 a TokenReview reads"),
        "{}",
        r.text
    );
    // At the limits and small enough: issued, and reviewable.
    let fine: Vec<String> = (0..100).map(|i| format!("aud-{i}")).collect();
    let r = api.token("app", json!({"audiences": fine})).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let token = r.json["status"]["token"].as_str().unwrap().to_owned();
    let requested: Vec<&str> = (0..100).map(|_| "aud-99").collect();
    let r = api
        .review("authentication.k8s.io/v1", &token, &requested)
        .await;
    r.assert_authenticated();
    // A review naming too many audiences is a bad request.
    let requested: Vec<String> = (0..700).map(|i| format!("aud-{i}")).collect();
    let requested: Vec<&str> = requested.iter().map(String::as_str).collect();
    let r = api
        .review("authentication.k8s.io/v1", &token, &requested)
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(
        r.json["message"],
        "spec.audiences: 700 audiences, more than the 100 allowed"
    );
}

/// `--disable-secret-binding`: a Secret binding is refused with a 400 BadRequest Status, as kube
/// refuses a Node binding while its feature gate is off, in both API groups, before the Secret
/// is looked up (so an absent Secret gets the same answer, not a 404). Other bindings still work.
#[tokio::test]
async fn secret_binding_can_be_turned_off() {
    let api = api_without_secret_binding();
    let message = "cannot bind token to a Secret object as secret binding is disabled on this server (--disable-secret-binding)";
    for prefix in ["/api/v1", "/apis/warrant.dev/v1alpha1"] {
        for name in ["app-token", "absent"] {
            let r = api
                .post(
                    &format!("{prefix}/namespaces/demo/serviceaccounts/app/token"),
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                           "spec": {"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": name}}}),
                )
                .await;
            assert_eq!(
                r.code,
                StatusCode::BAD_REQUEST,
                "{prefix} {name}: {}",
                r.text
            );
            assert_eq!(
                r.json,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": "BadRequest", "code": 400}),
                "{prefix} {name}"
            );
        }
    }
    for spec in [
        json!({}),
        json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "app-0"}}),
        json!({"boundObjectRef": {"kind": "Node", "apiVersion": "v1", "name": "node-1"}}),
    ] {
        let r = api.token("app", spec.clone()).await;
        assert_eq!(r.code, StatusCode::CREATED, "{spec}: {}", r.text);
    }
}
