//! The one rule for where warrant sends plain HTTP: only to a host that never leaves the
//! machine (a test server such as moto's or MinIO's on this host). Every outbound client that
//! allows `http://` (KMS's endpoint, a bucket's endpoint) asks this, so they cannot disagree
//! about an address. Pure: it reads the host as written and resolves nothing.

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
}
