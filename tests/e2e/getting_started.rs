//! docs/getting-started.md, run as a reader runs it: every fenced `sh` block, in order, in one
//! terminal's worth of state, against warrant started by the Makefile's own `run` recipe.
//!
//! What the test changes, and only this:
//! - The walk-through runs in a scratch checkout: a temporary directory holding
//!   `deploy/local/objects.yaml` (committed to a throw-away git repository, so the doc's
//!   `git checkout` restores it), the built binary at `target/debug/warrant`, and the `.warrant/`
//!   that `make run` creates. `HOME` is that directory too (kubectl's cache).
//! - Port 8443 is a port the test owns: `make run`'s `PORT`, and `:8443` in the doc's commands.
//! - `make run [ARGS=…]` is the Makefile's `run` recipe without its `cargo build` line (the test
//!   binary is built already) and with its `echo`s left out; `serve` gets the test's listening
//!   socket (socket activation) so the port is never free between two runs. A second `make run`
//!   replaces the first, as the doc says (stop the first).
//! - Shell variables carry over from block to block, as in one terminal.
//! - A command the doc marks `# fails` must fail, and every other command must succeed.
//! - Step 4's edits of the objects file, which the doc gives in prose, are made by the test.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;

const DOC: &str = include_str!("../../docs/getting-started.md");
const MAKEFILE: &str = include_str!("../../Makefile");
const OBJECTS: &str = include_str!("../../deploy/local/objects.yaml");

/// One fenced `sh` block and the `## ` section it is in.
struct Block {
    section: String,
    text: String,
}

fn sh_blocks(doc: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match &mut current {
            Some(text) if line.trim_start().starts_with("```") => {
                blocks.push(Block {
                    section: section.clone(),
                    text: std::mem::take(text),
                });
                current = None;
            }
            Some(text) => {
                text.push_str(line);
                text.push('\n');
            }
            None if line.starts_with("## ") => section = line[3..].to_owned(),
            None if line.trim() == "```sh" => current = Some(String::new()),
            None => {}
        }
    }
    blocks
}

/// The commands of a block as the shell reads them (continuation lines joined, whitespace
/// collapsed), with whether the doc says each fails.
fn commands(block: &str) -> Vec<(String, bool)> {
    let joined = block.replace("\\\n", " ");
    let mut out = Vec::new();
    let mut heredoc: Option<String> = None;
    for line in joined.lines() {
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            continue;
        }
        if let Some(at) = line.find("<<") {
            let end = line[at + 2..]
                .trim_start_matches('-')
                .trim()
                .trim_matches('\'')
                .split_whitespace()
                .next()
                .unwrap()
                .to_owned();
            heredoc = Some(end);
        }
        let (command, comment) = match line.find(" #") {
            Some(at) => (&line[..at], &line[at..]),
            None => (line, ""),
        };
        let command = command.split_whitespace().collect::<Vec<_>>().join(" ");
        if !command.is_empty() {
            out.push((command, comment.contains("# fails")));
        }
    }
    out
}

/// The scratch checkout and the server `make run` started in it.
struct Walk {
    dir: tempfile::TempDir,
    listener: TcpListener,
    port: u16,
    serve: Option<Child>,
}

