//! The read-write model's checks: every property on the current scripts and rules, and the
//! shortest counterexamples on the scripts (and rules) before the lease-truth fixes.

use super::client::Side;
use super::model::{Action, ReadWriteModel, Rules, State, EXCLUSIVE, KEPT, SHARED_THEN_WRITTEN};
use super::store::Scripts;
use stateright::{Checker, Model};
use Action::{Acquire, RenewalArrives, SendRenewal, Tick, Unlock};
use Side::{Read, Write};

/// The bounds: CI's, or deeper with `LOCK_MODEL_DEPTH=deep`.
fn model(scripts: Scripts, rules: Rules) -> ReadWriteModel {
    let deep = std::env::var("LOCK_MODEL_DEPTH").is_ok_and(|depth| depth == "deep");
    let clients = if deep { 3 } else { 2 };
    ReadWriteModel {
        scripts,
        rules,
        clients,
        max_holds: 2,
        writers: clients,
        last_first: false,
        symmetric: false,
        track_shared: false,
        start: None,
        only: None,
    }
}

/// The model as it was before the fixes (scripts and rules), with unlocks last hold first
/// (as Redisson's users nest them), which keeps the read unlock's own defect out of the way:
/// `clients` of which the last `writers` also write.
fn before(clients: usize, writers: usize) -> ReadWriteModel {
    ReadWriteModel {
        clients,
        writers,
        last_first: true,
        ..model(Scripts::Before, Rules::Before)
    }
}

fn check(model: ReadWriteModel, label: &str) -> impl Checker<ReadWriteModel> {
    super::super::explore(model, label)
}

/// A shortest trace of `model` that breaks `property` (breadth-first, checking only it).
fn counterexample(model: ReadWriteModel, property: &'static str) -> Vec<Action> {
    let label = format!(
        "{:?} scripts, {:?} rules, {} client(s) ({} writing){}: {property}",
        model.scripts,
        model.rules,
        model.clients,
        model.writers,
        if model.last_first {
            ", last hold first"
        } else {
            ""
        },
    );
    let model = ReadWriteModel {
        only: Some(property),
        ..model
    };
    let trace = check(model, &label)
        .assert_any_discovery(property)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    trace
}

/// The state `trace` leads `model` to.
fn after(model: &ReadWriteModel, trace: &[Action]) -> State {
    let mut state = model.init_states().remove(0);
    for &action in trace {
        state = model.next_state(&state, action).expect("the trace runs");
    }
    state
}

#[test]
fn the_read_write_lock_under_mixed_leases_keeps_every_property() {
    // Every state once up to which client is which (the clients are alike); a trace it
    // reports names each client as it stands in its step's representative state.
    let model = ReadWriteModel {
        symmetric: true,
        ..model(Scripts::Current, Rules::Current)
    };
    check(model, "read-write").assert_properties();
}

#[test]
fn a_writer_with_three_holds_of_both_sides_keeps_its_holds() {
    // One client with a hold more: a write re-entry beside the writer's own read holds
    // (its unlock keeps the hash for them), or three read holds. Deep: two clients.
    let deep = model(Scripts::Current, Rules::Current).clients > 2;
    let clients = if deep { 2 } else { 1 };
    let model = ReadWriteModel {
        clients,
        writers: clients,
        max_holds: 3,
        symmetric: true,
        ..model(Scripts::Current, Rules::Current)
    };
    let checker = check(model, "read-write, three holds each");
    checker.assert_no_discovery(KEPT);
    checker.assert_no_discovery(EXCLUSIVE);
}

#[test]
fn a_writer_takes_the_lock_after_two_readers_shared_it() {
    let model = ReadWriteModel {
        track_shared: true,
        only: Some(SHARED_THEN_WRITTEN),
        ..model(Scripts::Current, Rules::Current)
    };
    let path = check(model, "read-write, history kept")
        .assert_any_discovery(SHARED_THEN_WRITTEN)
        .into_actions();
    eprintln!("  reached by {path:?}");
    assert_eq!(
        path,
        [
            Acquire(0, Read, Some(1_000)),
            Acquire(1, Read, Some(1_000)),
            Tick,
            Acquire(0, Write, None),
        ]
    );
}

