//! The fair model's actions and properties, and the checks: the bounds CI runs (deeper
//! with `LOCK_MODEL_DEPTH=deep`), the acquire before the lease-truth fixes, and negative
//! controls that break a script on purpose and see a property fail.

use super::super::store::Scripts;
use super::model::{owner, Client, FairModel, Phase, State, PAUSE_TICKS};
use super::store::Breakage;
use stateright::{Checker, Model, Path, Property};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Client `0` starts an acquire with a fixed lease or the watchdog (`None`).
    Start(usize, Option<u64>),
    /// Client `0`'s try reaches Redis and its answer comes back.
    RunTry(usize),
    /// Client `0`'s subscription to its channel is in place: it tries again.
    Subscribe(usize),
    /// A wake-up reaches client `0`.
    Wake(usize),
    /// A wake-up to client `0` is lost.
    LoseWake(usize),
    /// Client `0`'s timer fires: it tries again.
    Timer(usize),
    /// Client `0` gives up waiting (its wait ran out, or its caller left).
    GiveUp(usize),
    /// Client `0`'s withdraw reaches Redis.
    RunWithdraw(usize),
    /// Client `0` re-enters with a fixed lease or the watchdog.
    Reenter(usize, Option<u64>),
    /// Client `0`'s watchdog sends a renewal.
    SendRenewal(usize),
    /// Client `0`'s renewal reaches Redis and its answer comes back.
    RenewalArrives(usize),
    /// Client `0`'s renewal is lost.
    RenewalLost(usize),
    /// Client `0` unlocks its hold `1`.
    Unlock(usize, usize),
    /// Client `0` pauses (once at most) for `PAUSE_TICKS`.
    Pause(usize),
    /// Client `0` dies.
    Die(usize),
    /// The clock advances one step.
    Tick,
}

pub(crate) const ONE_HOLDER: &str = "at most one holder on the model's clock";
pub(crate) const KEPT: &str =
    "Redis keeps every hold at least as long as its client believes it held";
pub(crate) const ORDER: &str = "grants follow queue order among waiters that stayed";
pub(crate) const LEFT: &str = "a client that gave up or closed leaves no queue entry or deadline";
pub(crate) const SERVED: &str = "every waiter is granted or gives up (no lost wake-up)";

