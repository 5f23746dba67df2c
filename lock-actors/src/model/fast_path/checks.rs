//! The fast-path model's checks: the library's rules (both owner set-ups) keep every
//! property; the rules as they were break the count, with the shortest traces asserted.

use super::*;
use stateright::Checker;

const COUNTED: &str = "Redis counts every hold a guard believes it has";
const AT_REST: &str = "a process at rest leaves no count behind";

use super::super::deep;

/// The bounds: two callers making two acquires each (three behind `LOCK_MODEL_DEPTH=deep`),
/// and the other process taking the lock once.
fn model(shared_owner: bool, settle: Settle) -> FastPathModel {
    FastPathModel {
        callers: 2,
        shared_owner,
        rounds: if deep() { 3 } else { 2 },
        peer_rounds: 1,
        settle,
        close: true,
        only: None,
    }
}

fn check(model: FastPathModel, label: &str) -> impl Checker<FastPathModel> {
    super::super::explore(model, label)
}

#[test]
fn callers_sharing_an_owner_keep_the_count_true_through_the_fast_path() {
    check(model(true, Settle::Complete), "fast path, one owner").assert_properties();
}

#[test]
fn callers_with_their_own_owners_keep_the_count_true_through_the_fast_path() {
    check(model(false, Settle::Complete), "fast path, two owners").assert_properties();
}

/// A shortest trace that breaks `property` under `settle`.
fn counterexample(settle: Settle, property: &'static str) -> Vec<Action> {
    let model = FastPathModel {
        only: Some(property),
        ..model(true, settle)
    };
    let trace = check(model, &format!("fast path, {settle:?}: {property}"))
        .assert_any_discovery(property)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    trace
}

#[test]
fn a_reconcile_while_a_try_of_the_owner_is_on_its_way_undoes_the_hold_it_took() {
    // As the actor settled doubts before: at its next turn. A caller's direct try had run
    // (its hold counted in Redis, not yet in the process), and the reconcile of another
    // caller's dropped try of the same owner found one hold more than the actor counted
    // and undid it; the first caller's guard then held a hold Redis no longer counted.
    let trace = counterexample(Settle::AtOnce, COUNTED);
    let Some(&Action::Place(caller)) = trace.last() else {
        panic!("the broken hold is the one placed last: {trace:?}");
    };
    let ran = trace.iter().position(|a| *a == Action::TryRuns(caller));
    let turn = trace.iter().rposition(|a| *a == Action::ActorTurn);
    assert!(
        ran.is_some() && ran < turn,
        "the actor's turn came after the try ran: {trace:?}"
    );
}

#[test]
fn two_doubts_of_one_owner_settled_by_the_one_more_rule_leave_a_count_behind() {
    // Two tries of one owner ran and were not counted (dropped by their callers, or their
    // answers lost): Redis counts two holds nobody has, and a reconcile that undoes only
    // when Redis counts exactly one more undoes neither.
    let trace = counterexample(Settle::OneMore, AT_REST);
    let doubts = trace
        .iter()
        .filter(|a| matches!(a, Action::TryDropped(..) | Action::TryUnanswered(_)))
        .count();
    assert!(doubts >= 2, "two doubts: {trace:?}");
}
