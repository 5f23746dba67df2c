//! Where a hold stands, shared by whoever keeps it (a lock actor, a semaphore actor, the
//! lease list's entry) and the guards that stand for it: a status byte, a deadline and a
//! `Notify`. A guard reads the deadline on its own clock, so its `is_lost()` and `lost()`
//! turn at the lease's end even while the client's actors are too busy to say so.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Where a hold stands, as its guards see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldStatus {
    Held,
    Released,
    Lost,
}

impl HoldStatus {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => HoldStatus::Held,
            1 => HoldStatus::Released,
            _ => HoldStatus::Lost,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            HoldStatus::Held => 0,
            HoldStatus::Released => 1,
            HoldStatus::Lost => 2,
        }
    }
}

/// A hold's status, shared by its keeper (one sender) and its guards (receivers): a byte
/// and a `Notify`, far lighter than a watch channel (this is per hold).
///
/// The cell also carries the hold's deadline: the instant its lease surely ends unless a
/// renewal confirms it first. A guard reads it on its own clock, so `is_lost()` and
/// `lost()` turn at the deadline even while the client's actors are too busy to say so
/// (a burst of thousands of waiters giving up at once).
struct StatusCell {
    value: AtomicU8,
    /// Microseconds since [`base`]; `u64::MAX`: no deadline (nothing times this hold).
    deadline: AtomicU64,
    /// Microseconds since [`base`] before which the hold surely lasts whatever the deadline
    /// says (a fixed lease of the owner beside its watchdog-kept holds: the key keeps the
    /// longest lease any hold has left); 0: none.
    floor: AtomicU64,
    changed: Notify,
    /// Cells that take every deadline this one gets (see [`StatusSender::follow`]).
    followers: Mutex<Vec<Arc<StatusCell>>>,
}

/// The origin of the deadlines kept as microseconds.
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

const NO_DEADLINE: u64 = u64::MAX;

fn micros_of(at: Instant) -> u64 {
    at.saturating_duration_since(base()).as_micros() as u64
}

impl StatusCell {
    fn set_deadline(&self, deadline: Option<Instant>) {
        self.deadline
            .store(deadline.map_or(NO_DEADLINE, micros_of), Ordering::SeqCst);
        self.changed_deadline();
    }

    fn set_floor(&self, floor: Option<Instant>) {
        self.floor
            .store(floor.map_or(0, |f| micros_of(f).max(1)), Ordering::SeqCst);
        self.changed_deadline();
    }

    fn changed_deadline(&self) {
        // A `lost()` future sleeping on the old deadline picks the new one up.
        self.changed.notify_waiters();
        let deadline = self.deadline();
        let followers = self.followers.lock().unwrap_or_else(|p| p.into_inner());
        for follower in followers.iter() {
            follower.set_deadline(deadline);
        }
    }

    /// The instant the hold surely ends: its deadline, never before its floor.
    fn deadline(&self) -> Option<Instant> {
        match self.deadline.load(Ordering::SeqCst) {
            NO_DEADLINE => None,
            micros => {
                let micros = micros.max(self.floor.load(Ordering::SeqCst));
                Some(base() + Duration::from_micros(micros))
            }
        }
    }

    /// True while the floor lies ahead: the hold lasts until then whatever else says.
    fn floor_ahead(&self) -> bool {
        let floor = self.floor.load(Ordering::SeqCst);
        floor != 0 && base() + Duration::from_micros(floor) > Instant::now()
    }

    /// `Held` becomes `Lost` (waking `lost()` futures); any other status stays.
    fn lose(&self) {
        let held = HoldStatus::Held.as_u8();
        let lost = HoldStatus::Lost.as_u8();
        if self
            .value
            .compare_exchange(held, lost, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.changed.notify_waiters();
        }
    }

    /// The status, with a `Held` whose deadline has passed turned `Lost` for good.
    fn get(&self) -> HoldStatus {
        let status = HoldStatus::from_u8(self.value.load(Ordering::SeqCst));
        if status == HoldStatus::Held && self.deadline().is_some_and(|d| Instant::now() >= d) {
            self.lose();
            return HoldStatus::from_u8(self.value.load(Ordering::SeqCst));
        }
        status
    }
}

