//! The JSON Patch (RFC 6902) that gives a pod its [`Plan`]: the agent as a native sidecar (an
//! init container with `restartPolicy: Always`, after the pod's own native sidecars and before
//! its other init containers: [`placement`](super::placement)), the shared volume, and each
//! container's mounts and variables, but those of `warrant.dev/skip-containers`. Pure: the pod
//! as kube-apiserver sent it in, the operations out.
//!
//! The patch is minimal (one `add` per thing added, nothing replaced) and idempotent: what a
//! pod already has, from an earlier mutation of this pod (kube-apiserver's reinvocation) or
//! from its author, is not added again, so a pod mutated twice is unchanged. Decisions, said
//! in docs/injection.md:
//! - a container that sets a variable of a group itself keeps its own and gets none of that
//!   group (with a warning for an identity: its choice wins, and nothing mixes its identity
//!   with warrant's);
//! - a volume or container with one of warrant's names that warrant did not add, or a mount
//!   of something else at warrant's paths, refuses the pod, naming it: warrant cannot inject
//!   without them, and guessing would hand a pod someone else's files;
//! - "warrant added it" is decided by content, never by name: the agent's container must run
//!   warrant's image with warrant's arguments, environment, mounts and security context (the
//!   fields that decide what runs and what it reads and writes; those kube-apiserver defaults
//!   or that only size it are not compared), each volume must be the source warrant writes
//!   (the tokens' `emptyDir` in memory, the pod token projected for the token agent's
//!   audience), and a container's mount of warrant's volumes must be warrant's, read-only at
//!   warrant's path. A look-alike is refused, saying what differs: taking it as warrant's would
//!   let a disk-backed volume hold the tokens, another program hold the pod's token, or a
//!   container write the files the agent keeps.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};
use warrant_proto::agent_contract;

use super::names::{
    AGENT, GCP_CREDENTIALS, GOOGLE_DIR, GOOGLE_FILE, GOOGLE_VOLUME, KUBE_TOKEN_DIR,
    KUBE_TOKEN_VOLUME, TOKENS_DIR, TOKENS_VOLUME,
};
use super::placement;
use super::plan::{InjectionSettings, Plan, Refusal};

/// The lifetime of the pod's kube token the agent authenticates with: the kubelet refreshes
/// it at 80 %, and 3600 (not 3607) keeps kube-apiserver from extending it to a year (which it
/// does only for its API audiences anyway).
const KUBE_TOKEN_SECONDS: i64 = 3600;
/// The warrant binary in warrant's image (the probes' command).
const BINARY: &str = "/warrant";

/// The operations, and warnings for the client.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Mutation {
    pub(crate) ops: Vec<Value>,
    pub(crate) warnings: Vec<String>,
}

