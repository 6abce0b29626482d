//! The command line. Flags mirror kube-apiserver's names wherever the meaning is the same.

use clap::{Parser, Subcommand, ValueEnum};

mod completion;
mod credential;
mod discovery;
mod key_flags;
mod keys;
mod local_setup;
mod pod_certificates;
mod probe_signer;
mod serve;
mod token_agent;
mod verify;

pub(crate) use completion::{CompletionArgs, CompletionShell};
pub(crate) use discovery::{DiscoveryCommand, DiscoveryExportArgs, DiscoveryPublishArgs};
pub(crate) use key_flags::{KeyAlgorithm, KeySourceArgs, KmsArgs, Pkcs11Args, RotationArgs};
pub(crate) use keys::{
    ImportedKeyLimits, KeysCommand, KeysGenerateArgs, KeysImportArgs, KeysListArgs, KeysRevokeArgs,
    KeysRotateArgs, ListFormat, StoreArgs,
};
pub(crate) use local_setup::LocalSetupArgs;
pub(crate) use pod_certificates::{CaKeyAlgorithm, PodCertArgs};
pub(crate) use probe_signer::ProbeSignerArgs;
pub(crate) use serve::ServeArgs;
pub(crate) use verify::VerifyArgs;

pub(crate) use credential::CredentialArgs;
pub(crate) use token_agent::TokenAgentArgs;
pub(crate) use warrant_client::ObjectName;

