//! The lock holds on the lease list (`crate::lease::list`): a watchdog-leased hold, how
//! its renewal is written and whom its loss is told to.

use super::kind::LockKind;
use super::LockOwner;
use crate::config::clock_drift;
use crate::keys::LockName;
use crate::lease::ends::renewed_for;
use crate::lease::list::{Loss, WatchList, Watched};
use crate::lease::status::StatusLoser;
use crate::node::Commands;
use crate::script::ScriptCall;
use actix::prelude::*;
use actix::WeakAddr;
use redis::cluster_routing::Slot;
use std::time::{Duration, Instant};

/// The holds the watchdog keeps alive, told of a loss through lock actors of type `A`.
pub(crate) type WatchRegistry<A> = WatchList<LockHold<A>>;

/// A watchdog-leased hold of one lock by one owner.
///
/// `A` is the lock actor told of a loss. The entry holds its address weakly and as it is
/// (no boxed recipient per entry: the list can hold many thousands of holds, and the
/// watchdog bench counts the bytes of each).
pub(crate) struct LockHold<A: Actor> {
    kind: LockKind,
    name: LockName,
    owner: LockOwner,
    actor: WeakAddr<A>,
    /// Turns the owner's guards lost the moment the loss is found: the actor may be busy
    /// with a long mailbox (thousands of waiters giving up), and `lost()` must not wait
    /// behind it.
    status: StatusLoser,
    valid_until: Instant,
    in_batch: bool,
}

impl<A> WatchRegistry<A>
where
    A: Actor + Handler<HoldLost>,
    A::Context: actix::dev::ToEnvelope<A, HoldLost>,
{
    /// Starts renewing `owner`'s hold of `name`; `valid_until` is when its current lease
    /// surely ends (the hold is reported lost then unless a renewal confirms it first).
    pub(crate) fn register(
        &self,
        kind: LockKind,
        name: LockName,
        owner: LockOwner,
        actor: WeakAddr<A>,
        status: StatusLoser,
        valid_until: Instant,
    ) -> u64 {
        self.watch(LockHold {
            kind,
            name,
            owner,
            actor,
            status,
            valid_until,
            in_batch: false,
        })
    }
}

impl<A> Watched for LockHold<A>
where
    A: Actor + Handler<HoldLost>,
    A::Context: actix::dev::ToEnvelope<A, HoldLost>,
{
    /// Holds of one kind share a renewal script; on a cluster, one slot's keys a call.
    type Group = (LockKind, Option<Slot>);

    fn group(&self, by_slot: bool) -> Self::Group {
        (
            self.kind,
            by_slot.then(|| Slot::for_key(self.name.as_str())),
        )
    }

    fn name(&self) -> &LockName {
        &self.name
    }

    fn begin(&self, lease_ms: u64, _: &Commands) -> ScriptCall {
        let mut call = ScriptCall::new(self.kind.renew_script());
        call.arg(lease_ms);
        call
    }

    fn add(&self, call: &mut ScriptCall, client_id: &str) {
        let field = self.kind.field(format!("{client_id}:{}", self.owner.id()));
        self.kind.add_renewal(call, &self.name, &field);
    }

    fn valid_until(&mut self) -> &mut Instant {
        &mut self.valid_until
    }

    fn in_batch(&mut self) -> &mut bool {
        &mut self.in_batch
    }

    /// The guards time the hold themselves: they hear of each confirmed renewal.
    fn renewed(&mut self, valid_until: Instant, lease: Duration) {
        self.valid_until = valid_until;
        self.status.set_deadline(valid_until - clock_drift(lease));
    }

    /// A lock's renewal answers the key's PTTL after it ran: a hold lasts the earlier of
    /// its lease and that (a peer may have shortened the TTL the holds share).
    fn renewed_for(answer: i64, lease: Duration) -> Option<Duration> {
        renewed_for(answer, lease)
    }

    fn lost(self, id: u64, loss: Loss) {
        // Unconfirmed while a fixed lease of the owner keeps the key longer: not lost yet
        // (the actor watches the hold again until that lease's end).
        let lost = match loss {
            Loss::Gone => {
                self.status.lose();
                true
            }
            Loss::Unconfirmed => self.status.lose_unconfirmed(),
        };
        if lost {
            tracing::warn!(lock = %self.name, owner = self.owner.id(), why = loss.why(), "lock lost");
        }
        if let Some(actor) = self.actor.upgrade() {
            actor.do_send(HoldLost {
                owner: self.owner,
                watch_id: id,
                loss,
            });
        }
    }
}

/// The renewal service found `owner`'s hold gone, or no renewal confirmed it within its
/// lease (sent to the lock actor that registered it).
pub(crate) struct HoldLost {
    pub(crate) owner: LockOwner,
    pub(crate) watch_id: u64,
    pub(crate) loss: Loss,
}

impl Message for HoldLost {
    type Result = ();
}

#[cfg(test)]
mod tests {
    use super::LockHold;
    use crate::lock::LockActor;

    /// The lease list can hold many thousands of holds and the watchdog bench counts the
    /// bytes of each: a hold's entry is its seven fields, no wrapper and no padding added
    /// by the generic list.
    #[test]
    fn a_lock_hold_entry_is_its_fields_and_no_more() {
        assert_eq!(std::mem::size_of::<LockHold<LockActor>>(), 64);
    }
}
