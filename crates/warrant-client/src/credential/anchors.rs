//! Who controls each of the plugin's inputs, and the checks that keep the hub's trust anchors
//! the hub's.
//!
//! The plugin sends the hub controller's own token to warrant, and that token can mint tokens
//! for every member. So the inputs are split by who writes them:
//!
//! - **The hub's operator**: the plugin's flags and environment (the provider config's
//!   `execConfig`, the controller's pod). warrant's URL and CA, an `--audience` for every
//!   cluster, and `--allow-profile-audience` come only from here.
//! - **Whoever writes a member's ClusterProfile status** (the cluster manager, perhaps fed by
//!   the member): `spec.cluster` of `KUBERNETES_EXEC_INFO`, i.e. the member's server URL, its CA
//!   and its exec extension (`config`). The server URL is the token's audience: client-go sends
//!   the token only to that server, so a profile that names another member's server sends the
//!   token to that member, never to itself. A `warrant` or `warrantCA` in the extension is
//!   accepted only when it equals the hub's; an `audience` only when it equals the server URL,
//!   unless the hub allows profile audiences.
//!
//! KEP-5339's `additional-args` and `additional-envs` extensions are applied by the hub's
//! client library before the plugin starts: they arrive as flags and environment, which the
//! plugin cannot tell from the operator's. What it can see it refuses: a flag given twice
//! (clap), and a flag that differs from its environment variable ([`agree_with_environment`]).
//!
//! warrant's URL and CA bundle themselves are read as both clients read them
//! ([`crate::endpoint`]: https only, at least one certificate); this module checks what a
//! profile says of them against the hub's.

use aws_lc_rs::digest;
use base64::Engine as _;

/// Why the plugin refuses its inputs before calling warrant.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AnchorError {
    /// No warrant URL among the hub's inputs.
    #[error(
        "no warrant URL: give --warrant-url (or WARRANT_URL) in the hub's provider config{}",
        match .profile {
            Some(url) => format!(
                "; the cluster's exec extension names {url}, but warrant's URL is never taken from a member's profile"
            ),
            None => String::new(),
        }
    )]
    NoWarrantUrl {
        /// The URL the member's profile names, if any.
        profile: Option<String>,
    },
    /// A flag and its environment variable both say something, and differ.
    #[error(
        "{flag} {flag_value:?} and {env} {env_value:?} differ: the hub gives it once (a \
         ClusterProfile's additional-args or additional-envs must not change it)"
    )]
    FlagAndEnvironment {
        /// The flag.
        flag: &'static str,
        /// Its value.
        flag_value: String,
        /// The environment variable.
        env: &'static str,
        /// Its value.
        env_value: String,
    },
    /// The member's profile names another warrant.
    #[error(
        "the cluster's exec extension names warrant at {profile}, but the hub's is {hub} ({from}): \
         warrant's URL is the hub's, never a member profile's (remove `warrant` from the profile \
         or make it match)"
    )]
    OtherWarrant {
        /// What the profile says.
        profile: String,
        /// What the hub says.
        hub: String,
        /// Where the hub's came from.
        from: String,
    },
    /// The member's profile names a CA where the hub has none.
    #[error(
        "the cluster's exec extension names warrant's CA (warrantCA, {profile}), but the hub \
         gives none (--warrant-ca-file, WARRANT_CA_FILE): warrant's CA is the hub's, never a \
         member profile's"
    )]
    CaWithoutHub {
        /// The profile's bundle, by fingerprint.
        profile: String,
    },
    /// The member's profile names another CA than the hub's.
    #[error(
        "the cluster's exec extension names warrant's CA (warrantCA, {profile}), which differs \
         from the hub's {from} ({hub}): warrant's CA is the hub's, never a member profile's \
         (remove `warrantCA` from the profile or make it match)"
    )]
    OtherCa {
        /// The profile's bundle, by fingerprint.
        profile: String,
        /// The hub's bundle, by fingerprint.
        hub: String,
        /// Where the hub's came from.
        from: String,
    },
    /// `warrantCA` is not base64 of PEM certificates.
    #[error("warrantCA in the cluster's exec extension is not base64 PEM certificates")]
    CaNotPem,
    /// The profile asks for an audience other than its server URL.
    #[error(
        "the cluster's exec extension asks for audience {profile:?}, not the cluster's server URL \
         {server:?}: a member's profile chooses no other audience unless the hub runs the plugin \
         with --allow-profile-audience"
    )]
    ProfileAudience {
        /// What the profile asks for.
        profile: String,
        /// The cluster's server URL.
        server: String,
    },
    /// The profile asks for an audience other than the hub's `--audience`.
    #[error(
        "the cluster's exec extension asks for audience {profile:?}, but the hub's --audience is \
         {hub:?}"
    )]
    AudienceDiffers {
        /// What the profile asks for.
        profile: String,
        /// The hub's flag.
        hub: String,
    },
    /// Nothing names an audience.
    #[error(
        "no audience: give provideClusterInfo: true in the exec config so the cluster's server \
         URL is known, or --audience"
    )]
    NoAudience,
}

