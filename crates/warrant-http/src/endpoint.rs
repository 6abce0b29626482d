//! Where warrant sends requests in clear: only to a host that never leaves the machine (a test
//! server such as moto's or MinIO's on this host). Every outbound client that can be given an
//! `http://` URL asks [`Destination::of`] (KMS's endpoint, and each request the KMS client
//! sends; a bucket's endpoint), so they cannot disagree about an address. Pure: it reads the
//! host as written and resolves nothing (what a name resolves to is DNS's answer, not the
//! operator's).

use std::net::{IpAddr, Ipv6Addr};

/// True if `host`, a URL's host as written (a name, an IPv4 address, an IPv6 address with or
/// without its brackets), is this machine's: `localhost` (in any case), an IPv4 address in
/// 127.0.0.0/8, `::1`, or an IPv4 address in 127.0.0.0/8 written as IPv4-mapped IPv6
/// (`::ffff:127.0.0.1`), which the kernel sends to loopback too. Anything else is not, a name
/// that resolves to loopback included: what a name resolves to is not the URL's to promise.
pub fn is_loopback_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let ip = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        // Brackets hold an IPv6 address and nothing else.
        Some(inner) => inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => host.parse::<IpAddr>().ok(),
    };
    ip.is_some_and(|ip| ip.to_canonical().is_loopback())
}

/// What a URL's scheme and host say about sending it a request, by the one rule: `https://`
/// anywhere, plain `http://` only to a loopback host ([`is_loopback_host`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// `https://`: TLS, the certificate checked.
    Https,
    /// `http://` to this machine: nothing crosses the network.
    LoopbackHttp,
    /// `http://` to any other host: what is sent crosses the network in clear. Refused, unless
    /// the operator says in a word of their own that the network is trusted (publish's
    /// `--publish-allow-http`).
    RemoteHttp,
    /// Neither `http://` nor `https://` (or no scheme at all).
    NotHttp,
}

impl Destination {
    /// Where a URL with `scheme` (compared without regard to case) and `host` (as written,
    /// brackets and all) sends its requests.
    pub fn of(scheme: Option<&str>, host: Option<&str>) -> Destination {
        match scheme {
            Some(s) if s.eq_ignore_ascii_case("https") => Destination::Https,
            Some(s) if s.eq_ignore_ascii_case("http") => {
                if host.is_some_and(is_loopback_host) {
                    Destination::LoopbackHttp
                } else {
                    Destination::RemoteHttp
                }
            }
            _ => Destination::NotHttp,
        }
    }

    /// Where `uri` sends its requests.
    pub fn of_uri(uri: &http::Uri) -> Destination {
        Destination::of(uri.scheme_str(), uri.host())
    }

    /// True if the rule lets a request go there: https, or plain http to loopback.
    pub fn is_allowed(self) -> bool {
        matches!(self, Destination::Https | Destination::LoopbackHttp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machines_addresses_are_loopback() {
        for (host, loopback) in [
            ("127.0.0.1", true),
            ("127.1.2.3", true),
            ("::1", true),
            ("[::1]", true),
            ("[::ffff:127.0.0.1]", true),
            ("::ffff:127.0.0.1", true),
            // As the url crate writes the same address.
            ("[::ffff:7f00:1]", true),
            ("localhost", true),
            ("LocalHost", true),
            ("10.0.0.1", false),
            ("example.com", false),
            ("[::ffff:10.0.0.1]", false),
            ("[::]", false),
            ("0.0.0.0", false),
            ("128.0.0.1", false),
            ("localhost.example.com", false),
            ("127.0.0.1.nip.io", false),
            ("[127.0.0.1]", false),
            ("", false),
        ] {
            assert_eq!(is_loopback_host(host), loopback, "{host}");
        }
    }

    #[test]
    fn https_anywhere_plain_http_only_to_loopback() {
        for (url, destination) in [
            ("https://kms.us-east-1.amazonaws.com", Destination::Https),
            ("HTTPS://minio.internal:9000", Destination::Https),
            ("https://10.0.0.1", Destination::Https),
            ("http://127.0.0.1:4566", Destination::LoopbackHttp),
            ("http://[::1]:4566", Destination::LoopbackHttp),
            ("http://localhost:4566", Destination::LoopbackHttp),
            ("http://[::ffff:127.0.0.1]:4566", Destination::LoopbackHttp),
            ("http://kms.internal:80", Destination::RemoteHttp),
            ("http://10.0.0.1", Destination::RemoteHttp),
            ("http://[::]:9000", Destination::RemoteHttp),
            ("http://127.0.0.1.nip.io", Destination::RemoteHttp),
            ("ftp://x", Destination::NotHttp),
            ("/relative", Destination::NotHttp),
        ] {
            let uri: http::Uri = url.parse().unwrap();
            assert_eq!(Destination::of_uri(&uri), destination, "{url}");
            assert_eq!(
                destination.is_allowed(),
                matches!(destination, Destination::Https | Destination::LoopbackHttp),
                "{url}"
            );
        }
    }
}