/// warrant: a standalone, Kubernetes-compatible service-account token issuer.
#[derive(Debug, Parser)]
#[command(name = "warrant", version = warrant_server::build::VERSION_LINE, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Log format (kube components' --logging-format; --log-format is the same flag).
    #[arg(
        long = "logging-format",
        visible_alias = "log-format",
        global = true,
        value_enum,
        default_value_t = LogFormat::Text,
        value_name = "FORMAT",
        help_heading = "Logging"
    )]
    pub(crate) log_format: LogFormat,
    /// Log verbosity, as kube components' -v (klog): 0 to 2 log at info, 3 and 4 add
    /// warrant's debug lines, 5 and more its trace lines. --log-level wins over it, and
    /// RUST_LOG over both.
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        value_name = "N",
        help_heading = "Logging"
    )]
    pub(crate) verbosity: Option<u32>,
    /// Log filter, in tracing's syntax (e.g. `info`, `warrant_server=debug`). Default: info,
    /// or what -v says. RUST_LOG overrides it.
    #[arg(long, global = true, value_name = "FILTER", help_heading = "Logging")]
    pub(crate) log_level: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve TokenRequest, TokenReview, OIDC discovery and JWKS over HTTPS.
    Serve(Box<ServeArgs>),
    /// Create a local setup for trying warrant: a CA and serving certificate for this machine, a
    /// signing key, an admin token and a kubeconfig. Files that exist are kept.
    LocalSetup(LocalSetupArgs),
    /// Verify a token as a relying party does: fetch the issuer's discovery document and JWKS,
    /// then check signature, issuer, audience and time offline. (Whether the bound objects still
    /// exist is only known to the issuer: use a TokenReview for that.)
    Verify(VerifyArgs),
    /// Manage the keys in a key directory (--key-dir) or a Kubernetes Secret (--key-secret):
    /// generate the first, list them and their schedule, rotate, revoke a leaked one, import
    /// private keys into an HSM.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// The OIDC discovery documents, for hosting them elsewhere: export them to a directory, or
    /// publish them to buckets.
    #[command(subcommand)]
    Discovery(DiscoveryCommand),
    /// client-go's exec credential plugin: trade this workload's own token for a short-lived
    /// token from warrant for the cluster client-go is about to call (KEP-5339). Run by kubectl
    /// or a controller from a kubeconfig's `exec` section, never by hand.
    #[command(after_long_help = credential::EXAMPLES)]
    Credential(CredentialArgs),
    /// Keep warrant tokens in files for a pod's containers (the native sidecar token injection
    /// adds; docs/injection.md): each FILE=AUDIENCE is a token of the pod's service account,
    /// bound to the pod, refreshed before 80 % of its lifetime and replaced atomically.
    /// `--check` is its readiness probe.
    #[command(name = warrant_proto::agent_contract::COMMAND)]
    TokenAgent(TokenAgentArgs),
    /// Check an external signer as kube-apiserver does when it starts: Metadata and FetchKeys
    /// over the socket. Exits 0 if both answer and there are keys; otherwise says why and
    /// exits 1. The liveness probe where warrant serves only the socket (`--secure-port 0`).
    /// Warns when a kube-apiserver on this machine that uses the socket would ask for longer
    /// tokens than warrant signs (its --service-account-max-token-expiration).
    ProbeSigner(ProbeSignerArgs),
    /// Print the shell completion script for bash, zsh or fish to standard output, e.g.
    /// `source <(warrant completion bash)`.
    Completion(CompletionArgs),
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::*;

    /// A kid is base64url and may start with `-`, as about one in 64 do: `keys revoke` must not
    /// take it for a flag (a test with a real key found it).
    #[test]
    fn a_kid_starting_with_a_hyphen_is_a_kid() {
        for args in [
            vec![
                "warrant",
                "keys",
                "revoke",
                "-Uq3f2QmZ8",
                "--key-dir",
                "keys",
            ],
            vec![
                "warrant",
                "keys",
                "revoke",
                "--key-dir",
                "keys",
                "-Uq3f2QmZ8",
            ],
        ] {
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let Command::Keys(KeysCommand::Revoke(revoke)) = cli.command else {
                panic!("{args:?}: not keys revoke");
            };
            assert_eq!(revoke.kid, "-Uq3f2QmZ8");
        }
    }

    /// Every `warrant keys` command takes its store from --key-dir or --key-secret: without
    /// either, the message names both (not only --key-dir); with both, they conflict.
    #[test]
    fn keys_commands_need_a_key_dir_or_a_key_secret() {
        for command in [
            &["generate"][..],
            &["list"],
            &["rotate"],
            &["revoke", "kid-1"],
        ] {
            let args = |store: &[&'static str]| {
                let mut args = vec!["warrant", "keys"];
                args.extend_from_slice(command);
                args.extend_from_slice(store);
                args
            };
            let error = Cli::try_parse_from(args(&[])).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{command:?}"
            );
            let text = error.to_string();
            assert!(
                text.contains("--key-dir <DIR>") && text.contains("--key-secret <NAMESPACE/NAME>"),
                "{command:?}: {text}"
            );
            for store in [&["--key-dir", "keys"][..], &["--key-secret", "ns/keys"]] {
                Cli::try_parse_from(args(store))
                    .unwrap_or_else(|e| panic!("{command:?} {store:?}: {e}"));
            }
            let both = Cli::try_parse_from(args(&["--key-dir", "k", "--key-secret", "ns/k"]));
            assert_eq!(
                both.unwrap_err().kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{command:?}"
            );
        }
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// kube components' logging flags, and warrant's older names for them, anywhere on the line.
    #[test]
    fn logging_flags_as_kube_components_spell_them() {
        let parse =
            |args: &[&str]| Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        for args in [
            &["warrant", "-v", "4", "completion", "bash"][..],
            &["warrant", "--v", "4", "completion", "bash"],
            &["warrant", "--v=4", "completion", "bash"],
            &["warrant", "completion", "bash", "-v=4"],
            &["warrant", "completion", "-v4", "bash"],
        ] {
            assert_eq!(parse(args).verbosity, Some(4), "{args:?}");
        }
        for args in [
            &["warrant", "--logging-format", "json", "completion", "bash"][..],
            &["warrant", "completion", "bash", "--log-format=json"],
        ] {
            assert!(
                matches!(parse(args).log_format, LogFormat::Json),
                "{args:?}"
            );
        }
        let cli = parse(&["warrant", "completion", "bash"]);
        assert!(matches!(cli.log_format, LogFormat::Text));
        assert_eq!((cli.verbosity, cli.log_level), (None, None));
        let cli = parse(&[
            "warrant",
            "--log-level",
            "debug",
            "-v",
            "5",
            "completion",
            "zsh",
        ]);
        assert_eq!(cli.log_level.as_deref(), Some("debug"));
        assert!(Cli::try_parse_from(["warrant", "-v", "high", "completion", "bash"]).is_err());
    }

    /// The pod certificate CA's key Secret is elected through a Lease of --key-lease-duration
    /// too: the flag goes with either key Secret (or both), and is refused with neither.
    #[test]
    fn the_lease_duration_goes_with_either_key_secret() {
        let lease = ["--key-lease-duration", "9s"];
        for secrets in [
            &["--key-secret", "ns/keys"][..],
            &["--pod-certificate-ca-key-secret", "ns/ca"],
            &[
                "--key-secret",
                "ns/keys",
                "--pod-certificate-ca-key-secret",
                "ns/ca",
            ],
        ] {
            let args = [&["warrant", "serve"][..], secrets, &lease].concat();
            let Command::Serve(serve) = Cli::try_parse_from(&args)
                .unwrap_or_else(|e| panic!("{secrets:?}: {e}"))
                .command
            else {
                panic!("not serve");
            };
            assert_eq!(serve.keys.key_lease_duration, 9, "{secrets:?}");
        }
        let alone = Cli::try_parse_from([&["warrant", "serve"][..], &lease].concat());
        assert_eq!(
            alone.unwrap_err().kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        // Elsewhere --key-lease-duration goes with --key-secret alone, as before.
        let export = ["warrant", "discovery", "export", "--dir", "out"];
        let leased = [&export[..], &lease].concat();
        assert_eq!(
            Cli::try_parse_from(&leased).unwrap_err().kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        Cli::try_parse_from([&leased[..], &["--key-secret", "ns/keys"]].concat()).unwrap();
    }

    #[test]
    fn tls_flags_take_kube_apiservers_values() {
        let serve = |extra: &[&str]| {
            let args = [&["warrant", "serve"][..], extra].concat();
            Cli::try_parse_from(args).map(|cli| match cli.command {
                Command::Serve(args) => args,
                _ => panic!("not serve"),
            })
        };
        let args = serve(&[]).unwrap();
        assert_eq!(args.tls_min_version, warrant_server::TlsMinVersion::Tls12);
        assert!(args.tls_cipher_suites.is_empty());
        let args = serve(&[
            "--tls-min-version",
            "VersionTLS13",
            "--tls-cipher-suites",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
        ])
        .unwrap();
        assert_eq!(args.tls_min_version, warrant_server::TlsMinVersion::Tls13);
        assert_eq!(
            args.tls_cipher_suites,
            [
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                "TLS_AES_128_GCM_SHA256"
            ]
        );
        let error = serve(&["--tls-min-version", "VersionTLS11"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "VersionTLS11 is not supported: warrant's TLS library (rustls) supports only TLS 1.2 and 1.3"
            ),
            "{error}"
        );
    }

    /// `warrant serve --help` groups its flags under the headings of docs/configuration.md,
    /// and each flag is documented in the section its heading names.
    #[test]
    fn serve_flags_are_grouped_as_the_docs_are() {
        let docs = include_str!("../../../docs/configuration.md");
        let serve_docs = docs
            .split("\n## ")
            .find(|part| part.starts_with("`warrant serve`"))
            .expect("docs/configuration.md has a `warrant serve` part");
        let section = |heading: &str| {
            serve_docs
                .split("\n### ")
                .find(|part| part.starts_with(&format!("{heading}\n")))
        };
        let mut cli = Cli::command();
        cli.build();
        let serve = cli.find_subcommand("serve").expect("serve");
        let mut headings = Vec::new();
        for arg in serve.get_arguments() {
            let Some(long) = arg.get_long() else {
                continue;
            };
            if long == "help" {
                continue;
            }
            let heading = arg
                .get_help_heading()
                .unwrap_or_else(|| panic!("--{long} has no help heading"));
            let text = section(heading).unwrap_or_else(|| {
                panic!("--{long} is under \"{heading}\", which docs/configuration.md has no section for")
            });
            let flag = if long == "v" {
                "`-v".to_owned()
            } else {
                format!("`--{long}")
            };
            assert!(
                [" ", "`", "["]
                    .iter()
                    .any(|next| text.contains(&format!("{flag}{next}"))),
                "--{long} is under \"{heading}\" but not documented in that section"
            );
            if !headings.contains(&heading) {
                headings.push(heading);
            }
        }
        for heading in [
            "Issuer and tokens",
            "Keys",
            "Discovery",
            "Reviews",
            "Serving",
            "Who may call",
            "External signer",
            "Objects",
            "Token injection",
            "Pod certificates",
            "Logging",
        ] {
            assert!(headings.contains(&heading), "no flag under \"{heading}\"");
        }
    }

    /// A command with subcommands names each of them in its own help line (`warrant --help`
    /// and `warrant keys --help` show it), so none is found only by accident.
    #[test]
    fn command_groups_name_their_subcommands() {
        let mut cli = Cli::command();
        cli.build();
        for group in cli
            .get_subcommands()
            .filter(|c| c.has_subcommands() && c.get_name() != "help")
        {
            let about = group
                .get_about()
                .map(ToString::to_string)
                .unwrap_or_default();
            for sub in group.get_subcommands() {
                let name = sub.get_name();
                if name == "help" {
                    continue;
                }
                assert!(
                    about.contains(name),
                    "`warrant {}`'s help line does not name `{name}`: {about}",
                    group.get_name()
                );
            }
        }
    }
}
