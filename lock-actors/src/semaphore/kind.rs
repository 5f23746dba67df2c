//! The two semaphore kinds, each one value behind one trait: how errors name it, how its
//! permits go out and come back (counted, or one by one with ids and leases), its keys,
//! its acquire call and its metrics label. [`Kind::rules`] is the one list; nothing else
//! matches on a semaphore kind to build a call.

use super::guard::PermitId;
use super::{
    timeouts_key, SemaphoreKeys, ACQUIRE, ADD, EXPIRABLE_ACQUIRE, EXPIRABLE_RELEASE,
    EXPIRABLE_SETTLE, SETTLE,
};
use crate::kinds::Kind as Listed;
use crate::node::connection::PubSub;
use crate::script::ScriptCall;

/// The two semaphore kinds; each name has one actor per kind in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Plain,
    Expirable,
}

impl Kind {
    /// The kind's rules: the one list of semaphore kinds.
    pub(crate) fn rules(self) -> &'static dyn SemaphoreRules {
        match self {
            Kind::Plain => &Plain,
            Kind::Expirable => &Expirable,
        }
    }
}

/// The kind as the `kind` label of metrics and spans.
impl From<Kind> for Listed {
    fn from(kind: Kind) -> Self {
        kind.rules().listed()
    }
}

/// What one permit acquire asks for.
pub(crate) struct Take<'a> {
    pub(crate) permits: u32,
    /// The permits' lease (permit-expirable semaphores).
    pub(crate) lease_ms: u64,
    /// The acquire's receipt key: whether it ran (kinds that write one), or whether it was
    /// settled before it ran (every kind).
    pub(crate) receipt: &'a str,
    /// How long a receipt is kept.
    pub(crate) settle_window_ms: u64,
}

/// An acquire whose reply was lost, to settle: it may have run, or may still run.
pub(crate) struct Unanswered<'a> {
    pub(crate) permits: u32,
    /// The ids it asked for (kinds whose permits have ids).
    pub(crate) ids: &'a [PermitId],
    /// Its receipt key.
    pub(crate) receipt: &'a str,
    /// How long the settlement's marker is kept.
    pub(crate) settle_window_ms: u64,
}

/// What a semaphore kind answers for.
pub(crate) trait SemaphoreRules: Sync {
    /// How errors name it ("a plain semaphore").
    fn describe(&self) -> &'static str;

    /// Whether its permits go out one by one, each with an id and a lease, and come back by
    /// id; otherwise they are counted out and back.
    fn by_id(&self) -> bool;

    /// Whether its acquire writes its receipt when it takes permits, so that an acquire
    /// whose reply was lost can be settled (a counted permit carries nothing else to find
    /// it by); the receipt is deleted once the reply comes. Permits with ids are found by
    /// their ids, and their acquire only reads the receipt (a settlement's marker).
    fn writes_receipt(&self) -> bool;

    /// The zset of its permits' expiry for semaphore `name` (the mapped name), if it has one.
    fn timeouts_key(&self, name: &str) -> Option<String>;

    /// The acquire call for `take`, and the ids of the permits it asks for.
    fn acquire_call(
        &self,
        keys: &SemaphoreKeys,
        pubsub: PubSub,
        take: &Take<'_>,
    ) -> (ScriptCall, Vec<PermitId>);

    /// The call that gives back `permits` nobody will use (with their `ids`, if it has ids).
    fn give_back_call(
        &self,
        keys: &SemaphoreKeys,
        pubsub: PubSub,
        permits: u32,
        ids: &[PermitId],
    ) -> ScriptCall;

    /// The call that settles `unanswered`: the permits it took go back, and a copy of it
    /// that has not run yet takes nothing when it does. Its reply says whether permits
    /// went back ([`settled_any`]).
    fn settle_call(
        &self,
        keys: &SemaphoreKeys,
        pubsub: PubSub,
        unanswered: &Unanswered<'_>,
    ) -> ScriptCall;

    /// The kind as the `kind` label of metrics and spans.
    fn listed(&self) -> Listed;
}

/// Whether a settle call's reply says permits went back (`1` from a plain settlement,
/// `{released, live}` with `released > 0` from a permit-expirable one).
pub(crate) fn settled_any(reply: &redis::Value) -> bool {
    match reply {
        redis::Value::Int(n) => *n > 0,
        redis::Value::Array(items) => matches!(items.first(), Some(redis::Value::Int(n)) if *n > 0),
        _ => false,
    }
}

/// Redisson's `RSemaphore`: a count of available permits.
struct Plain;

