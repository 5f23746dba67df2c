use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The ids [`LockOwner::new`] draws: `[NEW_IDS_FROM, NEW_IDS_FROM * 2)`, bit 52 set. Ids a
/// caller picks for [`LockOwner::from_id`] below it never meet one of them, and every id is
/// exact as a JavaScript number (the inspector's page shows them) and as a Java `long`
/// (Redisson's thread ids).
const NEW_IDS_FROM: u64 = 1 << 52;

/// Room left above a process's random start, so its `new()` ids never run past the range.
const NEW_IDS_ROOM: u64 = 1 << 40;

/// The next id [`LockOwner::new`] hands out in this process.
fn next_owner() -> &'static AtomicU64 {
    static NEXT: OnceLock<AtomicU64> = OnceLock::new();
    NEXT.get_or_init(|| {
        // A random start: two processes that share a client id (see
        // `ClientConfig::client_id`) draw runs of ids that practically never overlap.
        let (random, _) = uuid::Uuid::new_v4().as_u64_pair();
        AtomicU64::new(NEW_IDS_FROM + random % (NEW_IDS_FROM - NEW_IDS_ROOM))
    })
}

/// Who holds a lock. Rust tasks hop threads, so the owner is an explicit value, not a thread.
///
/// Acquiring twice with the same owner re-enters the lock (its hold count goes up); every
/// hold must be released before others can take it. In Redis the owner appears as
/// `<client-uuid>:<id>`, the field shape Redisson writes for `uuid:threadId`.
///
/// Keep one `LockOwner` per logical holder: a task, a request, or an actor.
///
/// # Whoever has the id is the owner
///
/// An owner is nothing but its number: [`LockOwner::from_id`] makes the same owner from
/// [`id`](LockOwner::id) anywhere, so a lock taken in one task can be checked
/// ([`Lock::is_held_by`](crate::Lock::is_held_by)) or released
/// ([`Lock::unlock_as`](crate::Lock::unlock_as)) by code that only knows the number, as
/// Redisson's `lockAsync(threadId)` / `unlockAsync(threadId)` and redsync's `WithValue` do.
/// Two holders with one id are one owner: they re-enter each other's holds.
///
/// The number is scoped by the client's id (the `<client-uuid>` part of the field): another
/// process reaches the same owner only through a client configured with the same id
/// ([`ClientConfig::client_id`](crate::ClientConfig::client_id)).
///
/// Ids from [`new`](LockOwner::new) lie in `[2^52, 2^53)`, from a random start in each
/// process; pick your own ids below 2^52 and they never meet one of those.
///
/// # Example
///
/// ```
/// use actix_distributed_lock::LockOwner;
///
/// let a = LockOwner::new();
/// let b = LockOwner::new();
/// assert_ne!(a, b);
/// assert_eq!(a, a.clone());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockOwner(u64);

impl LockOwner {
    /// A fresh owner, distinct from every other owner made by `new()` in this process, and
    /// from every id below 2^52 given to [`from_id`](LockOwner::from_id).
    ///
    /// Its id is in `[2^52, 2^53)`; each process starts at a random point of that range,
    /// so processes sharing a client id practically never draw the same ids.
    ///
    /// ```
    /// # use actix_distributed_lock::LockOwner;
    /// assert!(LockOwner::new().id() >= 1 << 52);
    /// ```
    pub fn new() -> Self {
        LockOwner(next_owner().fetch_add(1, Ordering::Relaxed))
    }

    /// The owner whose number is `id`: the same owner as every other `LockOwner` with that
    /// id (see [whoever has the id is the owner](LockOwner#whoever-has-the-id-is-the-owner)).
    ///
    /// Use it to act for a holder you know by number: a job id, a request id, the
    /// [`id`](LockOwner::id) another task sent you, or a Redisson thread id (with a client
    /// configured with that Redisson's id). Choose your own ids below 2^52: ids from
    /// [`new`](LockOwner::new) lie above, so a number you picked never shares ownership
    /// with an owner made by `new()` by accident.
    ///
    /// ```
    /// # use actix_distributed_lock::LockOwner;
    /// let worker = LockOwner::new();
    /// assert_eq!(LockOwner::from_id(worker.id()), worker);
    /// assert_eq!(LockOwner::from_id(7).id(), 7);
    /// ```
    pub const fn from_id(id: u64) -> Self {
        LockOwner(id)
    }

    /// The number that follows the client's uuid in Redis.
    ///
    /// ```
    /// # use actix_distributed_lock::LockOwner;
    /// let o = LockOwner::new();
    /// assert_eq!(o.id(), o.id());
    /// ```
    pub fn id(&self) -> u64 {
        self.0
    }
}

impl Default for LockOwner {
    fn default() -> Self {
        LockOwner::new()
    }
}

tokio::task_local! {
    static TASK_OWNER: LockOwner;
}

impl LockOwner {
    /// The owner of the current task's scope (see [`LockOwner::scope`]), if any.
    ///
    /// Inside the body of a `#[distributed_lock]` call, it is the owner that call locks as:
    /// nested annotated calls for the same lock re-enter as it, one at a time (see the
    /// attribute's docs for the whole rule).
    ///
    /// ```
    /// # use actix_distributed_lock::LockOwner;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// assert_eq!(LockOwner::current(), None);
    /// let me = LockOwner::new();
    /// me.scope(async move { assert_eq!(LockOwner::current(), Some(me)) }).await;
    /// # }
    /// ```
    pub fn current() -> Option<LockOwner> {
        TASK_OWNER.try_with(|owner| *owner).ok()
    }

    /// Runs `work` with `self` as the task's owner: annotated calls inside it lock as `self`
    /// (side-by-side calls for one lock take turns). Also the way to let a spawned task
    /// re-enter a lock its parent holds: `tokio::spawn(owner.scope(work))`.
    ///
    /// ```
    /// # use actix_distributed_lock::LockOwner;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let me = LockOwner::new();
    /// let seen = me.scope(async { LockOwner::current() }).await;
    /// assert_eq!(seen, Some(me));
    /// # }
    /// ```
    pub async fn scope<F: std::future::Future>(self, work: F) -> F::Output {
        TASK_OWNER.scope(self, work).await
    }
}
