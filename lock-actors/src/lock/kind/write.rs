//! The write side of Redisson's `RReadWriteLock`: the same hash as the read side, the
//! writer's field suffixed `:write`; one writer, and no readers but its own. An unlock that
//! frees it publishes `1` on `redisson_rwlock:{name}`, which wakes every waiter.

use super::reentrant::{HOLDS, RENEW};
use super::{lease_and_field, script, AcquireArgs, Grant, KindRules, UnlockScripts, Unlocking};
use crate::keys::{LockName, READ_UNLOCK_MESSAGE};
use crate::kinds::Kind;
use crate::node::connection::PubSub;
use crate::script::ScriptCall;
use redis::Script;
use std::sync::LazyLock;

static ACQUIRE: LazyLock<Script> = LazyLock::new(|| script(&[include_str!("write/acquire.lua")]));
static UNLOCK: LazyLock<UnlockScripts> =
    LazyLock::new(|| UnlockScripts::new(HOLDS, &[include_str!("write/unlock.lua")]));

/// The write kind.
pub(super) struct Write;

impl KindRules for Write {
    fn name(&self) -> &'static str {
        "write"
    }

    fn grant(&self) -> Grant {
        Grant::Exclusive
    }

    fn channel_prefix(&self) -> &'static str {
        crate::keys::RWLOCK_CHANNEL
    }

    fn field_suffix(&self) -> &'static str {
        ":write"
    }

    /// Redisson's: a write unlock that frees the lock wakes every waiter (they may all be
    /// readers).
    fn freed_message(&self) -> &'static str {
        READ_UNLOCK_MESSAGE
    }

    fn acquire(&self, args: AcquireArgs<'_>) -> ScriptCall {
        lease_and_field(&ACQUIRE, &args)
    }

    fn unlock_scripts(&self) -> &'static UnlockScripts {
        &UNLOCK
    }

    fn unlock_keys(&self, name: &LockName, _field: &str) -> Vec<String> {
        vec![name.hash_tagged()]
    }

    /// As every kind's, plus what an unlock that leaves only the writer's own read holds
    /// publishes.
    fn release_call(
        &self,
        unlocking: Unlocking,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        pubsub: PubSub,
    ) -> ScriptCall {
        let mut call = super::release_call(self, unlocking, name, field, lease_ms, pubsub);
        call.arg(READ_UNLOCK_MESSAGE);
        call
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW
    }

    fn scripts(&self) -> Vec<&'static Script> {
        [&*ACQUIRE, &*RENEW]
            .into_iter()
            .chain(UNLOCK.all())
            .collect()
    }

    fn listed(&self) -> Kind {
        Kind::Write
    }
}
