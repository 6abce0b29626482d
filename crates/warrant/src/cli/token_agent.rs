//! `warrant token-agent`'s command line: the token agent's flags, each with the environment
//! variable token injection sets (`warrant_proto::agent_contract`), which the command
//! (`crate::agent`) turns into `warrant_client::agent::Config`.

use std::path::PathBuf;

use clap::Args;
use warrant_client::agent::TokenSpec;
use warrant_proto::agent_contract;

/// `warrant token-agent`. Every flag has an environment variable, which is how token
/// injection configures it, so that the probes (`warrant token-agent --check`, run in the
/// container) see the same configuration.
#[derive(Debug, Args)]
pub(crate) struct TokenAgentArgs {
    /// Check, instead of running, that every token file holds a token that has not expired, for
    /// its audience: exit 0 if so, else say which and exit 1. The readiness (and startup) probe.
    #[arg(long = agent_contract::CHECK_FLAG)]
    pub(crate) check: bool,
    /// A token to keep: FILE=AUDIENCE (repeat the flag, or separate them with commas). The file
    /// is replaced atomically with each new token.
    #[arg(
        long = "token",
        env = agent_contract::WARRANT_TOKENS,
        value_delimiter = agent_contract::TOKENS_DELIMITER,
        value_parser = clap::value_parser!(TokenSpec),
        required = true,
        value_name = agent_contract::TOKEN_FORMAT
    )]
    pub(crate) tokens: Vec<TokenSpec>,
    /// warrant's URL, https only (its Service, e.g. https://warrant.warrant.svc).
    #[arg(long = "warrant-url", env = agent_contract::WARRANT_URL, value_name = "URL")]
    pub(crate) warrant_url: Option<String>,
    /// CA bundle (PEM) for warrant's HTTPS, used instead of the system's roots.
    #[arg(
        long = "warrant-ca-file",
        env = "WARRANT_CA_FILE",
        value_name = "PATH",
        conflicts_with = "warrant_ca_data"
    )]
    pub(crate) warrant_ca_file: Option<PathBuf>,
    /// The same bundle as PEM text (token injection passes it this way).
    #[arg(
        long = "warrant-ca-data",
        env = agent_contract::WARRANT_CA_DATA,
        value_name = "PEM",
        hide_env_values = true
    )]
    pub(crate) warrant_ca_data: Option<String>,
    /// The pod's own token for kube-apiserver (a projected serviceAccountToken), read on every
    /// request: how the agent proves to warrant that it is the pod.
    #[arg(
        long = "kube-token-file",
        env = agent_contract::WARRANT_KUBE_TOKEN_FILE,
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount/token",
        value_name = "PATH"
    )]
    pub(crate) kube_token_file: PathBuf,
    /// The pod's name (downward API `metadata.name`): the tokens are bound to it.
    #[arg(long = "pod-name", env = agent_contract::WARRANT_POD_NAME, value_name = "NAME")]
    pub(crate) pod_name: Option<String>,
    /// The pod's UID (downward API `metadata.uid`).
    #[arg(long = "pod-uid", env = agent_contract::WARRANT_POD_UID, value_name = "UID")]
    pub(crate) pod_uid: Option<String>,
    /// The lifetime asked for each token, in seconds (600 to 2^32; warrant may shorten it).
    #[arg(
        long = "expiration-seconds",
        env = agent_contract::WARRANT_TOKEN_EXPIRATION_SECONDS,
        default_value_t = warrant_token::DEFAULT_EXPIRATION_SECONDS,
        value_name = "SECONDS"
    )]
    pub(crate) expiration_seconds: i64,
    /// The token files' permissions, in octal.
    #[arg(
        long = "file-mode",
        env = "WARRANT_TOKEN_FILE_MODE",
        default_value = "0644",
        value_parser = parse_mode,
        value_name = "MODE"
    )]
    pub(crate) file_mode: u32,
}

/// An octal mode (`0644`), permission bits only.
fn parse_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text.trim_start_matches("0o"), 8)
        .ok()
        .filter(|mode| *mode <= 0o777)
        .ok_or_else(|| format!("{text:?} is not an octal file mode such as 0644"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_as_documented() {
        assert_eq!(parse_mode("0640"), Ok(0o640));
        assert_eq!(parse_mode("0o600"), Ok(0o600));
        assert!(parse_mode("0999").is_err() && parse_mode("1777").is_err());
    }
}
