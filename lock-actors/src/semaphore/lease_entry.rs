//! The permits on the lease list (`crate::lease::list`): a lease-less permit of a
//! permit-expirable semaphore, how its renewal is written and whom its loss is told to.

use super::{Kind, SemaphoreKeys, RENEW};
use crate::config::clock_drift;
use crate::keys::LockName;
use crate::lease::list::{Loss, WatchList, Watched};
use crate::lease::status::StatusLoser;
use crate::node::connection::PubSub;
use crate::node::Commands;
use crate::script::ScriptCall;
use actix::prelude::*;
use actix::WeakAddr;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The lease-less permits the renewal service keeps alive, told of a loss through
/// semaphore actors of type `A`.
pub(crate) type PermitWatch<A> = WatchList<PermitHold<A>>;

/// Until when a permit whose lease `lease` surely lasts until `valid_until` (its acquire's
/// or last confirmed renewal's send time plus the lease) is held, as its guard sees it:
/// `valid_until` less the clock drift allowance, so the holder hears of the loss before
/// Redis takes the permit back. Fixed leases and renewed ones alike.
pub(crate) fn permit_deadline(valid_until: Instant, lease: Duration) -> Instant {
    valid_until - clock_drift(lease)
}

/// The renewal of permits of permit-expirable semaphore `name` to `lease_ms` (`renew.lua`),
/// with no permit added yet: each is one more argument, its raw id.
pub(crate) fn renewal_call(name: &LockName, lease_ms: u64, pubsub: PubSub) -> ScriptCall {
    let keys = SemaphoreKeys::new(name, Kind::Expirable);
    let mut call = ScriptCall::new(RENEW.get(pubsub));
    if let Some(timeouts) = keys.timeouts {
        call.key(timeouts);
    }
    call.arg(lease_ms);
    call
}

/// One lease-less permit, part of grant `grant` (the permits of one acquire) of the
/// semaphore actor `actor`.
pub(crate) struct PermitHold<A: Actor> {
    /// The semaphore's name: its timeout zset is the key of the renewal.
    name: LockName,
    /// The permit's raw id, a member of the zset.
    permit: Vec<u8>,
    valid_until: Instant,
    in_batch: bool,
    /// Told of the loss, with the grant.
    actor: WeakAddr<A>,
    grant: u64,
    /// The grant's guard deadline, which this permit's own deadline is part of.
    deadline: Arc<GrantDeadline>,
    /// This permit's deadline: `valid_until` less the clock drift allowance.
    own_deadline: Instant,
}

/// The deadline of a grant's guard: the earliest of its renewed permits' (any permit
/// lost is the grant lost, so the guard turns lost at the first of them to end). Each
/// permit's entry puts its deadline in when it is registered, moves it at each confirmed
/// renewal and takes it out when it leaves the lease list (released, or lost).
pub(crate) struct GrantDeadline {
    status: StatusLoser,
    /// The permits' deadlines, each with how many permits have it.
    ends: Mutex<BTreeMap<Instant, usize>>,
}

impl GrantDeadline {
    fn new(status: StatusLoser) -> Self {
        GrantDeadline {
            status,
            ends: Mutex::new(BTreeMap::new()),
        }
    }

    /// A permit's deadline moves from `from` (none: it is new) to `to` (none: it left).
    fn moved(&self, from: Option<Instant>, to: Option<Instant>) {
        let mut ends = self.ends.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(from) = from {
            if let Some(count) = ends.get_mut(&from) {
                *count -= 1;
                if *count == 0 {
                    ends.remove(&from);
                }
            }
        }
        if let Some(to) = to {
            *ends.entry(to).or_default() += 1;
        }
        // With no permit left the grant has ended (released or lost): its status says so.
        if let Some(earliest) = ends.keys().next() {
            self.status.set_deadline(*earliest);
        }
    }
}