impl Walk {
    fn new() -> Walk {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("deploy/local")).unwrap();
        std::fs::write(root.join("deploy/local/objects.yaml"), OBJECTS).unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::os::unix::fs::symlink(BIN, root.join("target/debug/warrant")).unwrap();
        for git in [
            &["init", "-q"][..],
            &["add", "deploy/local/objects.yaml"],
            &[
                "-c",
                "user.name=test",
                "-c",
                "user.email=test@example.invalid",
                "commit",
                "-qm",
                "objects",
            ],
        ] {
            let out = Command::new("git")
                .args(git)
                .current_dir(root)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {git:?}: {}", stderr(&out));
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        Walk {
            dir,
            listener,
            port,
            serve: None,
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `make run ARGS=…`: the Makefile's recipe, as make would expand it.
    async fn make_run(&mut self, args: &str) {
        if let Some(mut old) = self.serve.take() {
            let _ = old.kill();
            let _ = old.wait();
        }
        let mut vars: BTreeMap<&str, String> = BTreeMap::new();
        for line in MAKEFILE.lines() {
            if let Some((name, value)) = line.split_once("?=") {
                vars.insert(name.trim(), value.trim().to_owned());
            }
        }
        vars.insert("PORT", self.port.to_string());
        vars.insert("ARGS", args.to_owned());
        let expand = |text: &str| -> String {
            let mut text = text.replace("$$", "\u{0}");
            // Nested references (ISSUER names ADDRESS and PORT) need a few rounds.
            for _ in 0..4 {
                for (name, value) in &vars {
                    text = text.replace(&format!("$({name})"), value);
                }
            }
            text.replace('\u{0}', "$")
        };
        let recipe = MAKEFILE
            .split("\nrun:\n")
            .nth(1)
            .expect("the Makefile has a run target")
            .split("\n\n")
            .next()
            .unwrap()
            .replace("\\\n", " ");
        let mut served = false;
        for line in recipe.lines().map(str::trim) {
            if line.starts_with('@') || line.starts_with("$(CARGO)") {
                continue;
            }
            let line = expand(line);
            if let Some(serve) = line.strip_prefix("exec ") {
                self.serve = Some(self.spawn_serve(serve));
                served = true;
            } else {
                let out = Command::new("bash")
                    .args(["-c", &line])
                    .current_dir(self.root())
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{line}: {}", stderr(&out));
            }
        }
        assert!(served, "make run serves: {recipe}");
        self.wait_ready().await;
    }

    /// Runs the recipe's `serve` line with the test's socket (descriptor 3, `LISTEN_FDS=1`).
    fn spawn_serve(&self, line: &str) -> Child {
        use command_fds::{CommandFdExt, FdMapping};
        use std::os::fd::AsFd;
        let mut command = Command::new("bash");
        command
            .args(["-c", &format!("exec {line}")])
            .current_dir(self.root())
            .env("LISTEN_FDS", "1")
            .env_remove("LISTEN_PID")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
            .fd_mappings(vec![FdMapping {
                parent_fd: self.listener.as_fd().try_clone_to_owned().unwrap(),
                child_fd: 3,
            }])
            .unwrap();
        command.spawn().unwrap()
    }

    async fn wait_ready(&mut self) {
        let ca = std::fs::read(self.root().join(".warrant/ca.crt")).unwrap();
        let http = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(&ca).unwrap()])
            .build()
            .unwrap();
        let url = format!("https://127.0.0.1:{}/readyz", self.port);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = http.get(&url).timeout(Duration::from_secs(2)).send().await
                && r.status().is_success()
            {
                return;
            }
            let child = self.serve.as_mut().unwrap();
            assert!(child.try_wait().unwrap().is_none(), "warrant exited");
            assert!(
                tokio::time::Instant::now() < deadline,
                "warrant did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Runs a block in bash; returns its stdout and stderr. Every command must succeed except
    /// those marked `# fails`, which must fail.
    fn run(&mut self, block: &str) -> (String, String) {
        let block = block.replace(":8443", &format!(":{}", self.port));
        // Shell variables live on from block to block, as in one terminal: each block starts
        // from the variables earlier blocks set, and saves those it sets.
        let state = self.root().join(".walk-state.sh");
        let save: String = block
            .lines()
            .filter_map(|l| {
                let l = l.strip_prefix("export ").unwrap_or(l);
                let (name, _) = l.split_once('=')?;
                (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                    .then(|| format!("declare -p {name} >> {}\n", state.display()))
            })
            .collect();
        let script = format!(
            "[ -f {state} ] && . {state}\ntrap 'echo \"__FAILED__ $BASH_COMMAND\" >&2' ERR\n{block}\ntrap - ERR\n{save}",
            state = state.display()
        );
        let out = Command::new("bash")
            .args(["-c", &script])
            .current_dir(self.root())
            .env("HOME", self.root())
            .env("PWD", self.root())
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        let failed: Vec<String> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("__FAILED__ "))
            .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        let expected: Vec<String> = commands(&block)
            .into_iter()
            .filter(|(_, fails)| *fails)
            .map(|(c, _)| c)
            .collect();
        assert_eq!(
            failed, expected,
            "the commands that failed are not those the doc says fail:\n{block}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        (stdout, stderr)
    }

    fn write_objects(&self, objects: &str) {
        let file = self.root().join("deploy/local/objects.yaml");
        let tmp = file.with_extension("new");
        std::fs::write(&tmp, objects).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
    }

    fn objects(&self) -> String {
        std::fs::read_to_string(self.root().join("deploy/local/objects.yaml")).unwrap()
    }

    /// Runs `block` until its output holds `want` (warrant reloads the objects file on its
    /// own schedule).
    async fn until(&mut self, block: &str, want: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (out, _) = self.run(block);
            // kubectl's YAML wraps long strings: compare with the whitespace collapsed.
            if out
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .contains(want)
            {
                return out;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never saw {want:?}; last:\n{out}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        if let Some(child) = self.serve.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn make_run_args(block: &str) -> Option<String> {
    let line = block.trim();
    let rest = line.strip_prefix("make run")?;
    Some(
        rest.trim()
            .strip_prefix("ARGS=")
            .map(|a| a.trim_matches('"').to_owned())
            .unwrap_or_default(),
    )
}

#[tokio::test]
async fn getting_started_runs_as_written() {
    let blocks = sh_blocks(DOC);
    let mut walk = Walk::new();
    let mut outputs: Vec<(String, String)> = Vec::new();
    let mut step4_review: Option<String> = None;
    for block in &blocks {
        if let Some(args) = make_run_args(&block.text) {
            walk.make_run(&args).await;
            continue;
        }
        if block.section.starts_with("4.") && step4_review.is_none() {
            // "Delete the app-0 Pod document from deploy/local/objects.yaml and save."
            let without_pod: Vec<&str> = OBJECTS
                .split("\n---\n")
                .filter(|doc| !doc.contains("kind: Pod\n"))
                .collect();
            assert_eq!(without_pod.len() + 1, OBJECTS.split("\n---\n").count());
            walk.write_objects(&without_pod.join("\n---\n"));
            let revoked = walk
                .until(&block.text, "service account token has been invalidated")
                .await;
            assert!(!revoked.contains("authenticated: true"), "{revoked}");
            // "Put the Pod back as it was and review again": the same UID, valid again.
            walk.write_objects(OBJECTS);
            walk.until(&block.text, "authenticated: true").await;
            // "Put it back with a new metadata.uid instead".
            let uid = DOC
                .split("`uid: ")
                .nth(1)
                .and_then(|r| r.split('`').next())
                .expect("step 4 names the new uid");
            let renewed =
                OBJECTS.replace("  name: app-0\n", &format!("  name: app-0\n  uid: {uid}\n"));
            assert_ne!(renewed, OBJECTS);
            walk.write_objects(&renewed);
            let out = walk
                .until(&block.text, "does not match service account pod ref claim")
                .await;
            assert!(out.contains("pod UID ("), "{out}");
            step4_review = Some(block.text.clone());
            continue;
        }
        let out = walk.run(&block.text);
        if block
            .text
            .contains("git checkout deploy/local/objects.yaml")
        {
            assert_eq!(walk.objects(), OBJECTS, "git checkout restores the example");
        }
        outputs.push((block.section.clone(), out.0));
    }
    assert!(step4_review.is_some(), "step 4 has a review command");
    // The walk leaves nothing in the checkout but what git ignores (`.warrant/`, `target/`):
    // `git status` is as clean as before. (`HOME`'s kubectl cache and the test's own shell
    // state are the test's, kept there because HOME is the checkout.)
    let status = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(walk.root())
        .output()
        .unwrap();
    let left: Vec<String> = String::from_utf8(status.stdout)
        .unwrap()
        .lines()
        .map(|l| l[3..].to_owned())
        .filter(|path| {
            !["target/", ".warrant/", ".kube/", ".walk-state.sh"]
                .iter()
                .any(|ours| path.starts_with(ours))
        })
        .collect();
    assert!(
        left.is_empty(),
        "the walk left files in the checkout: {left:?}"
    );
    let output = |section: &str, n: usize| -> &str {
        &outputs
            .iter()
            .filter(|(s, _)| s.starts_with(section))
            .nth(n)
            .unwrap_or_else(|| panic!("no block {n} in section {section}"))
            .1
    };

    // Step 2: four tokens, each for vault, bound as asked.
    // kubectl prints a token without a newline when its output is not a terminal, so the four
    // run together; each starts with the same header (one key signs them all).
    let printed = output("2.", 0).trim();
    let header = &printed[..printed.find('.').unwrap()];
    let tokens: Vec<String> = printed
        .split(header)
        .filter(|t| !t.is_empty())
        .map(|t| format!("{header}{t}"))
        .collect();
    assert_eq!(tokens.len(), 4, "{tokens:?}");
    for token in &tokens {
        assert_eq!(claims(token).aud, vec!["vault".to_owned()]);
    }
    let pod = claims(&tokens[2]).kubernetes;
    assert_eq!(pod.pod.as_ref().unwrap().name, "app-0");
    assert_eq!(pod.node.as_ref().unwrap().name, "node-1");
    assert_eq!(
        claims(&tokens[3]).kubernetes.secret.as_ref().unwrap().name,
        "app-token"
    );

    // Step 3: the review shows the pod and node in extra, as the doc says; so does the JSON one.
    let reviewed = output("3.", 0);
    for want in [
        "authenticated: true",
        "system:serviceaccount:demo:app",
        "authentication.kubernetes.io/pod-name:\n      - app-0",
        "authentication.kubernetes.io/node-name:\n      - node-1",
    ] {
        assert!(reviewed.contains(want), "{want:?} not in:\n{reviewed}");
    }
    let json: serde_json::Value = serde_json::from_str(output("3.", 1)).unwrap();
    assert_eq!(json["status"]["authenticated"], true, "{json}");
    assert_eq!(
        json["status"]["user"]["extra"]["authentication.kubernetes.io/pod-name"][0],
        "app-0"
    );

    // Step 5: discovery, the key set, and a relying party's verification.
    // The discovery document, then the key set (kubectl prints them back to back).
    let documents: Vec<serde_json::Value> = serde_json::Deserializer::from_str(output("5.", 0))
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(documents.len(), 2);
    assert!(
        documents[1]["keys"][0]["kid"].is_string(),
        "{}",
        documents[1]
    );
    let discovery = &documents[0];
    assert_eq!(
        discovery["issuer"],
        format!("https://127.0.0.1:{}", walk.port)
    );
    let verified = output("5.", 1);
    assert!(
        verified.contains("system:serviceaccount:demo:app"),
        "{verified}"
    );

    // Step 6: the grant works; the other audience was refused (a command marked `# fails`).
    let issued = output("6.", 1);
    assert_eq!(issued.lines().count(), 1, "{issued}");
    assert_eq!(claims(issued).aud, vec!["vault".to_owned()]);
}

/// The parser this test relies on finds what the doc holds, so a reformatted doc cannot make the
/// walk-through above skip its steps.
#[test]
fn getting_started_blocks_are_found() {
    let blocks = sh_blocks(DOC);
    let sections: Vec<&str> = blocks.iter().map(|b| &b.section[..2]).collect();
    for step in ["1.", "2.", "3.", "4.", "5.", "6."] {
        assert!(
            sections.contains(&step),
            "no sh block in step {step}: {sections:?}"
        );
    }
    let failing: Vec<String> = blocks
        .iter()
        .flat_map(|b| commands(&b.text))
        .filter(|(_, fails)| *fails)
        .map(|(c, _)| c)
        .collect();
    assert_eq!(failing.len(), 2, "{failing:?}");
    assert_eq!(make_run_args("make run\n"), Some(String::new()));
    assert_eq!(
        make_run_args("make run ARGS=\"--a b\"\n").as_deref(),
        Some("--a b")
    );
}
