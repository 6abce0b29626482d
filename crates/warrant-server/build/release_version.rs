//! The release a build is asked to be, held to Cargo.toml's version (the one source): shared by
//! build.rs, which fails the build on a mismatch, and the crate's unit tests.

/// `Ok` if `asked` (the `WARRANT_VERSION` a build was given: the image's build argument, from
/// `scripts/version`) is absent, empty, or `v` followed by `cargo_version` (the crate's
/// `CARGO_PKG_VERSION`); otherwise the reason, naming both. Without this, an image labelled
/// one version would answer `/version` and `--version` with another.
pub(crate) fn check(asked: Option<&str>, cargo_version: &str) -> Result<(), String> {
    match asked.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(()),
        Some(asked) if asked.strip_prefix('v') == Some(cargo_version) => Ok(()),
        Some(asked) => Err(format!(
            "WARRANT_VERSION={asked}, but Cargo.toml's version is {cargo_version}: the build would be labelled {asked} and report {cargo_version}. Pass WARRANT_VERSION=$(scripts/version) (v{cargo_version}), or change [workspace.package] version in Cargo.toml"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn the_release_version_must_be_cargos() {
        assert_eq!(check(None, "0.1.0"), Ok(()));
        assert_eq!(check(Some(""), "0.1.0"), Ok(()));
        assert_eq!(check(Some("v0.1.0"), "0.1.0"), Ok(()));
        assert_eq!(check(Some("v0.2.0-rc.1"), "0.2.0-rc.1"), Ok(()));
        let refused = check(Some("v0.2.0"), "0.1.0").unwrap_err();
        assert!(refused.contains("WARRANT_VERSION=v0.2.0"), "{refused}");
        assert!(
            refused.contains("Cargo.toml's version is 0.1.0"),
            "{refused}"
        );
        // The tag names the version with its `v`, as deploy/release and kube do.
        assert!(check(Some("0.1.0"), "0.1.0").is_err());
    }
}
