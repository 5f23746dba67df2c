//! Lock kinds: which scripts, keys and channel each kind of lock uses, so one lock actor
//! drives them all.

use super::LockOwner;
use crate::keys::{LockName, READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};
use crate::node::connection::PubSub;
use crate::script::ScriptCall;
use redis::Script;
use std::sync::LazyLock;

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
}

static REENTRANT_RENEW: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("../reentrant/renew.lua")]));
static FAST_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("../fast/acquire.lua")]));
static FAST_UNLOCK: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[include_str!("../fast/unlock.lua")]));
static FAST_RENEW: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("../fast/renew.lua")]));
static FAST_RECONCILE: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[
        include_str!("../fast/holds.lua"),
        include_str!("reconcile.lua"),
        include_str!("../fast/unlock.lua"),
    ])
});
static REENTRANT_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("../reentrant/acquire.lua")]));
static FENCED_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("../reentrant/fenced_acquire.lua")]));
static REENTRANT_UNLOCK: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[include_str!("../reentrant/unlock.lua")]));
static REENTRANT_RECONCILE: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[
        include_str!("../reentrant/holds.lua"),
        include_str!("reconcile.lua"),
        include_str!("../reentrant/unlock.lua"),
    ])
});
static READ_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("../rwlock/read_acquire.lua")]));
static READ_UNLOCK: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[include_str!("../rwlock/read_unlock.lua")]));
static READ_RENEW: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("../rwlock/read_renew.lua")]));
static READ_RECONCILE: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[
        include_str!("../reentrant/holds.lua"),
        include_str!("reconcile.lua"),
        include_str!("../rwlock/read_unlock.lua"),
    ])
});
static WRITE_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| script(&[include_str!("../rwlock/write_acquire.lua")]));
static WRITE_UNLOCK: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[include_str!("../rwlock/write_unlock.lua")]));
static WRITE_RECONCILE: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[
        include_str!("../reentrant/holds.lua"),
        include_str!("reconcile.lua"),
        include_str!("../rwlock/write_unlock.lua"),
    ])
});
/// The fair lock's stale-head rule, joined in front of every fair script that drops dead
/// waiters.
const FAIR_STALE: &str = include_str!("../fair/stale.lua");
static FAIR_ACQUIRE: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[FAIR_STALE, include_str!("../fair/acquire.lua")]));
static FAIR_UNLOCK: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[FAIR_STALE, include_str!("../fair/unlock.lua")]));
static FAIR_RECONCILE: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[
        include_str!("../reentrant/holds.lua"),
        include_str!("reconcile.lua"),
        FAIR_STALE,
        include_str!("../fair/unlock.lua"),
    ])
});
static FAIR_WITHDRAW: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[include_str!("../fair/withdraw.lua")]));
static FAIR_FORCE_UNLOCK: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[FAIR_STALE, include_str!("../fair/force_unlock.lua")])
});
static SET_LEASE: LazyLock<Script> = LazyLock::new(|| script(&[include_str!("set_lease.lua")]));
static FORCE_UNLOCK: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[include_str!("force_unlock.lua")]));
/// The holder check an operator's force-unlock runs first, in the same script.
const EXPECT_HOLDERS: &str = include_str!("expect_holders.lua");
static FAIR_FORCE_UNLOCK_IF: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[
        EXPECT_HOLDERS,
        FAIR_STALE,
        include_str!("../fair/force_unlock.lua"),
    ])
});
static FORCE_UNLOCK_IF: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[EXPECT_HOLDERS, include_str!("force_unlock.lua")]));

/// One script from one or more source files, joined in order (a reconcile is the kind's
/// `holds` function, the shared prelude, then the kind's unlock).
fn script(parts: &[&str]) -> Script {
    Script::new(&parts.join("\n"))
}

/// A script that publishes, in both pub/sub flavours: its first line sets
/// `publish_command` to `publish` (classic) or `spublish` (sharded, Redis 7+), then comes
/// the `publish` function (`publish.lua`) the script's parts publish with.
pub(crate) struct PublishingScript {
    classic: Script,
    sharded: Script,
}