impl Model for FairModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial()]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, client) in state.clients.iter().enumerate() {
            // Deaths and pauses come before the reserve: in it, what is left must serve
            // every waiter (a death in it would end a path a lost wake-up left hanging).
            let busy = !matches!(client.phase, Phase::Idle | Phase::Done | Phase::Dead);
            let early = state.ticks_left > self.reserve;
            if self.lossy && busy && early {
                actions.push(Action::Die(c));
            }
            if client.asleep() {
                continue; // paused: what it sent and what is sent to it waits
            }
            if self.pauses && busy && early && client.paused.is_none() {
                actions.push(Action::Pause(c));
            }
            match client.phase {
                Phase::Idle if client.episodes > 0 && state.ticks_left > self.reserve => {
                    actions.extend(self.leases.iter().map(|&lease| Action::Start(c, lease)));
                }
                Phase::Subscribing => actions.push(Action::Subscribe(c)),
                Phase::Sleeping(Some(until)) if until <= 0 => actions.push(Action::Timer(c)),
                Phase::Holding => {
                    if client.holds.len() < self.max_holds {
                        let leases = self.leases.iter();
                        actions.extend(leases.map(|&lease| Action::Reenter(c, lease)));
                    }
                    if client.watched_until.is_some()
                        && client.renewing.is_none()
                        && !client.renewed
                    {
                        actions.push(Action::SendRenewal(c));
                    }
                    actions.extend((0..client.holds.len()).map(|h| Action::Unlock(c, h)));
                }
                _ => {}
            }
            if client.waiting() && early {
                // Waits are longer than the reserve: in it, a waiter waits to be served.
                actions.push(Action::GiveUp(c));
            }
            if client.trying.is_some() {
                actions.push(Action::RunTry(c));
            }
            if client.withdrawing.is_some() {
                actions.push(Action::RunWithdraw(c));
            }
            if client.renewing.is_some() {
                actions.push(Action::RenewalArrives(c));
                if self.lossy {
                    actions.push(Action::RenewalLost(c));
                }
            }
            if client.wake {
                actions.push(Action::Wake(c));
                if self.lossy {
                    actions.push(Action::LoseWake(c));
                }
            }
        }
        if self.may_tick(state) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Start(c, lease) => {
                let client = &mut state.clients[c];
                client.episodes -= 1;
                client.lease = lease;
                client.phase = Phase::Trying;
                client.trying = Some((0, false));
            }
            Action::RunTry(c) => self.run_try(&mut state, c)?,
            Action::Subscribe(c) => {
                let client = &mut state.clients[c];
                client.subscribed = true;
                client.phase = Phase::Trying;
                client.trying = Some((0, false));
            }
            Action::Wake(c) => {
                let client = &mut state.clients[c];
                client.wake = false;
                match client.phase {
                    Phase::Sleeping(_) => {
                        client.phase = Phase::Trying;
                        client.trying = Some((0, false));
                    }
                    Phase::Trying => {
                        if let Some((_, woken)) = &mut client.trying {
                            *woken = true;
                        }
                    }
                    _ => {}
                }
            }
            Action::LoseWake(c) => state.clients[c].wake = false,
            Action::Timer(c) => {
                let client = &mut state.clients[c];
                client.phase = Phase::Trying;
                client.trying = Some((0, false));
            }
            Action::GiveUp(c) => FairModel::give_up(&mut state, c),
            Action::RunWithdraw(c) => self.run_withdraw(&mut state, c)?,
            Action::Reenter(c, lease) => self.reenter(&mut state, c, lease)?,
            Action::SendRenewal(c) => {
                let client = &mut state.clients[c];
                client.renewing = Some(0);
                client.renewed = true;
            }
            Action::RenewalArrives(c) => self.renewal_arrives(&mut state, c)?,
            Action::RenewalLost(c) => state.clients[c].renewing = None,
            Action::Unlock(c, h) => self.unlock_hold(&mut state, c, h),
            Action::Pause(c) => state.clients[c].paused = Some(PAUSE_TICKS),
            Action::Die(c) => FairModel::die(&mut state, c),
            Action::Tick => FairModel::tick(&mut state),
        }
        self.lose_expired(&mut state);
        // Which hold came first does not matter to the rules: one order per set.
        for client in &mut state.clients {
            client.holds.sort();
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(ONE_HOLDER, |_: &FairModel, state: &State| {
                (0..state.clients.len())
                    .filter(|&c| FairModel::believed(state, c).is_some())
                    .count()
                    <= 1
            }),
            Property::always(KEPT, |_: &FairModel, state: &State| {
                let hash = &state.store.hash;
                (0..state.clients.len()).all(|c| {
                    FairModel::believed(state, c).is_none_or(|until| {
                        hash.fields.contains_key(&owner(c))
                            && hash.expires_at.is_none_or(|at| at * 1_000 >= until)
                    })
                })
            }),
            Property::always(ORDER, |_: &FairModel, state: &State| !state.out_of_order),
            Property::always(LEFT, |_: &FairModel, state: &State| {
                let store = &state.store;
                state.clients.iter().enumerate().all(|(c, client)| {
                    let settled = matches!(client.phase, Phase::Idle | Phase::Done)
                        && client.trying.is_none()
                        && client.withdrawing.is_none();
                    !settled
                        || !(store.queue.contains(&owner(c))
                            || store.deadlines.contains_key(&owner(c)))
                })
            }),
            Property::eventually(SERVED, |model: &FairModel, state: &State| {
                (0..state.clients.len()).all(|c| model.finished(state, c))
            }),
            Property::sometimes(
                "a waiter is granted after a hand-over",
                |_: &FairModel, state: &State| {
                    (0..state.clients.len()).any(|c| {
                        state.clients[c].handed_over && FairModel::believed(state, c).is_some()
                    })
                },
            ),
            Property::sometimes(
                "two live waiters in line",
                |_: &FairModel, state: &State| {
                    let waiting = |o: &u8| state.clients[usize::from(*o) - 1].waiting();
                    state.store.queue.iter().filter(|o| waiting(o)).count() >= 2
                },
            ),
            Property::sometimes(
                "a waiter gives up and leaves the queue",
                |_: &FairModel, state: &State| {
                    let queue = &state.store.queue;
                    (0..state.clients.len()).any(|c| {
                        state.clients[c].phase == Phase::Leaving && queue.contains(&owner(c))
                    })
                },
            ),
        ];
        if self.lossy {
            // Its place was taken by no grant and no withdraw: its deadline passed and a
            // script dropped it.
            properties.push(Property::sometimes(
                "a dead waiter's place ages out",
                |_: &FairModel, state: &State| {
                    let queue = &state.store.queue;
                    (0..state.clients.len()).any(|c| {
                        let client = &state.clients[c];
                        client.phase == Phase::Dead
                            && client.joined
                            && client.trying.is_none()
                            && !queue.contains(&owner(c))
                    })
                },
            ));
        }
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

