//! Lock kinds. Each kind is one module behind [`KindRules`]: its scripts, its keys and
//! channel, who may hold it at once, the message its unlock publishes and its telemetry
//! label. [`LockKind::rules`] is the one list of kinds; the lock actor, the fast path, the
//! watchdog and the inspector's force-unlock ask a kind through it and never match on
//! kinds themselves.
//!
//! Adding a kind: a module here implementing [`KindRules`], a variant of [`LockKind`], and
//! its line in [`LockKind::rules`].

mod fair;
mod fast;
mod read;
mod reentrant;
mod scripts;
mod spin;
mod write;

use super::LockOwner;
use crate::keys::{LockName, UNLOCK_MESSAGE};
use crate::kinds::Kind;
use crate::node::connection::PubSub;
use crate::script::ScriptCall;
use redis::Script;

pub(crate) use crate::node::publishing::PublishingScript;
use scripts::*;
pub(crate) use scripts::{UnlockScripts, Unlocking};

/// The kind of a lock: what it stores in Redis and who may share it.
///
/// Every kind has the same API (a [`Lock`](crate::Lock) handle, the [`LockActor`]'s
/// messages, `#[distributed_lock(kind = …)]`), the watchdog, `lost()`, bounded waits and the
/// same errors.
///
/// [`LockActor`]: crate::LockActor
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::LockKind;
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
/// let lock = client.fast_lock("hot:path")?;
/// assert_eq!(lock.kind(), LockKind::Fast);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// Redisson's `RLock`: a hash of owner → hold count; the same owner may re-enter.
    Reentrant,
    /// A non-reentrant lock: one string key (`SET NX PX`) whose value is the holder.
    /// Re-acquiring with the same owner is [`LockError::AlreadyHeld`](crate::LockError).
    Fast,
    /// The read side of Redisson's `RReadWriteLock`: shared by any number of readers.
    Read,
    /// The write side of Redisson's `RReadWriteLock`: one writer, and no readers but its own.
    Write,
    /// Redisson's `RFairLock`: a reentrant lock granted in request order across processes.
    Fair,
    /// Redisson's `RSpinLock`: the reentrant lock's hash, without pub/sub. Its unlock
    /// publishes nothing; its waiters try again after a backoff
    /// ([`SpinBackoff`](crate::SpinBackoff)) and never subscribe.
    Spin,
}

/// Who may hold a lock of a kind at the same time, and how its waiters line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// One owner at a time; the local waiters of a process queue in its lock actor.
    Exclusive,
    /// Any number of owners at a time (readers), unless a writer holds it.
    Shared,
    /// One owner at a time, granted in the order of a queue kept in Redis: each owner has
    /// an actor of its own, woken on a channel of its own.
    PerOwnerQueue,
}

