//! `warrant probe-signer`'s command line.

use std::path::PathBuf;

use clap::Args;

/// `warrant probe-signer`.
#[derive(Debug, Args)]
pub(crate) struct ProbeSignerArgs {
    /// The signer's Unix socket, as given to `serve` and kube-apiserver.
    #[arg(
        long = "service-account-signing-endpoint",
        visible_alias = "signing-endpoint",
        value_name = "PATH"
    )]
    pub(crate) signing_endpoint: PathBuf,
    /// How long the two calls may take together.
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = crate::duration::parse_duration)]
    pub(crate) timeout: std::time::Duration,
}
