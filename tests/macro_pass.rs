//! What is not misuse of `#[distributed_lock]` compiles, as written: each module is a case
//! (a plain fn with parameters named like extractors, `on_lost` and durations in every
//! form, `Result` aliases and errors of one's own). Compiled with the suite, so the
//! compile-fail cases (tests/macro_ui.rs) only need checking, not a build of every
//! dependency.

#[path = "macro_pass/not_a_handler.rs"]
mod not_a_handler;
#[path = "macro_pass/on_lost_and_durations.rs"]
mod on_lost_and_durations;
#[path = "macro_pass/result_alias.rs"]
mod result_alias;

#[test]
fn what_is_not_misuse_compiles_with_the_signature_as_written() {
    not_a_handler::check();
    on_lost_and_durations::check();
    result_alias::check();
}
