//! The wait queue driven by hand: every effect it asks for is checked, and every timer and
//! Redis answer is a call made here, at the instant the test chooses.

use super::*;

/// A waiter's payload in these tests: a name, and whether its asker left.
struct Ask {
    name: &'static str,
    left: bool,
}

impl Asker for Ask {
    fn left(&self) -> bool {
        self.left
    }
}

const MS: Duration = Duration::from_millis(1);
const WAIT: Duration = Duration::from_secs(10);

/// One effect as text: `try A`, `subscribe`, `sleep 300ms`, `cancel sleep`, `arm A +10s`,
/// `timeout A`, `fail A`, `withdrawn A`.
fn show(queue: &WaitQueue<Ask>, t0: Instant, effect: &Effect<Ask>) -> String {
    let name = |id: u64| queue.get(id).map_or("?", |w| w.data.name);
    match effect {
        Effect::Try { id } => format!("try {}", name(*id)),
        Effect::Subscribe => "subscribe".into(),
        Effect::Sleep { pause, .. } => format!("sleep {pause:?}"),
        Effect::CancelSleep => "cancel sleep".into(),
        Effect::ArmDeadline { id, at } => format!("arm {} +{:?}", name(*id), *at - t0),
        Effect::TimedOut(w) => format!("timeout {}", w.data.name),
        Effect::Fail(w, _) => format!("fail {}", w.data.name),
        Effect::Withdrawn(w) => format!("withdrawn {}", w.data.name),
    }
}

/// A queue under test, with the clock at `t0 + at`.
struct Run {
    queue: WaitQueue<Ask>,
    t0: Instant,
    at: Duration,
    /// The token of the last sleep asked for.
    token: u64,
    ids: Vec<(&'static str, u64)>,
}

impl Run {
    fn new(retry: Retry) -> Self {
        Run {
            queue: WaitQueue::new(retry),
            t0: Instant::now(),
            at: Duration::ZERO,
            token: 0,
            ids: Vec::new(),
        }
    }

    fn now(&self) -> Instant {
        self.t0 + self.at
    }

    fn id(&self, name: &str) -> u64 {
        self.ids
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, id)| *id)
            .expect("a waiter of this test")
    }

    fn log(&mut self, effects: Vec<Effect<Ask>>) -> Vec<String> {
        effects
            .iter()
            .map(|effect| {
                if let Effect::Sleep { token, .. } = effect {
                    self.token = *token;
                }
                show(&self.queue, self.t0, effect)
            })
            .collect()
    }

    fn enqueue(&mut self, name: &'static str, wait: Duration) -> Vec<String> {
        let now = self.now();
        let waiter = self.queue.waiter(now, wait, Ask { name, left: false });
        self.ids.push((name, waiter.id));
        let effects = self.queue.enqueue(waiter, false);
        self.log(effects)
    }

    fn pump(&mut self) -> Vec<String> {
        let effects = self.queue.pump(self.now(), |_| Gate::Go);
        self.log(effects)
    }

    fn granted(&mut self, name: &str) -> &'static str {
        match self.queue.granted(self.id(name)) {
            Granted::To(waiter) => waiter.data.name,
            Granted::Unclaimed => "unclaimed",
        }
    }

    fn busy(&mut self, name: &str, retry_in: Duration) -> Vec<String> {
        let effects = self.queue.busy(self.id(name), self.now(), retry_in);
        self.log(effects)
    }

    fn failed(&mut self, name: &str, error: LockError) -> Vec<String> {
        let effects = self.queue.failed(self.id(name), self.now(), error);
        self.log(effects)
    }

    fn leave(&mut self, name: &str) {
        let id = self.id(name);
        if let Some(waiter) = self.queue.get_mut(id) {
            waiter.data.left = true;
        }
    }

    /// The head tries and is told the lock is busy for `pttl`; it subscribes first, tries
    /// again, and sleeps on the second busy answer.
    fn wait_subscribed(&mut self, name: &str, pttl: Duration) {
        let at = self.at;
        assert_eq!(self.pump(), [format!("try {name}")]);
        assert_eq!(
            self.busy(name, pttl),
            [format!("arm {name} +{:?}", WAIT + at)]
        );
        assert_eq!(self.pump(), ["subscribe"]);
        self.queue.subscribed(Subscribed::Yes);
        assert_eq!(self.pump(), [format!("try {name}")]);
        assert_eq!(self.busy(name, pttl), [format!("sleep {pttl:?}")]);
    }
}

fn unavailable() -> LockError {
    LockError::Unavailable {
        node: "redis://127.0.0.1:1/".into(),
        reason: "no answer".into(),
    }
}

