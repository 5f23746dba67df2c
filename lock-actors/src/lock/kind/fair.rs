//! The fair lock (Redisson's `RFairLock`): the reentrant hash plus a queue of waiters
//! (`redisson_lock_queue:{name}`) and their deadlines (`redisson_lock_timeout:{name}`),
//! granted in queue order across processes. Each waiter is woken on a channel of its own
//! (`<channel>:<field>`), so each owner has an actor of its own here.

use super::reentrant::{HOLDS, RENEW};
use super::{AcquireArgs, Grant, KindRules, PublishingScript, UnlockScripts, EXPECT_HOLDERS};
use crate::keys::{LockName, UNLOCK_MESSAGE};
use crate::kinds::Kind;
use crate::node::connection::PubSub;
use crate::script::ScriptCall;
use redis::Script;
use std::sync::LazyLock;

/// The rule for dead queue heads, joined in front of every script that drops them.
const STALE: &str = include_str!("fair/stale.lua");
static ACQUIRE: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[STALE, include_str!("fair/acquire.lua")]));
static UNLOCK: LazyLock<UnlockScripts> =
    LazyLock::new(|| UnlockScripts::new(HOLDS, &[STALE, include_str!("fair/unlock.lua")]));
static WITHDRAW: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[include_str!("fair/withdraw.lua")]));
static FORCE_UNLOCK: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[STALE, include_str!("fair/force_unlock.lua")]));
static FORCE_UNLOCK_IF: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[EXPECT_HOLDERS, STALE, include_str!("fair/force_unlock.lua")])
});

/// The fair kind.
pub(super) struct Fair;

impl KindRules for Fair {
    fn name(&self) -> &'static str {
        "fair"
    }

    fn grant(&self) -> Grant {
        Grant::PerOwnerQueue
    }

    fn wake_channel(&self, name: &LockName, field: &str) -> String {
        name.fair_waiter_channel(field)
    }

    /// Also publishes (a wake for the new head when it drops dead ones).
    fn acquire(&self, args: AcquireArgs<'_>) -> ScriptCall {
        let name = args.name;
        let mut call = ScriptCall::with_key(ACQUIRE.get(args.pubsub), name.as_str());
        call.key(name.fair_queue_key())
            .key(name.fair_timeout_key())
            .key(self.channel(name));
        call.arg(args.lease_ms)
            .arg(args.field)
            .arg(args.fair_patience_ms)
            .arg(UNLOCK_MESSAGE);
        call
    }

    fn withdraw(
        &self,
        name: &LockName,
        field: &str,
        allowance_ms: u64,
        pubsub: PubSub,
    ) -> Option<ScriptCall> {
        let mut call = ScriptCall::with_key(WITHDRAW.get(pubsub), name.as_str());
        call.key(self.channel(name))
            .key(name.fair_queue_key())
            .key(name.fair_timeout_key())
            .arg(UNLOCK_MESSAGE)
            .arg(field)
            .arg(allowance_ms);
        Some(call)
    }

    fn unlock_scripts(&self) -> &'static UnlockScripts {
        &UNLOCK
    }

    fn unlock_keys(&self, name: &LockName, _field: &str) -> Vec<String> {
        vec![name.fair_queue_key(), name.fair_timeout_key()]
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW
    }

    /// Also drops dead queue heads, and wakes the next waiter on its own channel.
    fn force_unlock(&self, name: &LockName, pubsub: PubSub, holders: bool) -> ScriptCall {
        let script = if holders {
            &FORCE_UNLOCK_IF
        } else {
            &FORCE_UNLOCK
        };
        let mut call = ScriptCall::with_key(script.get(pubsub), name.as_str());
        call.key(self.channel(name))
            .key(name.fair_queue_key())
            .key(name.fair_timeout_key())
            .arg(UNLOCK_MESSAGE);
        call
    }

    fn scripts(&self) -> Vec<&'static Script> {
        [&*ACQUIRE, &*WITHDRAW, &*FORCE_UNLOCK, &*FORCE_UNLOCK_IF]
            .into_iter()
            .flat_map(PublishingScript::both)
            .chain(UNLOCK.all())
            .collect()
    }

    fn listed(&self) -> Kind {
        Kind::Fair
    }
}
