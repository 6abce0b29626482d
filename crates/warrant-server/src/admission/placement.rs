//! Which of a pod's containers get the tokens, and where the agent goes among its init
//! containers (docs/injection.md, "Which containers" and "Meshes"). Pure: the pod's lists in,
//! the names skipped, the agent's index and the warnings out.
//!
//! - `warrant.dev/skip-containers`, a pod annotation, lists containers (or init containers) by
//!   name, separated by commas (EKS's `eks.amazonaws.com/skip-containers`) or semicolons (Azure
//!   Workload Identity's `azure.workload.identity/skip-containers`): each gets no variables and
//!   no mounts. A name that is no container of the pod refuses the pod (`400`, naming it): a
//!   typo would otherwise hand the tokens to the very container the author meant to keep them
//!   from, and kube-apiserver's reinvocation sends warrant the same annotation again, so the
//!   refusal is the only time it is said.
//! - The agent goes right after the last native sidecar already among the init containers
//!   (`restartPolicy: Always`: a mesh's proxy, which Istio's and Linkerd's webhooks add before
//!   warrant's, whose configuration's name sorts after theirs), and before every init container
//!   that follows it. Init containers run in order, and each native sidecar must have started
//!   before the next one runs: with a mesh's CNI, the pod's traffic goes to the proxy from the
//!   start, so an agent ahead of the proxy could not reach warrant, and the proxy would wait for
//!   the agent's startup probe, forever. Without native sidecars, the agent is the first init
//!   container, as before.
//! - An ordinary init container ahead of a native sidecar therefore runs before the agent: it
//!   gets the variables as every container does (its SDK then fails on the missing file rather
//!   than fall back to the node's identity), and the client is warned, naming it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::plan::Refusal;

/// The pod annotation that lists the containers that get nothing from token injection.
pub(crate) const SKIP_CONTAINERS: &str = "warrant.dev/skip-containers";

/// The names `pod`'s [`SKIP_CONTAINERS`] lists, each one of `names` (the pod's containers and
/// init containers); a pod without the annotation skips none.
pub(crate) fn skipped<'a>(
    pod: &Value,
    names: impl Iterator<Item = &'a str> + Clone,
) -> Result<BTreeSet<String>, Refusal> {
    let Some(value) = pod
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(SKIP_CONTAINERS))
    else {
        return Ok(BTreeSet::new());
    };
    let Some(text) = value.as_str() else {
        return Err(Refusal::bad(format!(
            "the pod's annotation {SKIP_CONTAINERS} is not a string (a list of container names, separated by commas)"
        )));
    };
    let mut skipped = BTreeSet::new();
    for name in text
        .split([',', ';'])
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        if !names.clone().any(|known| known == name) {
            return Err(Refusal::bad(format!(
                "the pod's annotation {SKIP_CONTAINERS} names {}, which is not a container of the pod: correct it, or remove it from the list",
                warrant_token::quote_value(name)
            )));
        }
        skipped.insert(name.to_owned());
    }
    Ok(skipped)
}

/// Whether an init container is a native sidecar (`restartPolicy: Always`, Kubernetes 1.29).
pub(crate) fn is_native_sidecar(container: &Value) -> bool {
    container.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}

/// Where the agent goes among `init_containers` (which do not hold it): right after the last
/// native sidecar, or first when there is none.
pub(crate) fn agent_index(init_containers: &[Value]) -> usize {
    init_containers
        .iter()
        .rposition(is_native_sidecar)
        .map_or(0, |last| last + 1)
}

/// Warnings for the ordinary init containers of `ahead` (those the agent goes after) that get
/// the tokens' variables: they run before the agent has written a token.
pub(crate) fn run_before_agent(ahead: &[Value], skipped: &BTreeSet<String>) -> Vec<String> {
    let Some(sidecar) = ahead.iter().rev().find(|c| is_native_sidecar(c)) else {
        return Vec::new();
    };
    let sidecar = name_of(sidecar);
    ahead
        .iter()
        .filter(|c| !is_native_sidecar(c) && !skipped.contains(name_of(c)))
        .map(|c| {
            format!(
                "init container {} runs before warrant's token agent, which goes after the native sidecar {}: the token files are not there yet when it runs (move it after {}, or list it in {SKIP_CONTAINERS})",
                warrant_token::quote_value(name_of(c)),
                warrant_token::quote_value(sidecar),
                warrant_token::quote_value(sidecar),
            )
        })
        .collect()
}

