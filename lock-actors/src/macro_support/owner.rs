//! Which owner a `#[distributed_lock]` call locks as, and the turns nested calls take on
//! one hold.
//!
//! The rule (also in the attribute's docs):
//!
//! - A call nested in the body of an annotated call that holds the same lock (same client,
//!   same name) re-enters that hold: it locks as the enclosing call's owner.
//! - Several such nested calls running side by side (`join!`, `select!`, a
//!   `FuturesUnordered` in one body) take turns: one re-enters at a time, the others wait
//!   for it within their own `wait`. Two branches of one task never hold one lock at once.
//! - A call for a lock no enclosing call holds locks as the owner the caller set with
//!   [`LockOwner::scope`], taking turns with the other calls under that owner the same
//!   way; without one, as a fresh owner of its own, so side-by-side calls exclude each
//!   other through Redis as two processes would.
//! - A spawned task starts with none of this: it is another owner, and waits for a lock
//!   its parent holds (until its `wait` runs out, if the parent awaits it). To let it work
//!   under the parent's hold, run it in `LockOwner::current()`'s scope.

use crate::client::LockClient;
use crate::error::LockError;
use crate::lock::LockOwner;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex as TurnLock, OwnedMutexGuard};

tokio::task_local! {
    /// The innermost annotated call whose body is running in this task.
    static CALL: Arc<Call>;
}

/// One annotated call whose body is running.
struct Call {
    client: String,
    names: Vec<String>,
    owner: LockOwner,
    /// The owner the caller set with [`LockOwner::scope`] around the outermost call.
    callers_owner: Option<LockOwner>,
    /// Taken by each nested call that re-enters this call's hold, for its whole run.
    turns: Arc<TurnLock<()>>,
    parent: Option<Arc<Call>>,
}

impl Call {
    fn holds_any(&self, client: &str, names: &[String]) -> bool {
        self.client == client && names.iter().any(|name| self.names.contains(name))
    }
}

/// Turns on the holds of caller-set owners, by (owner, client, lock name).
type Lenders = HashMap<(LockOwner, String, String), Weak<TurnLock<()>>>;
static LENDERS: LazyLock<Mutex<Lenders>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The turn lock of `owner`'s hold of `name`, made when nobody uses one.
fn lender(owner: LockOwner, client: &str, name: &str) -> Arc<TurnLock<()>> {
    let mut lenders = LENDERS.lock().unwrap_or_else(|p| p.into_inner());
    let key = (owner, client.to_string(), name.to_string());
    if let Some(turns) = lenders.get(&key).and_then(Weak::upgrade) {
        return turns;
    }
    lenders.retain(|_, turns| turns.strong_count() > 0);
    let turns = Arc::new(TurnLock::new(()));
    lenders.insert(key, Arc::downgrade(&turns));
    turns
}

/// An annotated call's place among the calls of its task: the owner it locks as, the turn
/// it holds on an enclosing hold (released when it is dropped, after the unlock), and what
/// is left of its wait.
pub struct Turn {
    call: Option<Arc<Call>>,
    owner: LockOwner,
    deadline: Instant,
    _turns: Vec<OwnedMutexGuard<()>>,
}

impl Turn {
    /// Finds the owner a call for `names` (of `kind`) locks as and waits for its turn, at
    /// most `wait` (the client's default wait when `None`); [`LockError::Timeout`] when a
    /// sibling keeps the turn longer.
    pub async fn take(
        client: &LockClient,
        names: &[String],
        kind: super::Kind,
        wait: Option<Duration>,
    ) -> Result<Turn, LockError> {
        let wait = wait.unwrap_or(client.config().default_wait);
        let started = Instant::now();
        let deadline = started + wait;
        if kind.is_semaphore() {
            // Permits have no owner: nothing to re-enter, nothing to take turns on.
            return Ok(Turn {
                call: None,
                owner: LockOwner::new(),
                deadline,
                _turns: Vec::new(),
            });
        }
        let enclosing = CALL.try_with(Arc::clone).ok();
        let current = LockOwner::current();
        let callers_owner = match &enclosing {
            Some(call) if current == Some(call.owner) => call.callers_owner,
            // Outside any call, or the caller set an owner inside a body.
            _ => current,
        };
        let mut holder = enclosing.clone();
        while let Some(call) = holder.as_ref().filter(|c| !c.holds_any(client.id(), names)) {
            holder = call.parent.clone();
        }
        let (owner, lenders) = match (&holder, callers_owner) {
            (Some(call), _) => (call.owner, vec![call.turns.clone()]),
            (None, Some(owner)) => {
                let mut sorted: Vec<&String> = names.iter().collect();
                sorted.sort();
                sorted.dedup();
                let lenders = sorted
                    .into_iter()
                    .map(|name| lender(owner, client.id(), name))
                    .collect();
                (owner, lenders)
            }
            (None, None) => (LockOwner::new(), Vec::new()),
        };
        let mut turns = Vec::with_capacity(lenders.len());
        for turns_of in lenders {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, turns_of.lock_owned()).await {
                Ok(turn) => turns.push(turn),
                Err(_) => return Err(LockError::timeout(names.join(", "), started.elapsed())),
            }
        }
        let call = Call {
            client: client.id().to_string(),
            names: names.to_vec(),
            owner,
            callers_owner,
            turns: Arc::new(TurnLock::new(())),
            parent: enclosing,
        };
        Ok(Turn {
            call: Some(Arc::new(call)),
            owner,
            deadline,
            _turns: turns,
        })
    }

    /// The owner the call locks as.
    pub fn owner(&self) -> LockOwner {
        self.owner
    }

    /// What is left of the call's wait.
    pub fn wait_left(&self) -> Option<Duration> {
        Some(self.deadline.saturating_duration_since(Instant::now()))
    }

    /// Runs the call's body as this call: nested calls see it, and
    /// [`LockOwner::current`] is its owner. The body is boxed, so a call's future does not
    /// grow by the size of every call nested in it (side-by-side calls in debug builds
    /// overflowed a test thread's stack otherwise).
    pub async fn run<F: Future>(&self, body: Pin<Box<F>>) -> F::Output {
        match &self.call {
            Some(call) => {
                let body = self.owner.scope(body);
                CALL.scope(call.clone(), body).await
            }
            None => body.await,
        }
    }
}
