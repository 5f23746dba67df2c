//! The fast path's decisions, with a fake clock (instants are offsets of one start).

use super::*;

type Machine = FastPath<&'static str, &'static str, u32>;

fn idle() -> Machine {
    FastPath::new(false)
}

/// A direct try granted and its hold placed.
fn take_directly(m: &mut Machine, hold: u64, until: Option<Instant>, taken: &'static str) {
    m.begin_try(7).unwrap();
    m.try_answered(TryAnswer::Granted, || "d");
    m.place(hold, until, taken);
}

/// A try still in flight after the actor took charge and went idle again: the next
/// caller may try directly beside it.
fn after_an_overlapping_try() -> Machine {
    let mut m = idle();
    m.begin_try(7).unwrap();
    assert_eq!(m.absorb().0.count(), 0);
    m.actor_idle();
    assert_eq!(m.mode(), Mode::Idle);
    m
}

#[test]
fn an_uncontended_acquire_and_unlock_stay_on_the_fast_path_and_let_the_actor_go() {
    let mut m = idle();
    assert_eq!(m.begin_try(7), Ok(None));
    assert_eq!(m.mode(), Mode::Trying);
    assert_eq!(m.actor(), Some(&7), "kept while the call is in flight");
    assert_eq!(m.try_answered(TryAnswer::Granted, || "d"), AfterTry::Grant);
    m.place(1, None, "h1");
    assert_eq!(m.mode(), Mode::Held);
    assert_eq!(m.begin_unlock(1, Instant::now()), Some("h1"));
    m.count_back_quietly();
    assert_eq!(m.mode(), Mode::Unlocking);
    assert_eq!(m.actor(), Some(&7), "kept while the unlock is in flight");
    assert_eq!(
        m.unlock_answered(UnlockAnswer::Answered, || "d"),
        AfterUnlock::Done
    );
    assert_eq!(m.mode(), Mode::Idle);
    assert_eq!(
        m.actor(),
        None,
        "nobody needs the actor: its address is let go"
    );
}

#[test]
fn a_second_caller_asks_the_actor_while_one_tries_or_holds() {
    let mut m = idle();
    assert_eq!(m.begin_try(7), Ok(None));
    assert_eq!(m.begin_try(7), Err(7));
    m.try_answered(TryAnswer::Granted, || "d");
    m.place(1, None, "h1");
    assert_eq!(
        m.begin_try(7),
        Err(7),
        "held directly: re-entry goes to the actor"
    );
}

#[test]
fn a_busy_lock_puts_the_actor_in_charge_and_queues_the_caller() {
    let mut m = idle();
    m.begin_try(7).unwrap();
    assert_eq!(m.try_answered(TryAnswer::Busy, || "d"), AfterTry::Queue(7));
    assert_eq!(m.mode(), Mode::Actor);
    assert_eq!(m.begin_try(7), Err(7));
    assert_eq!(m.absorb().0.count(), 0);
    m.actor_idle();
    assert_eq!(m.mode(), Mode::Idle);
}

#[test]
fn an_unanswered_try_is_a_doubt_for_the_actor() {
    let mut m = idle();
    m.begin_try(7).unwrap();
    assert_eq!(
        m.try_answered(TryAnswer::Unanswered, || "d"),
        AfterTry::DoubtAndQueue(7)
    );
    assert_eq!(m.mode(), Mode::Actor);
    let mut m = idle();
    m.begin_try(7).unwrap();
    assert_eq!(
        m.try_answered(TryAnswer::NotReplicated, || "d"),
        AfterTry::DoubtAndQueue(7)
    );
    let mut m = idle();
    m.begin_try(7).unwrap();
    assert_eq!(m.try_answered(TryAnswer::Refused, || "d"), AfterTry::Fail);
    assert_eq!(
        m.mode(),
        Mode::Idle,
        "nothing was taken: callers may try again"
    );
    assert_eq!(m.actor(), None);
}

#[test]
fn a_dropped_try_is_a_doubt_and_the_actor_takes_charge() {
    let mut m = idle();
    m.begin_try(7).unwrap();
    assert_eq!(m.call_dropped("d"), Some(7));
    assert_eq!(m.mode(), Mode::Actor);
    assert_eq!(
        m.actor(),
        Some(&7),
        "kept until the actor absorbed the doubt"
    );
    m.actor_idle();
    assert_eq!(
        m.mode(),
        Mode::Actor,
        "not idle before the doubt is absorbed"
    );
    let (holds, doubts) = m.absorb();
    assert_eq!((holds.count(), doubts), (0, vec!["d"]));
    assert_eq!(m.actor(), None, "nobody needs the actor any more");
    m.actor_idle();
    assert_eq!(m.mode(), Mode::Idle);
}

