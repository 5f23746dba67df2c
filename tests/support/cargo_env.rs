//! A `cargo` command run from inside a test, without what cargo set for that test. Part of
//! the support crate, and included by the compile-error package's tests too (which cannot
//! depend on the support crate: trybuild would check every case against it).

use std::process::Command;

/// Removes from `command` the variables cargo sets for a running test (the package's name,
/// version and manifest dir, `OUT_DIR`, ...). Build scripts watch some of them (ring's
/// does), so a build seeing them would run those scripts again and rebuild what depends on
/// them in the shared target directory, and the next build from a shell would rebuild it
/// all back.
pub fn without_test_env(command: &mut Command) -> &mut Command {
    for (var, _) in std::env::vars_os() {
        let var = var.to_string_lossy();
        let set_for_tests = [
            "CARGO_PKG_",
            "CARGO_BIN_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
        ]
        .iter()
        .any(|prefix| var.starts_with(prefix))
            || [
                "CARGO_TARGET_TMPDIR",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_RUSTC_CURRENT_DIR",
                "OUT_DIR",
            ]
            .contains(&var.as_ref());
        if set_for_tests {
            command.env_remove(var.as_ref());
        }
    }
    command
}