#[test]
fn waiters_are_served_in_fifo_order_one_try_at_a_time() {
    let mut run = Run::new(Retry::TransientOnce);
    assert_eq!(run.enqueue("A", WAIT), Vec::<String>::new());
    assert_eq!(run.pump(), ["try A"]);
    assert_eq!(run.enqueue("B", WAIT), ["arm B +10s"]);
    assert_eq!(run.enqueue("C", WAIT), ["arm C +10s"]);
    assert!(run.pump().is_empty(), "only the head contends");
    assert_eq!(run.granted("A"), "A");
    assert_eq!(run.pump(), ["try B"]);
    assert_eq!(run.granted("B"), "B");
    assert_eq!(run.pump(), ["try C"]);
    assert_eq!(run.granted("C"), "C");
    assert!(run.pump().is_empty());
    assert!(run.queue.is_empty());
}

#[test]
fn a_busy_head_subscribes_before_its_second_try_then_sleeps_at_the_pttl() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", 300 * MS);
    assert!(run.queue.ever_subscribed());
    assert!(run.pump().is_empty(), "asleep");
}

#[test]
fn a_lost_unlock_message_costs_one_pttl_the_fallback_timer_retries_the_head() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", 300 * MS);
    run.at += 300 * MS; // no unlock message came
    run.queue.slept(run.token);
    assert_eq!(run.pump(), ["try A"]);
    assert_eq!(run.granted("A"), "A");
}

#[test]
fn a_stale_timer_wakes_nobody() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", 300 * MS);
    let stale = run.token;
    assert_eq!(run.busy_after_news("A"), ["sleep 300ms"]);
    run.queue.slept(stale);
    assert!(run.pump().is_empty(), "the old timer is not the head's");
}

impl Run {
    /// News wakes the sleeping head; its try finds the lock busy again.
    fn busy_after_news(&mut self, name: &str) -> Vec<String> {
        assert_eq!(self.log_news(), ["cancel sleep"]);
        assert_eq!(self.pump(), [format!("try {name}")]);
        self.busy(name, 300 * MS)
    }

    fn log_news(&mut self) -> Vec<String> {
        let effects = self.queue.news();
        self.log(effects)
    }
}

#[test]
fn a_publish_wakes_the_sleeping_head_at_once() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", Duration::from_secs(5));
    run.at += 5 * MS;
    assert_eq!(run.log_news(), ["cancel sleep"]);
    assert_eq!(run.pump(), ["try A"]);
    assert_eq!(run.granted("A"), "A");
}

#[test]
fn a_publish_during_a_try_makes_a_busy_answer_retry_at_once() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", 300 * MS);
    run.queue.slept(run.token);
    assert_eq!(run.pump(), ["try A"]);
    assert!(
        run.log_news().is_empty(),
        "nothing to cancel: the try is in Redis"
    );
    assert!(run.busy("A", 300 * MS).is_empty(), "no sleep: it retries");
    assert_eq!(run.pump(), ["try A"]);
}

#[test]
fn a_reconnect_makes_every_waiter_retry_in_turn_without_sleeping() {
    // The node answers a reconnect with a wake-up to every actor that has waiters: here the
    // head sleeps on a long PTTL and two more wait behind it.
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", Duration::from_secs(5));
    assert_eq!(run.enqueue("B", WAIT), ["arm B +10s"]);
    assert_eq!(run.enqueue("C", WAIT), ["arm C +10s"]);
    assert_eq!(run.log_news(), ["cancel sleep"]);
    assert_eq!(run.pump(), ["try A"]);
    assert_eq!(run.granted("A"), "A");
    // The next waiters try at once (the lock may be free for them too), one at a time.
    assert_eq!(run.pump(), ["try B"]);
    // The actor is subscribed already: a busy answer sleeps until news or the PTTL.
    assert_eq!(run.busy("B", 300 * MS), ["sleep 300ms"]);
    assert_eq!(run.log_news(), ["cancel sleep"]);
    assert_eq!(run.pump(), ["try B"]);
    assert_eq!(run.granted("B"), "B");
    assert_eq!(run.pump(), ["try C"]);
}

