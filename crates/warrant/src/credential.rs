//! `warrant credential`: the exec credential plugin, which is `warrant_client::credential`; this
//! command hands it the flags as its configuration.

use std::error::Error;

use warrant_client::credential::Config;

use crate::cli::CredentialArgs;

/// Runs the plugin with the configuration the flags give.
pub(crate) async fn run(args: &CredentialArgs) -> Result<(), Box<dyn Error>> {
    warrant_client::credential::run(&config(args)).await
}

/// The plugin's configuration: the flags, as they are.
fn config(args: &CredentialArgs) -> Config {
    Config {
        warrant_url: args.warrant_url.clone(),
        warrant_ca_file: args.warrant_ca_file.clone(),
        token_file: args.token_file.clone(),
        audience: args.audience.clone(),
        allow_profile_audience: args.allow_profile_audience,
        service_account: args.service_account.clone(),
        expiration_seconds: args.expiration,
        cache_dir: args.cache_dir.clone(),
        no_cache: args.no_cache,
        kubeconfig: args.kubeconfig.clone(),
        key_binding: args.key_binding,
    }
}
