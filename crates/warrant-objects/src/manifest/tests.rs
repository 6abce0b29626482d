use super::*;

fn entries(text: &str) -> Vec<Entry> {
    parse("objects.yaml", text).unwrap()
}

fn error(text: &str) -> String {
    parse("objects.yaml", text).unwrap_err().to_string()
}

fn find<'a>(entries: &'a [Entry], kind: Kind, name: &str) -> &'a Entry {
    entries
        .iter()
        .find(|e| e.kind == kind && e.name == name)
        .unwrap_or_else(|| panic!("{kind:?} {name} not found in {entries:?}"))
}

#[test]
fn multi_document_yaml_with_defaults() {
    let text = "\
# objects for the demo
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: app
  namespace: demo
  uid: 5b0c2c5e-0000-4000-8000-000000000001
---
apiVersion: v1
kind: Pod
metadata:
  name: app-0
spec:
  serviceAccount: legacy
---
apiVersion: v1
kind: Pod
metadata:
  name: bare
  namespace: demo
---
apiVersion: v1
kind: Node
metadata:
  name: node-1
  namespace: ignored
---
---
apiVersion: v1
kind: Secret
metadata:
  name: token
  namespace: demo
  deletionTimestamp: \"2027-01-15T10:00:00Z\"
type: Opaque
data:
  password: c2VjcmV0
stringData:
  other: plain
";
    let got = entries(text);
    assert_eq!(got.len(), 5);
    let sa = find(&got, Kind::ServiceAccount, "app");
    assert_eq!(sa.namespace, "demo");
    assert_eq!(
        sa.uid.as_deref(),
        Some("5b0c2c5e-0000-4000-8000-000000000001")
    );
    assert_eq!(sa.pod, None);

    // No namespace: `default`. Only the deprecated field: it stands in.
    let pod = find(&got, Kind::Pod, "app-0");
    assert_eq!(pod.namespace, "default");
    assert_eq!(pod.uid, None);
    let info = pod.pod.as_ref().unwrap();
    assert_eq!(info.service_account_name, "legacy");
    assert_eq!(info.node_name, "");

    // No service account at all: `default`, as admission sets.
    let bare = find(&got, Kind::Pod, "bare");
    assert_eq!(bare.pod.as_ref().unwrap().service_account_name, "default");

    // Nodes are cluster-scoped whatever the manifest says.
    assert_eq!(find(&got, Kind::Node, "node-1").namespace, "");

    let secret = find(&got, Kind::Secret, "token");
    assert_eq!(
        secret.deletion_timestamp,
        Some("2027-01-15T10:00:00Z".parse().unwrap())
    );
}

#[test]
fn service_account_name_wins_over_the_deprecated_field() {
    let got = entries(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n\
         spec: {serviceAccountName: new, serviceAccount: old, nodeName: n1}\n",
    );
    let info = find(&got, Kind::Pod, "p").pod.clone().unwrap();
    assert_eq!(info.service_account_name, "new");
    assert_eq!(info.node_name, "n1");
}

#[test]
fn projected_token_audiences_in_volume_order() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  volumes:
  - name: config
    configMap: {name: cfg}
  - name: vault
    projected:
      sources:
      - serviceAccountToken: {audience: vault, expirationSeconds: 600, path: token}
      - configMap: {name: ca}
      - serviceAccountToken: {path: api-token}
  - name: empty
    projected: {}
  - name: cloud
    projected:
      sources:
      - serviceAccountToken: {audience: "sts.amazonaws.com", path: token}
"#;
    let got = entries(text);
    let info = find(&got, Kind::Pod, "p").pod.clone().unwrap();
    assert_eq!(
        info.token_audiences,
        ["vault", "", "sts.amazonaws.com"].map(String::from)
    );
}