/// What makes a lock kind: the one place that knows its Redis layout and rules.
///
/// Every script call a lock makes is built here. Replies are shared by all kinds: an
/// acquire replies nil (taken), `{token}` (taken, fenced), status `OK` or `{token, 0}`
/// (taken as the owner's first hold, where the kind's script says so) or the holder's PTTL;
/// an unlock nil (not the owner), 0 (still held) or 1 (freed).
pub(crate) trait KindRules: Sync + 'static {
    /// The kind's name, as the attribute's `kind =` and the `kind` label spell it.
    fn name(&self) -> &'static str;

    /// Who may hold it at once.
    fn grant(&self) -> Grant;

    /// Whether the same owner may take it again while holding it.
    fn reentrant(&self) -> bool {
        true
    }

    /// Whether its waiters poll (try again after a backoff) instead of waiting for a
    /// message on a channel: they never subscribe, and its unlocks publish nothing (their
    /// calls take no channel key).
    fn polls(&self) -> bool {
        false
    }

    /// Whether a waiter marks that it waits (the fast lock: `fast/acquire.lua`), so its
    /// unlock takes the mark as a third key and publishes only when it finds it.
    fn marks_waiters(&self) -> bool {
        false
    }

    /// The key type a lock of this kind is stored as.
    fn key_type(&self) -> &'static str {
        "hash"
    }

    /// Whether its holds can draw fencing tokens.
    fn fences(&self) -> bool {
        false
    }

    /// Adds to `pipe` the read of how many holds `field` has (its reply is read by
    /// [`holds_in`](Self::holds_in)): the Rust side of the kind's `holds.lua`.
    fn read_holds(&self, pipe: &mut redis::Pipeline, name: &LockName, field: &str) {
        pipe.cmd("HGET").arg(name.as_str()).arg(field);
    }

    /// How many holds `field` has, from the reply to [`read_holds`](Self::read_holds).
    fn holds_in(&self, reply: Option<&str>, _field: &str) -> u32 {
        reply.and_then(|count| count.parse().ok()).unwrap_or(0)
    }

    /// The prefix of the channel its unlocks are published on (`<prefix>:{name}`).
    fn channel_prefix(&self) -> &'static str {
        crate::keys::UNLOCK_CHANNEL
    }

    /// The channel its unlocks are published on.
    fn channel(&self, name: &LockName) -> String {
        name.prefixed_text(self.channel_prefix()).to_string()
    }

    /// The channel a waiter whose field is `field` listens on.
    fn wake_channel(&self, name: &LockName, _field: &str) -> String {
        self.channel(name)
    }

    /// What follows the owner's `uuid:owner` in the field (or value) that stands for it.
    fn field_suffix(&self) -> &'static str {
        ""
    }

    /// The message an unlock that frees the lock publishes (Redisson's: `0` wakes one
    /// waiter, `1` every waiter).
    fn freed_message(&self) -> &'static str {
        UNLOCK_MESSAGE
    }

    /// The acquire script call (see [`LockKind::acquire`]).
    fn acquire(&self, call: AcquireArgs<'_>) -> ScriptCall;

    /// A plain command that takes a free lock without Lua (see [`LockKind::plain_acquire`]).
    fn plain_acquire(&self, _name: &LockName, _field: &str, _lease_ms: u64) -> Option<redis::Cmd> {
        None
    }

    /// The call that takes a waiter out of a queue kept in Redis (see
    /// [`LockKind::withdraw`]); `None` without such a queue.
    fn withdraw(
        &self,
        _name: &LockName,
        _field: &str,
        _allowance_ms: u64,
        _pubsub: PubSub,
    ) -> Option<ScriptCall> {
        None
    }

    /// Its unlock script and the reconcile made from it.
    fn unlock_scripts(&self) -> &'static UnlockScripts;

    /// The keys its unlock takes after the lock's name and channel.
    fn unlock_keys(&self, _name: &LockName, _field: &str) -> Vec<String> {
        Vec::new()
    }

    /// The unlock call, the reconcile call (without its last argument) or the foreign
    /// unlock, as `unlocking` says: the script on the lock's name, then the channel (unless
    /// it [`polls`](Self::polls)), the waiters' mark (if it
    /// [`marks_waiters`](Self::marks_waiters)) and the kind's
    /// [`unlock_keys`](Self::unlock_keys); then the freed message, the lease left and the
    /// field.
    fn release_call(
        &self,
        unlocking: Unlocking,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        pubsub: PubSub,
    ) -> ScriptCall {
        release_call(self, unlocking, name, field, lease_ms, pubsub)
    }

    /// The keys besides the lock's own whose TTL carries a hold's lease (a reader's
    /// timeout keys' prefix), for [`LockKind::set_lease`].
    fn lease_keys(&self, _name: &LockName, _field: &str) -> Vec<String> {
        Vec::new()
    }

    /// The watchdog's batch renewal script (see [`LockKind::renew_script`]).
    fn renew_script(&self) -> &'static Script;

    /// Adds one entry to a batch made from [`renew_script`](Self::renew_script).
    fn add_renewal(&self, call: &mut ScriptCall, name: &LockName, field: &str) {
        call.key(name.as_str());
        call.arg(field);
    }

    /// The force-unlock call (see [`LockKind::force_unlock`]).
    fn force_unlock(&self, name: &LockName, pubsub: PubSub, holders: bool) -> ScriptCall {
        let [plain, checked] = self.force_unlock_scripts();
        let script = if holders { checked } else { plain };
        let mut call = ScriptCall::with_key(script.get(pubsub), name.as_str());
        if !self.polls() {
            call.key(self.channel(name));
        }
        call.arg(self.freed_message()).arg(self.key_type());
        call
    }

    /// The scripts of the default [`force_unlock`](Self::force_unlock): without and with
    /// the holder check.
    fn force_unlock_scripts(&self) -> [&'static PublishingScript; 2] {
        [&FORCE_UNLOCK, &FORCE_UNLOCK_IF]
    }

    /// The scripts of its own, for loading into Redis's cache at connect (both flavours
    /// of the publishing ones).
    fn scripts(&self) -> Vec<&'static Script>;

    /// The kind in the one list of kinds (`crate::kinds`): its name, and its `kind` label.
    fn listed(&self) -> Kind;
}