#[test]
fn a_read_unlock_wakes_every_waiting_reader() {
    // Readers share the lock: once the writer's unlock (or a read unlock, message `1`) is
    // heard, the head reader takes it and every reader behind it tries at once, none sleeps.
    let mut run = Run::new(Retry::UnansweredFirstTry {
        grace: Duration::from_secs(3),
    });
    run.enqueue("R1", WAIT);
    run.wait_subscribed("R1", Duration::from_secs(5));
    for reader in ["R2", "R3", "R4"] {
        assert_eq!(run.enqueue(reader, WAIT), [format!("arm {reader} +10s")]);
    }
    assert_eq!(run.log_news(), ["cancel sleep"]);
    for reader in ["R1", "R2", "R3", "R4"] {
        assert_eq!(run.pump(), [format!("try {reader}")]);
        assert_eq!(run.granted(reader), reader);
    }
    assert!(run.queue.is_empty());
}

#[test]
fn cancelling_the_sleeping_head_lets_the_next_waiter_try_at_once() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", Duration::from_secs(5));
    run.enqueue("B", WAIT);
    run.leave("A");
    let effects = run.queue.gone(run.id("A"));
    assert_eq!(run.log(effects), ["withdrawn A", "cancel sleep"]);
    assert_eq!(run.pump(), ["try B"]);
}

#[test]
fn a_cancelled_head_whose_try_is_in_redis_stays_and_its_grant_is_unclaimed() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    run.enqueue("B", WAIT);
    run.leave("A");
    assert!(run.queue.gone(run.id("A")).is_empty(), "its answer decides");
    let effects = run.queue.withdraw_gone();
    assert!(effects.is_empty(), "not even for a newcomer");
    assert_eq!(run.granted("A"), "A");
    run.leave("B");
    let effects = run.queue.gone(run.id("B"));
    assert_eq!(run.log(effects), ["withdrawn B"]);
    // A grant for a waiter no longer queued is given back.
    run.enqueue("C", WAIT);
    assert_eq!(run.pump(), ["try C"]);
    run.leave("C");
    let effects = run.queue.withdraw_gone();
    assert!(effects.is_empty());
    let effects = run.queue.pump(run.now(), |_| Gate::Go);
    assert!(effects.is_empty(), "busy: the try is in Redis");
    // The caller left, the answer is a grant: nobody to hand it to once it is dropped.
    let id = run.id("C");
    run.queue.waiters.retain(|w| w.id != id);
    assert!(matches!(run.queue.granted(id), Granted::Unclaimed));
}

#[test]
fn cancelling_a_middle_waiter_keeps_the_others_in_order() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    run.enqueue("B", WAIT);
    run.enqueue("C", WAIT);
    run.enqueue("D", WAIT);
    run.leave("B");
    let effects = run.queue.gone(run.id("B"));
    assert_eq!(run.log(effects), ["withdrawn B"], "the head's try goes on");
    // A waiter whose asker left without a word is dropped when the next one queues.
    run.leave("C");
    assert_eq!(run.enqueue("E", WAIT), ["withdrawn C", "arm E +10s"]);
    assert_eq!(run.granted("A"), "A");
    assert_eq!(run.pump(), ["try D"]);
    assert_eq!(run.granted("D"), "D");
    assert_eq!(run.pump(), ["try E"]);
}

#[test]
fn a_deadline_passing_times_the_waiter_out_and_the_next_one_tries() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", Duration::from_secs(1));
    assert_eq!(run.pump(), ["try A"]);
    assert_eq!(run.busy("A", Duration::from_secs(5)), ["arm A +1s"]);
    assert_eq!(run.pump(), ["subscribe"]);
    run.queue.subscribed(Subscribed::Yes);
    assert_eq!(run.pump(), ["try A"]);
    // The sleep never reaches past the deadline.
    run.at = 400 * MS;
    assert_eq!(run.busy("A", Duration::from_secs(5)), ["sleep 600ms"]);
    run.enqueue("B", WAIT);
    run.at = Duration::from_secs(1);
    let effects = run.queue.expire(run.id("A"));
    assert_eq!(run.log(effects), ["timeout A", "cancel sleep"]);
    assert_eq!(run.pump(), ["try B"]);
}

#[test]
fn a_deadline_during_a_try_times_the_waiter_out_at_once_and_its_grant_is_given_back() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", Duration::from_secs(1));
    run.enqueue("B", WAIT);
    run.enqueue("C", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    run.at = Duration::from_secs(2);
    let effects = run.queue.expire(run.id("A"));
    assert_eq!(
        run.log(effects),
        ["timeout A"],
        "its caller waits no longer"
    );
    assert!(
        run.pump().is_empty(),
        "nobody else tries while A's try is in Redis"
    );
    assert_eq!(run.granted("A"), "unclaimed", "the actor gives it back");
    assert_eq!(run.pump(), ["try B"]);
    // A busy answer for a waiter that timed out meanwhile lets the next one try.
    let effects = run.queue.expire(run.id("B"));
    assert_eq!(run.log(effects), ["timeout B"]);
    assert!(run.busy("B", 300 * MS).is_empty());
    assert_eq!(run.pump(), ["try C"]);
    // A head past its deadline is timed out by the pump, its timer notwithstanding.
    assert!(run.busy("C", 300 * MS).is_empty(), "armed when it queued");
    run.at = Duration::from_secs(13);
    assert_eq!(run.pump(), ["timeout C"]);
}

