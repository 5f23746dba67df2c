//! The lock protocol, model-checked: `stateright` explores every interleaving of a few
//! clients' calls, Redis's answers, lost and late messages and the passing of time, and
//! checks properties that must hold in every state (or at the end of every path).
//!
//! The clients decide as the library does: they import its own machines and rules rather
//! than restating them: the fast-path machine that decides who acts on a lock
//! ([`FastPath`](crate::lock::fast_path::FastPath)), the wait queue that decides when a waiter
//! tries, sleeps and wakes ([`WaitQueue`](crate::wait_queue::WaitQueue)), and the lease
//! arithmetic (how long a hold is surely held, what a renewal's answer is worth, what lease
//! an unlock leaves the remaining holds), and the lock machine that decides for the lock actor
//! ([`LockMachine`](crate::lock::machine::LockMachine)). What is restated is marked so: the
//! lock actor's turn in the older models, and rules as they were before a fix (to show the checker finds what they broke).
//! The model's Redis runs the kinds' scripts as pure Rust functions, each checked against
//! its Lua on a real Redis over generated inputs, so the model cannot drift from them.
//!
//! `cargo test -p actix-distributed-lock-actors --lib model` runs the checks CI runs, each
//! printing the states it explored; `LOCK_MODEL_DEPTH=deep` runs deeper bounds (more
//! clients or rounds).
//!
//! - `reentrant`: the reentrant, fenced and fast locks under mixed leases, renewals delayed
//!   or lost, paused clients, a Redisson client beside the library's, a key lost once.
//! - `fast_path`: one process's callers through the fast path and the lock actor, direct
//!   calls answered, lost or abandoned, a client that closes.
//! - `in_flight`: one owner's callers with every request in flight as steps of its own on
//!   one ordered connection (direct tries, the actor's tries, releases, reconciles, a
//!   force-unlock of ours, the clearing of lost holds, callers giving up), holds reaching
//!   their end while their key lives on, another client beside them; the lock machine
//!   (`lock::machine`) itself, against its rules as they were.
//! - `wake_up`: waiters in the wait queue against a holder that unlocks or dies, messages
//!   late or lost.
//! - `spin`: the spin lock's polling waiters (no pub/sub) against a holder that unlocks or
//!   dies, waiters that start after a busy try elsewhere or leave.
//! - `fair`: the fair lock's waiters in its Redis queue: wake-ups on their own channels or
//!   by the timed fallback, giving up, dying, grants in queue order.
//! - `read_write`: readers and writers with mixed leases, each read hold's timeout key.
//! - `semaphore`: plain and permit-expirable semaphores, lost replies, closing and dying
//!   clients.
//! - `latch`: the count-down latch's waiters against count-downs, deletes and counts set
//!   again, messages late or lost, waiters giving up.

mod clock;
mod fair;
mod fast_path;
mod in_flight;
mod kinds_mirror;
mod latch;
mod mirror;
mod read_write;
mod reentrant;
mod semaphore;
mod server;
mod spin;
mod store;
mod waits;
mod wake_up;

/// Whether `LOCK_MODEL_DEPTH=deep` asks for the deeper bounds.
fn deep() -> bool {
    std::env::var("LOCK_MODEL_DEPTH").is_ok_and(|depth| depth == "deep")
}

/// Explores every state of `model` breadth-first and prints how many it explored, how deep
/// and how long it took (`label` names the run).
fn explore<M>(model: M, label: &str) -> impl stateright::Checker<M>
where
    M: stateright::Model + Send + Sync + 'static,
    M::State: Clone + std::fmt::Debug + Eq + std::hash::Hash + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + Eq + std::hash::Hash + Send + Sync + 'static,
{
    use stateright::Checker;
    let started = std::time::Instant::now();
    let checker = model.checker().spawn_bfs().join();
    eprintln!(
        "model {label}: {} states ({} unique), depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker
}