/// What an acquire call is built from.
pub(crate) struct AcquireArgs<'a> {
    pub(crate) name: &'a LockName,
    pub(crate) field: &'a str,
    pub(crate) lease_ms: u64,
    /// Draw a fencing token (reentrant locks only: the others ignore it).
    pub(crate) fenced: bool,
    /// How long a fair waiter may wait in the queue at most.
    pub(crate) fair_patience_ms: u64,
    pub(crate) pubsub: PubSub,
    /// Its caller waits if the lock is busy (the fast lock's busy try then marks it).
    pub(crate) waits: bool,
}

/// What [`KindRules::release_call`] builds unless a kind adds to it.
fn release_call<R: KindRules + ?Sized>(
    rules: &R,
    unlocking: Unlocking,
    name: &LockName,
    field: &str,
    lease_ms: u64,
    pubsub: PubSub,
) -> ScriptCall {
    let script = rules.unlock_scripts().pick(unlocking).get(pubsub);
    let channel = name.prefixed_text(rules.channel_prefix());
    let mut call = match (rules.polls(), rules.marks_waiters()) {
        (true, _) => ScriptCall::keyed(script, [&name.as_str()]),
        (false, false) => ScriptCall::keyed(script, [&name.as_str(), &channel]),
        (false, true) => {
            let waiting = name.fast_waiting_text();
            ScriptCall::keyed(script, [&name.as_str(), &channel, &waiting])
        }
    };
    for key in rules.unlock_keys(name, field) {
        call.key(key);
    }
    call.arg(rules.freed_message()).arg(lease_ms).arg(field);
    call
}

/// A call of `script` on the lock's name with the lease and the field: the acquire of the
/// kinds that take nothing more.
fn lease_and_field(script: &'static Script, args: &AcquireArgs<'_>) -> ScriptCall {
    let mut call = ScriptCall::keyed(script, [&args.name.as_str()]);
    call.arg(args.lease_ms).arg(args.field);
    call
}

/// Every lock script (both flavours of the publishing ones), each once, for loading into
/// Redis's cache at connect.
pub(crate) fn all_scripts() -> Vec<&'static Script> {
    let mut all: Vec<&'static Script> = vec![&SET_LEASE];
    all.extend(FORCE_UNLOCK.both());
    all.extend(FORCE_UNLOCK_IF.both());
    for kind in LockKind::ALL {
        all.extend(kind.rules().scripts());
    }
    let mut seen = std::collections::HashSet::new();
    all.retain(|script| seen.insert(script.get_hash().to_string()));
    all
}

impl LockKind {
    /// Every kind.
    pub(crate) const ALL: [LockKind; 6] = [
        LockKind::Reentrant,
        LockKind::Fast,
        LockKind::Read,
        LockKind::Write,
        LockKind::Fair,
        LockKind::Spin,
    ];

