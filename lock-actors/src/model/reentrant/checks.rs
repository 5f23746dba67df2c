//! The reentrant model's checks: every property on the current scripts and rules (the
//! reentrant, fenced and fast locks, a Redisson client beside the library's, a key lost
//! once, extends), the shortest counterexamples on the scripts and rules before the
//! lease-truth fixes, and the negative controls.

use super::{Action, Kind, ReentrantModel, Rules};
use crate::model::store::{Scripts, SetLease};
use stateright::Checker;

/// The safety properties the tests name.
const KEPT: &str = "Redis keeps every hold at least as long as its client believes it held";
const ONE_OWNER: &str = "at most one owner holds on the model's clock";
const HONEST_RENEWAL: &str =
    "a renewal tells its client the hold is there only while Redis counts it";
const FIXED_KEPT: &str = "no client gives up a hold while one of its fixed leases runs";

/// The bounds: CI's, or deeper with `LOCK_MODEL_DEPTH=deep`.
fn model(scripts: Scripts, rules: Rules) -> ReentrantModel {
    let deep = std::env::var("LOCK_MODEL_DEPTH").is_ok_and(|depth| depth == "deep");
    ReentrantModel {
        kind: Kind::Reentrant,
        redisson: false,
        key_loss: false,
        scripts,
        rules,
        clients: if deep { 3 } else { 2 },
        max_holds: 3,
        extends: false,
        set_lease: SetLease::Current,
        in_order: true,
        unlock_while_extending: true,
        keep_claims: true,
        only: None,
        fixed_beside_watchdog: true,
    }
}

fn check(model: ReentrantModel, label: &str) -> impl Checker<ReentrantModel> {
    super::super::explore(model, label)
}

/// A shortest trace that breaks `property` (breadth-first, checking only it).
fn counterexample(scripts: Scripts, rules: Rules, property: &'static str) -> Vec<Action> {
    let model = ReentrantModel {
        only: Some(property),
        ..model(scripts, rules)
    };
    let label = format!("{scripts:?} scripts, {rules:?} rules: {property}");
    let trace = check(model, &label)
        .assert_any_discovery(property)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    trace
}

#[test]
fn the_reentrant_lock_under_mixed_leases_keeps_every_property() {
    check(model(Scripts::Current, Rules::Current), "reentrant").assert_properties();
}

#[test]
fn the_rules_and_scripts_before_the_lease_truth_fixes_let_a_re_entry_cut_a_watched_hold() {
    // A watched hold, then a re-entry with a shorter fixed lease: the old acquire set the
    // key's TTL to that lease under the watched hold...
    let cut = counterexample(Scripts::Before, Rules::Before, KEPT);
    assert_eq!(
        cut,
        [Action::Acquire(0, None), Action::Acquire(0, Some(1_000))]
    );
    // ...so once it ran out, another owner took the lock while the first still held it.
    let two = counterexample(Scripts::Before, Rules::Before, ONE_OWNER);
    assert_eq!(two.last(), Some(&Action::Acquire(1, None)), "{two:?}");
}

#[test]
fn the_current_rules_on_the_old_scripts_are_caught_too() {
    // The scripts alone: the library's rules cannot make up for a re-entry that cuts the
    // key's TTL.
    counterexample(Scripts::Before, Rules::Current, KEPT);
    counterexample(Scripts::Before, Rules::Current, ONE_OWNER);
}

#[test]
fn the_fenced_lock_keeps_every_property_and_its_tokens_increase() {
    let model = ReentrantModel {
        kind: Kind::Fenced,
        ..model(Scripts::Current, Rules::Current)
    };
    check(model, "fenced").assert_properties();
}

#[test]
fn the_fast_lock_keeps_every_property() {
    let model = ReentrantModel {
        kind: Kind::Fast,
        ..model(Scripts::Current, Rules::Current)
    };
    check(model, "fast").assert_properties();
}

#[test]
fn after_the_key_is_lost_no_renewal_tells_its_client_the_hold_is_still_there() {
    // A lost key breaks the lock's safety by itself (that is what fencing tokens are for);
    // what the library owes is that the next renewal reports it.
    for kind in [Kind::Reentrant, Kind::Fast] {
        // Two holds each: once the key is lost both owners may hold, and the states
        // multiply (three holds each: 816,548 states, a minute).
        let model = ReentrantModel {
            kind,
            key_loss: true,
            max_holds: 2,
            only: Some(HONEST_RENEWAL),
            ..model(Scripts::Current, Rules::Current)
        };
        check(model, &format!("{kind:?}, key lost")).assert_properties();
    }
}