/// Whether two URLs name the same place (scheme and host compared without case, a trailing `/`
/// ignored).
fn same_url(a: &str, b: &str) -> bool {
    let parse = |text: &str| text.trim().trim_end_matches('/').parse::<http::Uri>().ok();
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// The profile's `warrant`, if any, must name the hub's warrant.
pub(crate) fn profile_warrant(
    profile: Option<&str>,
    hub: &str,
    from: &str,
) -> Result<(), AnchorError> {
    match profile {
        Some(named) if !same_url(named, hub) => Err(AnchorError::OtherWarrant {
            profile: named.to_owned(),
            hub: hub.to_owned(),
            from: from.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// A bundle's name in messages: the SHA-256 of its sorted certificates, shortened.
fn fingerprint(certs: &[Vec<u8>]) -> String {
    let mut context = digest::Context::new(&digest::SHA256);
    for cert in certs {
        context.update(cert);
    }
    let hex: String = context
        .finish()
        .as_ref()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256 {hex}…")
}

/// The profile's `warrantCA`, if any, must be the hub's bundle (`hub`: its sorted DER
/// certificates and where they came from).
pub(crate) fn profile_ca(
    profile: Option<&str>,
    hub: Option<(&[Vec<u8>], &str)>,
) -> Result<(), AnchorError> {
    let Some(data) = profile else {
        return Ok(());
    };
    let named = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()
        .and_then(|pem| crate::endpoint::certificates(&pem))
        .filter(|certs| !certs.is_empty())
        .ok_or(AnchorError::CaNotPem)?;
    match hub {
        None => Err(AnchorError::CaWithoutHub {
            profile: fingerprint(&named),
        }),
        Some((certs, _)) if certs == named.as_slice() => Ok(()),
        Some((certs, from)) => Err(AnchorError::OtherCa {
            profile: fingerprint(&named),
            hub: fingerprint(certs),
            from: from.to_owned(),
        }),
    }
}

/// The token's audience: the hub's `--audience`, else the profile's where the hub allows it,
/// else the cluster's server URL. A profile audience that is not the one chosen is refused.
pub(crate) fn audience(
    hub: Option<&str>,
    allow_profile: bool,
    server: Option<&str>,
    profile: Option<&str>,
) -> Result<String, AnchorError> {
    match (hub, profile) {
        (Some(hub), Some(profile)) if hub != profile => Err(AnchorError::AudienceDiffers {
            profile: profile.to_owned(),
            hub: hub.to_owned(),
        }),
        (Some(hub), _) => Ok(hub.to_owned()),
        (None, Some(profile)) if allow_profile => Ok(profile.to_owned()),
        (None, Some(profile)) => match server {
            Some(server) if server == profile => Ok(profile.to_owned()),
            Some(server) => Err(AnchorError::ProfileAudience {
                profile: profile.to_owned(),
                server: server.to_owned(),
            }),
            // A profile is only seen with provideClusterInfo, which always carries the server.
            None => Err(AnchorError::NoAudience),
        },
        (None, None) => server.map(str::to_owned).ok_or(AnchorError::NoAudience),
    }
}

/// A hub input given both as `flag` (parsed value `value`) and as `env` must say the same:
/// clap lets a flag win over its variable, so a flag appended from a member's profile would
/// otherwise replace what the operator put in the environment (and the other way round).
pub(crate) fn agree_with_environment(
    flag: &'static str,
    value: Option<&str>,
    env: &'static str,
) -> Result<(), AnchorError> {
    let Some(value) = value else {
        return Ok(());
    };
    match std::env::var(env) {
        Ok(env_value) if !env_value.is_empty() && env_value != value => {
            Err(AnchorError::FlagAndEnvironment {
                flag,
                flag_value: value.to_owned(),
                env,
                env_value,
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_names_the_hubs_warrant_or_none() {
        let hub = "https://w.example";
        for same in [
            "https://w.example",
            "https://w.example/",
            "https://W.example",
        ] {
            profile_warrant(Some(same), hub, "--warrant-url").unwrap();
        }
        profile_warrant(None, hub, "--warrant-url").unwrap();
        let err = profile_warrant(Some("http://attacker:18999"), hub, "--warrant-url").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("http://attacker:18999") && text.contains("https://w.example"),
            "{text}"
        );
    }

    #[test]
    fn the_audience_is_the_servers_unless_the_hub_says_otherwise() {
        let server = Some("https://m1:6443");
        // (hub flag, allow profile, profile audience) → audience or the error's variant.
        assert_eq!(
            audience(None, false, server, None).unwrap(),
            "https://m1:6443"
        );
        assert_eq!(
            audience(None, false, server, Some("https://m1:6443")).unwrap(),
            "https://m1:6443"
        );
        assert!(matches!(
            audience(None, false, server, Some("member-2")),
            Err(AnchorError::ProfileAudience { .. })
        ));
        assert_eq!(
            audience(None, true, server, Some("member-2")).unwrap(),
            "member-2"
        );
        assert_eq!(audience(Some("m"), false, server, None).unwrap(), "m");
        assert_eq!(audience(Some("m"), false, server, Some("m")).unwrap(), "m");
        assert!(matches!(
            audience(Some("m"), false, server, Some("member-2")),
            Err(AnchorError::AudienceDiffers { .. })
        ));
        assert!(matches!(
            audience(None, false, None, None),
            Err(AnchorError::NoAudience)
        ));
        assert!(
            AnchorError::ProfileAudience {
                profile: "member-2".into(),
                server: "https://m1:6443".into()
            }
            .to_string()
            .contains("--allow-profile-audience")
        );
    }
}
