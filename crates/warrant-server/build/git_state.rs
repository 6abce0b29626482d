//! What the build says of its git checkout (the commit, its date, kube's `gitTreeState`) and
//! the paths whose change can alter that answer: shared by build.rs, which prints them as
//! `cargo:rerun-if-changed`, and the crate's unit tests, which check them on real repositories.
//!
//! The tree state is about tracked files only (`git status --untracked-files=no`): `clean` when
//! every tracked file matches the commit, `dirty` otherwise. An untracked file is not part of
//! the build, and a rule that counted it could not be watched without watching every directory
//! (where `target/` and `.warrant/` come and go).
//!
//! What is watched, so that a second build of an unchanged checkout compiles nothing and a real
//! change is never missed:
//! - always, what a commit or a checkout moves: `HEAD`, the branch refs (`refs/heads`, a
//!   directory cargo scans whole) and `packed-refs`, each only if it exists, since cargo counts a
//!   missing watched path as changed and would rerun the script on every build;
//! - when the tree is clean, every tracked file, by its path from the top of the checkout
//!   (`git ls-files`, whatever directory the script runs in), so the first edit anywhere, at
//!   any depth, makes the next build say `dirty`;
//! - when the tree is dirty, no tracked file: editing on costs no rebuild, and the next commit
//!   or checkout makes the script look again. The one way to be wrong is the safe one: a tree put
//!   back by hand to its commit says `dirty` until then.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The checkout as the build sees it.
pub(crate) struct GitState {
    /// `clean` or `dirty`.
    pub(crate) tree_state: &'static str,
    /// Every path whose change can change this answer or the commit; each one exists.
    pub(crate) watched: Vec<PathBuf>,
}

/// Runs git in `dir` (any directory inside the checkout) and returns its trimmed output.
pub(crate) fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("TZ", "UTC")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The state of the checkout holding `dir`, or `None` where there is no git or no checkout.
pub(crate) fn read(dir: &Path) -> Option<GitState> {
    let git_dir = PathBuf::from(git(dir, &["rev-parse", "--absolute-git-dir"])?);
    let top = PathBuf::from(git(dir, &["rev-parse", "--show-toplevel"])?);
    // In a linked worktree (`git worktree add`) HEAD is the worktree's own and the refs are the
    // repository's, in the common directory.
    let common = git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .map_or_else(|| git_dir.clone(), PathBuf::from);
    // A commit always writes a loose ref under refs/heads, even where the others are packed.
    let mut watched: Vec<PathBuf> = [
        git_dir.join("HEAD"),
        common.join("refs/heads"),
        common.join("packed-refs"),
    ]
    .into_iter()
    .filter(|path| path.exists())
    .collect();
    // `--no-optional-locks`: status must not rewrite the index behind the build's back.
    let changes = Command::new("git")
        .current_dir(&top)
        .args([
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
        ])
        .output()
        .ok()
        .filter(|out| out.status.success())?;
    if !changes.stdout.is_empty() {
        return Some(GitState {
            tree_state: "dirty",
            watched,
        });
    }
    // `-z`: names as they are, unquoted. Run at the top, so paths are the checkout's, not the
    // current directory's.
    let listed = Command::new("git")
        .current_dir(&top)
        .args(["ls-files", "-z"])
        .output()
        .ok()
        .filter(|out| out.status.success())?;
    watched.extend(
        listed
            .stdout
            .split(|byte| *byte == 0)
            .filter(|name| !name.is_empty())
            .map(|name| top.join(String::from_utf8_lossy(name).as_ref()))
            // A clean tree has every tracked file; a symbolic link to nothing is still tracked,
            // and cargo would count it as changed on every build.
            .filter(|path| path.exists()),
    );
    Some(GitState {
        tree_state: "clean",
        watched,
    })
}

#[cfg(test)]
mod tests {
    use super::{git, read};
    use std::path::Path;