/// Grants of lease-less permits go on the list permit by permit.
impl<A> PermitWatch<A>
where
    A: Actor + Handler<PermitLost>,
    A::Context: actix::dev::ToEnvelope<A, PermitLost>,
{
    /// Starts renewing the permits `permits` (raw ids) of semaphore `name`, handed out
    /// together in grant `grant` by an acquire sent at `sent` with the watchdog lease:
    /// `(sent, lease)`. Their guard's status `status` is told of their deadline (the
    /// earliest of theirs) and of a loss found by the renewal service. Returns their
    /// entries' ids, in the same order.
    pub(crate) fn register_grant<'a>(
        &self,
        name: &LockName,
        permits: impl IntoIterator<Item = &'a [u8]>,
        grant: u64,
        actor: WeakAddr<A>,
        status: StatusLoser,
        (sent, lease): (Instant, Duration),
    ) -> Vec<u64> {
        let deadline = Arc::new(GrantDeadline::new(status));
        let valid_until = sent + lease;
        let own_deadline = permit_deadline(valid_until, lease);
        permits
            .into_iter()
            .map(|permit| {
                deadline.moved(None, Some(own_deadline));
                self.watch(PermitHold {
                    name: name.clone(),
                    permit: permit.to_vec(),
                    grant,
                    actor: actor.clone(),
                    valid_until,
                    in_batch: false,
                    deadline: deadline.clone(),
                    own_deadline,
                })
            })
            .collect()
    }
}

impl<A> Watched for PermitHold<A>
where
    A: Actor + Handler<PermitLost>,
    A::Context: actix::dev::ToEnvelope<A, PermitLost>,
{
    /// Permits of one semaphore share its timeout zset, the one key of a call.
    type Group = LockName;

    fn group(&self, _: bool) -> LockName {
        self.name.clone()
    }

    fn name(&self) -> &LockName {
        &self.name
    }

    fn begin(&self, lease_ms: u64, commands: &Commands) -> ScriptCall {
        renewal_call(&self.name, lease_ms, commands.pubsub)
    }

    fn add(&self, call: &mut ScriptCall, _: &str) {
        call.arg(self.permit.as_slice());
    }

    fn valid_until(&mut self) -> &mut Instant {
        &mut self.valid_until
    }

    fn in_batch(&mut self) -> &mut bool {
        &mut self.in_batch
    }

    /// The guard times the grant itself: it hears of each confirmed renewal.
    fn renewed(&mut self, valid_until: Instant, lease: Duration) {
        self.valid_until = valid_until;
        let own_deadline = permit_deadline(valid_until, lease);
        let from = std::mem::replace(&mut self.own_deadline, own_deadline);
        self.deadline.moved(Some(from), Some(own_deadline));
    }

    fn lost(self, id: u64, loss: Loss) {
        // The guard hears of it at once, not behind the semaphore actor's mailbox.
        self.deadline.status.lose();
        if let Some(actor) = self.actor.upgrade() {
            actor.do_send(PermitLost {
                grant: self.grant,
                watch_id: id,
                loss,
            });
        }
    }
}

/// A permit leaving the lease list (released, or lost) no longer times its grant.
impl<A: Actor> Drop for PermitHold<A> {
    fn drop(&mut self) {
        self.deadline.moved(Some(self.own_deadline), None);
    }
}

/// The renewal service found a permit of grant `grant` gone, or no renewal confirmed it
/// within its lease (sent to the semaphore actor that registered it).
pub(crate) struct PermitLost {
    pub(crate) grant: u64,
    pub(crate) watch_id: u64,
    pub(crate) loss: Loss,
}

impl Message for PermitLost {
    type Result = ();
}

#[cfg(test)]
mod tests {
    use super::GrantDeadline;
    use crate::lease::status::StatusSender;
    use std::time::{Duration, Instant};

    fn past() -> Instant {
        Instant::now() - Duration::from_millis(1)
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    /// Any permit lost is the grant lost: the guard's deadline is the earliest permit's.
    #[test]
    fn the_earliest_permit_deadline_times_the_guard() {
        let (status, guard) = StatusSender::held();
        let deadline = GrantDeadline::new(status.loser());
        deadline.moved(None, Some(later()));
        assert!(!guard.is_lost());
        deadline.moved(None, Some(past()));
        assert!(guard.is_lost());
    }

    /// A permit that left the list (released by id) no longer times its grant; one of two
    /// permits with the same deadline renewed leaves the other's in place.
    #[test]
    fn a_permit_that_left_or_moved_no_longer_counts() {
        let (status, guard) = StatusSender::held();
        let deadline = GrantDeadline::new(status.loser());
        let (ended, kept) = (past(), later());
        deadline.moved(None, Some(ended));
        deadline.moved(None, Some(kept));
        deadline.moved(Some(ended), None);
        assert!(!guard.is_lost());

        let (status, guard) = StatusSender::held();
        let deadline = GrantDeadline::new(status.loser());
        let ended = past();
        deadline.moved(None, Some(ended));
        deadline.moved(None, Some(ended));
        deadline.moved(Some(ended), Some(later()));
        assert!(guard.is_lost());
    }
}