/// The shape `kubectl get pod,sa,secret -o yaml` prints: a List, keys in alphabetical order
/// (`items` before `kind`), managedFields, status and secret data included.
#[test]
fn kubectl_get_o_yaml_list() {
    let text = r#"apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      kubectl.kubernetes.io/restartedAt: "2025-01-01T00:00:00Z"
    creationTimestamp: "2025-06-01T12:00:00Z"
    generateName: web-7d4b9c-
    labels:
      abac.warrant.dev/team: blue
      app: web
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1:
        f:metadata:
          f:generateName: {}
          f:labels:
            .: {}
            f:app: {}
        f:spec:
          f:containers:
            k:{"name":"web"}:
              .: {}
              f:image: {}
      manager: kube-controller-manager
      operation: Update
      time: "2025-06-01T12:00:00Z"
    name: web-7d4b9c-abcde
    namespace: shop
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: ReplicaSet
      name: web-7d4b9c
      uid: 11111111-2222-4333-8444-555555555555
    resourceVersion: "4242"
    uid: 0d5e1f3a-9c1b-4b1e-8f0a-6a7b8c9d0e1f
  spec:
    containers:
    - image: nginx:1.27
      name: web
      volumeMounts:
      - mountPath: /var/run/secrets/kubernetes.io/serviceaccount
        name: kube-api-access-x7k2p
        readOnly: true
    nodeName: worker-2
    serviceAccount: web
    serviceAccountName: web
    volumes:
    - name: kube-api-access-x7k2p
      projected:
        defaultMode: 420
        sources:
        - serviceAccountToken:
            expirationSeconds: 3607
            path: token
        - configMap:
            items:
            - key: ca.crt
              path: ca.crt
            name: kube-root-ca.crt
  status:
    conditions:
    - lastProbeTime: null
      status: "True"
      type: Ready
    phase: Running
    podIP: 10.244.1.7
- apiVersion: v1
  kind: ServiceAccount
  metadata:
    annotations:
      aws.warrant.dev/role-arn: arn:aws:iam::111122223333:role/web
      eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/web
      kubectl.kubernetes.io/last-applied-configuration: |
        {"apiVersion":"v1","kind":"ServiceAccount"}
      warrant.dev/audience: vault
    creationTimestamp: "2025-06-01T11:00:00Z"
    name: web
    namespace: shop
    resourceVersion: "4000"
    uid: 7e6f5d4c-3b2a-4190-8f7e-6d5c4b3a2918
- apiVersion: v1
  data:
    password: c3VwZXJzZWNyZXQ=
  kind: Secret
  metadata:
    annotations:
      kubectl.kubernetes.io/last-applied-configuration: |
        {"data":{"password":"c3VwZXJzZWNyZXQ="}}
      warrant.dev/audience: not-kept
    name: db
    namespace: shop
    uid: aa5e1f3a-9c1b-4b1e-8f0a-6a7b8c9d0e1f
  type: Opaque
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
    namespace: shop
  spec:
    replicas: 2
    volumes: not a list of volumes
kind: List
metadata:
  resourceVersion: ""
"#;
    let got = entries(text);
    assert_eq!(got.len(), 3, "{got:?}");
    let pod = find(&got, Kind::Pod, "web-7d4b9c-abcde");
    assert_eq!(pod.namespace, "shop");
    assert_eq!(
        pod.uid.as_deref(),
        Some("0d5e1f3a-9c1b-4b1e-8f0a-6a7b8c9d0e1f")
    );
    assert_eq!(
        pod.pod,
        Some(PodInfo {
            service_account_name: "web".into(),
            node_name: "worker-2".into(),
            token_audiences: vec![String::new()],
            // Labels in warrant's domains only, as annotations.
            labels: vec![("abac.warrant.dev/team".into(), "blue".into())],
        })
    );
    assert_eq!(
        find(&got, Kind::Secret, "db").uid.as_deref(),
        Some("aa5e1f3a-9c1b-4b1e-8f0a-6a7b8c9d0e1f")
    );
    // A ServiceAccount keeps warrant's annotations, sorted, and nothing else; other kinds
    // keep none (the pod's restartedAt, the Secret's last-applied configuration).
    assert_eq!(
        find(&got, Kind::ServiceAccount, "web").annotations,
        [
            (
                "aws.warrant.dev/role-arn",
                "arn:aws:iam::111122223333:role/web"
            ),
            ("warrant.dev/audience", "vault"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
    assert!(find(&got, Kind::Secret, "db").annotations.is_empty());
    assert!(pod.annotations.is_empty());
}

/// The shape `kubectl get -o json` prints.
#[test]
fn kubectl_get_o_json_list() {
    let text = r#"{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "labels": {"kubernetes.io/hostname": "worker-2"},
                "name": "worker-2",
                "uid": "3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
            },
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {"nodeInfo": {"kubeletVersion": "v1.33.1"}}
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "job-\u0031",
                "namespace": "batch",
                "deletionTimestamp": "2025-06-01T12:00:30Z"
            },
            "spec": {
                "serviceAccountName": "runner",
                "volumes": [{"name": "t", "projected": {"sources": [
                    {"serviceAccountToken": {"audience": "vault", "path": "t"}}
                ]}}]
            }
        },
        {
            "apiVersion": "v1",
            "data": {"token": "ZXhhbXBsZQ=="},
            "kind": "Secret",
            "metadata": {"name": "tok", "namespace": "batch"},
            "type": "kubernetes.io/service-account-token"
        }
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}
"#;
    let got = entries(text);
    assert_eq!(got.len(), 3);
    let node = find(&got, Kind::Node, "worker-2");
    assert_eq!(node.namespace, "");
    assert_eq!(
        node.uid.as_deref(),
        Some("3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f")
    );
    let pod = find(&got, Kind::Pod, "job-1");
    assert_eq!(pod.namespace, "batch");
    assert_eq!(
        pod.deletion_timestamp,
        Some("2025-06-01T12:00:30Z".parse().unwrap())
    );
    let info = pod.pod.clone().unwrap();
    assert_eq!(info.service_account_name, "runner");
    assert_eq!(info.token_audiences, ["vault"]);
    assert_eq!(find(&got, Kind::Secret, "tok").namespace, "batch");
}