    /// The one list of kinds: each kind's rules, from its module.
    pub(crate) fn rules(self) -> &'static dyn KindRules {
        match self {
            LockKind::Reentrant => &reentrant::Reentrant,
            LockKind::Fast => &fast::Fast,
            LockKind::Read => &read::Read,
            LockKind::Write => &write::Write,
            LockKind::Fair => &fair::Fair,
            LockKind::Spin => &spin::Spin,
        }
    }

    /// The kind's name as the macro spells it.
    ///
    /// ```
    /// # use actix_distributed_lock::LockKind;
    /// assert_eq!(LockKind::Read.as_str(), "read");
    /// ```
    pub fn as_str(self) -> &'static str {
        self.rules().name()
    }

    /// Whether the same owner may take the lock again while holding it.
    pub(crate) fn reentrant(self) -> bool {
        self.rules().reentrant()
    }

    /// Whether its holds can draw fencing tokens.
    pub(crate) fn fences(self) -> bool {
        self.rules().fences()
    }

    /// Adds to `pipe` the read of how many holds `field` has; see [`holds_in`](Self::holds_in).
    pub(crate) fn read_holds(self, pipe: &mut redis::Pipeline, name: &LockName, field: &str) {
        self.rules().read_holds(pipe, name, field);
    }

    /// How many holds `field` has, from the reply to [`read_holds`](Self::read_holds).
    pub(crate) fn holds_in(self, reply: Option<&str>, field: &str) -> u32 {
        self.rules().holds_in(reply, field)
    }

    /// Whether its waiters poll with a backoff instead of subscribing (the spin lock).
    pub(crate) fn polls(self) -> bool {
        self.rules().polls()
    }

    /// Whether holders of different owners may hold it at the same time.
    pub(crate) fn shared(self) -> bool {
        self.rules().grant() == Grant::Shared
    }

    /// Whether each owner has an actor of its own: a fair lock's waiters each wait in the
    /// Redis queue, on a channel of their own.
    pub(crate) fn per_owner(self) -> bool {
        self.rules().grant() == Grant::PerOwnerQueue
    }

    /// The key type a lock of this kind is stored as.
    pub(crate) fn key_type(self) -> &'static str {
        self.rules().key_type()
    }

    /// The channel its unlocks are published on (a fair lock publishes on
    /// `<channel>:<owner field>`, for the next waiter only).
    pub(crate) fn channel(self, name: &LockName) -> String {
        self.rules().channel(name)
    }

    /// The channel a waiter whose field is `field` listens on.
    pub(crate) fn wake_channel(self, name: &LockName, field: &str) -> String {
        self.rules().wake_channel(name, field)
    }

    /// The field (or value) that stands for an owner, from the owner's `uuid:owner` base.
    pub(crate) fn field(self, base: String) -> String {
        base + self.field_suffix()
    }

    /// What follows the owner's `uuid:owner` in its field.
    pub(crate) fn field_suffix(self) -> &'static str {
        self.rules().field_suffix()
    }

    /// The acquire script call; replies nil (acquired), the holder's PTTL (or, for a fair
    /// lock, how long to wait at most), or `{token}`. Only the fair lock's publishes (a wake
    /// for the new head when it drops dead ones), in the node's `pubsub` flavour.
    pub(crate) fn acquire(
        self,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        fenced: bool,
        fair_patience_ms: u64,
        pubsub: PubSub,
    ) -> ScriptCall {
        self.acquire_args(AcquireArgs {
            name,
            field,
            lease_ms,
            fenced,
            fair_patience_ms,
            pubsub,
            waits: false,
        })
    }

    /// The acquire script call for `args` (see [`acquire`](Self::acquire)); with
    /// `args.waits`, a busy fast lock is marked as waited for, so its unlock wakes the waiter.
    pub(crate) fn acquire_args(self, args: AcquireArgs<'_>) -> ScriptCall {
        self.rules().acquire(args)
    }

    /// A plain command that takes the lock when it is free, without running Lua: for the
    /// fast lock, `SET name field NX PX lease` (the first line of its acquire script). It
    /// replies `OK` when it took the lock; anything else (busy, or a key of another type)
    /// leaves the answer to the acquire script. `None` for the other kinds, and for a
    /// fenced acquire.
    ///
    /// Uncontended fast-lock acquires are the only users: the first try on the direct path.
    pub(crate) fn plain_acquire(
        self,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        fenced: bool,
    ) -> Option<redis::Cmd> {
        if fenced {
            return None;
        }
        self.rules().plain_acquire(name, field, lease_ms)
    }

    /// The fair lock's call that takes `field` out of its queue (a waiter that gave up;
    /// `allowance_ms` is the fair wait allowance, taken off every deadline behind it);
    /// `None` for kinds without a queue in Redis.
    pub(crate) fn withdraw(
        self,
        name: &LockName,
        field: &str,
        allowance_ms: u64,
        pubsub: PubSub,
    ) -> Option<ScriptCall> {
        self.rules().withdraw(name, field, allowance_ms, pubsub)
    }

    /// The unlock script call; replies nil (not the owner), 0 (still held), 1 (released).
    /// `lease_ms` is the longest lease the owner's remaining holds have left: the key's TTL
    /// while they remain (the read and write sides never set it below another hold's).
    pub(crate) fn unlock(
        self,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        pubsub: PubSub,
    ) -> ScriptCall {
        self.release(Unlocking::Counted, name, field, lease_ms, pubsub)
    }

    /// The call of the unlock family's script `unlocking` (see [`Unlocking`] for what each
    /// replies), without a reconcile's last argument.
    pub(crate) fn release(
        self,
        unlocking: Unlocking,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        pubsub: PubSub,
    ) -> ScriptCall {
        self.rules()
            .release_call(unlocking, name, field, lease_ms, pubsub)
    }

    /// The reconcile script call: undoes one hold when Redis counts more than `counted`
    /// holds for the owner; replies -1 when it counts no more. Sent only while no call of
    /// the process for the lock is on its way (see `FastPath::counts_complete`).
    pub(crate) fn reconcile(
        self,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        counted: usize,
        pubsub: PubSub,
    ) -> ScriptCall {
        let mut call =
            self.rules()
                .release_call(Unlocking::Reconcile, name, field, lease_ms, pubsub);
        call.arg(counted);
        call
    }

    /// The watchdog's batch renewal script; replies one integer per entry: the key's PTTL
    /// after the renewal (-1: no expiry) when renewed, 0 when the hold is gone.
    pub(crate) fn renew_script(self) -> &'static Script {
        self.rules().renew_script()
    }

    /// Adds one entry's keys and field to a batch made from [`renew_script`](Self::renew_script)
    /// (whose first argument is the lease).
    pub(crate) fn add_renewal(self, call: &mut ScriptCall, name: &LockName, field: &str) {
        self.rules().add_renewal(call, name, field);
    }

    /// The call that sets the key's TTL to `ttl_ms` for `field`'s holds (a hold's lease set
    /// again from now), of which this process counts `counted`; replies the key's PTTL
    /// after it, or 0 when `field` holds nothing. Where other fields hold the key too, or
    /// `field` has holds this process does not count, it only ever extends.
    pub(crate) fn set_lease(
        self,
        name: &LockName,
        field: &str,
        ttl_ms: u64,
        counted: usize,
    ) -> ScriptCall {
        let mut call = ScriptCall::with_key(&SET_LEASE, name.as_str());
        for key in self.rules().lease_keys(name, field) {
            call.key(key);
        }
        call.arg(ttl_ms)
            .arg(field)
            .arg(self.key_type())
            .arg(counted);
        call
    }

    /// The force-unlock script call; replies 1 when a lock was deleted. A fair lock's next
    /// waiter is woken on its own channel. With `holders`, only a lock held by exactly
    /// those fields is deleted (checked in the same script); -1 replies that it was not.
    pub(crate) fn force_unlock(
        self,
        name: &LockName,
        pubsub: PubSub,
        holders: Option<&[String]>,
    ) -> ScriptCall {
        let mut call = self.rules().force_unlock(name, pubsub, holders.is_some());
        if let Some(holders) = holders {
            for field in holders {
                call.arg(field.as_str());
            }
            call.arg(holders.len());
        }
        call
    }
}