/// The mutation that gives `pod` its `plan`.
pub(crate) fn mutate(
    pod: &Value,
    plan: &Plan,
    settings: &InjectionSettings,
) -> Result<Mutation, Refusal> {
    let mut mutation = Mutation::default();
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let list = |field: &str| {
        spec.get(field)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let init_containers = list("initContainers");
    let containers = list("containers");
    let volumes = list("volumes");

    if containers.iter().any(|c| name_of(c) == AGENT) {
        return Err(reserved(
            "a container",
            AGENT,
            "warrant adds it as an init container",
        ));
    }
    let skipped = placement::skipped(
        pod,
        init_containers
            .iter()
            .chain(containers)
            .map(name_of)
            .filter(|name| *name != AGENT),
    )?;
    let agent = agent(plan, settings);
    let agent_present = agent_present(init_containers, &agent)?;
    let google = plan.google_credentials.as_deref();
    let missing_volumes = missing_volumes(volumes, settings, google.is_some())?;
    if let Some(credentials) = google {
        mutation
            .ops
            .extend(credentials_annotation(pod, credentials));
    }

    // Every container but the agent (a container by its name was refused above).
    let inits = init_containers
        .iter()
        .enumerate()
        .map(|(i, c)| ("initContainers", i, c));
    let apps = containers
        .iter()
        .enumerate()
        .map(|(i, c)| ("containers", i, c));
    for (field, index, container) in inits.chain(apps).filter(|(_, _, c)| name_of(c) != AGENT) {
        let skip = skipped.contains(name_of(container));
        consumer(&mut mutation, field, index, container, plan, skip)?;
    }

    append(&mut mutation.ops, spec, "/spec", "volumes", missing_volumes);
    if !agent_present {
        add_agent(&mut mutation, spec, agent, &skipped);
    }
    Ok(mutation)
}

/// Whether the pod already has the agent among its `init_containers`: an init container by
/// its name that is not `agent` as warrant writes it is refused.
fn agent_present(init_containers: &[Value], agent: &Value) -> Result<bool, Refusal> {
    let Some(existing) = init_containers.iter().find(|c| name_of(c) == AGENT) else {
        return Ok(false);
    };
    match agent_difference(existing, agent) {
        None => Ok(true),
        Some(field) => Err(reserved(
            "an init container",
            AGENT,
            &format!("its {field} is not what warrant writes"),
        )),
    }
}

/// The volumes warrant needs (Google's with `google`) that the pod's `volumes` lack; one by
/// warrant's name with another source is refused.
fn missing_volumes(
    volumes: &[Value],
    settings: &InjectionSettings,
    google: bool,
) -> Result<Vec<Value>, Refusal> {
    let mut wanted: Vec<(&str, Value)> = vec![
        (TOKENS_VOLUME, tokens_volume()),
        (
            KUBE_TOKEN_VOLUME,
            kube_token_volume(&settings.agent_audience),
        ),
    ];
    if google {
        wanted.push((GOOGLE_VOLUME, google_volume()));
    }
    let mut missing_volumes = Vec::new();
    for (name, volume) in wanted {
        match volumes.iter().find(|v| name_of(v) == name) {
            Some(existing) if same_volume(existing, &volume) => {}
            Some(_) => {
                return Err(reserved(
                    "a volume",
                    name,
                    "its source is not the one warrant writes",
                ));
            }
            None => missing_volumes.push(volume),
        }
    }
    Ok(missing_volumes)
}

/// The operation that sets the pod's Google credentials annotation to `credentials`, if it
/// does not say so already.
fn credentials_annotation(pod: &Value, credentials: &str) -> Option<Value> {
    let annotations = pod.pointer("/metadata/annotations");
    match annotations.and_then(|a| a.get(GCP_CREDENTIALS)) {
        Some(Value::String(existing)) if existing == credentials => None,
        Some(_) => Some(json!({
            "op": "replace",
            "path": format!("/metadata/annotations/{}", pointer_escape(GCP_CREDENTIALS)),
            "value": credentials,
        })),
        None if annotations.is_some_and(Value::is_object) => Some(json!({
            "op": "add",
            "path": format!("/metadata/annotations/{}", pointer_escape(GCP_CREDENTIALS)),
            "value": credentials,
        })),
        None => Some(json!({
            "op": "add",
            "path": "/metadata/annotations",
            "value": {GCP_CREDENTIALS: credentials},
        })),
    }
}

/// Adds the agent at its place among the init containers (a list of its own if the pod has
/// none), warning of those that run before it.
fn add_agent(mutation: &mut Mutation, spec: &Value, agent: Value, skipped: &BTreeSet<String>) {
    match spec.get("initContainers").and_then(Value::as_array) {
        Some(init_containers) => {
            // Last: the operations before it name the init containers by their index without it.
            let at = placement::agent_index(init_containers);
            let ahead = init_containers.get(..at).unwrap_or_default();
            mutation
                .warnings
                .extend(placement::run_before_agent(ahead, skipped));
            mutation.ops.push(
                json!({"op": "add", "path": format!("/spec/initContainers/{at}"), "value": agent}),
            );
        }
        None => mutation
            .ops
            .push(json!({"op": "add", "path": "/spec/initContainers", "value": [agent]})),
    }
}

/// One consumer container's mounts and variables (`field` is `containers` or
/// `initContainers`; `index` its place there before the agent is inserted); with `skip` (the
/// pod's `warrant.dev/skip-containers` names it), none, but a mount of warrant's volumes it
/// has is still checked: a skipped container may not write the tokens either.
fn consumer(
    mutation: &mut Mutation,
    field: &str,
    index: usize,
    container: &Value,
    plan: &Plan,
    skip: bool,
) -> Result<(), Refusal> {
    let name = name_of(container);
    let mounts = container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let new_mounts = new_mounts(name, mounts, plan, skip)?;
    if skip {
        return Ok(());
    }
    // A container that already has warrant's mount was mutated before: its variables are
    // warrant's, not its own.
    let mutated_before = mounts.iter().any(|m| name_of(m) == TOKENS_VOLUME);
    let env = container
        .get("env")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut new_env = Vec::new();
    for group in &plan.groups {
        let own = group
            .vars
            .iter()
            .find(|(var, _)| env.iter().any(|e| name_of(e) == *var));
        match own {
            Some((var, _)) => {
                if group.identity && !mutated_before {
                    mutation.warnings.push(format!(
                        "container {} sets {var} itself: warrant adds none of its {} variables to it, and it keeps its own",
                        warrant_token::quote_value(name),
                        group.cloud
                    ));
                }
            }
            None => new_env.extend(
                group
                    .vars
                    .iter()
                    .map(|(var, value)| json!({"name": var, "value": value})),
            ),
        }
    }
    let at = format!("/spec/{field}/{index}");
    append(&mut mutation.ops, container, &at, "env", new_env);
    append(
        &mut mutation.ops,
        container,
        &at,
        "volumeMounts",
        new_mounts,
    );
    Ok(())
}

/// The mounts of warrant's volumes container `name` lacks (none with `skip`); one of them
/// mounted otherwise than warrant mounts it, or another volume at warrant's path, is refused.
fn new_mounts(
    name: &str,
    mounts: &[Value],
    plan: &Plan,
    skip: bool,
) -> Result<Vec<Value>, Refusal> {
    let mut wanted = vec![(TOKENS_VOLUME, TOKENS_DIR)];
    if plan.google_credentials.is_some() {
        wanted.push((GOOGLE_VOLUME, GOOGLE_DIR));
    }
    let mut new_mounts = Vec::new();
    for (volume, path) in wanted {
        if let Some(mount) = mounts.iter().find(|m| name_of(m) == volume) {
            if !is_consumer_mount(mount, path) {
                return Err(Refusal::bad(format!(
                    "container {} mounts warrant's volume {volume} itself, not read-only at {path} as warrant mounts it: remove that mount, or opt the pod out with the label warrant.dev/inject=false",
                    warrant_token::go_quote(name),
                )));
            }
            continue;
        }
        if skip {
            continue;
        }
        if let Some(other) = mounts
            .iter()
            .find(|m| m.get("mountPath").and_then(Value::as_str) == Some(path))
        {
            return Err(Refusal::bad(format!(
                "container {} mounts the volume {} at {path}, where warrant mounts its {volume}: mount it elsewhere, or opt the pod out with the label warrant.dev/inject=false",
                warrant_token::quote_value(name),
                warrant_token::quote_value(name_of(other)),
            )));
        }
        new_mounts.push(json!({"name": volume, "mountPath": path, "readOnly": true}));
    }
    Ok(new_mounts)
}

/// `add` operations for `items` at the end of `object`'s array `field` (at `at`), or one that
/// makes the array when there is none.
fn append(ops: &mut Vec<Value>, object: &Value, at: &str, field: &str, items: Vec<Value>) {
    if items.is_empty() {
        return;
    }
    if object.get(field).is_some_and(Value::is_array) {
        ops.extend(
            items
                .into_iter()
                .map(|item| json!({"op": "add", "path": format!("{at}/{field}/-"), "value": item})),
        );
    } else {
        ops.push(json!({"op": "add", "path": format!("{at}/{field}"), "value": items}));
    }
}

fn name_of(object: &Value) -> &str {
    object
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The fields of the agent's container compared with warrant's, as JSON pointers: what runs
/// (image, command, arguments, working directory, hooks, probes' commands), with what
/// (environment, mounts, devices, security context) and how it restarts. Not compared: what
/// kube-apiserver defaults (`imagePullPolicy`, `terminationMessagePath`, probe timings) and
/// what only sizes or schedules it (`resources`, which a LimitRange or an autoscaler may set).
const AGENT_FIELDS: [&str; 15] = [
    "/image",
    "/command",
    "/args",
    "/workingDir",
    "/env",
    "/envFrom",
    "/volumeMounts",
    "/volumeDevices",
    "/lifecycle",
    "/restartPolicy",
    "/securityContext",
    "/startupProbe/exec",
    "/readinessProbe/exec",
    "/livenessProbe",
    "/stdin",
];

/// The first field (of [`AGENT_FIELDS`]) in which an init container under the agent's name
/// differs from the agent warrant writes, `want`; `None` when it is warrant's.
fn agent_difference(existing: &Value, want: &Value) -> Option<&'static str> {
    AGENT_FIELDS
        .into_iter()
        .find(|field| present(existing.pointer(field)) != present(want.pointer(field)))
        .map(|field| field.trim_start_matches('/'))
}

/// A field's value, with absent, `null`, `false` and empty taken as one (kube-apiserver
/// treats them alike).
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| match v {
        Value::Null | Value::Bool(false) => false,
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        _ => true,
    })
}

