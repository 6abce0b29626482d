//! Errors. Every message is safe to show an operator or a client: none contains key material or
//! a token.

use thiserror::Error;

/// Why key material could not be loaded or created.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The PEM text itself is malformed (bad base64, a BEGIN without an END, …).
    #[error("malformed PEM: {0}")]
    Pem(String),
    /// The PEM holds an encrypted private key, which warrant cannot use without a passphrase.
    #[error(
        "encrypted private keys are not supported; decrypt it first (openssl pkey -in KEY -out KEY.plain)"
    )]
    Encrypted,
    /// A key file holds no key of a kind warrant understands (kube-apiserver's message).
    #[error("data does not contain any valid RSA or ECDSA public keys")]
    NoPublicKeys,
    /// A signing key file holds no private key (kube-apiserver's message).
    #[error("data does not contain a valid RSA or ECDSA private key")]
    NoPrivateKey,
    /// A key block could not be parsed as the kind of key its PEM label claims.
    #[error("invalid {label} block: {reason}")]
    Invalid {
        /// The PEM label, e.g. `PRIVATE KEY`.
        label: &'static str,
        /// What was wrong with it.
        reason: &'static str,
    },
    /// An RSA key outside the sizes aws-lc accepts for RS256 (2048 to 8192 bits).
    #[error("RSA key of {0} bits is not supported: use 2048 to 8192 bits")]
    RsaSize(usize),
    /// An elliptic curve other than P-256, P-384 or P-521.
    #[error("unknown private key curve, must be 256, 384, or 521")]
    Curve,
    /// A JWK that does not describe a supported public key.
    #[error("invalid JWK: {0}")]
    Jwk(&'static str),
    /// Key generation or encoding failed inside the crypto library.
    #[error("crypto library failed to {0}")]
    Crypto(&'static str),
    /// A key held elsewhere (an HSM) did not sign.
    #[error("{0}")]
    Remote(crate::RemoteSignError),
    /// A key held elsewhere was asked for something only a key in memory does: to sign
    /// synchronously, or to be written out as PEM.
    #[error("the key is held in {0}: {1}")]
    HeldElsewhere(String, &'static str),
}

/// Why a token was not accepted. `Display` gives kube-apiserver's exact message, which is what
/// a TokenReview reports in `status.error`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Not a token of ours: not a three-part JWT, undecodable, another issuer, or too large to
    /// consider. kube-apiserver's authenticator says nothing for such a token; its bearer-token
    /// layer then reports the message used here.
    #[error("invalid bearer token")]
    NotMine,
    /// The token names a `kid` that none of our keys has, or we have no keys.
    #[error("invalid signature, no keys found")]
    NoKeysFound,
    /// The token names the `kid` of a key an operator revoked (`warrant keys revoke`). Not a
    /// kube-apiserver message: kube has no revocation, and would say "no keys found".
    #[error("invalid signature: the key that signed this token ({0}) has been revoked")]
    Revoked(String),
    /// No candidate key verified the signature (or the algorithm was not acceptable).
    #[error("go-jose/go-jose: error in cryptographic primitive")]
    Signature,
    /// The signature verified but the claims are not well-formed JSON of the expected types.
    #[error("service account token claims could not be decoded")]
    MalformedClaims,
    /// The verified issuer is not one of ours.
    #[error("token issuer {0:?} is invalid")]
    Issuer(String),
    /// No audience of the token is among the requested audiences.
    #[error(
        "token audiences {} is invalid for the target audiences {}",
        crate::goquote::quote_list(token),
        crate::goquote::quote_list(target)
    )]
    Audience {
        /// The token's audiences.
        token: Vec<String>,
        /// The audiences the caller asked for.
        target: Vec<String>,
    },
    /// `nbf` is more than 60 s in the future.
    #[error("service account token is not valid yet")]
    NotValidYet,
    /// `exp` is more than 60 s in the past.
    #[error("service account token has expired")]
    Expired,
    /// `iat` is more than 60 s in the future.
    #[error("service account token is issued in the future")]
    IssuedInTheFuture,
    /// warrant requires `exp`; kube-apiserver would accept such a token forever.
    #[error("service account token has no expiration (exp) claim")]
    MissingExpiry,
}

/// Why the discovery document could not be built. Messages are kube-apiserver's.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DocumentError {
    /// The issuer is empty.
    #[error("empty issuer URL")]
    EmptyIssuer,
    /// The issuer cannot be parsed as a URL.
    #[error("issuer URL {0:?} is not a valid URL")]
    IssuerNotUrl(String),
    /// The issuer is not https.
    #[error("issuer URL must use https scheme, got: {0}")]
    IssuerScheme(String),
    /// The issuer has a query.
    #[error("issuer URL may not include a query, got: {0}")]
    IssuerQuery(String),
    /// The issuer has a fragment.
    #[error("issuer URL may not include a fragment, got: {0}")]
    IssuerFragment(String),
    /// No JWKS URI.
    #[error("either the JWKS URI or the default external address, or both, must be set")]
    NoJwksUri,
    /// The JWKS URI is not https.
    #[error("service-account-jwks-uri requires https scheme, parsed as: {0}")]
    JwksUriScheme(String),
    /// No key to publish.
    #[error("no keys provided for validating keyset")]
    NoKeys,
}