impl SemaphoreRules for Plain {
    fn describe(&self) -> &'static str {
        "a plain semaphore"
    }

    fn by_id(&self) -> bool {
        false
    }

    fn writes_receipt(&self) -> bool {
        true
    }

    fn timeouts_key(&self, _name: &str) -> Option<String> {
        None
    }

    fn acquire_call(
        &self,
        keys: &SemaphoreKeys,
        pubsub: PubSub,
        take: &Take<'_>,
    ) -> (ScriptCall, Vec<PermitId>) {
        let mut call = ScriptCall::with_key(ACQUIRE.get(pubsub), keys.count.as_str());
        call.key(take.receipt)
            .arg(take.permits)
            .arg(take.settle_window_ms);
        (call, Vec::new())
    }

    fn settle_call(
        &self,
        keys: &SemaphoreKeys,
        pubsub: PubSub,
        unanswered: &Unanswered<'_>,
    ) -> ScriptCall {
        let mut call = keys.invocation(SETTLE.get(pubsub));
        call.key(unanswered.receipt)
            .arg(unanswered.permits)
            .arg(unanswered.settle_window_ms);
        call
    }

    fn give_back_call(
        &self,
        keys: &SemaphoreKeys,
        pubsub: PubSub,
        permits: u32,
        _ids: &[PermitId],
    ) -> ScriptCall {
        let mut call = ScriptCall::with_key(ADD.get(pubsub), keys.count.as_str());
        call.key(keys.channel.as_str()).arg(i64::from(permits));
        call
    }

    fn listed(&self) -> Listed {
        Listed::Semaphore
    }
}

/// Redisson's `RPermitExpirableSemaphore`: permits with ids and leases, their expiry in a
/// zset beside the count.
struct Expirable;

impl SemaphoreRules for Expirable {
    fn describe(&self) -> &'static str {
        "a permit-expirable semaphore"
    }

    fn by_id(&self) -> bool {
        true
    }

    fn writes_receipt(&self) -> bool {
        false
    }

    fn timeouts_key(&self, name: &str) -> Option<String> {
        Some(timeouts_key(name))
    }

    fn acquire_call(
        &self,
        keys: &SemaphoreKeys,
        pubsub: PubSub,
        take: &Take<'_>,
    ) -> (ScriptCall, Vec<PermitId>) {
        let ids: Vec<PermitId> = (0..take.permits).map(|_| PermitId::random()).collect();
        let mut call = keys.invocation(EXPIRABLE_ACQUIRE.get(pubsub));
        call.key(take.receipt).arg(take.lease_ms);
        for permit in &ids {
            call.arg(permit.raw.as_slice());
        }
        (call, ids)
    }

    fn give_back_call(
        &self,
        keys: &SemaphoreKeys,
        pubsub: PubSub,
        _permits: u32,
        ids: &[PermitId],
    ) -> ScriptCall {
        let mut call = keys.invocation(EXPIRABLE_RELEASE.get(pubsub));
        for id in ids {
            call.arg(id.raw.as_slice());
        }
        call
    }

    fn settle_call(
        &self,
        keys: &SemaphoreKeys,
        pubsub: PubSub,
        unanswered: &Unanswered<'_>,
    ) -> ScriptCall {
        let mut call = keys.invocation(EXPIRABLE_SETTLE.get(pubsub));
        call.key(unanswered.receipt)
            .arg(unanswered.settle_window_ms);
        for id in unanswered.ids {
            call.arg(id.raw.as_slice());
        }
        call
    }

    fn listed(&self) -> Listed {
        Listed::ExpirableSemaphore
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_own_label_and_counting() {
        let (plain, expirable) = (Kind::Plain.rules(), Kind::Expirable.rules());
        assert_eq!(plain.listed().name(), "semaphore");
        assert_eq!(expirable.listed().name(), "expirable_semaphore");
        assert!(!plain.by_id() && plain.writes_receipt());
        assert!(expirable.by_id() && !expirable.writes_receipt());
        assert_eq!(plain.timeouts_key("s"), None);
        assert_eq!(expirable.timeouts_key("s").as_deref(), Some("{s}:timeout"));
    }

    /// The semaphore kinds are the semaphore family of the one list of kinds (`crate::kinds`).
    #[test]
    fn the_semaphore_kinds_are_the_semaphore_family_of_the_one_list() {
        let ours = [Listed::from(Kind::Plain), Listed::from(Kind::Expirable)];
        let family: Vec<Listed> = Listed::ALL
            .iter()
            .copied()
            .filter(|kind| kind.family() == crate::kinds::Family::Semaphore)
            .collect();
        assert_eq!(ours.to_vec(), family);
    }
}
