//! The JSON Patch (RFC 6902) that gives a pod its [`Plan`]: the agent as a native sidecar (the
//! first init container, `restartPolicy: Always`), the shared volume, and each container's
//! mounts and variables. Pure: the pod as kube-apiserver sent it in, the operations out.
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
//!   without them, and guessing would hand a pod someone else's files.

use serde_json::{Map, Value, json};

use super::plan::{
    GCP_CREDENTIALS, GOOGLE_DIR, GOOGLE_FILE, InjectionSettings, KUBE_TOKEN_DIR, Plan, Refusal,
    TOKENS_DIR,
};

/// The agent's container name: reserved.
pub(crate) const AGENT: &str = "warrant-token-agent";
/// The agent's first argument: the subcommand.
pub(crate) const AGENT_COMMAND: &str = "token-agent";
/// The volume the agent writes the tokens to (memory-backed, the pod's own).
pub(crate) const TOKENS_VOLUME: &str = "warrant-tokens";
/// The pod's own kube token, for the agent alone.
pub(crate) const KUBE_TOKEN_VOLUME: &str = "warrant-kube-token";
/// Google's credential configuration, from the pod's annotation.
pub(crate) const GOOGLE_VOLUME: &str = "warrant-google-credentials";
/// The lifetime of the pod's kube token the agent authenticates with: the kubelet refreshes
/// it at 80 %, and 3600 (not 3607) keeps kube-apiserver from extending it to a year.
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
        return Err(reserved("a container", AGENT));
    }
    let agent_present = match init_containers.iter().find(|c| name_of(c) == AGENT) {
        Some(agent) if is_agent(agent) => true,
        Some(_) => return Err(reserved("an init container", AGENT)),
        None => false,
    };
    let google = plan.google_credentials.as_deref();
    let mut wanted: Vec<(&str, Value)> = vec![
        (TOKENS_VOLUME, tokens_volume()),
        (KUBE_TOKEN_VOLUME, kube_token_volume()),
    ];
    if google.is_some() {
        wanted.push((GOOGLE_VOLUME, google_volume()));
    }
    let mut missing_volumes = Vec::new();
    for (name, volume) in wanted {
        match volumes.iter().find(|v| name_of(v) == name) {
            Some(existing) if same_source(existing, &volume) => {}
            Some(_) => return Err(reserved("a volume", name)),
            None => missing_volumes.push(volume),
        }
    }

    if let Some(credentials) = google {
        let annotations = pod.pointer("/metadata/annotations");
        match annotations.and_then(|a| a.get(GCP_CREDENTIALS)) {
            Some(Value::String(existing)) if existing == credentials => {}
            Some(_) => mutation.ops.push(json!({
                "op": "replace",
                "path": format!("/metadata/annotations/{}", pointer_escape(GCP_CREDENTIALS)),
                "value": credentials,
            })),
            None if annotations.is_some_and(Value::is_object) => mutation.ops.push(json!({
                "op": "add",
                "path": format!("/metadata/annotations/{}", pointer_escape(GCP_CREDENTIALS)),
                "value": credentials,
            })),
            None => mutation.ops.push(json!({
                "op": "add",
                "path": "/metadata/annotations",
                "value": {GCP_CREDENTIALS: credentials},
            })),
        }
    }

    for (index, container) in init_containers.iter().enumerate() {
        if name_of(container) != AGENT {
            consumer(&mut mutation, "initContainers", index, container, plan)?;
        }
    }
    for (index, container) in containers.iter().enumerate() {
        consumer(&mut mutation, "containers", index, container, plan)?;
    }

    append(&mut mutation.ops, spec, "/spec", "volumes", missing_volumes);
    if !agent_present {
        let agent = agent(plan, settings);
        if spec.get("initContainers").is_some_and(Value::is_array) {
            mutation
                .ops
                .push(json!({"op": "add", "path": "/spec/initContainers/0", "value": agent}));
        } else {
            mutation
                .ops
                .push(json!({"op": "add", "path": "/spec/initContainers", "value": [agent]}));
        }
    }
    Ok(mutation)
}

/// One consumer container's mounts and variables (`field` is `containers` or
/// `initContainers`; `index` its place there before the agent is inserted).
fn consumer(
    mutation: &mut Mutation,
    field: &str,
    index: usize,
    container: &Value,
    plan: &Plan,
) -> Result<(), Refusal> {
    let name = name_of(container);
    let mounts = container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut wanted = vec![(TOKENS_VOLUME, TOKENS_DIR)];
    if plan.google_credentials.is_some() {
        wanted.push((GOOGLE_VOLUME, GOOGLE_DIR));
    }
    let mut new_mounts = Vec::new();
    for (volume, path) in wanted {
        if mounts.iter().any(|m| name_of(m) == volume) {
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

/// An init container warrant added: its name, restarting always, running the agent.
fn is_agent(container: &Value) -> bool {
    container.get("restartPolicy").and_then(Value::as_str) == Some("Always")
        && container.pointer("/args/0").and_then(Value::as_str) == Some(AGENT_COMMAND)
}

/// Whether an existing volume is the kind warrant would add under that name (kube-apiserver
/// may have defaulted its fields since, so the source's kind is compared, not every field).
fn same_source(existing: &Value, wanted: &Value) -> bool {
    ["emptyDir", "projected", "downwardAPI"]
        .into_iter()
        .find(|kind| wanted.get(kind).is_some())
        .is_some_and(|kind| existing.get(kind).is_some_and(Value::is_object))
}

fn reserved(what: &str, name: &str) -> Refusal {
    Refusal::bad(format!(
        "the pod has {what} named {} that warrant did not add; warrant injects its token agent under that name: rename yours, or opt the pod out with the label warrant.dev/inject=false",
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

fn kube_token_volume() -> Value {
    json!({
        "name": KUBE_TOKEN_VOLUME,
        "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": KUBE_TOKEN_SECONDS}}]},
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
    let tokens: Vec<String> = plan
        .tokens
        .iter()
        .map(|t| format!("{}={}", t.path(), t.audience))
        .collect();
    let field = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
    let mut env = vec![json!({"name": "WARRANT_URL", "value": settings.warrant_url})];
    if let Some(ca) = &settings.ca_pem {
        env.push(json!({"name": "WARRANT_CA_DATA", "value": ca}));
    }
    env.extend([
        json!({"name": "WARRANT_KUBE_TOKEN_FILE", "value": format!("{KUBE_TOKEN_DIR}/token")}),
        json!({"name": "WARRANT_POD_NAME", "valueFrom": field("metadata.name")}),
        json!({"name": "WARRANT_POD_UID", "valueFrom": field("metadata.uid")}),
        json!({"name": "WARRANT_TOKENS", "value": tokens.join(",")}),
        json!({"name": "WARRANT_TOKEN_EXPIRATION_SECONDS", "value": plan.expiration_seconds.to_string()}),
    ]);
    let check = json!({"exec": {"command": [BINARY, AGENT_COMMAND, "--check"]}});
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
        "args": [AGENT_COMMAND],
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
    use crate::admission::plan::{self, tests::settings};

    /// A pod with none of the lists warrant appends to gets each made, with one `add` each;
    /// without a CA bundle the agent trusts the system's roots (no `WARRANT_CA_DATA`).
    #[test]
    fn a_bare_pod_gets_each_list_made() {
        let annotations = vec![(
            plan::AWS_ROLE_ARN.to_owned(),
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
}
