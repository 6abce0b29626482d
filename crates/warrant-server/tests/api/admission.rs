//! Token injection's mutating webhook (`POST /mutate/pods`) with the AdmissionReviews a real
//! kube-apiserver sent (tests/vectors/admission): the patch it answers is applied to the pod by
//! kubectl (`kubectl patch --local --type=json`: the JSON Patch library kube-apiserver applies
//! webhook patches with, not warrant's code), and the pod that results must be exactly the
//! expected one (tests/vectors/admission/expected). Then the bad inputs: each admitted
//! unchanged or refused as docs/injection.md says, naming what is wrong, and none a panic.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use warrant_auth::{Policy, PolicyFile};
use warrant_objects::Kind;
use warrant_server::{AZURE_DEFAULT_AUTHORITY_HOST, AdmissionCallers, InjectionSettings};

use crate::support::*;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/admission");

const POLICY: &str = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
selfService:
  audiences:
  - sts.amazonaws.com
  - api://AzureADTokenExchange
  - https://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/warrant/providers/cluster-a
  - vault
  maxExpirationSeconds: 7200
";

/// The CA bundle the agent is given (any PEM; the webhook passes it on as it is).
const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";

fn settings() -> InjectionSettings {
    InjectionSettings {
        agent_image: "ghcr.io/warrant-dev/warrant:v0.1.0".into(),
        warrant_url: "https://warrant.warrant.svc".into(),
        ca_pem: Some(CA.into()),
        agent_audience: warrant_server::TOKEN_AGENT_DEFAULT_AUDIENCE.into(),
        azure_authority_host: AZURE_DEFAULT_AUTHORITY_HOST.into(),
        azure_tenant_id: None,
        aws_region: None,
        callers: AdmissionCallers::Anonymous,
        limits: Default::default(),
    }
}

/// The captured reviews' service accounts: `apps/s3-reader` with warrant's AWS and Azure
/// annotations (the capture's EKS and Azure Workload Identity annotations, prefix changed),
/// `apps/plain` with none.
fn injecting() -> Api {
    injecting_with(&warrant_testkit::INJECTED_ANNOTATIONS)
}

/// As [`injecting`], `apps/s3-reader` carrying `annotations`.
fn injecting_with(annotations: &[(&str, &str)]) -> Api {
    let policy = Policy::parse(POLICY, "policy.yaml").unwrap();
    let api = api_auth(|_, authz| {
        authz.policy = Some(PolicyFile::from_policy(policy, Path::new("policy.yaml")));
    });
    let mut account = record("a1b2c3d4-0000-4000-8000-000000000001");
    account.annotations = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    api.objects
        .put(Kind::ServiceAccount, "apps", "s3-reader", account);
    api.objects.put(
        Kind::ServiceAccount,
        "apps",
        "plain",
        record("a1b2c3d4-0000-4000-8000-000000000002"),
    );
    api.state.set_injection(settings());
    api
}

/// The server's metrics, as `/metrics` renders them.
fn metrics(api: &Api) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, api.state.registry()).unwrap();
    text
}