fn name_of(object: &Value) -> &str {
    object
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(skip: Option<Value>) -> Value {
        let mut pod = json!({"metadata": {"name": "p"}});
        if let Some(skip) = skip {
            pod["metadata"]["annotations"] = json!({SKIP_CONTAINERS: skip});
        }
        pod
    }

    const NAMES: [&str; 3] = ["app", "istio-proxy", "migrate"];

    #[test]
    fn skip_containers_lists_names_by_comma_or_semicolon() {
        assert!(skipped(&pod(None), NAMES.into_iter()).unwrap().is_empty());
        for value in [
            "app,istio-proxy",
            " app , istio-proxy ,",
            "app;istio-proxy",
            "istio-proxy;app,app",
        ] {
            let names = skipped(&pod(Some(json!(value))), NAMES.into_iter()).unwrap();
            assert_eq!(
                names.iter().map(String::as_str).collect::<Vec<_>>(),
                ["app", "istio-proxy"],
                "{value:?}"
            );
        }
        assert!(
            skipped(&pod(Some(json!(""))), NAMES.into_iter())
                .unwrap()
                .is_empty()
        );
    }

    /// A name that is no container of the pod refuses it, naming the name (cut when long); so
    /// does a value that is not a string.
    #[test]
    fn an_unknown_container_refuses_the_pod_by_name() {
        let refusal = skipped(&pod(Some(json!("app,ap"))), NAMES.into_iter()).unwrap_err();
        assert_eq!(refusal.code, 400);
        assert!(
            refusal
                .message
                .contains("warrant.dev/skip-containers names \"ap\", which is not a container"),
            "{}",
            refusal.message
        );
        let long = "x".repeat(5000);
        let refusal = skipped(&pod(Some(json!(long))), NAMES.into_iter()).unwrap_err();
        assert!(refusal.message.len() < 600, "{}", refusal.message);
        let refusal = skipped(&pod(Some(json!(["app"]))), NAMES.into_iter()).unwrap_err();
        assert!(
            refusal.message.contains("not a string"),
            "{}",
            refusal.message
        );
    }

    fn init(name: &str, sidecar: bool) -> Value {
        if sidecar {
            json!({"name": name, "restartPolicy": "Always"})
        } else {
            json!({"name": name})
        }
    }

    /// After the last native sidecar, before what follows it; first without one.
    #[test]
    fn the_agent_goes_after_the_last_native_sidecar() {
        for (list, want) in [
            (vec![], 0),
            (vec![init("migrate", false)], 0),
            (vec![init("istio-proxy", true), init("migrate", false)], 1),
            (
                vec![
                    init("istio-validation", false),
                    init("istio-proxy", true),
                    init("migrate", false),
                ],
                2,
            ),
            (
                vec![
                    init("linkerd-network-validator", false),
                    init("linkerd-proxy", true),
                    init("logs", true),
                ],
                3,
            ),
            (
                vec![
                    init("proxy", true),
                    init("migrate", false),
                    init("logs", true),
                    init("seed", false),
                ],
                3,
            ),
        ] {
            assert_eq!(agent_index(&list), want, "{list:?}");
        }
    }

    /// The ordinary init containers the agent goes after are named in a warning, unless
    /// skipped; sidecars and what follows the agent are not.
    #[test]
    fn init_containers_ahead_of_the_agent_are_warned_about() {
        let list = vec![
            init("istio-validation", false),
            init("migrate", false),
            init("istio-proxy", true),
            init("seed", false),
        ];
        let at = agent_index(&list);
        let warnings = run_before_agent(&list[..at], &BTreeSet::new());
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[1].starts_with("init container \"migrate\" runs before warrant's token agent, which goes after the native sidecar \"istio-proxy\""),
            "{}",
            warnings[1]
        );
        let skipped = BTreeSet::from(["istio-validation".to_owned()]);
        assert_eq!(run_before_agent(&list[..at], &skipped).len(), 1);
        assert!(run_before_agent(&list[..0], &skipped).is_empty());
    }
}
