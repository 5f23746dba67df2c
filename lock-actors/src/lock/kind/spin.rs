//! The spin lock (Redisson's `RSpinLock`): the reentrant lock's hash, acquire and renewal,
//! without pub/sub. Its unlock publishes nothing and its waiters never subscribe: they try
//! again after a backoff ([`SpinBackoff`](crate::SpinBackoff)), for deployments where
//! pub/sub is unavailable (an ACL user without channels) or costly (a large cluster's
//! broadcast publishes).

use super::reentrant::{self, HOLDS, RENEW};
use super::{AcquireArgs, Grant, KindRules, PublishingScript, UnlockScripts, EXPECT_HOLDERS};
use crate::kinds::Kind;
use crate::script::ScriptCall;
use redis::Script;
use std::sync::LazyLock;

/// The `publish` that tells nobody, in place of `publish.lua`.
const SILENT: &str = include_str!("spin/silent.lua");
static UNLOCK: LazyLock<UnlockScripts> =
    LazyLock::new(|| UnlockScripts::silent(SILENT, HOLDS, &[reentrant::UNLOCK_SOURCE]));
static FORCE_UNLOCK: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::silent(SILENT, &[super::FORCE_UNLOCK_SOURCE]));
static FORCE_UNLOCK_IF: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::silent(SILENT, &[EXPECT_HOLDERS, super::FORCE_UNLOCK_SOURCE])
});

/// The spin kind. Its unlock, reconcile and force-unlock are the shared ones with the
/// silent `publish`, called without a channel key (it [`polls`](KindRules::polls)).
pub(super) struct Spin;

impl KindRules for Spin {
    fn name(&self) -> &'static str {
        "spin"
    }

    fn grant(&self) -> Grant {
        Grant::Exclusive
    }

    fn polls(&self) -> bool {
        true
    }

    /// The reentrant lock's acquire (Redisson's `RSpinLock` runs the `RLock` one too).
    fn acquire(&self, args: AcquireArgs<'_>) -> ScriptCall {
        reentrant::Reentrant.acquire(AcquireArgs {
            fenced: false,
            ..args
        })
    }

    fn unlock_scripts(&self) -> &'static UnlockScripts {
        &UNLOCK
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW
    }

    fn force_unlock_scripts(&self) -> [&'static PublishingScript; 2] {
        [&FORCE_UNLOCK, &FORCE_UNLOCK_IF]
    }

    fn scripts(&self) -> Vec<&'static Script> {
        [&*FORCE_UNLOCK, &*FORCE_UNLOCK_IF]
            .into_iter()
            .flat_map(PublishingScript::both)
            .chain(UNLOCK.all())
            .collect()
    }

    fn listed(&self) -> Kind {
        Kind::Spin
    }
}
