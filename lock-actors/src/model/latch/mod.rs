//! The count-down latch, model-checked: its key and scripts as pure functions (`store`,
//! each checked against its Lua on a real Redis, the messages published included, by
//! `mirror`), and waiters that park in the library's wait queue as the latch actor drives
//! it while another process counts down, deletes or sets a count again (`model`), with the
//! bounds checked and the negative controls below.

mod mirror;
mod model;
mod store;

use super::{deep, explore};
use model::{
    Action, LatchModel, Rules, NEVER_WHILE_CLOSED, NOTHING_LEFT, NO_LOST_WAKE_UP, WITHIN_FALLBACK,
};
use stateright::Checker;
use store::{Defect, Scripts};

/// The bounds: CI's, or deeper with `LOCK_MODEL_DEPTH=deep` (three waiters, a count of 2,
/// a delete beside the count-downs: another opening that publishes `0`).
fn model(drops: bool) -> LatchModel {
    LatchModel {
        callers: if deep() { 3 } else { 2 },
        count: if deep() { 2 } else { 1 },
        delete: deep(),
        scripts: Scripts::Current,
        rules: Rules::Library,
        drops,
        only: None,
    }
}

#[test]
fn waiters_are_released_by_every_opening_and_leave_nothing_behind() {
    explore(model(false), "latch").assert_properties();
}

#[test]
fn a_lost_message_costs_a_waiter_one_fallback_read_at_most() {
    // A message lost on the way: the head sleeps on until its fallback read (the
    // no-lost-wake-up property exempts a lost message), and is released within it.
    explore(model(true), "latch, messages lost").assert_properties();
}

/// A shortest trace that breaks `property` (breadth-first, checking only it).
fn counterexample(model: LatchModel, label: &str) -> Vec<Action> {
    let property = model.only.expect("one property");
    let trace = explore(model, label)
        .assert_any_discovery(property)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    trace
}

#[test]
fn releasing_on_the_message_without_reading_releases_a_waiter_of_a_closed_latch() {
    // The `0` of an opening (heard because a first waiter subscribed) arrives after the
    // count was set again: a second waiter, come after that, never saw the latch open, yet
    // goes.
    let naive = LatchModel {
        callers: 2,
        rules: Rules::ReleaseOnMessage,
        only: Some(NEVER_WHILE_CLOSED),
        ..model(false)
    };
    let trace = counterexample(naive, "latch, released on the message");
    let reset = trace.iter().position(|a| *a == Action::PeerReset);
    let waited = trace.iter().rposition(|a| matches!(a, Action::Wait(_)));
    assert!(
        matches!((reset, waited), (Some(r), Some(w)) if r < w),
        "{trace:?}"
    );
    assert_eq!(trace.last(), Some(&Action::Deliver), "{trace:?}");
}

#[test]
fn a_count_down_that_publishes_nothing_is_caught_and_the_fallback_still_releases() {
    let silent = |only| LatchModel {
        callers: 1,
        scripts: Scripts::Broken(Defect::SilentCountDown),
        only: Some(only),
        ..model(false)
    };
    let trace = counterexample(silent(NO_LOST_WAKE_UP), "latch, silent count-down");
    assert!(trace.contains(&Action::PeerCountDown), "{trace:?}");
    // The fallback read covers for the missing message: released within one period, and
    // nothing is left behind.
    for kept in [WITHIN_FALLBACK, NOTHING_LEFT] {
        explore(silent(kept), "latch, silent count-down").assert_properties();
    }
}