    fn run(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// A repository shaped like this one: the build script runs in a crate's directory, two
    /// levels down, beside names (`benches`, `src`) the top level does not have.
    fn repository() -> tempfile::TempDir {
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        for (path, text) in [
            ("Cargo.toml", "[workspace]\n"),
            ("crates/server/build.rs", "fn main() {}\n"),
            ("crates/server/src/lib.rs", "//! lib\n"),
            ("crates/server/benches/stack.rs", "fn main() {}\n"),
            ("docs/keys.md", "# keys\n"),
        ] {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        run(root, &["init", "-q", "-b", "main"]);
        run(root, &["add", "."]);
        run(root, &["commit", "-q", "-m", "first"]);
        repo
    }

    #[test]
    fn a_clean_checkout_watches_only_paths_that_exist_and_every_tracked_file() {
        let repo = repository();
        let crate_dir = repo.path().join("crates/server");
        let state = read(&crate_dir).unwrap();
        assert_eq!(state.tree_state, "clean");
        // cargo reruns the script whenever a watched path is missing: with one, every build
        // of a clean checkout recompiled this crate and the binary.
        for path in &state.watched {
            assert!(
                path.exists(),
                "{} is watched but does not exist",
                path.display()
            );
        }
        let top = std::fs::canonicalize(repo.path()).unwrap();
        let watched: Vec<_> = state
            .watched
            .iter()
            .map(|path| std::fs::canonicalize(path).unwrap())
            .collect();
        // A nested file's edit must be seen, not only the top level's.
        for tracked in ["crates/server/src/lib.rs", "docs/keys.md", "Cargo.toml"] {
            assert!(
                watched.contains(&top.join(tracked)),
                "{tracked} is not watched: {watched:?}"
            );
        }
        // A commit or a checkout moves these.
        let git_dir = top.join(".git");
        assert!(watched.contains(&git_dir.join("HEAD")));
        assert!(watched.contains(&git_dir.join("refs/heads")));
    }

    #[test]
    fn an_edit_makes_the_tree_dirty_and_stops_watching_files() {
        let repo = repository();
        std::fs::write(repo.path().join("crates/server/src/lib.rs"), "//! edited\n").unwrap();
        let state = read(&repo.path().join("crates/server")).unwrap();
        assert_eq!(state.tree_state, "dirty");
        assert!(state.watched.iter().all(|path| path.exists()));
        assert!(
            !state.watched.iter().any(|path| path.ends_with("lib.rs")),
            "a dirty tree watches HEAD and the refs only"
        );
        // A commit brings it back to clean, and the commit is what the refs show.
        run(repo.path(), &["commit", "-q", "-am", "second"]);
        assert_eq!(read(repo.path()).unwrap().tree_state, "clean");
    }

    #[test]
    fn untracked_files_leave_the_tree_clean() {
        let repo = repository();
        std::fs::create_dir_all(repo.path().join("target")).unwrap();
        std::fs::write(repo.path().join("target/out"), "built").unwrap();
        assert_eq!(read(repo.path()).unwrap().tree_state, "clean");
    }

    #[test]
    fn packed_refs_are_watched_only_once_they_exist() {
        let repo = repository();
        let packed = repo.path().join(".git/packed-refs");
        let before = read(repo.path()).unwrap();
        assert!(!packed.exists());
        assert!(
            !before
                .watched
                .iter()
                .any(|path| path.ends_with("packed-refs"))
        );
        run(repo.path(), &["pack-refs", "--all"]);
        let after = read(repo.path()).unwrap();
        assert!(
            after
                .watched
                .iter()
                .any(|path| path.ends_with("packed-refs"))
        );
        assert!(after.watched.iter().all(|path| path.exists()));
    }

    #[test]
    fn no_checkout_has_no_state() {
        let outside = tempfile::tempdir().unwrap();
        assert!(git(outside.path(), &["rev-parse", "HEAD"]).is_none());
        assert!(read(outside.path()).is_none());
    }
}
