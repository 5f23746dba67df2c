//! The fast lock: one string key whose value is the holder (`SET NX PX`); not reentrant.
//! A free one is taken with the plain `SET` alone, no Lua.

use super::{script, AcquireArgs, Grant, KindRules, UnlockScripts};
use crate::keys::LockName;
use crate::kinds::Kind;
use crate::script::ScriptCall;
use redis::Script;
use std::sync::LazyLock;

static ACQUIRE: LazyLock<Script> = LazyLock::new(|| script(&[include_str!("fast/acquire.lua")]));
static RENEW: LazyLock<Script> = LazyLock::new(|| script(&[include_str!("fast/renew.lua")]));
static UNLOCK: LazyLock<UnlockScripts> = LazyLock::new(|| {
    UnlockScripts::new(
        include_str!("fast/holds.lua"),
        &[include_str!("fast/unlock.lua")],
    )
});

/// The fast kind.
pub(super) struct Fast;

impl KindRules for Fast {
    fn name(&self) -> &'static str {
        "fast"
    }

    fn grant(&self) -> Grant {
        Grant::Exclusive
    }

    fn reentrant(&self) -> bool {
        false
    }

    fn key_type(&self) -> &'static str {
        "string"
    }

    /// The holder is the key's value: one hold or none.
    fn read_holds(&self, pipe: &mut redis::Pipeline, name: &LockName, _field: &str) {
        pipe.cmd("GET").arg(name.as_str());
    }

    fn holds_in(&self, reply: Option<&str>, field: &str) -> u32 {
        u32::from(reply == Some(field))
    }

    /// Also marks that someone waits, when busy (see `fast/acquire.lua`).
    fn acquire(&self, args: AcquireArgs<'_>) -> ScriptCall {
        let name = args.name;
        let waiting = name.fast_waiting_text();
        let mut call = ScriptCall::keyed(&ACQUIRE, [&name.as_str(), &waiting]);
        call.arg(args.lease_ms)
            .arg(args.field)
            .arg(if args.waits { "1" } else { "0" });
        call
    }

    /// `SET name field NX PX lease`: the first line of its acquire script.
    fn plain_acquire(&self, name: &LockName, field: &str, lease_ms: u64) -> Option<redis::Cmd> {
        let mut cmd = redis::Cmd::with_capacity(6, name.as_str().len() + field.len() + 32);
        cmd.arg("SET")
            .arg(name.as_str())
            .arg(field)
            .arg("NX")
            .arg("PX")
            .arg(lease_ms);
        Some(cmd)
    }

    fn unlock_scripts(&self) -> &'static UnlockScripts {
        &UNLOCK
    }

    /// Its unlock publishes only when a waiter's mark is there (see `fast/unlock.lua`).
    fn marks_waiters(&self) -> bool {
        true
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
        Kind::Fast
    }
}
