//! The reentrant lock (Redisson's `RLock`): a hash of owner → hold count; the same owner
//! may take it again. A fenced acquire also draws a token from `redisson_lock_token:{name}`.
//! The read, write, fair and spin kinds build on this layout (its `holds` and renewal).

use super::{lease_and_field, script, AcquireArgs, Grant, KindRules, UnlockScripts};
use crate::kinds::Kind;
use crate::script::ScriptCall;
use redis::Script;
use std::sync::LazyLock;

/// The `holds` function of a hash lock (how many holds a field has), for reconciles.
pub(super) const HOLDS: &str = include_str!("reentrant/holds.lua");

/// The batch renewal of hash locks, shared by the write and fair kinds.
pub(super) static RENEW: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("reentrant/renew.lua")]));
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("reentrant/acquire.lua")]));
static FENCED_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("reentrant/fenced_acquire.lua")]));
/// The unlock's source, which the spin kind runs without a publish.
pub(super) const UNLOCK_SOURCE: &str = include_str!("reentrant/unlock.lua");
static UNLOCK: LazyLock<UnlockScripts> =
    LazyLock::new(|| UnlockScripts::new(HOLDS, &[UNLOCK_SOURCE]));

/// The reentrant kind.
pub(super) struct Reentrant;

impl KindRules for Reentrant {
    fn name(&self) -> &'static str {
        "reentrant"
    }

    fn grant(&self) -> Grant {
        Grant::Exclusive
    }

    fn fences(&self) -> bool {
        true
    }

    fn acquire(&self, args: AcquireArgs<'_>) -> ScriptCall {
        if !args.fenced {
            return lease_and_field(&ACQUIRE, &args);
        }
        let token_key = args.name.prefixed_text(crate::keys::TOKEN_KEY);
        let mut call = ScriptCall::keyed(&FENCED_ACQUIRE, [&args.name.as_str(), &token_key]);
        call.arg(args.lease_ms).arg(args.field);
        call
    }

    fn unlock_scripts(&self) -> &'static UnlockScripts {
        &UNLOCK
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW
    }

    fn scripts(&self) -> Vec<&'static Script> {
        [&*ACQUIRE, &*FENCED_ACQUIRE, &*RENEW]
            .into_iter()
            .chain(UNLOCK.all())
            .collect()
    }

    fn listed(&self) -> Kind {
        Kind::Reentrant
    }
}