fn vector(name: &str) -> Value {
    let text = std::fs::read_to_string(format!("{VECTORS}/admissionreview-{name}.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// What the webhook answered: the response, and its patch decoded.
struct Answer {
    response: Value,
    patch: Option<Value>,
}

/// `body` posted to the webhook as kube-apiserver posts a review: no credentials, JSON.
async fn post(api: &Api, body: String) -> Reply {
    api.send(
        Request::builder()
            .method(Method::POST)
            .uri(warrant_proto::ADMISSION_PATH)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap(),
    )
    .await
}

async fn review(api: &Api, review: &Value) -> Answer {
    let reply = post(api, review.to_string()).await;
    assert_eq!(reply.code, StatusCode::OK, "{}", reply.text);
    assert_eq!(
        reply.json["apiVersion"], review["apiVersion"],
        "{}",
        reply.text
    );
    assert_eq!(reply.json["kind"], "AdmissionReview");
    let response = reply.json["response"].clone();
    assert_eq!(response["uid"], review["request"]["uid"], "{}", reply.text);
    let patch = response["patch"].as_str().map(|patch| {
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    });
    Answer { response, patch }
}

/// `pod` with `patch` applied by kubectl, as kube-apiserver applies it.
fn apply(pod: &Value, patch: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.json");
    std::fs::write(&file, pod.to_string()).unwrap();
    let out = warrant_testkit::tools::command("kubectl", "kubectl")
        .env("KUBECONFIG", dir.path().join("none"))
        .args(["patch", "--local", "--type=json", "-o", "json", "-f"])
        .arg(&file)
        .arg("-p")
        .arg(patch.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl patch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn expected_path(name: &str) -> PathBuf {
    Path::new(VECTORS)
        .join("expected")
        .join(format!("{name}.json"))
}

/// The review `name` is mutated into exactly `expected/<expected>.json`; a second review of
/// the mutated pod changes nothing. Returns the answer.
async fn mutated_exactly(api: &Api, name: &str, expected: &str) -> Answer {
    let sent = vector(name);
    let answer = review(api, &sent).await;
    assert_eq!(answer.response["allowed"], true, "{}", answer.response);
    let patch = answer.patch.clone().expect("a patch");
    let pod = apply(&sent["request"]["object"], &patch);
    let want: Value =
        serde_json::from_str(&std::fs::read_to_string(expected_path(expected)).unwrap()).unwrap();
    assert_eq!(pod, want, "the mutated pod of {name}");
    // Idempotent: the mutated pod, reviewed again (kube-apiserver's reinvocation), is admitted
    // as it is, without warnings.
    let mut again = sent.clone();
    again["request"]["object"] = pod;
    let second = review(api, &again).await;
    assert_eq!(second.response["allowed"], true);
    assert!(second.patch.is_none(), "a second patch: {:?}", second.patch);
    assert!(
        second.response.get("warnings").is_none(),
        "{}",
        second.response
    );
    answer
}

#[tokio::test]
async fn an_annotated_service_accounts_pod_gets_the_agent_and_each_clouds_variables() {
    let api = injecting();
    let answer = mutated_exactly(&api, "pod-annotated-sa", "annotated-sa-aws-azure").await;
    assert!(answer.response.get("warnings").is_none());
    let text = metrics(&api);
    assert!(
        text.contains("warrant_admission_reviews_total{result=\"mutated\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn google_gets_a_credential_configuration_from_the_pods_annotation() {
    let api = injecting_with(&[
        (
            "gcp.warrant.dev/workload-identity-provider",
            "projects/123456789012/locations/global/workloadIdentityPools/warrant/providers/cluster-a",
        ),
        (
            "gcp.warrant.dev/service-account-email",
            "s3-reader@demo-project.iam.gserviceaccount.com",
        ),
        ("warrant.dev/audience", "vault"),
        ("warrant.dev/token-expiration", "1800"),
    ]);
    mutated_exactly(&api, "pod-annotated-sa", "annotated-sa-google").await;
}

/// Init containers get the variables too (after the agent, which starts first); a container
/// that sets `AWS_ROLE_ARN` itself keeps its own and gets none of warrant's AWS variables,
/// with a warning; its other volumes and mounts stay as they are.
#[tokio::test]
async fn init_containers_and_a_containers_own_variable() {
    let api = injecting();
    let answer = mutated_exactly(
        &api,
        "pod-init-containers-env-volumes",
        "init-containers-env-volumes",
    )
    .await;
    assert_eq!(
        answer.response["warnings"],
        json!([
            "container \"app\" sets AWS_ROLE_ARN itself: warrant adds none of its AWS variables to it, and it keeps its own"
        ])
    );
}

/// A dry run (`kubectl create --dry-run=server`) is mutated exactly as the real request.
#[tokio::test]
async fn a_dry_run_is_mutated_the_same_way() {
    let api = injecting();
    let dry = review(&api, &vector("pod-dry-run")).await;
    let real = review(&api, &vector("pod-annotated-sa")).await;
    assert_eq!(dry.patch.unwrap(), real.patch.unwrap());
}

#[tokio::test]
async fn unannotated_and_opted_out_pods_are_admitted_unchanged() {
    let api = injecting();
    for name in ["pod-unannotated-sa", "pod-generate-name-opt-out"] {
        let answer = review(&api, &vector(name)).await;
        assert_eq!(answer.response["allowed"], true, "{name}");
        assert!(answer.patch.is_none(), "{name}: {:?}", answer.patch);
        assert!(answer.response.get("warnings").is_none(), "{name}");
    }
    // The opted-out pod's ServiceAccount is annotated: the label alone keeps it out.
    let sent = vector("pod-generate-name-opt-out");
    assert_eq!(
        sent["request"]["object"]["spec"]["serviceAccountName"],
        "s3-reader"
    );
}

/// A Windows pod (by `spec.os` or its node selector) is admitted unchanged, with a warning: the
/// agent's image is built for Linux, and a sidecar that cannot start would hold the pod back.
#[tokio::test]
async fn a_windows_pod_is_admitted_unchanged_with_a_warning() {
    let api = injecting();
    for (field, value) in [
        ("os", json!({"name": "windows"})),
        ("nodeSelector", json!({"kubernetes.io/os": "windows"})),
    ] {
        let mut sent = vector("pod-annotated-sa");
        sent["request"]["object"]["spec"][field] = value;
        let answer = review(&api, &sent).await;
        assert_eq!(answer.response["allowed"], true, "{field}");
        assert!(answer.patch.is_none(), "{field}");
        assert!(
            answer.response["warnings"][0]
                .as_str()
                .unwrap()
                .contains("runs on Linux only"),
            "{}",
            answer.response
        );
    }
    let mut linux = vector("pod-annotated-sa");
    linux["request"]["object"]["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
    assert!(review(&api, &linux).await.patch.is_some());
}

/// The review's wrapper (`response.uid`, `apiVersion` echoed) is kube's contract; a review of
/// `admission.k8s.io/v1beta1` is answered in `v1beta1`.
#[tokio::test]
async fn a_v1beta1_review_is_answered_in_v1beta1() {
    let api = injecting();
    let mut sent = vector("pod-annotated-sa");
    sent["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let answer = review(&api, &sent).await;
    assert!(answer.patch.is_some());
}

/// Reviews that are not a pod's CREATE are admitted unchanged: another kind (a webhook whose
/// rules send more than pods) with a warning saying so, an UPDATE, a subresource.
#[tokio::test]
async fn other_kinds_operations_and_subresources_pass_unchanged() {
    let api = injecting();
    let mut deployment = vector("pod-annotated-sa");
    deployment["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let answer = review(&api, &deployment).await;
    assert_eq!(answer.response["allowed"], true);
    assert!(answer.patch.is_none());
    assert!(
        answer.response["warnings"][0]
            .as_str()
            .unwrap()
            .contains("was sent a apps/v1, Kind=Deployment"),
        "{}",
        answer.response
    );
    for (field, value) in [
        ("operation", json!("UPDATE")),
        ("subResource", json!("ephemeralcontainers")),
    ] {
        let mut sent = vector("pod-annotated-sa");
        sent["request"][field] = value;
        let answer = review(&api, &sent).await;
        assert_eq!(answer.response["allowed"], true, "{field}");
        assert!(answer.patch.is_none(), "{field}");
    }
}

/// A malformed annotation refuses the pod with 400 and a message naming it; an audience the
/// policy does not allow, with 403, naming the annotation it came from.
#[tokio::test]
async fn bad_annotations_and_refused_audiences_refuse_the_pod_by_name() {
    for (annotations, code, names) in [
        (
            vec![(
                "aws.warrant.dev/role-arn",
                "arn:aws:iam::1111:role/s3-reader",
            )],
            400,
            "aws.warrant.dev/role-arn is \"arn:aws:iam::1111:role/s3-reader\", not an IAM role ARN",
        ),
        (
            vec![
                ("azure.warrant.dev/client-id", "s3-reader"),
                (
                    "azure.warrant.dev/tenant-id",
                    "55555555-6666-7777-8888-999999999999",
                ),
            ],
            400,
            "azure.warrant.dev/client-id is \"s3-reader\", not a UUID",
        ),
        (
            vec![
                (
                    "aws.warrant.dev/role-arn",
                    "arn:aws:iam::111122223333:role/s3-reader",
                ),
                ("aws.warrant.dev/audience", "s3"),
            ],
            403,
            "aws.warrant.dev/audience: warrant would refuse the token agent the token for \"s3\": serviceaccounts \"s3-reader\" is forbidden: User \"system:serviceaccount:apps:s3-reader\" cannot request a token for itself for the audience \"s3\": not a self-service audience",
        ),
        (
            vec![
                (
                    "aws.warrant.dev/role-arn",
                    "arn:aws:iam::111122223333:role/s3-reader",
                ),
                ("aws.warrant.dev/token-expiration", "86400"),
            ],
            403,
            "aws.warrant.dev/role-arn: warrant would refuse the token agent the token for \"sts.amazonaws.com\": serviceaccounts \"s3-reader\" is forbidden: User \"system:serviceaccount:apps:s3-reader\" cannot request a token for itself valid for 86400 seconds: self-service allows at most 7200",
        ),
    ] {
        let api = injecting_with(&annotations);
        let answer = review(&api, &vector("pod-annotated-sa")).await;
        let response = &answer.response;
        assert_eq!(response["allowed"], false, "{response}");
        assert!(answer.patch.is_none());
        assert_eq!(response["status"]["code"], code, "{response}");
        let message = response["status"]["message"].as_str().unwrap();
        assert!(message.contains(names), "{message}");
    }
}

/// Without a policy that lets the service account ask for itself, the agent would be refused:
/// so is the pod, saying what to allow.
#[tokio::test]
async fn a_pod_whose_agent_warrant_would_refuse_is_refused() {
    let api = api();
    let mut account = record("a1b2c3d4-0000-4000-8000-000000000001");
    account.annotations = vec![(
        "aws.warrant.dev/role-arn".to_owned(),
        "arn:aws:iam::111122223333:role/s3-reader".to_owned(),
    )];
    api.objects
        .put(Kind::ServiceAccount, "apps", "s3-reader", account);
    api.state.set_injection(settings());
    let answer = review(&api, &vector("pod-annotated-sa")).await;
    assert_eq!(answer.response["allowed"], false);
    assert_eq!(answer.response["status"]["code"], 403);
    let message = answer.response["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("warrant would refuse the token agent of this pod: serviceaccounts \"s3-reader\" is forbidden: User \"system:serviceaccount:apps:s3-reader\" cannot create resource \"serviceaccounts/token\""),
        "{message}"
    );
    // The question was about a request nobody made: no authorization decision is counted.
    let text = metrics(&api);
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("warrant_authorizations_total{") && !l.ends_with(" 0")),
        "{text}"
    );
}

/// A volume or container under warrant's names that warrant did not add, or a mount of
/// something else at its path, refuses the pod, naming it.
#[tokio::test]
async fn names_and_paths_warrant_needs_refuse_the_pod_when_taken() {
    let api = injecting();
    let base = vector("pod-annotated-sa");
    let mut volume = base.clone();
    volume["request"]["object"]["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "warrant-tokens", "hostPath": {"path": "/etc"}}));
    let mut container = base.clone();
    container["request"]["object"]["spec"]["initContainers"] =
        json!([{"name": "warrant-token-agent", "image": "mine"}]);
    for (sent, says) in [
        (
            volume,
            "a volume named \"warrant-tokens\" that warrant did not add",
        ),
        (
            container,
            "an init container named \"warrant-token-agent\" that warrant did not add",
        ),
    ] {
        let answer = review(&api, &sent).await;
        assert_eq!(answer.response["allowed"], false, "{says}");
        assert_eq!(answer.response["status"]["code"], 400);
        let message = answer.response["status"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    let mut sent = base.clone();
    sent["request"]["object"]["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "data", "mountPath": "/var/run/secrets/warrant.dev/tokens"}]);
    let answer = review(&api, &sent).await;
    let message = answer.response["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "container \"app\" mounts the volume \"data\" at /var/run/secrets/warrant.dev/tokens"
        ),
        "{message}"
    );
}

/// A review that is not one is answered with a 400 `Status` saying why, quoting nothing of
/// the body; kube-apiserver then applies the webhook's failurePolicy.
#[tokio::test]
async fn malformed_reviews_are_400s_never_panics() {
    let api = injecting();
    let without_request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
    let mut without_object = vector("pod-annotated-sa");
    without_object["request"]["object"] = Value::Null;
    let mut without_uid = vector("pod-annotated-sa");
    without_uid["request"]["uid"] = json!("");
    let mut other_version = vector("pod-annotated-sa");
    other_version["apiVersion"] = json!("admission.k8s.io/v2");
    let mut object_not_a_map = vector("pod-annotated-sa");
    object_not_a_map["request"]["object"] = json!(["s3-reader"]);
    let mut containers_not_a_list = vector("pod-annotated-sa");
    containers_not_a_list["request"]["object"]["spec"]["containers"] = json!("secret-value");
    for (body, says) in [
        ("{not json".to_owned(), "is not valid JSON"),
        ("[]".to_owned(), "must be a JSON object"),
        (without_request.to_string(), "has no request"),
        (without_object.to_string(), "request.object is missing"),
        (without_uid.to_string(), "request.uid is required"),
        (other_version.to_string(), "got apiVersion \"admission.k8s.io/v2\""),
        (object_not_a_map.to_string(), "request.object is missing or is not a pod"),
        (
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 7}}).to_string(),
            "does not match the expected object",
        ),
    ] {
        let reply = post(&api, body.clone()).await;
        assert_eq!(reply.code, StatusCode::BAD_REQUEST, "{body}: {}", reply.text);
        let message = reply.json["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    // Containers that are not a list: nothing to mount into, so nothing is added to them; the
    // pod gets the agent and kube-apiserver's own validation refuses the spec afterwards.
    let reply = post(&api, containers_not_a_list.to_string()).await;
    assert_eq!(reply.code, StatusCode::OK, "{}", reply.text);
    assert!(!reply.text.contains("secret-value"));
    let text = metrics(&api);
    assert!(
        text.contains("warrant_admission_reviews_total{result=\"error\"} 8"),
        "{text}"
    );
}

/// Injection off (no --injection-agent-image): a `Status` that says so, so kube-apiserver's
/// failurePolicy applies and its log names the cause.
#[tokio::test]
async fn a_server_without_injection_says_so() {
    let api = api();
    let reply = post(&api, vector("pod-annotated-sa").to_string()).await;
    assert_eq!(
        reply.code,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.text
    );
    assert!(
        reply.json["message"]
            .as_str()
            .unwrap()
            .contains("--injection-agent-image"),
        "{}",
        reply.text
    );
}

/// `injecting()` with `limits` in place of the defaults.
fn injecting_limited(limits: warrant_server::AdmissionLimits) -> Api {
    let api = injecting();
    api.state.set_injection(InjectionSettings {
        limits,
        ..settings()
    });
    api
}

/// The annotated pod's review with `count` containers, or init containers.
fn with_containers(field: &str, count: usize) -> Value {
    let mut review = vector("pod-annotated-sa");
    let containers: Vec<Value> = (0..count)
        .map(|i| json!({"name": format!("c{i}")}))
        .collect();
    review["request"]["object"]["spec"][field] = json!(containers);
    review
}

/// Issue 43: a 3 MB review of 150,000 containers for an annotated ServiceAccount made warrant
/// build a 184 MB patch. Now it is refused before it is parsed, with a short `Status` naming
/// the bound; a pod past the bound on containers or init containers is refused too, naming it,
/// and one at the bound is mutated.
#[tokio::test]
async fn an_oversized_review_is_refused_with_a_short_answer() {
    let api = injecting();
    // Under the byte bound: containers of one short name.
    let mut huge = vector("pod-annotated-sa");
    huge["request"]["object"]["spec"]["containers"] = json!(vec![json!({"name": "c"}); 150_000]);
    let huge = huge.to_string();
    assert!(huge.len() < 3 * 1024 * 1024, "{}", huge.len());
    let reply = post(&api, huge).await;
    assert_eq!(reply.code, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.text);
    assert!(reply.bytes.len() < 1024, "{} bytes", reply.bytes.len());
    assert_eq!(reply.json["reason"], "RequestEntityTooLarge");
    assert!(reply.text.contains("JSON values"), "{}", reply.text);

    let limits = warrant_server::AdmissionLimits {
        max_containers: 3,
        ..Default::default()
    };
    let api = injecting_limited(limits);
    for (field, says) in [
        ("containers", "the pod has 4 containers, more than the 3"),
        (
            "initContainers",
            "the pod has 4 init containers, more than the 3",
        ),
    ] {
        let reply = post(&api, with_containers(field, 4).to_string()).await;
        assert_eq!(reply.code, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.text);
        let message = reply.json["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        assert!(message.contains("--injection-max-containers"), "{message}");
    }
    let answer = review(&api, &with_containers("containers", 3)).await;
    assert!(answer.patch.is_some(), "{}", answer.response);

    // A review of more JSON values than the bound, however few bytes, is not parsed either.
    let many: Vec<Value> = (0..warrant_server::MAX_REVIEW_VALUES)
        .map(|_| json!(0))
        .collect();
    let mut review = vector("pod-annotated-sa");
    review["request"]["object"]["metadata"]["labels"] = json!({"many": many});
    let reply = post(&api, review.to_string()).await;
    assert_eq!(reply.code, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.text);
    assert!(reply.text.contains("JSON values"), "{}", reply.text);

    let text = metrics(&api);
    for limit in ["containers", "review_values"] {
        assert!(
            text.contains(&format!(
                "warrant_admission_limited_total{{limit=\"{limit}\"}}"
            )),
            "{text}"
        );
    }
}

/// The body and the patch have bounds of their own, each said in the refusal.
#[tokio::test]
async fn the_body_and_the_patch_are_bounded() {
    let limits = warrant_server::AdmissionLimits {
        max_review_bytes: 4096,
        max_patch_bytes: 1024,
        ..Default::default()
    };
    let api = injecting_limited(limits);
    let mut big = vector("pod-annotated-sa");
    big["request"]["object"]["metadata"]["annotations"] = json!({"note": "x".repeat(5000)});
    let reply = post(&api, big.to_string()).await;
    assert_eq!(reply.code, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.text);
    assert!(
        reply.text.contains("larger than 4096 bytes") && !reply.text.contains("xxxx"),
        "{}",
        reply.text
    );
    let reply = post(&api, vector("pod-annotated-sa").to_string()).await;
    assert_eq!(reply.code, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.text);
    assert!(
        reply.text.contains("--injection-max-patch-bytes"),
        "{}",
        reply.text
    );
}

/// Issue 43: a 3 MiB `apiVersion` was quoted whole in the answer (and the log). Now what a
/// message quotes of a review is cut to 256 characters; past the body's bound the review is
/// not read at all.
#[tokio::test]
async fn a_huge_value_is_quoted_cut() {
    let mut review = vector("pod-annotated-sa");
    review["apiVersion"] = json!("v".repeat(3 * 1024 * 1024));
    let reply = post(&injecting(), review.to_string()).await;
    assert_eq!(reply.code, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.text);
    assert!(reply.bytes.len() < 1024, "{} bytes", reply.bytes.len());

    let api = injecting_limited(warrant_server::AdmissionLimits {
        max_review_bytes: 4 * 1024 * 1024,
        ..Default::default()
    });
    let reply = post(&api, review.to_string()).await;
    assert_eq!(
        reply.code,
        StatusCode::BAD_REQUEST,
        "{}",
        reply.text.chars().take(200).collect::<String>()
    );
    assert!(reply.bytes.len() < 1024, "{} bytes", reply.bytes.len());
    let message = reply.json["message"].as_str().unwrap();
    let quoted = format!("\"{}\"…", "v".repeat(256));
    assert!(message.ends_with(&quoted), "{message}");

    // A kind is cut as well.
    let mut review = vector("pod-annotated-sa");
    review["request"]["kind"]["kind"] = json!("K".repeat(100_000));
    let answer = self::review(&api, &review).await;
    assert!(
        answer.response.to_string().len() < 1024,
        "{}",
        answer.response
    );
}

/// The reviews answered at once are bounded: one more is refused at once with a 429, and a
/// place freed is taken again.
#[tokio::test]
async fn reviews_in_flight_are_bounded() {
    let api = injecting_limited(warrant_server::AdmissionLimits {
        max_in_flight: 1,
        ..Default::default()
    });
    // A review whose body is still arriving holds its place.
    let (mut sender, receiver) =
        futures::channel::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
    let slow = Request::builder()
        .method(Method::POST)
        .uri(warrant_proto::ADMISSION_PATH)
        .header("content-type", "application/json")
        .body(axum::body::Body::from_stream(receiver))
        .unwrap();
    let body = vector("pod-annotated-sa").to_string();
    let others = async {
        let mut refused = None;
        for _ in 0..1000 {
            let reply = post(&api, body.clone()).await;
            if reply.code == StatusCode::TOO_MANY_REQUESTS {
                refused = Some(reply);
                break;
            }
            tokio::task::yield_now().await;
        }
        futures::SinkExt::send(&mut sender, Ok(body.clone().into()))
            .await
            .unwrap();
        sender.close_channel();
        refused.expect("the second review was answered while the first held the place")
    };
    let (first, refused) = tokio::join!(api.send(slow), others);
    assert!(
        refused.text.contains("--injection-max-reviews-in-flight"),
        "{}",
        refused.text
    );
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(first.code, StatusCode::OK, "{}", first.text);
    assert_eq!(post(&api, body).await.code, StatusCode::OK);
}

/// With `--injection-allowed-names`, a caller without one of those certificates is refused
/// before its review is read: anonymous 401, another user 403; the mode's gauge says who is
/// answered.
#[tokio::test]
async fn allowed_names_refuse_everyone_else() {
    let api = injecting();
    let anonymous_allowed = |api: &Api| {
        metrics(api)
            .lines()
            .find_map(|line| line.strip_prefix("warrant_admission_anonymous_allowed "))
            .map(str::to_owned)
    };
    assert_eq!(anonymous_allowed(&api).as_deref(), Some("1"));
    api.state.set_injection(InjectionSettings {
        callers: AdmissionCallers::ClientCertificates(vec!["kube-apiserver-admission".into()]),
        ..settings()
    });
    let reply = post(&api, vector("pod-annotated-sa").to_string()).await;
    assert_eq!(reply.code, StatusCode::UNAUTHORIZED, "{}", reply.text);
    let reply = api
        .post(warrant_proto::ADMISSION_PATH, vector("pod-annotated-sa"))
        .await;
    assert_eq!(reply.code, StatusCode::FORBIDDEN, "{}", reply.text);
    assert!(
        reply.text.contains("--injection-allowed-names"),
        "{}",
        reply.text
    );
    assert_eq!(anonymous_allowed(&api).as_deref(), Some("0"));
}
