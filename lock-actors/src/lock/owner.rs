use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// Who holds a lock. Rust tasks hop threads, so the owner is an explicit value, not a thread.
///
/// Acquiring twice with the same owner re-enters the lock (its hold count goes up); every
/// hold must be released before others can take it. In Redis the owner appears as
/// `<client-uuid>:<id>`, the field shape Redisson writes for `uuid:threadId`.
///
/// Keep one `LockOwner` per logical holder: a task, a request, or an actor.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockOwner(u64);

impl LockOwner {
    /// A fresh owner, distinct from every other owner in this process.
    ///
    /// ```
    /// # use actix_distributed_lock::LockOwner;
    /// assert!(LockOwner::new().id() > 0);
    /// ```
    pub fn new() -> Self {
        LockOwner(NEXT_OWNER.fetch_add(1, Ordering::Relaxed))
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
