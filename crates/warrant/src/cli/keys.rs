//! `warrant keys …`'s command lines: where the keys are, and each subcommand's flags (the commands
//! are `crate::keydir`).

use std::path::PathBuf;

use clap::{ArgAction, Args, Subcommand, ValueEnum};
use warrant_client::{ObjectName, parse_object_name};

use super::key_flags::KeyAlgorithm;
use super::key_flags::KmsArgs;
use super::key_flags::Pkcs11Args;
use super::key_flags::RotationArgs;

/// `warrant keys …`.
#[derive(Debug, Subcommand)]
pub(crate) enum KeysCommand {
    /// Create a key directory or Secret with its first key, which signs at once. With
    /// --service-account-signing-key-file, that key is an existing static signing key (to move
    /// from kube-apiserver's key files to managed keys without breaking a token).
    Generate(KeysGenerateArgs),
    /// List each key: kid, algorithm, state, and the times of its transitions.
    List(KeysListArgs),
    /// Start a rotation now instead of when it is due: a new key is published now and signs
    /// once --key-publish-ahead has passed (a next key that exists already is brought forward
    /// to its earliest safe time). A running server picks the change up by itself.
    Rotate(KeysRotateArgs),
    /// Revoke a key at once, for a key that leaked: it leaves the JWKS, every server reading
    /// the store refuses its tokens as soon as it sees the change, and if it was signing, a key
    /// signs in its place now (the next key if one is published, else a new one). Relying
    /// parties that cached the JWKS keep trusting it until they refetch (docs/keys.md).
    Revoke(KeysRevokeArgs),
    /// Move private keys into the PKCS#11 token of --key-pkcs11-uri as non-extractable objects,
    /// with the same kids, so no token breaks: every key of the PEM store in --key-dir or
    /// --key-secret (which then records only public keys and where the private ones are), or,
    /// with --from-pem, a static signing key (kubeadm's sa.key) as the first key of an empty
    /// store.
    Import(KeysImportArgs),
}

/// Where `warrant keys` finds managed keys: a key directory or a Kubernetes Secret. One of the
/// two is required, and clap's message names both.
#[derive(Debug, Clone, Args)]
#[command(group = clap::ArgGroup::new("managed").required(true).multiple(false))]
pub(crate) struct StoreArgs {
    /// The key directory.
    #[arg(long = "key-dir", value_name = "DIR", group = "managed")]
    pub(crate) key_dir: Option<PathBuf>,
    /// The Kubernetes Secret holding the keys (`serve --key-secret`).
    #[arg(long = "key-secret", value_name = "NAMESPACE/NAME", value_parser = parse_object_name, group = "managed")]
    pub(crate) key_secret: Option<ObjectName>,
    /// Kubeconfig of the cluster holding --key-secret; default: the in-cluster configuration.
    #[arg(long = "kubeconfig", value_name = "PATH", requires = "key_secret")]
    pub(crate) kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) pkcs11: Pkcs11Args,
    #[command(flatten)]
    pub(crate) kms: KmsArgs,
}

/// `warrant keys generate`.
#[derive(Debug, Args)]
pub(crate) struct KeysGenerateArgs {
    /// The key directory or Secret to create.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// Algorithm of the new key.
    #[arg(long = "key-algorithm", value_enum, default_value_t = KeyAlgorithm::Rs256, value_name = "ALG")]
    pub(crate) key_algorithm: KeyAlgorithm,
    /// Import this static signing key (PEM) as the first key instead of generating one: it
    /// goes on signing, and the managed keys rotate from it.
    #[arg(id = IMPORTED_KEY, long = "service-account-signing-key-file", value_name = "PATH")]
    pub(crate) signing_key_file: Option<PathBuf>,
    /// How kube-apiserver capped the imported key's tokens.
    #[command(flatten)]
    pub(crate) limits: ImportedKeyLimits,
}

/// The argument ID of the PEM key `keys generate` and `keys import` take: the limits below
/// require it.
const IMPORTED_KEY: &str = "imported_key";

/// What kube-apiserver capped the tokens of a key imported from it with: how long the key must
/// stay published once retired, so its tokens keep verifying.
#[derive(Debug, Args)]
pub(crate) struct ImportedKeyLimits {
    /// With an imported key: the --service-account-max-token-expiration kube-apiserver used
    /// with it, which bounds the tokens it signed (and so how long it must stay published once
    /// retired). Default: no cap, as kube-apiserver's (2^32 s).
    #[arg(long = "service-account-max-token-expiration", value_name = "DURATION", value_parser = crate::duration::parse_seconds, requires = IMPORTED_KEY)]
    pub(crate) max_token_expiration: Option<i64>,
    /// With an imported key: the --service-account-extend-token-expiration kube-apiserver used
    /// with it (extended tokens live a year).
    #[arg(
        long = "service-account-extend-token-expiration",
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_value_t = true,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub(crate) extend_token_expiration: bool,
}

/// `warrant keys import`.
#[derive(Debug, Args)]
pub(crate) struct KeysImportArgs {
    /// The key directory or Secret, and the token (--key-pkcs11-uri, required).
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// Import this static signing key (PEM) as the first key of an empty store instead.
    #[arg(id = IMPORTED_KEY, long = "from-pem", value_name = "FILE")]
    pub(crate) from_pem: Option<PathBuf>,
    /// How kube-apiserver capped the key's tokens (with --from-pem).
    #[command(flatten)]
    pub(crate) limits: ImportedKeyLimits,
}

/// `warrant keys list`.
#[derive(Debug, Args)]
pub(crate) struct KeysListArgs {
    /// Where the keys are.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// With --key-secret: the Lease electing the replica that writes it (shown as the writer).
    /// Default: in the Secret's namespace, named after it with `-leader`.
    #[arg(long = "key-lease", value_name = "NAMESPACE/NAME", value_parser = parse_object_name, requires = "key_secret")]
    pub(crate) key_lease: Option<ObjectName>,
    /// With --key-secret: this node's local copy (`serve --key-copy-dir`), compared with the
    /// Secret; listed instead of the Secret when the Secret cannot be read.
    #[arg(long = "key-copy-dir", value_name = "DIR", requires = "key_secret")]
    pub(crate) key_copy_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) rotation: RotationArgs,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = ListFormat::Text)]
    pub(crate) output: ListFormat,
}

/// `warrant keys rotate`.
#[derive(Debug, Args)]
pub(crate) struct KeysRotateArgs {
    /// Where the keys are.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    #[command(flatten)]
    pub(crate) rotation: RotationArgs,
    /// Output format of the resulting schedule.
    #[arg(long, short, value_enum, default_value_t = ListFormat::Text)]
    pub(crate) output: ListFormat,
}

/// `warrant keys revoke`.
#[derive(Debug, Args)]
pub(crate) struct KeysRevokeArgs {
    /// The key ID to revoke, as `warrant keys list` shows it. (A kid is base64url, so it may
    /// start with `-`: it is still read as the kid.)
    #[arg(value_name = "KID", allow_hyphen_values = true)]
    pub(crate) kid: String,
    /// Where the keys are.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    #[command(flatten)]
    pub(crate) rotation: RotationArgs,
    /// Output format of the resulting schedule.
    #[arg(long, short, value_enum, default_value_t = ListFormat::Text)]
    pub(crate) output: ListFormat,
}

/// How `keys list`, `keys rotate` and `keys revoke` print.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ListFormat {
    /// A table.
    Text,
    /// JSON.
    Json,
}