use super::super::deep;

/// The bounds CI checks: two clients, the first acquiring twice (so it can come back while
/// the other waits), the second once; the watchdog or a fixed lease; wake-ups and renewals
/// lost, clients dying. Acquires start in the first three ticks; the reserve is one tick
/// more than the shortest that serves every waiter (with four, a waiter queued behind a
/// dead waiter's place may still be waiting when the budget ends). Deeper with
/// `LOCK_MODEL_DEPTH=deep`: three clients acquiring once each, which need a longer reserve.
fn model() -> FairModel {
    let (episodes, reserve) = if deep() {
        (vec![1, 1, 1], RESERVE_DEEP)
    } else {
        (vec![2, 1], 6)
    };
    FairModel {
        scripts: Scripts::Current,
        breakage: Breakage::None,
        episodes,
        max_holds: 1,
        leases: vec![None, Some(2_000)],
        fallback: true,
        lossy: true,
        pauses: false,
        budget: reserve + 3,
        reserve,
        only: None,
    }
}

const RESERVE_DEEP: u8 = 9;

/// Clients that pause: each acquiring once in CI, the CI bounds' clients deeper.
fn paused() -> FairModel {
    FairModel {
        episodes: if deep() { vec![2, 1] } else { vec![1, 1] },
        pauses: true,
        budget: 9,
        reserve: 6,
        ..model()
    }
}

/// The properties that must hold whatever the bounds (the examples need some).
const SAFE: [&str; 5] = [ONE_HOLDER, KEPT, ORDER, LEFT, SERVED];

fn check(model: FairModel, label: &str) -> impl Checker<FairModel> {
    super::super::explore(model, label)
}

/// A shortest trace that breaks `property` (breadth-first, checking only it).
fn counterexample(model: FairModel, property: &'static str) -> Vec<Action> {
    counterexample_path(model, property).into_actions()
}

/// The same, with the states along it.
fn counterexample_path(model: FairModel, property: &'static str) -> Path<State, Action> {
    let label = format!("{:?}, {:?}: {property}", model.scripts, model.breakage);
    let model = FairModel {
        only: Some(property),
        ..model
    };
    let path = check(model, &label).assert_any_discovery(property);
    eprintln!("  broken by {:?}", path.clone().into_actions());
    path
}

/// Whether a path ends with a waiter asleep for good (no timer, no wake-up on its way)
/// while the lock is free: a lost wake-up.
fn left_asleep(path: &Path<State, Action>) -> bool {
    let last = path.last_state();
    let free = last.store.hash.fields.is_empty();
    let asleep =
        |client: &Client| client.phase == Phase::Sleeping(None) && !client.wake && !client.gave_up;
    free && last.clients.iter().any(asleep)
}

#[test]
fn the_fair_lock_with_waiters_keeps_every_property() {
    check(model(), "fair").assert_properties();
}

#[test]
fn paused_clients_keep_every_property() {
    let checker = check(paused(), "fair, paused clients");
    for property in SAFE {
        checker.assert_no_discovery(property);
    }
}

/// Re-entries with mixed leases, for the lease defect of the scripts before the fixes.
fn reentries(scripts: Scripts) -> FairModel {
    FairModel {
        scripts,
        episodes: vec![1, 1],
        max_holds: 2,
        leases: vec![None, Some(1_000)],
        pauses: false,
        // Acquires start in the first two ticks; three would serve every waiter.
        budget: 6,
        reserve: 4,
        ..model()
    }
}