#[test]
fn a_renewal_that_ignores_the_owner_tells_a_client_it_holds_anothers_lock() {
    // The negative control: a renewal that extends the key whoever holds it answers the
    // first owner's renewal with the second owner's lease.
    let model = ReentrantModel {
        key_loss: true,
        only: Some(HONEST_RENEWAL),
        ..model(Scripts::RenewIgnoresOwner, Rules::Current)
    };
    let trace = check(model, "renewal ignoring the owner")
        .assert_any_discovery(HONEST_RENEWAL)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    assert!(trace.contains(&Action::KeyLost), "{trace:?}");
    assert!(
        matches!(trace.last(), Some(Action::RenewalArrives(0))),
        "{trace:?}"
    );
}

#[test]
fn a_redisson_client_and_the_library_never_hold_at_once() {
    // Two of the library's clients and one Redisson client (three with
    // `LOCK_MODEL_DEPTH=deep`, and one Redisson client).
    let base = model(Scripts::Current, Rules::Current);
    let model = ReentrantModel {
        redisson: true,
        clients: base.clients + 1,
        max_holds: 2,
        ..base
    };
    check(model, "reentrant with a Redisson client").assert_properties();
}

#[test]
fn extends_longer_and_shorter_keep_every_property() {
    // Fixed holds set again to a shorter or a longer lease, beside re-entries of either
    // lease and watched holds, and unlocks of other holds meanwhile; the answers late,
    // lost, or the calls lost.
    // Two holds per client (three when deep): what an extend can do to another hold of
    // its owner needs two; a third multiplies the states without new orders of calls.
    let deep = std::env::var("LOCK_MODEL_DEPTH").is_ok_and(|depth| depth == "deep");
    for kind in [Kind::Reentrant, Kind::Fast] {
        let model = ReentrantModel {
            kind,
            extends: true,
            max_holds: if deep { 3 } else { 2 },
            ..model(Scripts::Current, Rules::Current)
        };
        check(model, &format!("{kind:?} with extends")).assert_properties();
    }
}

#[test]
fn a_set_lease_that_ignores_the_other_holds_cuts_one_and_is_caught() {
    // The negative control: `set_lease.lua` without the max with the key's PTTL. One client
    // per owner counts every hold of its field, so only a hold Redis has and the extend's
    // count does not can suffer: a re-entry the extend overtakes (a call may overtake
    // another on a cluster's resend).
    let overtaking = |set_lease| ReentrantModel {
        extends: true,
        set_lease,
        in_order: false,
        unlock_while_extending: false,
        only: Some(KEPT),
        ..model(Scripts::Current, Rules::Current)
    };
    let trace = check(
        overtaking(SetLease::Unconditional),
        "set_lease ignoring the others",
    )
    .assert_any_discovery(KEPT)
    .into_actions();
    eprintln!("  broken by {trace:?}");
    assert_eq!(
        trace,
        [
            Action::Acquire(0, Some(1_000)),
            Action::Extend(0, 0, 1_000),
            Action::Acquire(0, None),
            Action::ExtendArrives(0),
        ]
    );
    // The script as it is keeps the re-entry's lease.
    check(overtaking(SetLease::Current), "set_lease, overtaken").assert_no_discovery(KEPT);
}

#[test]
fn an_unlock_that_ignores_an_extend_on_its_way_leaves_the_extended_hold_a_shorter_key() {
    // The lock actor's rule before the fix, which the model found: while an extend to a
    // longer lease is on its way, the hold counts on its old, shorter end, and an unlock of
    // another hold of the owner sent that end as the lease the key keeps. The extend ran
    // first and answers the longer PTTL it left, so the hold then counted on the longer
    // lease while the unlock had cut the key to the shorter one. The rule now
    // (`keep_claims`) passes every property with such unlocks in the mix (the check above).
    let model = ReentrantModel {
        extends: true,
        keep_claims: false,
        only: Some(KEPT),
        ..model(Scripts::Current, Rules::Current)
    };
    let trace = check(model, "unlock while an extend is on its way")
        .assert_any_discovery(KEPT)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    assert_eq!(
        trace,
        [
            Action::Acquire(0, None),
            Action::Acquire(0, Some(1_000)),
            Action::Extend(0, 1, 4_500),
            Action::Unlock(0, 0),
            Action::ExtendArrives(0),
        ]
    );
}

#[test]
fn a_watchdog_deadline_alone_gives_up_a_fixed_lease_beside_it() {
    // A watched hold, a re-entry with a fixed lease longer than the watchdog's, and no
    // renewal confirmed within the watchdog's lease: the rule before (one deadline per owner, the watchdog's while any
    // hold is watched) gave the owner up, and took its key out, while the fixed lease ran.
    let model = ReentrantModel {
        fixed_beside_watchdog: false,
        only: Some(FIXED_KEPT),
        ..model(Scripts::Current, Rules::Current)
    };
    let cut = check(model, "watchdog deadline alone")
        .assert_any_discovery(FIXED_KEPT)
        .into_actions();
    eprintln!("  broken by {cut:?}");
    assert_eq!(
        cut,
        [
            Action::Acquire(0, None),
            Action::Acquire(0, Some(4_500)),
            Action::Tick,
            Action::Tick,
            Action::Tick,
        ]
    );
}
