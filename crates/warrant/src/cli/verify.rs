//! `warrant verify`'s command line (the command is `crate::verify`).

use std::path::PathBuf;

use clap::Args;

/// `warrant verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The issuer to trust; its discovery document is fetched from
    /// <issuer>/.well-known/openid-configuration.
    #[arg(long, value_name = "URL")]
    pub(crate) issuer: String,
    /// Audience the token must carry (repeatable); default: the issuer.
    #[arg(long = "audience", value_name = "AUDIENCE")]
    pub(crate) audiences: Vec<String>,
    /// Extra CA certificates (PEM) to trust for the issuer's HTTPS, e.g. .warrant/ca.crt.
    #[arg(long, value_name = "PATH")]
    pub(crate) ca_file: Option<PathBuf>,
    /// The DPoP proof (RFC 9449) that came with a key-bound token (`cnf.jkt`), or `-` to read
    /// it from standard input: checked as a relying party checks it (signature by the bound
    /// key, `ath` the token's hash, `htm`/`htu` the request's, `iat` within 60 seconds of now).
    /// verify is one offline check and keeps no replay cache: it cannot tell a proof used
    /// before. A key-bound token without a proof is refused.
    #[arg(
        long = "dpop-proof",
        value_name = "JWT",
        requires_all = ["dpop_method", "dpop_uri"],
        help_heading = "Key-bound tokens"
    )]
    pub(crate) dpop_proof: Option<String>,
    /// The method of the request the proof came with (its `htm`), e.g. GET.
    #[arg(
        long = "dpop-method",
        value_name = "METHOD",
        requires = "dpop_proof",
        help_heading = "Key-bound tokens"
    )]
    pub(crate) dpop_method: Option<String>,
    /// The absolute URI of the request the proof came with (its `htu`; query ignored), e.g.
    /// https://vault.example/v1/auth/jwt/login.
    #[arg(
        long = "dpop-uri",
        value_name = "URI",
        requires = "dpop_proof",
        help_heading = "Key-bound tokens"
    )]
    pub(crate) dpop_uri: Option<String>,
    /// The client certificate (PEM; the first one in the file) of the TLS connection a
    /// certificate-bound token (`cnf["x5t#S256"]`, RFC 8705) came over: the token passes only
    /// if its SHA-256 thumbprint is the token's. A certificate-bound token without it is
    /// refused.
    #[arg(
        long = "client-certificate",
        value_name = "PATH",
        help_heading = "Key-bound tokens"
    )]
    pub(crate) client_certificate: Option<PathBuf>,
    /// The token, or `-` to read it from standard input.
    #[arg(value_name = "TOKEN")]
    pub(crate) token: String,
}