#[test]
fn a_single_json_object() {
    let got = entries(
        "{\"apiVersion\": \"v1\", \"kind\": \"ServiceAccount\", \"metadata\": {\"name\": \"a\"}}",
    );
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].namespace, "default");
}

#[test]
fn other_kinds_and_versions_are_skipped() {
    let text = "\
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  template:
    spec: {serviceAccountName: web}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {a: b}
---
apiVersion: example.com/v1
kind: Pod
metadata: {name: not-a-core-pod}
---
kind: Secret
metadata: {name: no-api-version}
---
apiVersion: v2
kind: List
items:
- apiVersion: v1
  kind: ServiceAccount
  metadata: {name: in-a-strange-list}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kept}
";
    let (got, logs) = capture_logs(|| entries(text));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].name, "kept");
    // Each skipped object is named in a warning, with where and what it is.
    let expected = [
        r#"line=1 kind="Namespace" api_version="v1" object=demo"#,
        r#"line=5 kind="Deployment" api_version="apps/v1" object=demo/web"#,
        r#"line=12 kind="ConfigMap" api_version="v1" object=cfg"#,
        r#"line=17 kind="Pod" api_version="example.com/v1" object=not-a-core-pod"#,
        r#"line=21 kind="Secret" api_version="" object=no-api-version"#,
        r#"line=24 api_version="v2""#,
    ];
    assert_eq!(logs.len(), expected.len(), "{logs:#?}");
    for (log, want) in logs.iter().zip(expected) {
        assert!(log.starts_with("WARN "), "{log}");
        assert!(log.contains(want), "{log}\nwant: {want}");
    }
}

