//! The lock machine's rules one event at a time, on a fast path it owns (the model check
//! drives the same machine through every interleaving).

use super::*;

type Fast = FastPath<u64, u8, ()>;
type Machine = LockMachine<u8, Vec<u64>, &'static str>;

const SHARED_NOT: Shape = Shape {
    reentrant: true,
    shared: false,
};

/// A reconcile sent for `owner`, setting its count to `counted`.
fn send(owner: u8, counted: usize) -> NextReconcile<u8> {
    NextReconcile::Send {
        owner,
        counted,
        doubt: (),
    }
}

fn machine() -> (Machine, Fast) {
    (LockMachine::new(SHARED_NOT), FastPath::new(false))
}

#[test]
fn a_grant_sent_before_a_force_unlock_is_a_doubt_and_no_try_goes_while_it_is_out() {
    let (mut m, mut fast) = machine();
    let before = m.try_sent();
    let steps = m.force_begun(&mut fast, true);
    assert_eq!(
        steps,
        vec![Step::LoseAll],
        "its holders are told before it is sent"
    );
    assert_eq!(m.gate(&1), Gate::Forcing);
    let outcome = m.try_answered(1, before, TryAnswer::Granted, || "stale");
    assert_eq!(outcome, TryOutcome::Stale);
    assert_eq!(m.oldest_doubt(), Some((&1, &"stale")));
    assert_eq!(m.force_answered(&mut fast, true), vec![Step::LoseAll]);
    let during = m.try_sent();
    assert_eq!(
        m.try_answered(1, during, TryAnswer::Granted, || "never"),
        TryOutcome::Grant
    );
}

#[test]
fn a_conditional_force_tells_nobody_before_its_answer() {
    let (mut m, mut fast) = machine();
    assert!(m.force_begun(&mut fast, false).is_empty());
    assert_eq!(m.force_answered(&mut fast, false), vec![]);
    assert!(!m.busy());
}

#[test]
fn a_lost_hold_is_cleared_when_nothing_is_out_and_settled_otherwise() {
    let (mut m, fast) = machine();
    m.holder_entry(1, Vec::new).extend([10, 11]);
    let (holder, plan) = m.lose_and_clear(1, &fast, true, || "lost");
    assert_eq!((holder, plan), (Some(vec![10, 11]), LostPlan::Clear(2)));
    assert_eq!(m.gate(&1), Gate::Settling, "its owner's tries wait");
    m.clear_done(&1);
    assert_eq!(m.gate(&1), Gate::Go);

    m.holder_entry(1, Vec::new).push(12);
    let ticket = m.try_sent();
    let (_, plan) = m.lose_and_clear(1, &fast, true, || "lost");
    assert_eq!(plan, LostPlan::Settle(1), "a try is out");
    assert_eq!(m.next_reconcile(&fast, |_| ()), NextReconcile::Wait);
    m.try_answered(1, ticket, TryAnswer::Busy, || "never");
    assert_eq!(m.next_reconcile(&fast, |_| ()), send(1, 0));
}

#[test]
fn a_hold_lost_while_a_reconcile_is_out_is_settled_after_it() {
    let (mut m, fast) = machine();
    m.doubt(1, "lost reply");
    m.holder_entry(1, Vec::new).push(10);
    assert_eq!(m.next_reconcile(&fast, |_| ()), send(1, 1));
    // The reconcile sets the count it was sent with: a clearing now would race it.
    let (_, plan) = m.lose_and_clear(1, &fast, true, || "lost");
    assert_eq!(plan, LostPlan::Settle(1));
    assert_eq!(m.reconcile_answered(true), Some("lost reply"));
    assert_eq!(m.next_reconcile(&fast, |_| ()), send(1, 0));
}

#[test]
fn nothing_is_sent_for_a_lost_hold_once_the_client_stopped() {
    let (mut m, fast) = machine();
    m.holder_entry(1, Vec::new).push(10);
    let (holder, plan) = m.lose_and_clear(1, &fast, false, || "lost");
    assert_eq!((holder, plan), (Some(vec![10]), LostPlan::Nothing));
    assert!(!m.busy());
}