#[test]
fn the_gate_refuses_or_holds_back_the_head() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.enqueue("B", WAIT);
    run.enqueue("C", WAIT);
    let effects = run.queue.pump(run.now(), |head| match head.data.name {
        "A" => Gate::Refuse(LockError::Shutdown),
        _ => Gate::Hold {
            pause: 250 * MS,
            error: Some(unavailable()),
        },
    });
    assert_eq!(run.log(effects), ["fail A", "sleep 250ms"]);
    let b = run.queue.get(run.id("B")).expect("B waits");
    assert_eq!(b.attempts, 1, "held back counts as tried");
    assert!(b.last_error.is_some());
    run.queue.slept(run.token);
    // Tried once, so it subscribes before it tries again.
    assert_eq!(run.pump(), ["subscribe"]);
}

#[test]
fn an_unanswered_first_try_is_retried_once_within_the_grace() {
    let grace = Duration::from_secs(3);
    let mut run = Run::new(Retry::UnansweredFirstTry { grace });
    run.enqueue("A", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    assert_eq!(run.failed("A", unavailable()), ["arm A +3s"]);
    assert_eq!(run.pump(), ["try A"], "at once, not subscribing");
    assert_eq!(run.failed("A", unavailable()), ["fail A"]);
    // An answer after the retry gives the caller its own wait back.
    run.enqueue("B", WAIT);
    assert_eq!(run.pump(), ["try B"]);
    run.failed("B", unavailable());
    assert_eq!(run.pump(), ["try B"]);
    assert_eq!(run.busy("B", 300 * MS), ["arm B +10s"]);
    // A permanent error fails at once.
    assert_eq!(run.pump(), ["subscribe"]);
    run.queue.subscribed(Subscribed::No {
        retry_after: Some(run.now() + Duration::from_secs(1)),
    });
    assert_eq!(run.pump(), ["try B"], "polling while subscribing fails");
    assert_eq!(run.busy("B", 300 * MS), ["sleep 300ms"]);
    run.queue.slept(run.token);
    assert_eq!(run.pump(), ["try B"]);
    assert_eq!(run.failed("B", LockError::Shutdown), ["fail B"]);
}

#[test]
fn a_transient_error_is_retried_at_once_then_after_a_pause() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    assert!(run.failed("A", unavailable()).is_empty());
    assert_eq!(run.pump(), ["try A"]);
    assert_eq!(
        run.failed("A", unavailable()),
        ["arm A +10s", "sleep 100ms"]
    );
    run.queue.slept(run.token);
    assert_eq!(run.pump(), ["subscribe"]);
    run.queue.subscribed(Subscribed::Yes);
    assert_eq!(run.pump(), ["try A"]);
    run.at = WAIT;
    assert_eq!(
        run.failed("A", unavailable()),
        ["fail A"],
        "past its deadline"
    );
}

#[test]
fn a_reentry_goes_ahead_of_the_queue_and_wakes_the_head() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", Duration::from_secs(5));
    let waiter = run.queue.waiter(
        run.now(),
        WAIT,
        Ask {
            name: "R",
            left: false,
        },
    );
    run.ids.push(("R", waiter.id));
    let effects = run.queue.enqueue(waiter, true);
    assert_eq!(run.log(effects), ["cancel sleep"]);
    assert_eq!(run.pump(), ["try R"]);
}

#[test]
fn a_head_whose_asker_left_during_its_try_is_withdrawn_at_the_busy_answer() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", Duration::from_secs(5));
    let effects = run.queue.news();
    assert_eq!(run.log(effects), ["cancel sleep"]);
    assert_eq!(run.pump(), ["try A"]);
    // Its caller leaves while the try is in Redis: the answer decides.
    run.leave("A");
    let effects = run.queue.gone(run.id("A"));
    assert!(effects.is_empty());
    // Busy: it leaves now, instead of sleeping out the holder's lease (its asker watch
    // has fired already: nothing else would wake it before then).
    assert_eq!(run.busy("A", Duration::from_secs(5)), ["withdrawn A"]);
    run.enqueue("B", WAIT);
    assert_eq!(run.pump(), ["try B"]);
}