#[test]
fn before_the_fixes_a_readers_renewal_cut_another_readers_lease_and_let_a_writer_in() {
    // Two readers: a watchdog reader's renewal, sent before the other took a longer fixed
    // lease, set the shared hash to the watchdog lease, under that fixed hold.
    let readers = before(2, 0);
    let cut = counterexample(before(2, 0), KEPT);
    assert_eq!(
        cut,
        [
            Acquire(0, Read, None),
            SendRenewal(0, Read),
            Acquire(1, Read, Some(4_000)),
            RenewalArrives(0, Read),
        ]
    );
    // From there the hash runs out while the fixed reader still holds, and a writer (the
    // watchdog reader, once its own hold ran out) takes the lock.
    let from_cut = ReadWriteModel {
        start: Some(after(&readers, &cut)),
        ..before(2, 2)
    };
    let writer_in = counterexample(from_cut, EXCLUSIVE);
    assert_eq!(writer_in, [Tick, Tick, Tick, Acquire(0, Write, None)]);
}

#[test]
fn the_old_renewal_cuts_a_readers_own_longer_lease_under_the_current_rules_too() {
    // One reader alone, the library's rules: the old renewal sets the hash (and the
    // reader's timeout keys) to the watchdog lease under the reader's longer fixed hold,
    // which the side counts on beside its watched one.
    let own = ReadWriteModel {
        rules: Rules::Current,
        ..before(1, 0)
    };
    assert_eq!(
        counterexample(own, KEPT),
        [
            Acquire(0, Read, None),
            Acquire(0, Read, Some(4_000)),
            SendRenewal(0, Read),
            RenewalArrives(0, Read),
        ]
    );
}

#[test]
fn the_old_write_renewal_cuts_the_writers_own_longer_read_lease() {
    // A watchdog writer also reads with a longer fixed lease: the write side's renewal (the
    // reentrant one) set the hash to the watchdog lease under the read hold. The shortest
    // counterexample is now the read side's own old renewal (above), so this trace is
    // replayed and judged.
    let writer = ReadWriteModel {
        rules: Rules::Current,
        ..before(2, 2)
    };
    let cut = [
        Acquire(0, Write, None),
        Acquire(0, Read, Some(4_000)),
        SendRenewal(0, Write),
        RenewalArrives(0, Write),
    ];
    let state = after(&writer, &cut);
    let kept = writer
        .properties()
        .into_iter()
        .find(|property| property.name == KEPT)
        .expect("the model names the property");
    assert!(
        !(kept.condition)(&writer, &state),
        "{cut:?} keeps every hold"
    );
}

#[test]
fn a_read_unlock_out_of_order_left_a_shorter_holds_key_before_the_fix() {
    // A read unlock removes the reader's last timeout key, whichever hold was let go: the
    // watched hold let go first left the fixed hold only the watched hold's key, and the
    // hash went down to it...
    let any_order = model(Scripts::Before, Rules::Current);
    assert_eq!(
        counterexample(any_order, KEPT),
        [
            Acquire(0, Read, None),
            Acquire(0, Read, Some(4_000)),
            Unlock(0, Read, 0),
        ]
    );
    // ...and the other way round: the short fixed hold's key, gone after a tick, freed the
    // hash under the watched hold for a writer.
    let any_order = model(Scripts::Before, Rules::Current);
    assert_eq!(
        counterexample(any_order, EXCLUSIVE),
        [
            Acquire(0, Read, Some(1_000)),
            Acquire(0, Read, None),
            Unlock(0, Read, 1),
            Tick,
            Acquire(1, Write, None),
        ]
    );
}

#[test]
fn the_old_rules_restarted_a_fixed_lease_at_an_unlock() {
    // Letting the watched hold go restarted the remaining fixed lease from the unlock, while
    // its timeout key (and so the hash) still ran from the acquire.
    assert_eq!(
        counterexample(before(1, 0), KEPT),
        [
            Acquire(0, Read, Some(4_000)),
            Acquire(0, Read, None),
            Tick,
            Unlock(0, Read, 1),
        ]
    );
}
