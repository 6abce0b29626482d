//! What `/version` and `warrant --version` say of the build: the git commit and the commit's
//! date (reproducible: the same source gives the same answer), and the platform in Go's names.
//! `WARRANT_GIT_COMMIT` and `WARRANT_BUILD_DATE` override them where there is no `.git` (an
//! image built from a copy of the tree: `docker build --build-arg`).
//!
//! The tree state is kube's `gitTreeState`: `dirty` when `git status` shows any change,
//! `clean` when it shows none, empty when there is no git (or `WARRANT_GIT_TREE_STATE` says).
//! A clean tree watches every tracked top-level path, so the first edit after it reruns this
//! script and the build says `dirty`; a dirty tree watches only HEAD and the refs, so editing
//! on costs no rebuild, and a commit makes it look again. The one way to be wrong is the safe
//! one: a tree put back by hand to its commit still says `dirty` until the next commit.
//!
//! The version itself is Cargo.toml's, the one source. A build given `WARRANT_VERSION` (the
//! image's build argument, which its OCI label carries) fails unless it is that version.

use std::process::Command;

#[path = "build/release_version.rs"]
mod release_version;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .env("TZ", "UTC")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// `clean` or `dirty`, as kube's build says, or empty without git; watches what can change it.
fn tree_state() -> String {
    if let Ok(state) = std::env::var("WARRANT_GIT_TREE_STATE") {
        return state;
    }
    // `--no-optional-locks`: status must not rewrite the index, or the next build would see
    // a watched file newer than this run.
    let Some(changes) = Command::new("git")
        .args(["--no-optional-locks", "status", "--porcelain"])
        .output()
        .ok()
        .filter(|out| out.status.success())
    else {
        return String::new();
    };
    if !changes.stdout.is_empty() {
        return "dirty".to_owned();
    }
    if let Some(top) = git(&["rev-parse", "--show-toplevel"])
        && let Some(paths) = git(&["ls-tree", "--name-only", "HEAD"])
    {
        for path in paths.lines() {
            println!("cargo:rerun-if-changed={top}/{path}");
        }
    }
    "clean".to_owned()
}

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
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        // A new commit or checkout moves HEAD or a ref. Only paths that exist are watched:
        // cargo counts a watched path that is missing as changed, so naming `packed-refs`
        // (absent in a fresh clone until `git gc` packs the refs) rebuilt this crate and
        // everything above it on every build. A commit always writes a loose ref under
        // refs/heads, even where the others are packed, so the directory is enough. In a
        // linked worktree (`git worktree add`) HEAD is the worktree's own, and the refs are
        // the repository's, in the common directory.
        let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
            .unwrap_or_else(|| dir.clone());
        for (base, path) in [
            (&dir, "HEAD"),
            (&common, "refs/heads"),
            (&common, "packed-refs"),
        ] {
            let path = std::path::Path::new(base).join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
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
    println!("cargo:rustc-env=WARRANT_GIT_TREE_STATE={}", tree_state());
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