#[test]
fn only_a_call_that_may_have_run_uncounted_is_recorded_as_a_doubt() {
    for (answer, doubted) in [
        (TryAnswer::Granted, false),
        (TryAnswer::Busy, false),
        (TryAnswer::Refused, false),
        (TryAnswer::Unanswered, true),
        (TryAnswer::NotReplicated, true),
    ] {
        let mut m = idle();
        m.begin_try(7).unwrap();
        let mut made = false;
        m.try_answered(answer, || {
            made = true;
            "d"
        });
        assert_eq!(made, doubted, "{answer:?}");
        assert_eq!(m.absorb().1.len(), usize::from(doubted), "{answer:?}");
    }
    for (answer, doubted) in [
        (UnlockAnswer::Answered, false),
        (UnlockAnswer::Unanswered, true),
        (UnlockAnswer::Failed, true),
    ] {
        let mut m = idle();
        take_directly(&mut m, 1, None, "h1");
        m.begin_unlock(1, Instant::now()).unwrap();
        m.count_back_quietly();
        m.unlock_answered(answer, || "d");
        assert_eq!(m.absorb().1.len(), usize::from(doubted), "{answer:?}");
    }
}

#[test]
fn a_doubt_recorded_while_a_hold_is_held_directly_puts_both_in_the_actors_care() {
    // A try overlapping the direct hold is dropped: nobody may unlock directly until
    // the actor has settled the doubt beside the hold.
    let mut m = after_an_overlapping_try();
    take_directly(&mut m, 1, None, "h1");
    assert_eq!(m.mode(), Mode::Held);
    assert_eq!(m.call_dropped("d1"), Some(7));
    assert_eq!(m.mode(), Mode::Actor);
    assert_eq!(m.begin_unlock(1, Instant::now()), None);
    assert_eq!(m.begin_try(7), Err(7));
    let (holds, doubts) = m.absorb();
    assert_eq!(holds.collect::<Vec<_>>(), vec!["h1"]);
    assert_eq!(doubts, vec!["d1"]);
}

#[test]
fn doubts_are_absorbed_in_the_order_recorded() {
    let mut m = idle();
    m.begin_try(7).unwrap();
    m.try_answered(TryAnswer::Unanswered, || "first");
    // The actor went idle before its turn: the doubt keeps it in charge.
    m.actor_idle();
    assert_eq!(m.begin_try(7), Err(7));
    let mut m2 = after_an_overlapping_try();
    m2.begin_try(7).unwrap();
    m2.call_dropped("first");
    m2.call_dropped("second");
    assert_eq!(m2.absorb().1, vec!["first", "second"]);
    assert_eq!(m.absorb().1, vec!["first"]);
}

#[test]
fn a_grant_after_the_actor_took_charge_waits_in_the_slot_for_its_next_turn() {
    let mut m = idle();
    m.begin_try(7).unwrap();
    // Another caller asked the actor meanwhile; it took charge.
    assert_eq!(m.absorb().0.count(), 0);
    assert_eq!(m.try_answered(TryAnswer::Granted, || "d"), AfterTry::Grant);
    m.place(1, None, "h1");
    assert_eq!(m.mode(), Mode::Actor);
    assert_eq!(
        m.begin_unlock(1, Instant::now()),
        None,
        "the actor releases it, not the guard"
    );
    assert_eq!(m.absorb().0.collect::<Vec<_>>(), vec!["h1"]);
    // The guard is still out: the address stays.
    m.actor_idle();
    assert_eq!(m.mode(), Mode::Idle);
    assert_eq!(m.actor(), Some(&7));
    assert_eq!(m.count_back(), Some(7));
    assert_eq!(m.actor(), None);
}

#[test]
fn a_grant_placed_between_the_actors_turns_stays_held_directly() {
    let mut m = idle();
    m.begin_try(7).unwrap();
    assert_eq!(m.absorb().0.count(), 0);
    m.try_answered(TryAnswer::Granted, || "d");
    m.place(1, None, "h1");
    // The actor goes idle without another turn: the one hold is held directly.
    m.actor_idle();
    assert_eq!(m.mode(), Mode::Held);
    assert_eq!(m.begin_unlock(1, Instant::now()), Some("h1"));
}

