//! The contract between token injection's webhook, which writes the token agent's container
//! into a pod, and the token agent (`warrant token-agent`), which runs in it: the subcommand,
//! the flag of its probes, the variables its flags are read from, and how a token it keeps is
//! written (`FILE=AUDIENCE`, several separated by commas). The webhook writes the container
//! from these and the agent declares its flags with them, so the two programs cannot drift
//! apart; the end-to-end tests (`tests/e2e/injection.rs`) run them together.

/// The agent's subcommand: `warrant token-agent`.
pub const COMMAND: &str = "token-agent";
/// The agent's flag (`--check`) that checks the token files instead of running: its startup
/// and readiness probes.
pub const CHECK_FLAG: &str = "check";

/// warrant's URL (https), which the agent asks for tokens.
pub const WARRANT_URL: &str = "WARRANT_URL";
/// The CA bundle (PEM text) the agent trusts warrant's serving certificate with.
pub const WARRANT_CA_DATA: &str = "WARRANT_CA_DATA";
/// The pod's own projected token, with which the agent proves to warrant that it is the pod.
pub const WARRANT_KUBE_TOKEN_FILE: &str = "WARRANT_KUBE_TOKEN_FILE";
/// The pod's name (downward API `metadata.name`): the tokens are bound to it.
pub const WARRANT_POD_NAME: &str = "WARRANT_POD_NAME";
/// The pod's UID (downward API `metadata.uid`).
pub const WARRANT_POD_UID: &str = "WARRANT_POD_UID";
/// The tokens to keep: [`token`]s separated by [`TOKENS_DELIMITER`].
pub const WARRANT_TOKENS: &str = "WARRANT_TOKENS";
/// The lifetime asked for each token, in seconds.
pub const WARRANT_TOKEN_EXPIRATION_SECONDS: &str = "WARRANT_TOKEN_EXPIRATION_SECONDS";

/// What separates the tokens in [`WARRANT_TOKENS`] (an audience never holds one: token
/// injection refuses it).
pub const TOKENS_DELIMITER: char = ',';
/// How a token is written, for help and messages.
pub const TOKEN_FORMAT: &str = "FILE=AUDIENCE";

/// A token the agent keeps, written as [`TOKEN_FORMAT`]: where, and for which audience.
pub fn token(file: &str, audience: &str) -> String {
    format!("{file}={audience}")
}

/// A token written as [`TOKEN_FORMAT`], split at the first `=` (an audience may hold `=`, a
/// path must not): `None` without one.
pub fn split_token(text: &str) -> Option<(&str, &str)> {
    text.split_once('=')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the webhook writes, the agent reads back, an audience with `=` included.
    #[test]
    fn a_token_is_read_back_as_written() {
        for (file, audience) in [
            (
                "/var/run/secrets/warrant.dev/tokens/aws-token",
                "sts.amazonaws.com",
            ),
            ("/t/token", "api://AzureADTokenExchange"),
            ("/t/token", "https://example.com/?a=b"),
        ] {
            assert_eq!(split_token(&token(file, audience)), Some((file, audience)));
        }
        assert_eq!(split_token("/t/token"), None);
    }
}
