//! The permits on the watch list (`crate::watch_list`): a lease-less permit of a
//! permit-expirable semaphore, how its renewal is written and whom its loss is told to.

use super::{Kind, SemaphoreKeys, RENEW};
use crate::keys::LockName;
use crate::node::Commands;
use crate::script::ScriptCall;
use crate::watch_list::{Loss, WatchList, Watched};
use actix::prelude::*;
use actix::WeakAddr;
use std::time::Instant;

/// The lease-less permits the renewal service keeps alive, told of a loss through
/// semaphore actors of type `A`.
pub(crate) type PermitWatch<A> = WatchList<PermitHold<A>>;

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
}

/// Grants of lease-less permits go on the list permit by permit.
impl<A> PermitWatch<A>
where
    A: Actor + Handler<PermitLost>,
    A::Context: actix::dev::ToEnvelope<A, PermitLost>,
{
    /// Starts renewing the permits `permits` (raw ids) of semaphore `name`, handed out
    /// together in grant `grant`; `valid_until` is when their current lease surely ends.
    /// Returns their entries' ids, in the same order.
    pub(crate) fn register_grant<'a>(
        &self,
        name: &LockName,
        permits: impl IntoIterator<Item = &'a [u8]>,
        grant: u64,
        actor: WeakAddr<A>,
        valid_until: Instant,
    ) -> Vec<u64> {
        permits
            .into_iter()
            .map(|permit| {
                self.watch(PermitHold {
                    name: name.clone(),
                    permit: permit.to_vec(),
                    grant,
                    actor: actor.clone(),
                    valid_until,
                    in_batch: false,
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
        let keys = SemaphoreKeys::new(&self.name, Kind::Expirable);
        let mut call = ScriptCall::new(RENEW.get(commands.pubsub));
        if let Some(timeouts) = keys.timeouts {
            call.key(timeouts);
        }
        call.arg(lease_ms);
        call
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

    fn lost(self, id: u64, loss: Loss) {
        if let Some(actor) = self.actor.upgrade() {
            actor.do_send(PermitLost {
                grant: self.grant,
                watch_id: id,
                loss,
            });
        }
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