/// Without losses (no wake-up or renewal lost, nobody dies, leases that outlast a hold),
/// a wake-up is the only thing that frees a lock to a waiter.
fn lossless(breakage: Breakage, fallback: bool) -> FairModel {
    FairModel {
        breakage,
        leases: vec![None, Some(3_000)],
        fallback,
        lossy: false,
        pauses: false,
        ..model()
    }
}

#[test]
fn re_entries_with_mixed_leases_keep_every_property() {
    let checker = check(reentries(Scripts::Current), "fair re-entries");
    for property in SAFE {
        checker.assert_no_discovery(property);
    }
}

#[test]
fn the_acquire_before_the_lease_truth_fixes_lets_a_re_entry_cut_a_watched_hold() {
    // A watched hold, then a re-entry with a shorter fixed lease: the old acquire set the
    // key's TTL to that lease under the watched hold.
    let cut = counterexample(reentries(Scripts::Before), KEPT);
    assert_eq!(
        cut,
        [
            Action::Start(0, None),
            Action::RunTry(0),
            Action::Reenter(0, Some(1_000))
        ]
    );
    // Once it ran out, the other client took the lock while the first still held it.
    let two = counterexample(reentries(Scripts::Before), ONE_HOLDER);
    assert_eq!(two.last(), Some(&Action::RunTry(1)), "{two:?}");
}

#[test]
fn an_unlock_that_wakes_nobody_is_covered_by_the_timed_fallback() {
    // Every busy answer puts a fair waiter to sleep for at most what `busy_retry_in` makes of
    // it (the holder's lease left, or the head's time left, and never more than a third
    // of the allowance), and its next try takes the lock once it is free and the waiter
    // is first in line: a silent unlock costs that sleep, and loses nobody.
    let silent = FairModel {
        breakage: Breakage::SilentUnlock,
        only: Some(SERVED),
        ..model()
    };
    check(silent, "silent unlock, timed fallback").assert_no_discovery(SERVED);
}

#[test]
fn without_the_timed_fallback_a_silent_unlock_loses_a_waiter() {
    // Without losses, the wake-ups alone serve every waiter...
    let served = FairModel {
        only: Some(SERVED),
        ..lossless(Breakage::None, false)
    };
    check(served, "lossless, no fallback").assert_no_discovery(SERVED);
    // ...so an unlock that wakes nobody leaves the next waiter asleep for good.
    let lost = counterexample_path(lossless(Breakage::SilentUnlock, false), SERVED);
    assert!(left_asleep(&lost), "{:?}", lost.last_state());
    // And with losses the timed fallback is needed whatever the unlock does: a fixed lease
    // that runs out frees the lock without any wake-up at all.
    let expired = counterexample_path(
        FairModel {
            fallback: false,
            pauses: false,
            ..model()
        },
        SERVED,
    );
    assert!(left_asleep(&expired), "{:?}", expired.last_state());
    let freed = |action: &Action| matches!(action, Action::Unlock(..) | Action::Wake(_));
    assert!(!expired.into_actions().iter().any(freed));
}

#[test]
fn an_acquire_that_takes_a_free_lock_ahead_of_the_queue_breaks_queue_order() {
    let barged = counterexample(
        FairModel {
            breakage: Breakage::Barging,
            ..model()
        },
        ORDER,
    );
    // The first client holds, the second queues; the first unlocks (waking the second),
    // and a newcomer (the first again, or with the deep bounds the third) tries before the
    // second does: it takes the lock ahead of it.
    let newcomer = if deep() { 2 } else { 0 };
    assert_eq!(
        barged,
        [
            Action::Start(0, None),
            Action::RunTry(0),
            Action::Start(1, None),
            Action::RunTry(1),
            Action::Unlock(0, 0),
            Action::Start(newcomer, None),
            Action::RunTry(newcomer)
        ]
    );
}

#[test]
fn a_withdraw_that_keeps_its_deadline_leaves_it_behind() {
    let kept = counterexample(
        FairModel {
            breakage: Breakage::KeptDeadline,
            ..model()
        },
        LEFT,
    );
    // A waiter gives up while its first try is in Redis; that try finds the lock taken and
    // queues it, so it withdraws: its deadline stays behind.
    assert_eq!(
        kept,
        [
            Action::Start(0, None),
            Action::GiveUp(0),
            Action::Start(1, None),
            Action::RunTry(1),
            Action::RunTry(0),
            Action::RunWithdraw(0)
        ]
    );
}
