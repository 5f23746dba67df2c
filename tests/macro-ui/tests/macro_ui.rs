//! Misuse of `#[distributed_lock]` is a compile error with a span on the offending token;
//! what is not misuse compiles (the facade's tests/macro_pass.rs).
//!
//! The expected messages are ours (the macro's `compile_error!`s), not rustc's, so they do
//! not drift with the compiler version. Regenerate with `TRYBUILD=overwrite` after changing
//! a message on purpose.

#[test]
fn misuse_is_a_compile_error_on_the_offending_token() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
