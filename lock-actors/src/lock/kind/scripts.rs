//! The scripts every kind shares or builds from its own parts: the unlock family (unlock,
//! reconcile, foreign unlock), lease updates, force-unlock, and the publishing flavours.

use crate::node::publishing::PublishingScript;
use redis::Script;
use std::sync::LazyLock;

/// Which script of a kind's unlock family a release runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unlocking {
    /// The unlock of a hold this process counts.
    Counted,
    /// The reconcile: undo a hold Redis counts beyond this process's count.
    Reconcile,
    /// The unlock of an owner's hold this process does not count (`Lock::unlock_as`):
    /// replies nil (no hold of the field), `{1, 0}` (freed), or `{0, n}` with the holds the
    /// field has left (0: freed for it, others hold the key). The holds left keep the key's
    /// TTL as it was; the lease argument is set only on a key without expiry.
    Foreign,
}

/// A kind's unlock, its reconcile (the kind's `holds` function, the shared prelude
/// `reconcile.lua`, then the same unlock), and its foreign unlock (the same unlock run
/// inside `foreign_begin.lua` and `foreign_end.lua`).
pub(crate) struct UnlockScripts {
    unlock: PublishingScript,
    reconcile: PublishingScript,
    /// Rarely used: not preloaded, loaded on its first use.
    foreign: PublishingScript,
}

impl UnlockScripts {
    /// From the kind's `holds` function and its unlock's parts.
    pub(super) fn new(holds: &str, unlock: &[&str]) -> Self {
        Self::made(holds, unlock, PublishingScript::new)
    }

    /// As [`new`](Self::new), publishing with `silent` (a `publish` that tells nobody) in
    /// both flavours.
    pub(super) fn silent(silent: &str, holds: &str, unlock: &[&str]) -> Self {
        Self::made(holds, unlock, |parts| {
            PublishingScript::silent(silent, parts)
        })
    }

    /// The unlock and its reconcile, each made by `make` from its parts.
    fn made(holds: &str, unlock: &[&str], make: impl Fn(&[&str]) -> PublishingScript) -> Self {
        let reconcile: Vec<&str> = [holds, RECONCILE]
            .into_iter()
            .chain(unlock.iter().copied())
            .collect();
        let foreign: Vec<&str> = [holds, FOREIGN_BEGIN]
            .into_iter()
            .chain(unlock.iter().copied())
            .chain([FOREIGN_END])
            .collect();
        UnlockScripts {
            unlock: make(unlock),
            reconcile: make(&reconcile),
            foreign: make(&foreign),
        }
    }

    pub(super) fn pick(&self, unlocking: Unlocking) -> &PublishingScript {
        match unlocking {
            Unlocking::Counted => &self.unlock,
            Unlocking::Reconcile => &self.reconcile,
            Unlocking::Foreign => &self.foreign,
        }
    }

    /// Both scripts in both flavours.
    pub(super) fn all(&self) -> [&Script; 4] {
        let [a, b] = self.unlock.both();
        let [c, d] = self.reconcile.both();
        [a, b, c, d]
    }
}

/// The reconcile prelude, joined between a kind's `holds` function and its unlock.
pub(super) const RECONCILE: &str = include_str!("reconcile.lua");
/// The foreign unlock's parts, around a kind's unlock.
pub(super) const FOREIGN_BEGIN: &str = include_str!("foreign_begin.lua");
pub(super) const FOREIGN_END: &str = include_str!("foreign_end.lua");
pub(super) static SET_LEASE: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("set_lease.lua")]));
/// The shared force-unlock's source (the spin kind runs it without a publish).
pub(super) const FORCE_UNLOCK_SOURCE: &str = include_str!("force_unlock.lua");
pub(super) static FORCE_UNLOCK: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[FORCE_UNLOCK_SOURCE]));
/// The holder check an operator's force-unlock runs first, in the same script.
pub(super) const EXPECT_HOLDERS: &str = include_str!("expect_holders.lua");
pub(super) static FORCE_UNLOCK_IF: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[EXPECT_HOLDERS, FORCE_UNLOCK_SOURCE]));

/// One script from one or more source files, joined in order (a reconcile is the kind's
/// `holds` function, the shared prelude, then the kind's unlock).
pub(super) fn script(parts: &[&str]) -> Script {
    Script::new(&parts.join("\n"))
}