/// The keeper's end (the actor that holds the hold): sets the status. Dropping it while
/// still `Held` (the actor is gone, nothing renews any more) counts as a loss.
pub(crate) struct StatusSender(Arc<StatusCell>);

/// A guard's end: reads the status and waits for it to end.
#[derive(Clone)]
pub(crate) struct StatusReceiver(Arc<StatusCell>);

impl StatusSender {
    /// A new status, `Held`, and one receiver of it.
    pub(crate) fn held() -> (Self, StatusReceiver) {
        let cell = Arc::new(StatusCell {
            value: AtomicU8::new(HoldStatus::Held.as_u8()),
            deadline: AtomicU64::new(NO_DEADLINE),
            floor: AtomicU64::new(0),
            changed: Notify::new(),
            followers: Mutex::new(Vec::new()),
        });
        (StatusSender(cell.clone()), StatusReceiver(cell))
    }

    pub(crate) fn subscribe(&self) -> StatusReceiver {
        StatusReceiver(self.0.clone())
    }

    /// The watchdog's handle: it moves the deadline at each confirmed renewal and turns
    /// `Held` into `Lost` the moment it finds the hold gone, so the guards hear of it at
    /// once, not behind the keeping actor's mailbox.
    pub(crate) fn loser(&self) -> StatusLoser {
        StatusLoser(self.0.clone())
    }

    /// Until when the hold surely lasts (`None`: nothing times it here); past it the
    /// guards see `Lost` on their own.
    pub(crate) fn set_deadline(&self, deadline: Option<Instant>) {
        self.0.set_deadline(deadline);
    }

    /// Before `floor` the hold surely lasts, whatever its deadline says (`None`: no floor):
    /// the end of the owner's longest fixed lease, less its drift allowance, while the
    /// watchdog keeps its other holds. The deadline never comes before it.
    pub(crate) fn set_floor(&self, floor: Option<Instant>) {
        self.0.set_floor(floor);
    }

    /// `other` takes this status's deadline, now and at every later change (the watchdog's
    /// included): a hold merged into another one's keeping is timed as that one is.
    pub(crate) fn follow(&self, other: &StatusSender) {
        other.0.set_deadline(self.0.deadline());
        let mut followers = self.0.followers.lock().unwrap_or_else(|p| p.into_inner());
        followers.push(other.0.clone());
    }

    /// True once the hold is lost, its deadline past included (as its guards see it).
    pub(crate) fn is_lost(&self) -> bool {
        self.0.get() == HoldStatus::Lost
    }

