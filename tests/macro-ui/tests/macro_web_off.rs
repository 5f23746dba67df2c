//! `#[distributed_lock]` on an actix-web handler in a crate that turned the facade's `web`
//! feature off is one compile error, ours, that says to turn it on.
//!
//! trybuild builds its cases with the features of the package under test, so this case is
//! built here instead: a project made of tests/ui/web_off/handler.rs and a dependency on the
//! facade without default features, checked with `cargo check --offline` against a copy of
//! the workspace's lock file (the versions the suite built), in the workspace's own target
//! directory with the workspace's profile: `scripts/test` has checked the facade without
//! default features there already, so the dependencies are reused and only the library's
//! own crates (which are no workspace members here, so cargo names them apart) and the case
//! are checked: seconds, not the minute a target directory of its own took.

use std::path::Path;
use std::process::Command;

#[path = "../../support/cargo_env.rs"]
mod cargo_env;

#[test]
fn a_handler_without_the_web_feature_is_told_to_turn_it_on() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here
        .join("../..")
        .canonicalize()
        .expect("the workspace root");
    // `<target>/tmp`: the workspace's target directory is its parent.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .to_path_buf();
    let project = target.join("tmp").join("web-off");
    std::fs::create_dir_all(project.join("src")).expect("project directory");
    let manifest = format!(
        "[package]\n\
         name = \"web-off\"\n\
         version = \"0.0.0\"\n\
         edition = \"2021\"\n\
         publish = false\n\n\
         [dependencies]\n\
         actix-distributed-lock = {{ path = {root:?}, default-features = false }}\n\n\
         [workspace]\n\n\
         {profile}",
        root = root.display().to_string(),
        profile = workspace_profile(&root),
    );
    std::fs::write(project.join("Cargo.toml"), manifest).expect("Cargo.toml");
    std::fs::copy(root.join("Cargo.lock"), project.join("Cargo.lock")).expect("Cargo.lock");
    std::fs::copy(
        here.join("tests/ui/web_off/handler.rs"),
        project.join("src/main.rs"),
    )
    .expect("src/main.rs");

    let mut check = Command::new(env!("CARGO"));
    // The shared target directory's dependencies stay as the workspace built them.
    cargo_env::without_test_env(&mut check);
    let output = check
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", &target)
        .args(["check", "--offline", "--quiet", "--color=never"])
        .args(["--message-format=short"])
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the case compiled:\n{stderr}");

    // One diagnostic, ours, on the attribute (line 11 of the case); nothing follows from it.
    let diagnostics: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("src/"))
        .collect();
    assert_eq!(
        diagnostics,
        [
            "src/main.rs:11:1: error: #[distributed_lock] on an actix-web handler needs the \
             `web` feature of actix-distributed-lock: enable it (it is on by default; \
             `default-features = false` turns it off)"
        ],
        "cargo check said:\n{stderr}"
    );
}

/// The workspace manifest's `[profile.*]` tables, so the project's dependencies are the ones
/// the workspace checked (the profile is part of what names a compiled crate; without them
/// every dependency is checked again).
fn workspace_profile(root: &Path) -> String {
    let manifest =
        std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace manifest");
    let mut profile = String::new();
    let mut in_profile = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_profile = line.starts_with("[profile.");
        }
        if in_profile {
            profile.push_str(line);
            profile.push('\n');
        }
    }
    profile
}