impl PublishingScript {
    /// The script made of `parts`, as [`script`] joins them, once per flavour.
    pub(crate) fn new(parts: &[&str]) -> Self {
        let body = parts.join("\n");
        let publish = include_str!("publish.lua");
        PublishingScript {
            classic: Script::new(&format!(
                "local publish_command = 'publish'\n{publish}\n{body}"
            )),
            sharded: Script::new(&format!(
                "local publish_command = 'spublish'\n{publish}\n{body}"
            )),
        }
    }

    /// The flavour for a node that uses `pubsub`.
    pub(crate) fn get(&self, pubsub: PubSub) -> &Script {
        match pubsub {
            PubSub::Classic => &self.classic,
            PubSub::Sharded => &self.sharded,
        }
    }

    /// Both flavours.
    pub(crate) fn both(&self) -> [&Script; 2] {
        [&self.classic, &self.sharded]
    }
}

/// Every lock script (both flavours of the publishing ones), for loading into Redis's
/// cache at connect.
pub(crate) fn all_scripts() -> Vec<&'static Script> {
    let plain: [&'static Script; 9] = [
        &SET_LEASE,
        &REENTRANT_ACQUIRE,
        &FENCED_ACQUIRE,
        &REENTRANT_RENEW,
        &FAST_ACQUIRE,
        &FAST_RENEW,
        &READ_ACQUIRE,
        &READ_RENEW,
        &WRITE_ACQUIRE,
    ];
    let publishing: [&'static PublishingScript; 16] = [
        &FAIR_ACQUIRE,
        &REENTRANT_UNLOCK,
        &REENTRANT_RECONCILE,
        &FAST_UNLOCK,
        &FAST_RECONCILE,
        &READ_UNLOCK,
        &READ_RECONCILE,
        &WRITE_UNLOCK,
        &WRITE_RECONCILE,
        &FAIR_UNLOCK,
        &FAIR_RECONCILE,
        &FAIR_WITHDRAW,
        &FAIR_FORCE_UNLOCK,
        &FORCE_UNLOCK,
        &FAIR_FORCE_UNLOCK_IF,
        &FORCE_UNLOCK_IF,
    ];
    let mut all = plain.to_vec();
    all.extend(publishing.iter().flat_map(|script| script.both()));
    all
}

