//! The read side of Redisson's `RReadWriteLock`: one hash with a `mode` field, a hold
//! count per reader, and one key per read hold (`{name}:<field>:rwlock_timeout:N`) carrying
//! that hold's lease. Shared by any number of readers; unlocks go out on
//! `redisson_rwlock:{name}`.

use super::reentrant::HOLDS;
use super::{script, AcquireArgs, Grant, KindRules, UnlockScripts};
use crate::keys::LockName;
use crate::kinds::Kind;
use crate::script::ScriptCall;
use redis::Script;
use std::sync::LazyLock;

static ACQUIRE: LazyLock<Script> = LazyLock::new(|| script(&[include_str!("read/acquire.lua")]));
static RENEW: LazyLock<Script> = LazyLock::new(|| script(&[include_str!("read/renew.lua")]));
static UNLOCK: LazyLock<UnlockScripts> =
    LazyLock::new(|| UnlockScripts::new(HOLDS, &[include_str!("read/unlock.lua")]));

/// The read kind.
pub(super) struct Read;

impl KindRules for Read {
    fn name(&self) -> &'static str {
        "read"
    }

    fn grant(&self) -> Grant {
        Grant::Shared
    }

    fn channel_prefix(&self) -> &'static str {
        crate::keys::RWLOCK_CHANNEL
    }

    fn acquire(&self, args: AcquireArgs<'_>) -> ScriptCall {
        let mut call = ScriptCall::with_key(&ACQUIRE, args.name.as_str());
        call.key(args.name.read_timeout_prefix(args.field));
        // The writer's field of the same owner: a writer may also read.
        call.arg(args.lease_ms).arg(args.field).arg(format!(
            "{}{}",
            args.field,
            super::write::Write.field_suffix()
        ));
        call
    }

    fn unlock_scripts(&self) -> &'static UnlockScripts {
        &UNLOCK
    }

    fn unlock_keys(&self, name: &LockName, field: &str) -> Vec<String> {
        vec![name.read_timeout_prefix(field), name.hash_tagged()]
    }

    fn lease_keys(&self, name: &LockName, field: &str) -> Vec<String> {
        vec![name.read_timeout_prefix(field)]
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW
    }

    fn add_renewal(&self, call: &mut ScriptCall, name: &LockName, field: &str) {
        call.key(name.as_str());
        call.key(name.hash_tagged());
        call.arg(field);
    }

    fn scripts(&self) -> Vec<&'static Script> {
        [&*ACQUIRE, &*RENEW]
            .into_iter()
            .chain(UNLOCK.all())
            .collect()
    }

    fn listed(&self) -> Kind {
        Kind::Read
    }
}
