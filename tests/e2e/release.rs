//! A release people can fetch: one source of the version (Cargo.toml) behind `--version`,
//! `/version`, the metrics, deploy/release and the image's label; THIRD-PARTY-NOTICES naming
//! exactly the crates in the binary; and scripts/release's packaging, run on the debug binary
//! this test has (a release build would take CI's two cores most of an hour): archives,
//! stripped binaries, debug info, SBOM and checksums.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::*;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
/// This machine's Rust target and Go platform (the archive's name).
fn host() -> (&'static str, &'static str) {
    match std::env::consts::ARCH {
        "aarch64" => ("aarch64-unknown-linux-gnu", "linux-arm64"),
        _ => ("x86_64-unknown-linux-gnu", "linux-amd64"),
    }
}

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap()
}

/// `scripts/version`: `v` and Cargo.toml's version.
fn release_version() -> String {
    let out = Command::new(format!("{ROOT}/scripts/version"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test]
async fn the_version_has_one_source() {
    let cargo = env!("CARGO_PKG_VERSION");
    let version = release_version();
    assert_eq!(version, format!("v{cargo}"));

    let said = warrant_ok(&["--version"]);
    assert!(said.starts_with(&format!("warrant {cargo} (")), "{said}");

    let w = Warrant::start(crate::tokens::OBJECTS, &[]).await;
    let served: Value = w
        .http
        .get(w.url("/version"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        served["gitVersion"]
            .as_str()
            .unwrap()
            .ends_with(&format!("+warrant-{cargo}")),
        "{served}"
    );
    assert_eq!(
        w.metric(&format!(
            r#"warrant_build_info{{version="{cargo}",git_commit="{}",platform="{}"}}"#,
            served["gitCommit"].as_str().unwrap(),
            served["platform"].as_str().unwrap()
        ))
        .await,
        1.0
    );

    // deploy/release names the same release.
    let release: Value =
        serde_saphyr::from_str(&read("deploy/release/kustomization.yaml")).unwrap();
    assert_eq!(release["images"][0]["newTag"], version.as_str());
    assert_eq!(
        release["labels"][0]["pairs"]["app.kubernetes.io/version"],
        version.as_str()
    );

    // The image: its label is the build argument, which the build stage requires and hands
    // to the build (where build.rs holds it to Cargo.toml), and the docs pass scripts/version.
    let dockerfile = read("Dockerfile");
    assert!(dockerfile.contains(r#"org.opencontainers.image.version="$WARRANT_VERSION""#));
    let build_stage = &dockerfile[..dockerfile.find("cargo build").unwrap()];
    assert!(
        build_stage.contains(r#"test -n "$WARRANT_VERSION""#),
        "the build stage does not require WARRANT_VERSION"
    );
    assert!(
        build_stage.contains("ENV WARRANT_VERSION=$WARRANT_VERSION"),
        "the build does not see WARRANT_VERSION"
    );
    let install = read("docs/install.md");
    for doc in [install.as_str(), dockerfile.as_str()] {
        assert!(doc.contains("--build-arg WARRANT_VERSION=$(scripts/version)"));
        assert!(doc.contains("--build-arg WARRANT_GIT_TREE_STATE="));
        assert!(
            !doc.contains("WARRANT_VERSION=v"),
            "a version written by hand"
        );
    }
}

/// The crates THIRD-PARTY-NOTICES names (`    name version` lines of its listing).
fn noticed() -> BTreeSet<String> {
    let notices = read("THIRD-PARTY-NOTICES");
    let listing = &notices[..notices
        .find("\nLicence texts\n")
        .expect("THIRD-PARTY-NOTICES has its listing")];
    listing
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .map(str::to_owned)
        .collect()
}

/// The crates built into the warrant binary for `target`, as cargo resolves them (features
/// and all): its normal dependencies, build scripts' and tests' left out, and the workspace's
/// own crates too (`cargo tree` marks them with their path).
fn built_into_warrant(target: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--locked",
            "--offline",
            "-p",
            "warrant",
            "-e",
            "normal",
        ])
        .args([
            "--target",
            target,
            "--prefix",
            "none",
            "-f",
            "{p}",
            "--manifest-path",
        ])
        .arg(format!("{ROOT}/Cargo.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.contains(" (/"))
        .map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next().unwrap();
            let version = words.next().unwrap().trim_start_matches('v');
            format!("{name} {version}")
        })
        .collect()
}

/// THIRD-PARTY-NOTICES names exactly the crates in the released binaries (the targets
/// scripts/notices.toml lists): a dependency added, removed or updated fails here until
/// `make notices` has run.
#[test]
fn the_notices_name_the_crates_in_the_binary() {
    let config = read("scripts/notices.toml");
    let mut built = BTreeSet::new();
    for target in string_array(&config, "targets") {
        built.extend(built_into_warrant(&target));
    }
    let noticed = noticed();
    let missing: Vec<&String> = built.difference(&noticed).collect();
    let extra: Vec<&String> = noticed.difference(&built).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "THIRD-PARTY-NOTICES is stale (run make notices): not named {missing:?}, not built {extra:?}"
    );
    assert!(
        built.iter().any(|c| c.starts_with("aws-lc-rs ")),
        "{built:?}"
    );
    // The licences accepted are those deny.toml allows (cargo deny checks the tree with it).
    assert_eq!(
        string_array(&read("deny.toml"), "allow"),
        string_array(&config, "accepted"),
        "scripts/notices.toml and deny.toml accept different licences"
    );
}

/// The strings of the first TOML array `key = [...]` in `text` (the two files hold only plain
/// string arrays under these keys).
fn string_array(text: &str, key: &str) -> BTreeSet<String> {
    let start = text
        .find(&format!("\n{key} = ["))
        .unwrap_or_else(|| panic!("no {key} = ["));
    let body = &text[start..];
    let body = &body[body.find('[').unwrap()..body.find(']').unwrap()];
    body.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// `scripts/release ARGS` with its output in `out`, at a fixed commit time.
fn release(out: &Path, args: &[&str]) -> Output {
    release_with(out, args, &[])
}

/// The same, with more variables in its environment.
fn release_with(out: &Path, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Output {
    Command::new(format!("{ROOT}/scripts/release"))
        .args(args)
        .env("RELEASE_DIR", out)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .env_remove("RELEASE_SIGNING_KEY")
        .env_remove("GLIBC_FLOOR")
        .env_remove("RELEASE_TARGETS")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// A throw-away release key in `dir` (OpenSSH ed25519): its private key's path, and the
/// allowed_signers file users verify with.
fn signing_key(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let key = dir.join("release-key");
    let made = warrant_testkit::tools::command("ssh-keygen", "OpenSSH's ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "releases@warrant.dev",
            "-f",
        ])
        .arg(&key)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let allowed = dir.join("allowed_signers");
    std::fs::write(&allowed, format!("releases@warrant.dev {public}")).unwrap();
    (key, allowed)
}

fn sections(file: &Path) -> String {
    let out = Command::new("readelf")
        .args(["-S", "-W"])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_release_packs_a_stripped_binary_with_its_licences_sbom_and_sums() {
    let version = release_version();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("dist");
    let (host, platform) = host();
    let packed = release(&out, &["package", host, BIN]);
    assert!(packed.status.success(), "{}", stderr(&packed));
    // Not without its signature.
    let unsigned = release(&out, &["sums"]);
    assert!(!unsigned.status.success());
    assert!(
        stderr(&unsigned).contains("RELEASE_SIGNING_KEY is not set"),
        "{}",
        stderr(&unsigned)
    );
    let (key, allowed) = signing_key(scratch.path());
    let sums = release_with(&out, &["sums"], &[("RELEASE_SIGNING_KEY", key.as_os_str())]);
    assert!(sums.status.success(), "{}", stderr(&sums));
    let name = format!("warrant-{version}-{platform}");
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "SHA256SUMS".to_owned(),
            "SHA256SUMS.sig".to_owned(),
            format!("{name}.cdx.json"),
            format!("{name}.debug"),
            format!("{name}.tar.gz"),
        ]
    );

    // The archive: one directory, the binary, LICENSE and the notices, owned by root.
    let listing = Command::new("tar")
        .args(["-tvzf"])
        .arg(out.join(format!("{name}.tar.gz")))
        .output()
        .unwrap();
    let listing = String::from_utf8(listing.stdout).unwrap();
    let entries: Vec<&str> = listing
        .lines()
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert_eq!(
        entries,
        [
            format!("{name}/"),
            format!("{name}/LICENSE"),
            format!("{name}/THIRD-PARTY-NOTICES"),
            format!("{name}/warrant"),
        ]
    );
    assert!(listing.lines().all(|l| l.contains(" 0/0 ")), "{listing}");
    let unpacked = scratch.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(out.join(format!("{name}.tar.gz")))
        .arg("-C")
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(untar.success());
    let binary = unpacked.join(&name).join("warrant");
    // It runs, and says the version it was packed as.
    let said = Command::new(&binary).arg("--version").output().unwrap();
    let said = String::from_utf8(said.stdout).unwrap();
    assert!(
        said.starts_with(&format!("warrant {} ", &version[1..])),
        "{said}"
    );
    // Stripped, with the debug info apart and linked by name.
    let stripped = sections(&binary);
    for section in [".symtab", ".debug_line"] {
        assert!(
            !stripped.contains(section),
            "{section} left in:\n{stripped}"
        );
    }
    assert!(stripped.contains(".gnu_debuglink"), "{stripped}");
    assert!(sections(&out.join(format!("{name}.debug"))).contains(".debug_line"));
    assert_eq!(
        std::fs::read(unpacked.join(&name).join("LICENSE")).unwrap(),
        read("LICENSE").into_bytes()
    );

    // The checksums verify every file.
    let check = Command::new("sha256sum")
        .args(["-c", "SHA256SUMS"])
        .current_dir(&out)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", stderr(&check));
    assert_eq!(
        String::from_utf8(check.stdout).unwrap().lines().count(),
        3,
        "SHA256SUMS covers the archive, the debug info and the SBOM"
    );
    // The signature verifies with the release key, as docs/install.md has users check it, and
    // not once SHA256SUMS changes.
    let verify = |sums: &[u8]| {
        use std::io::Write as _;
        let mut child = warrant_testkit::tools::command("ssh-keygen", "OpenSSH's ssh-keygen")
            .args([
                "-Y",
                "verify",
                "-I",
                "releases@warrant.dev",
                "-n",
                "file",
                "-f",
            ])
            .arg(&allowed)
            .arg("-s")
            .arg(out.join("SHA256SUMS.sig"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(sums).unwrap();
        child.wait().unwrap().success()
    };
    let signed = std::fs::read(out.join("SHA256SUMS")).unwrap();
    assert!(verify(&signed), "SHA256SUMS.sig does not verify");
    let mut forged = signed.clone();
    forged[0] ^= 1;
    assert!(!verify(&forged), "a changed SHA256SUMS verifies");
    let doc = read("docs/install.md");
    assert!(
        doc.contains("ssh-keygen -Y verify -f allowed_signers -I releases@warrant.dev -n file -s SHA256SUMS.sig < SHA256SUMS"),
        "docs/install.md does not say how to verify the checksums"
    );

    // The SBOM: the crates built into this binary, nothing else.
    let sbom_file = out.join(format!("{name}.cdx.json"));
    let sbom: Value = serde_json::from_slice(&std::fs::read(&sbom_file).unwrap()).unwrap();
    assert_lists_the_binary(&sbom, host);
    assert_eq!(sbom["metadata"]["timestamp"], "2023-11-14T22:13:20Z");

    // Packing again gives the same archive, byte for byte.
    let again = scratch.path().join("again");
    let packed = release(&again, &["package", host, BIN]);
    assert!(packed.status.success(), "{}", stderr(&packed));
    assert!(
        std::fs::read(out.join(format!("{name}.tar.gz"))).unwrap()
            == std::fs::read(again.join(format!("{name}.tar.gz"))).unwrap(),
        "the archive is not reproducible"
    );
    assert!(
        std::fs::read(&sbom_file).unwrap()
            == std::fs::read(again.join(format!("{name}.cdx.json"))).unwrap(),
        "the SBOM is not reproducible"
    );
}

/// Checks that `sbom` is warrant's CycloneDX 1.6 SBOM for `target`: its components are exactly
/// the crates built into the binary for that target (no other platform's), each named by its
/// purl with its licence, and its dependency graph reaches each of them from warrant.
#[track_caller]
fn assert_lists_the_binary(sbom: &Value, target: &str) {
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    assert_eq!(sbom["specVersion"], "1.6");
    let serial = sbom["serialNumber"].as_str().unwrap();
    assert!(
        serial.starts_with("urn:uuid:") && serial.len() == "urn:uuid:".len() + 36,
        "{serial}"
    );
    let warrant = &sbom["metadata"]["component"];
    assert_eq!(warrant["name"], "warrant");
    assert_eq!(warrant["version"], env!("CARGO_PKG_VERSION"));
    let warrant_ref = warrant["bom-ref"].as_str().unwrap();
    assert!(
        warrant["purl"]
            .as_str()
            .is_some_and(|p| p.starts_with("pkg:")),
        "{warrant}"
    );

    let components = sbom["components"].as_array().unwrap();
    let mut listed = BTreeSet::new();
    for c in components {
        let (name, version) = (c["name"].as_str().unwrap(), c["version"].as_str().unwrap());
        assert_eq!(c["type"], "library", "{c}");
        assert_eq!(c["purl"], format!("pkg:cargo/{name}@{version}"), "{c}");
        let licence = c["licenses"][0]["expression"].as_str().unwrap_or_default();
        assert!(
            is_spdx_expression(licence),
            "{name} {version}: licence {licence:?}"
        );
        listed.insert(format!("{name} {version}"));
    }
    let built = built_into_warrant(target);
    let missing: Vec<&String> = built.difference(&listed).collect();
    let extra: Vec<&String> = listed.difference(&built).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the {target} SBOM leaves out {missing:?} and lists crates not built into it {extra:?}"
    );

    // Every component is reached from warrant through the graph.
    let graph: std::collections::BTreeMap<&str, Vec<&str>> = sbom["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let on = d["dependsOn"].as_array().unwrap();
            let on = on.iter().map(|r| r.as_str().unwrap()).collect();
            (d["ref"].as_str().unwrap(), on)
        })
        .collect();
    let mut reached = BTreeSet::new();
    let mut next = vec![warrant_ref];
    while let Some(r) = next.pop() {
        if reached.insert(r) {
            next.extend(
                graph
                    .get(r)
                    .unwrap_or_else(|| panic!("{r} has no dependencies entry")),
            );
        }
    }
    let refs: BTreeSet<&str> = components
        .iter()
        .map(|c| c["bom-ref"].as_str().unwrap())
        .chain([warrant_ref])
        .collect();
    assert_eq!(
        reached, refs,
        "the dependency graph does not reach exactly the components"
    );
}

/// Whether `licence` is an SPDX licence expression: licence identifiers joined by AND, OR and
/// WITH, in parentheses or not (cargo's old `MIT/Apache-2.0` is not one).
fn is_spdx_expression(licence: &str) -> bool {
    let spaced = licence.replace('(', " ( ").replace(')', " ) ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let mut depth = 0i32;
    let mut want_id = true;
    for word in &words {
        match *word {
            "(" if want_id => depth += 1,
            ")" if !want_id && depth > 0 => depth -= 1,
            "AND" | "OR" | "WITH" if !want_id => want_id = true,
            id if want_id
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c)) =>
            {
                want_id = false
            }
            _ => return false,
        }
    }
    !words.is_empty() && !want_id && depth == 0
}

/// scripts/sbom filters by the target it is given: the release's other targets get the crates
/// built for them (the host's SBOM is checked through scripts/release above).
#[test]
fn the_sbom_of_each_release_target_lists_its_crates() {
    let targets = string_array(&read("scripts/notices.toml"), "targets");
    for target in targets.iter().filter(|t| *t != host().0) {
        let out = Command::new(format!("{ROOT}/scripts/sbom"))
            .arg(target)
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_lists_the_binary(&serde_json::from_slice(&out.stdout).unwrap(), target);
    }
}

/// A binary that needs a newer glibc than the floor docs/install.md promises is not packed: here
/// this test's own binary, against a floor set below what it needs. The script's floor is the
/// documented one.
#[test]
fn the_release_refuses_a_binary_above_the_glibc_floor() {
    let script = read("scripts/release");
    let floor = script
        .lines()
        .find_map(|l| l.strip_prefix("GLIBC_FLOOR=${GLIBC_FLOOR:-"))
        .and_then(|l| l.strip_suffix('}'))
        .expect("scripts/release sets GLIBC_FLOOR");
    assert!(
        read("docs/install.md").contains(&format!("The binary needs glibc {floor} or later")),
        "docs/install.md does not promise glibc {floor}"
    );
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("dist");
    let packed = release_with(
        &out,
        &["package", host().0, BIN],
        &[("GLIBC_FLOOR", std::ffi::OsStr::new("2.2"))],
    );
    assert!(!packed.status.success());
    let said = stderr(&packed);
    assert!(said.contains("above the floor 2.2"), "{said}");
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
}

/// A release builds both architectures by default, and refuses a target rustup does not have
/// before building anything (a machine with one target does not release one architecture).
#[test]
fn the_release_needs_every_architecture_installed() {
    let script = read("scripts/release");
    let required = script
        .lines()
        .find_map(|l| l.strip_prefix("REQUIRED_TARGETS=\""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("scripts/release names its targets");
    assert_eq!(
        required.split(' ').collect::<BTreeSet<_>>(),
        BTreeSet::from(["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"])
    );
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("dist");
    let refused = release_with(
        &out,
        &[],
        &[(
            "RELEASE_TARGETS",
            std::ffi::OsStr::new("x86_64-unknown-linux-gnu sparc64-unknown-linux-gnu"),
        )],
    );
    assert!(!refused.status.success());
    let said = stderr(&refused);
    assert!(
        said.contains("sparc64-unknown-linux-gnu is not installed"),
        "{said}"
    );
    assert!(!out.exists());
}

/// A binary that is not the version the release is named for is not packed.
#[test]
fn the_release_refuses_a_binary_of_another_version() {
    let scratch = tempfile::tempdir().unwrap();
    let fake = scratch.path().join("warrant");
    std::fs::write(&fake, "#!/bin/sh\necho 'warrant 9.9.9 (linux/amd64)'\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = scratch.path().join("dist");
    let packed = release(&out, &["package", host().0, fake.to_str().unwrap()]);
    assert!(!packed.status.success());
    let said = stderr(&packed);
    assert!(said.contains("not version"), "{said}");
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
}
