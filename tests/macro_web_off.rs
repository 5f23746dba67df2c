//! `#[distributed_lock]` on an actix-web handler in a crate that turned the facade's `web`
//! feature off is one compile error, ours, that says to turn it on.
//!
//! trybuild builds its cases with this crate's features (all of them in CI), so this case is
//! built here instead: a project in the target directory made of tests/ui/web_off/handler.rs
//! and a dependency on the facade without default features, checked with `cargo check
//! --offline` against a copy of the workspace's lock file (the versions the suite built).
//! Its target directory is kept between runs: after the first, only the case is checked.

use std::path::Path;
use std::process::Command;

#[test]
fn a_handler_without_the_web_feature_is_told_to_turn_it_on() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let project = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-off");
    std::fs::create_dir_all(project.join("src")).expect("project directory");
    let manifest = format!(
        "[package]\n\
         name = \"web-off\"\n\
         version = \"0.0.0\"\n\
         edition = \"2021\"\n\
         publish = false\n\n\
         [dependencies]\n\
         actix-distributed-lock = {{ path = {root:?}, default-features = false }}\n\n\
         [workspace]\n",
        root = root.display().to_string(),
    );
    std::fs::write(project.join("Cargo.toml"), manifest).expect("Cargo.toml");
    std::fs::copy(root.join("Cargo.lock"), project.join("Cargo.lock")).expect("Cargo.lock");
    std::fs::copy(
        root.join("tests/ui/web_off/handler.rs"),
        project.join("src/main.rs"),
    )
    .expect("src/main.rs");

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", project.join("target"))
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
