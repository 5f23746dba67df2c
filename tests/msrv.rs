//! The `rust-version` the packages state is the real minimum: no crate a user builds with
//! them (normal and build dependencies, every feature, every target) needs a newer Rust.
//! Other toolchains cannot be installed to try, so the lock file's resolved crates are read
//! through `cargo metadata` and each one's own `rust-version` is compared with ours.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::process::Command;

fn version(text: &str) -> (u32, u32, u32) {
    let mut parts = text.split('.').map(|part| part.parse::<u32>().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

#[test]
fn the_stated_rust_version_covers_every_dependency_users_build() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--all-features",
            "--locked",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages: HashMap<&str, &Value> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| (package["id"].as_str().unwrap(), package))
        .collect();
    let nodes: HashMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| (node["id"].as_str().unwrap(), node))
        .collect();
    let members: Vec<&str> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();

    // Every member states the same minimum.
    let stated: BTreeSet<&str> = members
        .iter()
        .map(|id| {
            packages[id]["rust_version"]
                .as_str()
                .expect("rust-version set")
        })
        .collect();
    assert_eq!(stated.len(), 1, "the members disagree: {stated:?}");
    let ours = version(stated.first().unwrap());

    // The crates a user's build compiles: the members' normal and build dependencies,
    // transitively (dev-dependencies are ours alone).
    let mut seen: BTreeSet<&str> = members.iter().copied().collect();
    let mut todo: Vec<&str> = members.clone();
    while let Some(id) = todo.pop() {
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let built = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|kind| kind["kind"].as_str() != Some("dev"));
            let pkg = dep["pkg"].as_str().unwrap();
            if built && seen.insert(pkg) {
                todo.push(pkg);
            }
        }
    }
    let newer: Vec<String> = seen
        .iter()
        .filter_map(|id| {
            let needs = packages[id]["rust_version"].as_str()?;
            (version(needs) > ours).then(|| {
                format!(
                    "{} {} needs {needs}",
                    packages[id]["name"], packages[id]["version"]
                )
            })
        })
        .collect();
    assert!(
        newer.is_empty(),
        "rust-version {ours:?} is below what the lock file's crates need: {newer:?}"
    );
    assert!(seen.len() > 50, "only {} crates found", seen.len());
}
