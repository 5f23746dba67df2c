//! The in-flight model's checks: the library's rules keep every property with force-unlocks
//! and lost holds among requests in flight; the rules as they were break them, and the
//! checker finds each defect as a shortest trace.

use super::*;
use stateright::Checker;

fn model(rules: Rules, force: bool, hold_ends: bool) -> InFlightModel {
    InFlightModel {
        callers: if super::super::deep() { 4 } else { 3 },
        rules,
        force,
        hold_ends,
        rival_rounds: 1,
        releases: true,
        cancels: true,
        unconfirmed: false,
        forgets: false,
        only: None,
    }
}

fn check(model: InFlightModel, label: &str) -> impl Checker<InFlightModel> {
    super::super::explore(model, label)
}

#[test]
fn the_current_rules_keep_every_property_with_requests_in_flight() {
    check(
        model(Rules::CURRENT, true, true),
        "in flight, current rules",
    )
    .assert_properties();
}

/// Replica sync: a direct grant no replica confirmed is uncounted, given back by the actor's
/// reconcile, and its caller queued, while force-unlocks and releases are in flight.
#[test]
fn a_direct_grant_the_replicas_did_not_confirm_keeps_every_property() {
    let model = InFlightModel {
        unconfirmed: true,
        ..model(Rules::CURRENT, true, false)
    };
    check(model, "in flight, unconfirmed direct grants").assert_properties();
}

/// The server forgets every hold (a failover to a replica that never saw them) while
/// requests are in flight: from the answer of the owner's first grant after it, every
/// property holds again.
#[test]
fn a_server_that_forgot_every_hold_is_heard_at_the_next_grant() {
    let model = InFlightModel {
        forgets: true,
        ..model(Rules::CURRENT, true, true)
    };
    check(model, "in flight, the server forgets").assert_properties();
}

#[test]
fn the_old_rules_leave_a_forgotten_hold_untold_past_the_next_grant() {
    // The server forgets the owner's hold; a re-entry takes the lock afresh (Redis's first
    // hold of the owner), and the outer guard, still counted, is not told: Redis counts one
    // hold where the process counts two.
    let rules = Rules {
        first_hold_ends: false,
        ..Rules::CURRENT
    };
    let model = InFlightModel {
        forgets: true,
        only: Some(UNTOLD),
        ..model(rules, false, false)
    };
    let trace = check(model, "in flight, old rules: the server forgets")
        .assert_any_discovery(UNTOLD)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    let forgot = at(&trace, Action::Forget);
    let answered = trace.iter().rposition(|a| *a == Action::ActorTryAnswered);
    assert!(
        answered.is_some_and(|answered| forgot < answered),
        "a grant answered after the forget: {trace:?}"
    );
}

/// A shortest trace that breaks `property` under `rules` with only the given events.
fn counterexample(
    rules: Rules,
    force: bool,
    hold_ends: bool,
    property: &'static str,
) -> Vec<Action> {
    let model = InFlightModel {
        only: Some(property),
        ..model(rules, force, hold_ends)
    };
    let trace = check(model, &format!("in flight, old rules: {property}"))
        .assert_any_discovery(property)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    trace
}

fn at(trace: &[Action], action: Action) -> usize {
    trace
        .iter()
        .position(|a| *a == action)
        .unwrap_or_else(|| panic!("{action:?} is in the trace: {trace:?}"))
}

#[test]
fn the_old_rules_let_a_force_unlock_delete_a_direct_grant_on_its_way_untold() {
    // A direct try runs, the actor sends the force (nothing counted to lose yet), the force
    // deletes the hold, and the try's answer is placed as a live hold.
    let rules = Rules {
        force_voids: false,
        ..Rules::CURRENT
    };
    let trace = counterexample(rules, true, false, UNTOLD_AFTER_FORCE);
    let caller = trace
        .iter()
        .find_map(|a| match a {
            Action::Place(c) => Some(*c),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a direct grant is placed: {trace:?}"));
    let ran = at(&trace, Action::TryRuns(caller));
    let sent = at(&trace, Action::ForceSent);
    let forced = at(&trace, Action::ForceRuns);
    assert!(ran < forced, "the try ran before the force: {trace:?}");
    assert!(
        sent < at(&trace, Action::Place(caller)),
        "placed after: {trace:?}"
    );
}

#[test]
fn the_old_rules_leave_a_lost_hold_counted_when_a_reentry_lands_on_it() {
    // The owner's hold ends while the actor's re-entry is on its way; the clearing is
    // skipped, the re-entry lands on the old field, and Redis counts one hold more than the
    // process once everything is answered.
    let rules = Rules {
        settle_in_flight: false,
        ..Rules::CURRENT
    };
    let trace = counterexample(rules, false, true, SETTLED);
    let ended = at(&trace, Action::HoldsEnd);
    let ran = at(&trace, Action::ActorTryRuns);
    assert!(
        ended < ran,
        "the hold ended before the re-entry ran: {trace:?}"
    );
    assert!(
        !trace.contains(&Action::ClearRuns),
        "nothing cleared: {trace:?}"
    );
}

#[test]
fn the_old_rules_let_the_clearing_cut_a_new_hold() {
    // The owner is told its hold is lost and the actor goes on (the fast path reopens, the
    // head may try) before the clearing is registered; its new try lands on the old field,
    // the clearing's unlock takes one count and cuts the key's TTL short, and the key
    // expires under the new guard.
    let rules = Rules {
        clear_first: false,
        ..Rules::CURRENT
    };
    let trace = counterexample(rules, false, true, UNTOLD);
    let ended = at(&trace, Action::HoldsEnd);
    let ran = trace
        .iter()
        .rposition(|a| matches!(a, Action::TryRuns(_) | Action::ActorTryRuns))
        .unwrap_or_else(|| panic!("a new try runs: {trace:?}"));
    let cleared = at(&trace, Action::ClearRuns);
    assert!(ended < ran && ran < cleared, "{trace:?}");
    assert_eq!(trace.last(), Some(&Action::KeyExpires), "{trace:?}");
}

#[test]
fn the_old_rules_let_the_clearing_cut_a_direct_hold_still_in_the_slot() {
    // A fourth window the model found: the owner's hold taken directly is still in the
    // slot (placed while the actor was in charge, not absorbed yet) when the holds the
    // actor keeps for the same owner reach their end. The old rule looked only at the
    // actor's own try: nothing out, so it cleared at once, and the clearing's unlock took
    // one count and cut the key's TTL under the slot's untold guard.
    let rules = Rules {
        settle_in_flight: false,
        ..Rules::CURRENT
    };
    let trace = counterexample(rules, false, true, UNTOLD);
    let ended = at(&trace, Action::HoldsEnd);
    let placed = trace
        .iter()
        .position(|a| matches!(a, Action::Place(_)))
        .unwrap_or_else(|| panic!("a direct grant is placed: {trace:?}"));
    let absorbed = trace[placed..].contains(&Action::ActorTurn);
    assert!(placed < ended && !absorbed, "{trace:?}");
    assert_eq!(trace.last(), Some(&Action::KeyExpires), "{trace:?}");
}