    pub(crate) fn send_replace(&self, status: HoldStatus) {
        self.0.value.store(status.as_u8(), Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// Marks a hold lost unless it has been released already (see [`StatusSender::loser`]).
pub(crate) struct StatusLoser(Arc<StatusCell>);

impl StatusLoser {
    /// `Held` becomes `Lost` and waiting `lost()` futures wake; any other status stays.
    pub(crate) fn lose(&self) {
        self.0.lose();
    }

    /// The watchdog confirmed no renewal in time: `Held` becomes `Lost` unless the floor
    /// lies ahead (a fixed lease of the owner keeps the key until then). Returns whether
    /// the hold is lost now.
    pub(crate) fn lose_unconfirmed(&self) -> bool {
        if self.0.floor_ahead() {
            return false;
        }
        self.0.lose();
        true
    }

    /// A renewal confirmed the hold until `deadline`.
    pub(crate) fn set_deadline(&self, deadline: Instant) {
        self.0.set_deadline(Some(deadline));
    }
}

impl Drop for StatusSender {
    fn drop(&mut self) {
        let held = HoldStatus::Held.as_u8();
        let lost = HoldStatus::Lost.as_u8();
        let _ = self
            .0
            .value
            .compare_exchange(held, lost, Ordering::SeqCst, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

impl StatusReceiver {
    pub(crate) fn get(&self) -> HoldStatus {
        self.0.get()
    }

    /// How long the hold surely lasts from now: its deadline less now while held (`None`
    /// when nothing times it), zero once it has ended (released, lost, or past the deadline).
    pub(crate) fn remaining(&self) -> Option<Duration> {
        match self.get() {
            HoldStatus::Held => self
                .0
                .deadline()
                .map(|deadline| deadline.saturating_duration_since(Instant::now())),
            HoldStatus::Released | HoldStatus::Lost => Some(Duration::ZERO),
        }
    }

    /// True once the hold is known lost (or its deadline has passed while held).
    pub(crate) fn is_lost(&self) -> bool {
        self.get() == HoldStatus::Lost
    }

    /// Returns once the status is `Lost` (or the deadline has passed while `Held`); never
    /// if it is `Released`.
    pub(crate) async fn ended_by_loss(self) {
        loop {
            let changed = self.0.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change right after it is not missed.
            changed.as_mut().enable();
            match self.get() {
                HoldStatus::Lost => return,
                HoldStatus::Released => std::future::pending::<()>().await,
                HoldStatus::Held => match self.0.deadline() {
                    Some(deadline) => {
                        tokio::select! {
                            () = changed => {}
                            () = tokio::time::sleep_until(deadline.into()) => {}
                        }
                    }
                    None => changed.await,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{HoldStatus, StatusSender};
    use std::time::{Duration, Instant};

    #[test]
    fn a_held_hold_is_lost_at_its_deadline_and_stays_lost() {
        let (status, guard) = StatusSender::held();
        status.set_deadline(Some(Instant::now() + Duration::from_secs(3600)));
        assert_eq!(guard.get(), HoldStatus::Held);
        status.set_deadline(Some(Instant::now() - Duration::from_millis(1)));
        assert!(guard.is_lost());
        // A renewal confirmed too late does not bring it back.
        status.set_deadline(Some(Instant::now() + Duration::from_secs(3600)));
        assert!(guard.is_lost());
    }

    #[test]
    fn a_released_hold_is_never_lost() {
        let (status, guard) = StatusSender::held();
        status.send_replace(HoldStatus::Released);
        status.set_deadline(Some(Instant::now() - Duration::from_millis(1)));
        assert_eq!(guard.get(), HoldStatus::Released);
        drop(status);
        assert_eq!(guard.get(), HoldStatus::Released);
    }

    #[test]
    fn a_follower_takes_every_later_deadline_of_the_one_it_follows() {
        let (main, _) = StatusSender::held();
        let (merged, guard) = StatusSender::held();
        let later = Instant::now() + Duration::from_secs(3600);
        main.set_deadline(Some(later));
        main.follow(&merged);
        assert!(guard
            .remaining()
            .is_some_and(|left| left > Duration::from_secs(3500)));
        main.set_deadline(Some(Instant::now() - Duration::from_millis(1)));
        assert!(guard.is_lost());
        assert_eq!(guard.remaining(), Some(Duration::ZERO));
    }

    #[test]
    fn a_floor_ahead_keeps_the_hold_past_its_deadline_and_an_unconfirmed_loss() {
        let (status, guard) = StatusSender::held();
        let loser = status.loser();
        status.set_floor(Some(Instant::now() + Duration::from_secs(3600)));
        status.set_deadline(Some(Instant::now() - Duration::from_millis(1)));
        assert_eq!(guard.get(), HoldStatus::Held);
        assert!(!loser.lose_unconfirmed());
        assert_eq!(guard.get(), HoldStatus::Held);
        // The floor gone (the fixed hold released), the deadline counts again.
        status.set_floor(None);
        assert!(guard.is_lost());
        let (status, guard) = StatusSender::held();
        status.set_floor(Some(Instant::now() - Duration::from_millis(1)));
        assert!(status.loser().lose_unconfirmed());
        assert!(guard.is_lost());
    }

    #[tokio::test]
    async fn lost_resolves_at_the_deadline_without_a_word_from_the_keeper() {
        let (status, guard) = StatusSender::held();
        let start = Instant::now();
        status.set_deadline(Some(start + Duration::from_millis(50)));
        tokio::time::timeout(Duration::from_secs(5), guard.ended_by_loss())
            .await
            .expect("lost() never resolved");
        assert!(start.elapsed() >= Duration::from_millis(50));
        drop(status);
    }
}