#[test]
fn two_holds_in_the_slot_are_never_unlocked_directly() {
    // Two tries overlap (the actor took charge and went idle between them).
    let mut m = after_an_overlapping_try();
    assert_eq!(m.mode(), Mode::Idle);
    take_directly(&mut m, 1, None, "h1");
    assert_eq!(m.mode(), Mode::Held);
    m.try_answered(TryAnswer::Granted, || "d");
    m.place(2, None, "h2");
    assert_eq!(m.mode(), Mode::Actor);
    assert_eq!(m.begin_unlock(1, Instant::now()), None);
    m.actor_idle();
    assert_eq!(
        m.mode(),
        Mode::Actor,
        "still two: the actor must absorb them"
    );
    assert_eq!(m.absorb().0.collect::<Vec<_>>(), vec!["h1", "h2"]);
}

#[test]
fn a_grant_placed_while_the_other_hold_is_unlocked_directly_is_held_after_it() {
    let mut m = after_an_overlapping_try();
    take_directly(&mut m, 1, None, "h1");
    assert_eq!(m.begin_unlock(1, Instant::now()), Some("h1"));
    m.try_answered(TryAnswer::Granted, || "d");
    m.place(2, None, "h2");
    assert_eq!(m.mode(), Mode::Unlocking);
    assert_eq!(
        m.unlock_answered(UnlockAnswer::Answered, || "d"),
        AfterUnlock::Done
    );
    assert_eq!(m.mode(), Mode::Held);
    assert_eq!(m.begin_unlock(2, Instant::now()), Some("h2"));
}

#[test]
fn an_unanswered_unlock_is_settled_by_the_actor() {
    let mut m = idle();
    take_directly(&mut m, 1, None, "h1");
    m.begin_unlock(1, Instant::now()).unwrap();
    m.count_back_quietly();
    assert_eq!(
        m.unlock_answered(UnlockAnswer::Unanswered, || "d"),
        AfterUnlock::Settle(7)
    );
    assert_eq!(m.mode(), Mode::Actor);
    let mut m = idle();
    take_directly(&mut m, 1, None, "h1");
    m.begin_unlock(1, Instant::now()).unwrap();
    assert_eq!(
        m.unlock_answered(UnlockAnswer::Failed, || "d"),
        AfterUnlock::Doubt(7)
    );
}

#[test]
fn a_dropped_unlock_is_a_doubt() {
    let mut m = idle();
    take_directly(&mut m, 1, None, "h1");
    m.begin_unlock(1, Instant::now()).unwrap();
    m.count_back_quietly();
    assert_eq!(m.call_dropped("d"), Some(7));
    assert_eq!(m.mode(), Mode::Actor);
    assert_eq!(m.absorb().1, vec!["d"]);
    assert_eq!(m.actor(), None);
}

#[test]
fn a_per_owner_kind_never_acts_directly() {
    let mut m: Machine = FastPath::new(true);
    assert_eq!(m.begin_try(7), Err(7));
    assert_eq!(m.absorb().0.count(), 0);
    m.actor_idle();
    assert_eq!(m.mode(), Mode::Actor);
}

#[test]
fn the_actor_is_kept_while_a_guard_is_out_and_given_back_with_the_last_one() {
    let mut m = idle();
    m.hand_out(|| 7);
    m.hand_out(|| unreachable!("kept already"));
    assert_eq!(m.count_back(), Some(7));
    assert_eq!(m.actor(), Some(&7));
    assert_eq!(m.count_back(), Some(7), "the last guard's message gets it");
    assert_eq!(m.actor(), None);
}

#[test]
fn a_fixed_lease_past_its_surely_held_time_is_released_by_the_actor_not_directly() {
    // A fake clock: instants are offsets from one start.
    let start = Instant::now();
    let until = surely_held_until(start, Duration::from_millis(500));
    let mut m = idle();
    take_directly(&mut m, 1, Some(until), "h1");
    assert_eq!(m.mode(), Mode::Held);
    assert_eq!(
        m.begin_unlock(1, until),
        None,
        "at its end it is no longer surely held"
    );
    assert_eq!(
        m.mode(),
        Mode::Held,
        "left for the actor to report lost and clear"
    );
    assert_eq!(
        m.begin_unlock(1, until - Duration::from_millis(1)),
        Some("h1"),
        "still surely held a moment before"
    );
}

#[test]
fn a_hold_is_surely_held_until_its_lease_less_the_drift_allowance() {
    // A fake clock: the send time is any instant; only offsets from it matter.
    let sent = Instant::now();
    let lease = Duration::from_secs(30);
    assert_eq!(
        surely_held_until(sent, lease),
        sent + Duration::from_millis(30_000 - 300 - 2)
    );
    let short = Duration::from_millis(100);
    assert_eq!(
        surely_held_until(sent + short, short),
        sent + Duration::from_millis(200 - 1 - 2)
    );
}