#[test]
fn the_gate_keeps_each_kind_to_its_shape() {
    let mut plain = LockMachine::<u8, Vec<u64>, ()>::new(Shape {
        reentrant: false,
        shared: false,
    });
    plain.holder_entry(1, Vec::new).push(10);
    assert_eq!(plain.gate(&1), Gate::AlreadyHeld);
    assert_eq!(plain.gate(&2), Gate::LocalHolder);
    let mut read = LockMachine::<u8, Vec<u64>, ()>::new(Shape {
        reentrant: true,
        shared: true,
    });
    read.holder_entry(1, Vec::new).push(10);
    assert_eq!(read.gate(&2), Gate::Go);
}

#[test]
fn a_reconcile_waits_for_a_direct_call_on_its_way() {
    let (mut m, mut fast) = machine();
    fast.begin_try(()).expect("the fast path is open");
    m.doubt(1, "lost reply");
    assert_eq!(m.next_reconcile(&fast, |_| ()), NextReconcile::Recheck);
    assert_eq!(m.reconcile_answered(false), None, "nothing was settled");
}

#[test]
fn a_release_counts_its_unlock_in_flight_until_answered() {
    let (mut m, fast) = machine();
    m.holder_entry(1, Vec::new).extend([10, 11]);
    assert_eq!(m.release(1, Some(12)), Let::NotOwner, "no such hold");
    assert_eq!(m.release(1, Some(10)), Let::Kept(1));
    assert_eq!(
        m.gate(&1),
        Gate::Settling,
        "its owner's tries wait for the unlock"
    );
    assert_eq!(m.gate(&2), Gate::LocalHolder);
    assert!(m.in_flight(&fast));
    let answered = m.unlock_answered(1, 1, UnlockReply::HoldsLeft, || "never");
    assert_eq!(answered, (UnlockOutcome::StillHeld(1), false));
    assert_eq!(m.release(1, None), Let::Last(vec![]), "its last hold");
    let answered = m.unlock_answered(1, 0, UnlockReply::Unanswered, || "unlock");
    assert_eq!(answered, (UnlockOutcome::Settling, false));
    assert_eq!(m.oldest_doubt(), Some((&1, &"unlock")));
    assert!(!m.in_flight(&fast));
}

#[test]
fn an_unlock_that_finds_fewer_holds_than_counted_loses_the_rest() {
    let (mut m, _) = machine();
    m.holder_entry(1, Vec::new).extend([10, 11]);
    assert_eq!(m.release(1, None), Let::Kept(1));
    let answered = m.unlock_answered(1, 1, UnlockReply::Freed, || "never");
    assert_eq!(answered, (UnlockOutcome::Released, true));
    assert_eq!(m.release(1, None), Let::Last(vec![]));
}

#[test]
fn a_first_hold_ends_the_holder_counted_and_is_stale_after_an_unlock_sent_behind_it() {
    let (mut m, mut fast) = machine();
    m.holder_entry(1, Vec::new).extend([10, 11]);
    let ticket = m.try_sent();
    assert_eq!(
        m.try_answered(1, ticket, TryAnswer::Granted, || "never"),
        TryOutcome::Grant
    );
    let (steps, outcome) = m.first_hold(1, ticket, &mut fast, || "never");
    assert_eq!(steps, vec![Step::Lose(1)], "the forgotten holder is told");
    assert_eq!(outcome, TryOutcome::Grant);
    assert_eq!(m.oldest_doubt(), None);
    assert_eq!(
        m.remove(&1),
        Some(vec![10, 11]),
        "as the actor carries it out"
    );

    // An unlock sent after the try ran after it: it may have freed the new hold.
    m.holder_entry(1, Vec::new).extend([12, 13]);
    let ticket = m.try_sent();
    assert!(matches!(m.release(1, Some(12)), Let::Kept(1)));
    m.try_answered(1, ticket, TryAnswer::Granted, || "never");
    let (steps, outcome) = m.first_hold(1, ticket, &mut fast, || "freed behind");
    assert_eq!(steps, vec![Step::Lose(1)]);
    assert_eq!(
        outcome,
        TryOutcome::Stale,
        "settled as a doubt, tried again"
    );
    assert_eq!(m.oldest_doubt(), Some((&1, &"freed behind")));
}