/// Which actor serves a lock: its kind, its name, and for per-owner kinds (the fair lock)
/// its owner.
pub(crate) type ActorKey = (LockKind, LockName, Option<LockOwner>);

/// The key of the actor that serves `owner`'s `kind` lock `name`.
pub(crate) fn actor_key(kind: LockKind, name: &LockName, owner: Option<LockOwner>) -> ActorKey {
    (kind, name.clone(), owner.filter(|_| kind.per_owner()))
}

/// The kind as the `kind` label of metrics and spans.
impl From<LockKind> for Kind {
    fn from(kind: LockKind) -> Self {
        kind.rules().listed()
    }
}

impl LockKind {
    /// The kind a lock of this kind counts as in metrics and spans: fenced when its holds
    /// draw a token.
    pub(crate) fn label(self, fenced: bool) -> Kind {
        if fenced {
            Kind::Fenced
        } else {
            self.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Family;

    /// The lock kinds and the one list of kinds (`crate::kinds`) agree both ways: each lock
    /// kind is the list's kind of its name, and each kind of the lock family is stored as one.
    #[test]
    fn the_lock_kinds_are_the_lock_family_of_the_one_list() {
        let names: std::collections::HashSet<_> =
            LockKind::ALL.iter().map(|kind| kind.as_str()).collect();
        assert_eq!(names.len(), LockKind::ALL.len());
        let mut labels = Vec::new();
        for kind in LockKind::ALL {
            let listed = Kind::from(kind);
            assert_eq!(listed.name(), kind.as_str());
            assert_eq!(listed.family(), Family::Lock);
            assert_eq!(kind.label(false), listed);
            labels.push(listed);
            if kind.fences() {
                labels.push(kind.label(true));
            }
        }
        let lock_family: Vec<Kind> = Kind::ALL
            .iter()
            .copied()
            .filter(|kind| kind.family() == Family::Lock)
            .collect();
        labels.sort_by_key(|kind| *kind as usize);
        assert_eq!(
            labels, lock_family,
            "a lock kind is missing from one of the lists"
        );
        assert_eq!(LockKind::Reentrant.label(true), Kind::Fenced);
    }

    #[test]
    fn every_script_is_loaded_once() {
        let scripts = all_scripts();
        let hashes: std::collections::HashSet<_> =
            scripts.iter().map(|script| script.get_hash()).collect();
        assert_eq!(hashes.len(), scripts.len());
    }

    /// Every call a kind makes on its usual paths (acquire, fenced acquire, unlock,
    /// reconcile, renewal, lease update, force-unlock, in both pub/sub flavours) runs a
    /// preloaded script: a script a kind builds but does not list is caught here, whatever
    /// the number of kinds. (The foreign unlock alone is loaded on first use.)
    #[test]
    fn every_kind_preloads_the_scripts_its_calls_run() {
        let loaded: std::collections::HashSet<String> = all_scripts()
            .iter()
            .map(|script| script.get_hash().to_string())
            .collect();
        let name = LockName::new("k", 64).unwrap();
        for kind in LockKind::ALL {
            for pubsub in [PubSub::Classic, PubSub::Sharded] {
                let mut calls = vec![
                    kind.acquire(&name, "f", 1, false, 1, pubsub),
                    kind.unlock(&name, "f", 1, pubsub),
                    kind.reconcile(&name, "f", 1, 1, pubsub),
                    kind.set_lease(&name, "f", 1, 1),
                    kind.force_unlock(&name, pubsub, None),
                    kind.force_unlock(&name, pubsub, Some(&["f".to_string()])),
                ];
                if kind.fences() {
                    calls.push(kind.acquire(&name, "f", 1, true, 1, pubsub));
                }
                for call in calls {
                    let hash = call.script().get_hash();
                    assert!(
                        loaded.contains(hash),
                        "{} runs an unlisted script",
                        kind.as_str()
                    );
                }
                let renew = kind.renew_script().get_hash();
                assert!(loaded.contains(renew), "{}: renewal", kind.as_str());
            }
        }
    }
}
