//! The fast lock: one string key whose value is the holder (`SET NX PX`); not reentrant.
//! A free one is taken with the plain `SET` alone, no Lua.

use super::{lease_and_field, script, AcquireArgs, Grant, KindRules, UnlockScripts};
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

    fn acquire(&self, args: AcquireArgs<'_>) -> ScriptCall {
        lease_and_field(&ACQUIRE, &args)
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