impl LockKind {
    /// The kind's name as the macro spells it.
    ///
    /// ```
    /// # use actix_distributed_lock::LockKind;
    /// assert_eq!(LockKind::Read.as_str(), "read");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Reentrant => "reentrant",
            LockKind::Fast => "fast",
            LockKind::Read => "read",
            LockKind::Write => "write",
            LockKind::Fair => "fair",
        }
    }

    /// Whether the same owner may take the lock again while holding it.
    pub(crate) fn reentrant(self) -> bool {
        self != LockKind::Fast
    }

    /// Whether holders of different owners may hold it at the same time.
    pub(crate) fn shared(self) -> bool {
        self == LockKind::Read
    }

    /// Whether each owner has an actor of its own: a fair lock's waiters each wait in the
    /// Redis queue, on a channel of their own.
    pub(crate) fn per_owner(self) -> bool {
        self == LockKind::Fair
    }

    /// The key type a lock of this kind is stored as.
    pub(crate) fn key_type(self) -> &'static str {
        match self {
            LockKind::Fast => "string",
            _ => "hash",
        }
    }

    /// The channel its unlocks are published on (a fair lock publishes on
    /// `<channel>:<owner field>`, for the next waiter only).
    pub(crate) fn channel(self, name: &LockName) -> String {
        match self {
            LockKind::Reentrant | LockKind::Fast | LockKind::Fair => name.unlock_channel(),
            LockKind::Read | LockKind::Write => name.rwlock_channel(),
        }
    }

    /// The channel a waiter whose field is `field` listens on.
    pub(crate) fn wake_channel(self, name: &LockName, field: &str) -> String {
        match self {
            LockKind::Fair => name.fair_waiter_channel(field),
            _ => self.channel(name),
        }
    }

    /// The field (or value) that stands for an owner, from the owner's `uuid:owner` base.
    pub(crate) fn field(self, base: String) -> String {
        match self {
            LockKind::Write => base + ":write",
            _ => base,
        }
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
        let mut call = match (self, fenced) {
            (LockKind::Reentrant, true) => {
                let mut call = ScriptCall::with_key(&FENCED_ACQUIRE, name.as_str());
                call.key(name.fencing_token_key());
                call
            }
            (LockKind::Reentrant, false) => ScriptCall::with_key(&REENTRANT_ACQUIRE, name.as_str()),
            (LockKind::Fast, _) => ScriptCall::with_key(&FAST_ACQUIRE, name.as_str()),
            (LockKind::Read, _) => {
                let mut call = ScriptCall::with_key(&READ_ACQUIRE, name.as_str());
                call.key(name.read_timeout_prefix(field));
                call
            }
            (LockKind::Write, _) => ScriptCall::with_key(&WRITE_ACQUIRE, name.as_str()),
            (LockKind::Fair, _) => {
                let mut call = ScriptCall::with_key(FAIR_ACQUIRE.get(pubsub), name.as_str());
                call.key(name.fair_queue_key())
                    .key(name.fair_timeout_key())
                    .key(self.channel(name));
                call
            }
        };
        call.arg(lease_ms).arg(field);
        match self {
            LockKind::Read => {
                call.arg(LockKind::Write.field(field.to_string()));
            }
            LockKind::Fair => {
                call.arg(fair_patience_ms).arg(UNLOCK_MESSAGE);
            }
            _ => {}
        }
        call
    }

    /// A plain command that takes the lock when it is free, without running Lua: for the
    /// fast lock, `SET name field NX PX lease` (the first line of its acquire script). It
    /// replies `OK` when it took the lock; anything else (busy, or a key of another type)
    /// leaves the answer to the acquire script. `None` for the other kinds.
    ///
    /// Uncontended fast-lock acquires are the only users: the first try on the direct path.
    pub(crate) fn plain_acquire(
        self,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        fenced: bool,
    ) -> Option<redis::Cmd> {
        if self != LockKind::Fast || fenced {
            return None;
        }
        let mut cmd = redis::Cmd::with_capacity(6, name.as_str().len() + field.len() + 32);
        cmd.arg("SET")
            .arg(name.as_str())
            .arg(field)
            .arg("NX")
            .arg("PX")
            .arg(lease_ms);
        Some(cmd)
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
        if self != LockKind::Fair {
            return None;
        }
        let mut call = ScriptCall::with_key(FAIR_WITHDRAW.get(pubsub), name.as_str());
        call.key(self.channel(name))
            .key(name.fair_queue_key())
            .key(name.fair_timeout_key())
            .arg(UNLOCK_MESSAGE)
            .arg(field)
            .arg(allowance_ms);
        Some(call)
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
        self.release_call(false, name, field, lease_ms, pubsub)
    }

    /// The reconcile script call: undoes one hold when Redis counts `counted + 1` holds for
    /// the owner; replies -1 when it agrees with `counted`.
    pub(crate) fn reconcile(
        self,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        counted: usize,
        pubsub: PubSub,
    ) -> ScriptCall {
        let mut call = self.release_call(true, name, field, lease_ms, pubsub);
        call.arg(counted);
        call
    }

    fn release_call(
        self,
        reconcile: bool,
        name: &LockName,
        field: &str,
        lease_ms: u64,
        pubsub: PubSub,
    ) -> ScriptCall {
        let script: &PublishingScript = match (self, reconcile) {
            (LockKind::Reentrant, false) => &REENTRANT_UNLOCK,
            (LockKind::Reentrant, true) => &REENTRANT_RECONCILE,
            (LockKind::Fast, false) => &FAST_UNLOCK,
            (LockKind::Fast, true) => &FAST_RECONCILE,
            (LockKind::Read, false) => &READ_UNLOCK,
            (LockKind::Read, true) => &READ_RECONCILE,
            (LockKind::Write, false) => &WRITE_UNLOCK,
            (LockKind::Write, true) => &WRITE_RECONCILE,
            (LockKind::Fair, false) => &FAIR_UNLOCK,
            (LockKind::Fair, true) => &FAIR_RECONCILE,
        };
        let mut call = ScriptCall::with_key(script.get(pubsub), name.as_str());
        call.key(self.channel(name));
        match self {
            LockKind::Read => {
                call.key(name.read_timeout_prefix(field))
                    .key(name.hash_tagged());
            }
            LockKind::Fair => {
                call.key(name.fair_queue_key()).key(name.fair_timeout_key());
            }
            LockKind::Write => {
                call.key(name.hash_tagged());
            }
            _ => {}
        }
        // Redisson's messages: a write unlock that frees the lock wakes every waiter (`1`,
        // they may all be readers); any other unlock wakes one (`0`; a read unlock's
        // waiters are writers).
        let message = match self {
            LockKind::Write => READ_UNLOCK_MESSAGE,
            _ => UNLOCK_MESSAGE,
        };
        call.arg(message).arg(lease_ms).arg(field);
        if self == LockKind::Write {
            call.arg(READ_UNLOCK_MESSAGE);
        }
        call
    }

    /// The watchdog's batch renewal script; replies one integer per entry: the key's PTTL
    /// after the renewal (-1: no expiry) when renewed, 0 when the hold is gone.
    pub(crate) fn renew_script(self) -> &'static Script {
        match self {
            LockKind::Reentrant | LockKind::Write | LockKind::Fair => &REENTRANT_RENEW,
            LockKind::Fast => &FAST_RENEW,
            LockKind::Read => &READ_RENEW,
        }
    }

    /// Adds one entry's keys and field to a batch made from [`renew_script`](Self::renew_script)
    /// (whose first argument is the lease).
    pub(crate) fn add_renewal(self, call: &mut ScriptCall, name: &LockName, field: &str) {
        call.key(name.as_str());
        if self == LockKind::Read {
            call.key(name.hash_tagged());
        }
        call.arg(field);
    }

    /// The call that sets the key's TTL to `ttl_ms` for `field`'s holds (a lease restarted
    /// from now); replies the key's PTTL after it, or 0 when `field` holds nothing. Where
    /// other fields hold the key too, it only ever extends.
    pub(crate) fn set_lease(self, name: &LockName, field: &str, ttl_ms: u64) -> ScriptCall {
        let mut call = ScriptCall::with_key(&SET_LEASE, name.as_str());
        call.arg(ttl_ms).arg(field).arg(self.key_type());
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
        let mut call = if self == LockKind::Fair {
            let script = match holders {
                Some(_) => &FAIR_FORCE_UNLOCK_IF,
                None => &FAIR_FORCE_UNLOCK,
            };
            let mut call = ScriptCall::with_key(script.get(pubsub), name.as_str());
            call.key(self.channel(name))
                .key(name.fair_queue_key())
                .key(name.fair_timeout_key())
                .arg(UNLOCK_MESSAGE);
            call
        } else {
            // As Redisson's force unlocks: `1` for a write lock, `0` for the others.
            let message = match self {
                LockKind::Write => READ_UNLOCK_MESSAGE,
                _ => UNLOCK_MESSAGE,
            };
            let script = match holders {
                Some(_) => &FORCE_UNLOCK_IF,
                None => &FORCE_UNLOCK,
            };
            let mut call = ScriptCall::with_key(script.get(pubsub), name.as_str());
            call.key(self.channel(name))
                .arg(message)
                .arg(self.key_type());
            call
        };
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
impl From<LockKind> for crate::telemetry::Kind {
    fn from(kind: LockKind) -> Self {
        use crate::telemetry::Kind;
        match kind {
            LockKind::Reentrant => Kind::Reentrant,
            LockKind::Fast => Kind::Fast,
            LockKind::Read => Kind::Read,
            LockKind::Write => Kind::Write,
            LockKind::Fair => Kind::Fair,
        }
    }
}