/// Runs `f` and returns what it logged, one line per event: level, then the fields.
fn capture_logs<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    use std::fmt::Write as _;
    use std::sync::Mutex;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata};

    #[derive(Default)]
    struct Capture(Mutex<Vec<String>>);
    struct Line(String);
    impl Visit for Line {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
    impl tracing::Subscriber for &'static Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut line = Line(event.metadata().level().to_string());
            event.record(&mut line);
            self.0.lock().unwrap().push(line.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    let capture: &'static Capture = Box::leak(Box::default());
    let out = tracing::subscriber::with_default(capture, f);
    let logs = capture.0.lock().unwrap().clone();
    (out, logs)
}

#[test]
fn empty_files_and_empty_documents_hold_nothing() {
    assert_eq!(entries(""), []);
    assert_eq!(entries("# nothing yet\n---\n---\n"), []);
    assert_eq!(entries("apiVersion: v1\nkind: List\nitems: []\n"), []);
}

#[test]
fn every_error_names_its_line() {
    let cases = [
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n",
            "objects.yaml: line 5: object has no kind",
        ),
        (
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n- apiVersion: v1\n  metadata: {name: b}\n",
            "objects.yaml: line 7: object has no kind",
        ),
        (
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  namespace: demo\n",
            "objects.yaml: line 2: Pod has no metadata.name",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: \"\"\n",
            "objects.yaml: line 1: Secret has no metadata.name",
        ),
        (
            "apiVersion: v1\nkind: Deployment\nspec: {}\n",
            "objects.yaml: line 1: Deployment has no metadata.name",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-0\n  namespace: demo\n  deletionTimestamp: yesterday\n",
            "objects.yaml: line 6: Pod \"demo/app-0\": metadata.deletionTimestamp \"yesterday\" is not an RFC 3339 time: ",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  deletionTimestamp: \"2025-13-01T00:00:00Z\"\n",
            "objects.yaml: line 5: Node \"n1\": metadata.deletionTimestamp \"2025-13-01T00:00:00Z\" is not an RFC 3339 time: ",
        ),
        (
            "# pods\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: app-0\n  namespace: demo\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-1\n  namespace: demo\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-0\n  namespace: demo\n",
            "objects.yaml: line 15: Pod \"demo/app-0\" appears twice (first at line 3)",
        ),
        (
            // `default` is the namespace either way.
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n\
             apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ServiceAccount\n  metadata: {name: a, namespace: default}\n",
            "objects.yaml: line 8: ServiceAccount \"default/a\" appears twice (first at line 1)",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n   bad: indent\n",
            "objects.yaml: line 5, column 7: mapping values are not allowed in this context",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {first: a}\n",
            "objects.yaml: line 4, column 9: expected string scalar",
        ),
        (
            "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"a\"\n",
            "objects.yaml: line 4, column 15: unclosed bracket '{'",
        ),
        (
            "- apiVersion: v1\n  kind: Pod\n",
            "objects.yaml: line 1, column 1: expected mapping start",
        ),
    ];
    for (text, want) in cases {
        let got = error(text);
        if want.ends_with(": ") {
            // The rest is jiff's explanation.
            assert!(
                got.starts_with(want),
                "{text:?}\n got: {got}\nwant: {want}…"
            );
        } else {
            assert_eq!(got, want, "{text:?}");
        }
    }
}

#[test]
fn errors_never_quote_secret_data() {
    let head = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n";
    let cases = [
        "data:\n  password: hunter2: oops\n",
        "data:\n  password: \"hunter2\\q\"\n",
        "data:\n  password: hunter2\n  password: hunter2\n",
        "data:\n  password: 'hunter2\n",
        "data:\n  password: *hunter2\n",
        "data:\n  password: [hunter2\n",
        "data:\n  password: {hunter2: x, hunter2: y}\n",
        "stringData:\n  password: |\n   hunter2\n  bad\n",
        "data:\n\tpassword: hunter2\n",
    ];
    for case in cases {
        let got = error(&format!("{head}{case}"));
        assert!(got.starts_with("objects.yaml: line "), "{got}");
        assert!(!got.contains("hunter2"), "{got}");
    }
    assert_eq!(
        error(&format!("{head}{}", cases[2])),
        "objects.yaml: line 6, column 3: duplicate mapping key"
    );
}
