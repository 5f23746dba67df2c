//! Nothing to use: this package holds the attribute's compile-error cases (`tests/ui`) and
//! the build without the `web` feature (`tests/macro_web_off.rs`).