/// Whether an existing volume is the one warrant writes under its name: nothing but the name
/// and warrant's source, and that source as warrant writes it. Fields kube-apiserver defaults
/// (a projected or downward API volume's `defaultMode`, a field reference's `apiVersion`) are
/// left out of the comparison; the rest (an `emptyDir`'s medium and size, the projected
/// token's audience, lifetime and path, the downward API's item) must be warrant's.
fn same_volume(existing: &Value, wanted: &Value) -> bool {
    let Some((kind, want)) = ["emptyDir", "projected", "downwardAPI"]
        .into_iter()
        .find_map(|kind| wanted.get(kind).map(|want| (kind, want)))
    else {
        return false;
    };
    let Value::Object(fields) = existing else {
        return false;
    };
    if fields.keys().any(|key| key != "name" && key != kind) {
        return false;
    }
    let Some(have) = existing.get(kind) else {
        return false;
    };
    match kind {
        "emptyDir" => have == want,
        "projected" => have.get("sources") == want.get("sources"),
        _ => {
            let items = |source: &Value| {
                let mut items = source.get("items").cloned().unwrap_or(Value::Null);
                for item in items.as_array_mut().into_iter().flatten() {
                    if let Some(Value::Object(field)) = item.get_mut("fieldRef")
                        && field.get("apiVersion").and_then(Value::as_str) == Some("v1")
                    {
                        field.remove("apiVersion");
                    }
                }
                items
            };
            items(have) == items(want)
        }
    }
}

