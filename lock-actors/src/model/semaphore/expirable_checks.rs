//! The permit-expirable semaphore model's runs: its bounds (CI's, and deeper ones with
//! `LOCK_MODEL_DEPTH=deep`), the check of every property on the current scripts, and the
//! negative controls: deliberately broken scripts the checker must catch, with their
//! shortest traces.

use super::expirable::{Action, ExpirableModel, ACQUIRES, CI_ACQUIRES, CLOSED, OUT};
use super::store::{Defect, Scripts};
use stateright::Checker;

/// CI's bounds: two clients, each taking one permit with the watchdog or a fixed lease,
/// whose acquires may lose their replies.
fn model(scripts: Scripts) -> ExpirableModel {
    ExpirableModel {
        scripts,
        clients: 2,
        acquires: &CI_ACQUIRES,
        lost_replies: true,
        only: None,
    }
}

/// The bounds checked: CI's; with `LOCK_MODEL_DEPTH=deep`, three clients instead, and two
/// clients taking one or two permits with every lease.
fn models(scripts: Scripts) -> Vec<(ExpirableModel, &'static str)> {
    if !super::deep() {
        return vec![(model(scripts), "permit-expirable semaphore")];
    }
    let three = ExpirableModel {
        clients: 3,
        ..model(scripts)
    };
    let lost = ExpirableModel {
        acquires: &ACQUIRES,
        ..model(scripts)
    };
    vec![
        (three, "permit-expirable semaphore, three clients"),
        (
            lost,
            "permit-expirable semaphore, every lease, lost replies",
        ),
    ]
}

fn check(model: ExpirableModel, label: &str) -> impl Checker<ExpirableModel> {
    super::super::explore(model, label)
}

/// A shortest trace that breaks `property` (breadth-first, checking only it).
fn counterexample(scripts: Scripts, property: &'static str) -> Vec<Action> {
    let model = ExpirableModel {
        only: Some(property),
        ..model(scripts)
    };
    let label = format!("permit-expirable, {scripts:?} scripts: {property}");
    let trace = check(model, &label)
        .assert_any_discovery(property)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    trace
}

#[test]
fn the_permit_expirable_semaphore_keeps_every_property() {
    for (model, label) in models(Scripts::Current) {
        check(model, label).assert_properties();
    }
}

#[test]
fn a_late_copy_of_an_unsettled_acquire_outlives_its_closed_client() {
    // Before acquires were settled, and with a settlement that leaves no marker, a lost
    // reply's ids go back before the acquire runs; the late copy then takes a permit that
    // nobody holds, and it stays out after the client closed.
    for scripts in [
        Scripts::Before,
        Scripts::Broken(Defect::SettleLeavesNoMarker),
    ] {
        let trace = counterexample(scripts, CLOSED);
        assert_eq!(
            trace,
            [
                Action::AcquireUnanswered(0, 1, None),
                Action::LateCopyRuns(0),
                Action::Close(0)
            ]
        );
    }
}

#[test]
fn a_renewal_that_ignores_whether_the_permit_is_recorded_is_caught() {
    let scripts = Scripts::Broken(Defect::RenewIgnoresRecord);
    // A renewal on its way when the client closed writes the released permit back...
    let left = counterexample(scripts, CLOSED);
    assert_eq!(
        left,
        [
            Action::Acquire(0, 1, None),
            Action::SendRenewal(0),
            Action::Close(0),
            Action::RenewalArrives(0)
        ]
    );
    // ...uncounted: once it expires and is reclaimed, the semaphore has a permit too many.
    let over = counterexample(scripts, OUT);
    assert!(matches!(over.last(), Some(Action::Acquire(..))), "{over:?}");
}

#[test]
fn a_release_that_adds_back_a_permit_not_recorded_is_caught() {
    let scripts = Scripts::Broken(Defect::ReleaseIgnoresRecord);
    // Client 0 takes both permits; client 1's acquire loses its reply, and its settlement
    // (before the acquire ran) adds back the id it never took: a third permit goes out.
    let over = counterexample(scripts, OUT);
    assert_eq!(
        over,
        [
            Action::Acquire(0, 1, None),
            Action::Acquire(0, 1, None),
            Action::AcquireUnanswered(1, 1, None),
            Action::Acquire(1, 1, None)
        ]
    );
}
