//! README's crate graph (the Mermaid block under "Layout") says which workspace crate depends
//! on which. This test reads it and compares it with `cargo metadata`: a dependency added or
//! removed without the drawing fails here, so the drawing cannot go stale.

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

type Edges = BTreeSet<(String, String)>;

/// The workspace's crates and their normal (not dev, not build) dependencies on each other.
fn from_cargo(root: &Path) -> (BTreeSet<String>, Edges) {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let mut edges = Edges::new();
    for package in packages {
        let from = package["name"].as_str().unwrap();
        for dependency in package["dependencies"].as_array().unwrap() {
            let to = dependency["name"].as_str().unwrap();
            if dependency["kind"].is_null() && names.contains(to) && to != from {
                edges.insert((from.to_owned(), to.to_owned()));
            }
        }
    }
    (names, edges)
}

/// The crates and arrows of the Mermaid graph under README's `## Layout`: nodes are declared `id[crate-name]`, and
/// arrows are `id --> id & id …`.
fn from_readme(readme: &str) -> (BTreeSet<String>, Edges) {
    let block = readme
        .split("## Layout")
        .nth(1)
        .and_then(|layout| layout.split("```mermaid").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("README has a mermaid block");
    let mut crates: BTreeMap<String, String> = BTreeMap::new();
    let mut arrows: Vec<(String, Vec<String>)> = Vec::new();
    for line in block.lines().map(str::trim) {
        if let Some((from, to)) = line.split_once("-->") {
            let targets = to.split('&').map(|t| t.trim().to_owned()).collect();
            arrows.push((from.trim().to_owned(), targets));
        } else if let Some((id, rest)) = line.split_once('[')
            && let Some(name) = rest.strip_suffix(']')
        {
            crates.insert(id.trim().to_owned(), name.to_owned());
        }
    }
    let name = |id: &str| {
        crates
            .get(id)
            .unwrap_or_else(|| panic!("the graph's arrow names {id:?}, which is not declared"))
            .clone()
    };
    let mut edges = Edges::new();
    for (from, targets) in arrows {
        for to in targets {
            assert!(
                edges.insert((name(&from), name(&to))),
                "{from} --> {to} is drawn twice"
            );
        }
    }
    (crates.into_values().collect(), edges)
}

#[test]
fn readme_crate_graph_matches_cargo_metadata() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (drawn_crates, drawn) = from_readme(&readme);
    let (crates, actual) = from_cargo(&root);
    assert_eq!(
        drawn_crates, crates,
        "README's crate graph and the workspace list different crates"
    );
    let missing: Vec<_> = actual.difference(&drawn).collect();
    let extra: Vec<_> = drawn.difference(&actual).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README's crate graph is stale: dependencies not drawn: {missing:?}; drawn but not \
         dependencies: {extra:?}"
    );
}

#[test]
fn the_reader_sees_what_is_drawn() {
    let readme =
        "## Layout\n```mermaid\ngraph TD\n  a[x-a]\n  b[x-b]\n  c[x-c]\n  a --> b & c\n```\n";
    let (crates, edges) = from_readme(readme);
    assert_eq!(crates.len(), 3);
    let pairs: Vec<(&str, &str)> = edges
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    assert_eq!(pairs, [("x-a", "x-b"), ("x-a", "x-c")]);
}