/// Whether a container's existing mount of one of warrant's volumes is the one warrant adds:
/// read-only, at warrant's path, the whole volume.
fn is_consumer_mount(mount: &Value, path: &str) -> bool {
    mount.get("mountPath").and_then(Value::as_str) == Some(path)
        && mount.get("readOnly").and_then(Value::as_bool) == Some(true)
        && present(mount.get("subPath")).is_none()
        && present(mount.get("subPathExpr")).is_none()
}

fn reserved(what: &str, name: &str, why: &str) -> Refusal {
    Refusal::bad(format!(
        "the pod has {what} named {} that warrant did not add ({why}); warrant injects its token agent under that name: rename yours, or opt the pod out with the label warrant.dev/inject=false",
        warrant_token::quote_value(name)
    ))
}

/// JSON Pointer's escaping of a key (RFC 6901).
fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn tokens_volume() -> Value {
    json!({"name": TOKENS_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
}

/// The pod's own token for the agent, projected for the token agent's audience (warrant's,
/// `--token-agent-audience`), never for kube-apiserver's: the agent needs it only to prove to
/// warrant that it is the pod, and a token kube-apiserver would accept would hand warrant, and
/// whatever it receives, a credential for the cluster's API as every injected service account.
fn kube_token_volume(audience: &str) -> Value {
    json!({
        "name": KUBE_TOKEN_VOLUME,
        "projected": {"sources": [{"serviceAccountToken": {
            "audience": audience,
            "path": "token",
            "expirationSeconds": KUBE_TOKEN_SECONDS,
        }}]},
    })
}

fn google_volume() -> Value {
    json!({
        "name": GOOGLE_VOLUME,
        "downwardAPI": {"items": [{
            "path": GOOGLE_FILE,
            "fieldRef": {"fieldPath": format!("metadata.annotations['{GCP_CREDENTIALS}']")},
        }]},
    })
}

/// The agent: warrant's own image, run as a native sidecar; configured through its
/// environment, so the probes (`warrant token-agent --check`, run in the container) see the
/// same configuration.
fn agent(plan: &Plan, settings: &InjectionSettings) -> Value {
    use agent_contract::{
        WARRANT_CA_DATA, WARRANT_KUBE_TOKEN_FILE, WARRANT_POD_NAME, WARRANT_POD_UID,
        WARRANT_TOKEN_EXPIRATION_SECONDS, WARRANT_TOKENS, WARRANT_URL,
    };
    let tokens: Vec<String> = plan
        .tokens
        .iter()
        .map(|t| agent_contract::token(&t.path(), &t.audience))
        .collect();
    let tokens = tokens.join(&agent_contract::TOKENS_DELIMITER.to_string());
    let field = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
    let mut env = vec![json!({"name": WARRANT_URL, "value": settings.warrant_url})];
    if let Some(ca) = &settings.ca_pem {
        env.push(json!({"name": WARRANT_CA_DATA, "value": ca}));
    }
    env.extend([
        json!({"name": WARRANT_KUBE_TOKEN_FILE, "value": format!("{KUBE_TOKEN_DIR}/token")}),
        json!({"name": WARRANT_POD_NAME, "valueFrom": field("metadata.name")}),
        json!({"name": WARRANT_POD_UID, "valueFrom": field("metadata.uid")}),
        json!({"name": WARRANT_TOKENS, "value": tokens}),
        json!({"name": WARRANT_TOKEN_EXPIRATION_SECONDS, "value": plan.expiration_seconds.to_string()}),
    ]);
    let check_flag = format!("--{}", agent_contract::CHECK_FLAG);
    let check = json!({"exec": {"command": [BINARY, agent_contract::COMMAND, check_flag]}});
    let mut startup = check.clone();
    let mut readiness = check;
    if let (Value::Object(startup), Value::Object(readiness)) = (&mut startup, &mut readiness) {
        // The app containers start once the first tokens are written (the agent's own backoff
        // retries within this; past it the kubelet restarts the agent).
        startup.extend(Map::from_iter([
            ("periodSeconds".to_owned(), json!(1)),
            ("failureThreshold".to_owned(), json!(300)),
        ]));
        readiness.insert("periodSeconds".to_owned(), json!(10));
    }
    json!({
        "name": AGENT,
        "image": settings.agent_image,
        "args": [agent_contract::COMMAND],
        "env": env,
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        "volumeMounts": [
            {"name": TOKENS_VOLUME, "mountPath": TOKENS_DIR},
            {"name": KUBE_TOKEN_VOLUME, "mountPath": KUBE_TOKEN_DIR, "readOnly": true},
        ],
        "startupProbe": startup,
        "readinessProbe": readiness,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "restartPolicy": "Always",
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::names;
    use crate::admission::plan::{self, tests::settings};

    /// A pod with none of the lists warrant appends to gets each made, with one `add` each;
    /// without a CA bundle the agent trusts the system's roots (no `WARRANT_CA_DATA`).
    #[test]
    fn a_bare_pod_gets_each_list_made() {
        let annotations = vec![(
            names::AWS_ROLE_ARN.to_owned(),
            "arn:aws:iam::111122223333:role/r".to_owned(),
        )];
        let plan = plan::plan(&annotations, &settings()).unwrap().unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        let mutation = mutate(&pod, &plan, &settings()).unwrap();
        let paths: Vec<&str> = mutation
            .ops
            .iter()
            .map(|op| op["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "/spec/containers/0/env",
                "/spec/containers/0/volumeMounts",
                "/spec/volumes",
                "/spec/initContainers"
            ]
        );
        assert!(mutation.ops.iter().all(|op| op["op"] == "add"));
        let agent = &mutation.ops[3]["value"][0];
        assert!(
            agent["env"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e["name"] != "WARRANT_CA_DATA")
        );
        assert!(mutation.warnings.is_empty());
    }

    fn aws_plan() -> Plan {
        let annotations = vec![(
            names::AWS_ROLE_ARN.to_owned(),
            "arn:aws:iam::111122223333:role/r".to_owned(),
        )];
        plan::plan(&annotations, &settings()).unwrap().unwrap()
    }

    /// The pod as kube-apiserver would hold it once `pod`'s mutation is applied (the adds
    /// warrant makes: appended or made lists, the agent first).
    fn mutated(pod: &Value) -> Value {
        let mutation = mutate(pod, &aws_plan(), &settings()).unwrap();
        let mut pod = pod.clone();
        for op in &mutation.ops {
            let path = op["path"].as_str().unwrap();
            let (parent, last) = path.rsplit_once('/').unwrap();
            let target = pod.pointer_mut(parent).unwrap();
            match (target, last) {
                (Value::Array(items), "-") => items.push(op["value"].clone()),
                (Value::Array(items), index) => {
                    items.insert(index.parse().unwrap(), op["value"].clone());
                }
                (Value::Object(map), key) => {
                    map.insert(key.to_owned(), op["value"].clone());
                }
                (other, _) => panic!("{path} into {other}"),
            }
        }
        pod
    }

    fn pod() -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
    }

    /// The agent goes after the pod's native sidecars (a mesh's proxy) and before the init
    /// containers that follow them, the one ahead of them named in a warning; the containers
    /// `warrant.dev/skip-containers` names get nothing, yet may not mount the tokens writable;
    /// a second call patches nothing.
    #[test]
    fn the_agent_follows_native_sidecars_and_skipped_containers_get_nothing() {
        let pod = json!({
            "metadata": {"name": "p", "annotations": {placement::SKIP_CONTAINERS: "istio-proxy, cache"}},
            "spec": {
                "initContainers": [
                    {"name": "istio-validation"},
                    {"name": "istio-proxy", "restartPolicy": "Always"},
                    {"name": "migrate"},
                ],
                "containers": [{"name": "app"}, {"name": "cache"}],
            },
        });
        let injected = mutated(&pod);
        let names: Vec<&str> = injected["spec"]["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["istio-validation", "istio-proxy", AGENT, "migrate"]);
        for (field, index, injected_too) in [
            ("initContainers", 0, true),
            ("initContainers", 1, false),
            ("initContainers", 3, true),
            ("containers", 0, true),
            ("containers", 1, false),
        ] {
            let container = &injected["spec"][field][index];
            let got = ["env", "volumeMounts"].map(|list| container.get(list).is_some());
            assert_eq!(got, [injected_too; 2], "{container}");
        }
        let warnings = mutate(&pod, &aws_plan(), &settings()).unwrap().warnings;
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("init container \"istio-validation\" runs before"),
            "{warnings:?}"
        );
        assert_eq!(
            mutate(&injected, &aws_plan(), &settings()).unwrap(),
            Mutation::default()
        );
        let mut planted = injected.clone();
        planted["spec"]["containers"][1]["volumeMounts"] =
            json!([{"name": TOKENS_VOLUME, "mountPath": "/tokens"}]);
        let refusal = mutate(&planted, &aws_plan(), &settings()).unwrap_err();
        assert!(
            refusal
                .message
                .contains("container \"cache\" mounts warrant's volume warrant-tokens itself"),
            "{}",
            refusal.message
        );
    }

    /// Every token the patch projects names the token agent's audience: the agent holds no
    /// token for kube-apiserver's API, a pod that opted out of its API token
    /// (`automountServiceAccountToken: false`) included.
    #[test]
    fn the_agents_pod_token_is_for_warrants_audience_only() {
        for automount in [None, Some(false)] {
            let mut pod = pod();
            if let Some(automount) = automount {
                pod["spec"]["automountServiceAccountToken"] = json!(automount);
            }
            let pod = mutated(&pod);
            let projected: Vec<&Value> = pod["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v.pointer("/projected/sources"))
                .flat_map(|sources| sources.as_array().unwrap())
                .filter_map(|source| source.get("serviceAccountToken"))
                .collect();
            assert_eq!(projected.len(), 1, "{pod}");
            assert_eq!(
                projected[0]["audience"],
                json!(names::TOKEN_AGENT_DEFAULT_AUDIENCE),
                "{automount:?}"
            );
        }
    }

    /// What warrant added passes as warrant's (a second call patches nothing), even with the
    /// fields kube-apiserver defaults; a look-alike under warrant's names does not: another
    /// image, a command, another variable, a disk-backed or otherwise different volume, a
    /// container mounting the tokens writable. Each is refused naming it, not skipped.
    #[test]
    fn already_injected_is_decided_by_content_not_names() {
        let injected = mutated(&pod());
        let mut defaulted = injected.clone();
        let agent = &mut defaulted["spec"]["initContainers"][0];
        agent["imagePullPolicy"] = json!("IfNotPresent");
        agent["terminationMessagePath"] = json!("/dev/termination-log");
        agent["readinessProbe"]["timeoutSeconds"] = json!(1);
        for volume in defaulted["spec"]["volumes"].as_array_mut().unwrap() {
            if volume.get("projected").is_some() {
                volume["projected"]["defaultMode"] = json!(420);
            }
        }
        for pod in [&injected, &defaulted] {
            let again = mutate(pod, &aws_plan(), &settings()).unwrap();
            assert_eq!(again, Mutation::default(), "{pod}");
        }

        let agent = "/spec/initContainers/0";
        let volume = |name: &str| {
            let index = injected["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .position(|v| v["name"] == name)
                .unwrap();
            format!("/spec/volumes/{index}")
        };
        let tokens = volume(TOKENS_VOLUME);
        let kube = volume(KUBE_TOKEN_VOLUME);
        let app_mount = "/spec/containers/0/volumeMounts/0";
        for (at, field, value, says) in [
            (
                agent,
                "image",
                json!("registry.example/not-warrant:1"),
                "its image is not what warrant writes",
            ),
            (
                agent,
                "command",
                json!([
                    "/bin/sh",
                    "-c",
                    "cat /var/run/secrets/warrant.dev/kube/token"
                ]),
                "its command is not",
            ),
            (agent, "args", json!(["credential"]), "its args is not"),
            (
                agent,
                "env",
                json!([{"name": "WARRANT_URL", "value": "https://elsewhere.example"}]),
                "its env is not",
            ),
            (
                agent,
                "lifecycle",
                json!({"postStart": {"exec": {"command": ["/warrant", "x"]}}}),
                "its lifecycle is not",
            ),
            (
                agent,
                "restartPolicy",
                json!(null),
                "its restartPolicy is not",
            ),
            (
                tokens.as_str(),
                "emptyDir",
                json!({}),
                "a volume named \"warrant-tokens\" that warrant did not add (its source is not the one warrant writes)",
            ),
            (
                tokens.as_str(),
                "emptyDir",
                json!({"medium": "Memory", "sizeLimit": "1Gi"}),
                "\"warrant-tokens\" that warrant did not add",
            ),
            (
                tokens.as_str(),
                "hostPath",
                json!({"path": "/var/tokens"}),
                "\"warrant-tokens\" that warrant did not add",
            ),
            (
                kube.as_str(),
                "projected",
                json!({"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}),
                "\"warrant-kube-token\" that warrant did not add",
            ),
            (
                app_mount,
                "readOnly",
                json!(false),
                "container \"c\" mounts warrant's volume warrant-tokens itself, not read-only at /var/run/secrets/warrant.dev/tokens",
            ),
            (
                app_mount,
                "mountPath",
                json!("/writable"),
                "mounts warrant's volume warrant-tokens itself",
            ),
        ] {
            let mut pod = injected.clone();
            pod.pointer_mut(at).unwrap()[field] = value;
            let refusal = mutate(&pod, &aws_plan(), &settings()).unwrap_err();
            assert_eq!(refusal.code, 400, "{at}/{field}");
            assert!(
                refusal.message.contains(says),
                "{at}/{field}: {}",
                refusal.message
            );
        }

        // A pod-supplied look-alike in a new pod: the name taken with another image.
        let mut planted = pod();
        planted["spec"]["initContainers"] = json!([{
            "name": AGENT,
            "image": "registry.example/lookalike:1",
            "args": [agent_contract::COMMAND],
            "restartPolicy": "Always",
        }]);
        let refusal = mutate(&planted, &aws_plan(), &settings()).unwrap_err();
        assert!(
            refusal.message.contains("an init container named \"warrant-token-agent\" that warrant did not add (its image is not what warrant writes)"),
            "{}",
            refusal.message
        );
    }
}
