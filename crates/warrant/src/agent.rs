//! `warrant token-agent`: the token agent, which is `warrant_client::agent`; this command hands
//! it the flags as its configuration, the system clock, and SIGTERM (or SIGINT) as its end.

use std::error::Error;

use warrant_client::agent::{CaBundle, Config};
use warrant_clock::Clock;

use crate::cli::TokenAgentArgs;

/// Runs the agent until SIGTERM (or SIGINT), or checks the files (`--check`).
pub(crate) async fn run(args: &TokenAgentArgs) -> Result<(), Box<dyn Error>> {
    let config = config(args);
    let result = if args.check {
        warrant_client::agent::check(&config.tokens, Clock::System.now())
    } else {
        warrant_client::agent::run(&config, Clock::System, crate::serve::shutdown_signal()).await
    };
    result.map_err(|error| error as Box<dyn Error>)
}

/// The agent's configuration: the flags, the CA file before its PEM text (clap refuses both).
fn config(args: &TokenAgentArgs) -> Config {
    let warrant_ca = match (&args.warrant_ca_file, &args.warrant_ca_data) {
        (Some(path), _) => Some(CaBundle::File(path.clone())),
        (None, Some(pem)) => Some(CaBundle::Pem(pem.clone())),
        (None, None) => None,
    };
    Config {
        tokens: args.tokens.clone(),
        warrant_url: args.warrant_url.clone(),
        warrant_ca,
        kube_token_file: args.kube_token_file.clone(),
        pod_name: args.pod_name.clone(),
        pod_uid: args.pod_uid.clone(),
        expiration_seconds: args.expiration_seconds,
        file_mode: args.file_mode,
    }
}