#[test]
fn a_refused_subscription_fails_the_head_at_once_and_the_next_head_asks_again() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.enqueue("B", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    assert_eq!(run.busy("A", Duration::from_secs(30)), ["arm A +10s"]);
    assert_eq!(run.pump(), ["subscribe"]);
    let effects = run.queue.subscription_ended(Err(LockError::Shutdown));
    assert_eq!(
        run.log(effects),
        ["fail A"],
        "not polling out its wait at the lease"
    );
    assert_eq!(run.pump(), ["try B"]);
    assert!(
        run.busy("B", Duration::from_secs(30)).is_empty(),
        "armed when queued"
    );
    assert_eq!(
        run.pump(),
        ["subscribe"],
        "asked again: the ACL may have changed"
    );
    let effects = run.queue.subscription_ended(Ok(Subscribed::Yes));
    assert!(effects.is_empty());
    assert_eq!(run.pump(), ["try B"]);
}

#[test]
fn a_closed_queue_fails_its_waiters_and_every_later_one() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    run.wait_subscribed("A", 300 * MS);
    run.enqueue("B", WAIT);
    run.enqueue("C", WAIT);
    run.leave("B");
    let effects = run.queue.close();
    assert_eq!(
        run.log(effects),
        ["fail A", "withdrawn B", "fail C", "cancel sleep"]
    );
    assert!(run.queue.is_empty());
    assert!(run.pump().is_empty());
    assert_eq!(run.enqueue("D", WAIT), ["fail D"]);
    assert!(run.queue.is_empty());
}

#[test]
fn a_closed_queue_lets_the_answer_decide_for_a_head_whose_try_is_in_redis() {
    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    run.enqueue("B", WAIT);
    // A re-entry goes first, ahead of the waiter whose try is in Redis.
    let now = run.now();
    let ahead = run.queue.waiter(
        now,
        WAIT,
        Ask {
            name: "R",
            left: false,
        },
    );
    run.ids.push(("R", ahead.id));
    let effects = run.queue.enqueue(ahead, true);
    assert!(run.log(effects).is_empty());
    let effects = run.queue.close();
    assert_eq!(run.log(effects), ["fail R", "fail B"]);
    assert!(run.queue.trying(), "A's try is still in Redis");
    assert_eq!(run.granted("A"), "A", "a grant is handed over");

    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    let effects = run.queue.close();
    assert!(run.log(effects).is_empty());
    assert_eq!(
        run.busy("A", 300 * MS),
        ["fail A"],
        "busy: it does not wait on"
    );
    assert!(run.queue.is_empty() && !run.queue.trying());

    let mut run = Run::new(Retry::TransientOnce);
    run.enqueue("A", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    let effects = run.queue.close();
    assert!(run.log(effects).is_empty());
    assert_eq!(run.failed("A", unavailable()), ["fail A"], "no retry");
    assert!(run.queue.is_empty());
}

/// A polling queue (the spin lock's): never subscribes; the head sleeps the pause it is
/// given after every busy answer, and a waiter that found the lock busy elsewhere rests
/// before its first try here.
#[test]
fn a_polling_head_never_subscribes_and_sleeps_its_pause_between_tries() {
    let retry = Retry::TransientOnce;
    let mut run = Run {
        queue: WaitQueue::polling(retry),
        ..Run::new(retry)
    };
    run.enqueue("A", WAIT);
    assert_eq!(run.pump(), ["try A"]);
    assert_eq!(run.busy("A", 2 * MS), ["arm A +10s", "sleep 2ms"]);
    run.at += 2 * MS;
    run.queue.slept(run.token);
    assert_eq!(run.pump(), ["try A"], "no subscription first");
    assert_eq!(run.busy("A", 4 * MS), ["sleep 4ms"]);
    assert!(!run.queue.ever_subscribed());

    let now = run.now();
    let mut rested = run.queue.waiter(
        now,
        3 * MS,
        Ask {
            name: "B",
            left: false,
        },
    );
    rested.attempts = 1;
    rested.rest = Some(8 * MS);
    run.ids.push(("B", rested.id));
    let effects = run.queue.enqueue(rested, false);
    assert_eq!(run.log(effects), ["arm B +5ms"]);
    run.queue.slept(run.token);
    assert_eq!(run.granted("A"), "A");
    assert_eq!(
        run.pump(),
        ["sleep 3ms"],
        "B rests (within its wait) before it tries"
    );
    run.queue.slept(run.token);
    assert_eq!(run.pump(), ["try B"]);
}
