//! `warrant local-setup`'s command line.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

/// `warrant local-setup`.
#[derive(Debug, Args)]
pub(crate) struct LocalSetupArgs {
    /// Directory to write the setup into.
    #[arg(long, default_value = ".warrant", value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// Address the server will listen on (in the certificate and kubeconfig).
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub(crate) address: IpAddr,
    /// Port the server will listen on.
    #[arg(long, default_value_t = 8443, value_name = "PORT")]
    pub(crate) port: u16,
}
