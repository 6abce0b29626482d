//! What `/version` and `warrant --version` say of the build: the git commit and the commit's
//! date (reproducible: the same source gives the same answer), and the platform in Go's names.
//! `WARRANT_GIT_COMMIT` and `WARRANT_BUILD_DATE` override them where there is no `.git` (an
//! image built from a copy of the tree: `docker build --build-arg`).
//!
//! The tree state is kube's `gitTreeState` for tracked files: `dirty` when one differs from the
//! commit, `clean` when none does, empty when there is no git (or `WARRANT_GIT_TREE_STATE`
//! says). build/git_state.rs reads it and names exactly the paths that can change the answer,
//! so that a second build of an unchanged checkout compiles nothing (.ci/run checks it).
//!
//! The version itself is Cargo.toml's, the one source. A build given `WARRANT_VERSION` (the
//! image's build argument, which its OCI label carries) fails unless it is that version.

#[path = "build/git_state.rs"]
mod git_state;
#[path = "build/release_version.rs"]
mod release_version;

fn main() {
    println!("cargo:rerun-if-env-changed=WARRANT_VERSION");
    let cargo_version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    if let Err(why) = release_version::check(
        std::env::var("WARRANT_VERSION").ok().as_deref(),
        &cargo_version,
    ) {
        // cargo shows a failed build script's standard error: the one place to say why.
        #[allow(clippy::print_stderr)]
        {
            eprintln!("error: {why}");
        }
        std::process::exit(1);
    }
    println!("cargo:rerun-if-env-changed=WARRANT_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=WARRANT_BUILD_DATE");
    println!("cargo:rerun-if-env-changed=WARRANT_GIT_TREE_STATE");
    // git itself reads these: they choose the repository the answers below come from.
    println!("cargo:rerun-if-env-changed=GIT_DIR");
    println!("cargo:rerun-if-env-changed=GIT_WORK_TREE");
    let here = std::path::Path::new(".");
    let state = git_state::read(here);
    for path in state.iter().flat_map(|state| &state.watched) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let git = |args: &[&str]| git_state::git(here, args);
    let commit = std::env::var("WARRANT_GIT_COMMIT")
        .ok()
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_default();
    let date = std::env::var("WARRANT_BUILD_DATE")
        .ok()
        .or_else(|| {
            // The commit's time, in UTC, as Kubernetes writes buildDate.
            git(&[
                "log",
                "-1",
                "--format=%cd",
                "--date=format-local:%Y-%m-%dT%H:%M:%SZ",
            ])
        })
        .unwrap_or_default();
    println!("cargo:rustc-env=WARRANT_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=WARRANT_BUILD_DATE={date}");
    let tree_state = std::env::var("WARRANT_GIT_TREE_STATE")
        .ok()
        .or_else(|| state.map(|state| state.tree_state.to_owned()))
        .unwrap_or_default();
    println!("cargo:rustc-env=WARRANT_GIT_TREE_STATE={tree_state}");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH")
        .unwrap_or_default()
        .as_str()
    {
        "x86_64" => "amd64".to_owned(),
        "aarch64" => "arm64".to_owned(),
        "x86" => "386".to_owned(),
        "powerpc64" => "ppc64le".to_owned(),
        other => other.to_owned(),
    };
    println!("cargo:rustc-env=WARRANT_PLATFORM={os}/{arch}");
    let mut line = cargo_version;
    let mut about = Vec::new();
    if !commit.is_empty() {
        about.push(format!("commit {}", commit.get(..12).unwrap_or(&commit)));
    }
    if !date.is_empty() {
        about.push(format!("built {date}"));
    }
    about.push(format!("{os}/{arch}"));
    line.push_str(&format!(" ({})", about.join(", ")));
    println!("cargo:rustc-env=WARRANT_VERSION_LINE={line}");
}
