//! The lock protocol, model-checked: `stateright` explores every interleaving of a few
//! clients' acquires, re-entries, renewals, unlocks and the passing of time against the
//! model's Redis, and checks that no hold is believed by its client after Redis let it go
//! and that two owners never hold at once.
//!
//! The clients decide as the library does: they import its lease arithmetic (how long a
//! hold is surely held, what a renewal's answer is worth, what lease an unlock leaves the
//! remaining holds) rather than restating it. The model's Redis runs the kinds' scripts as
//! pure functions (`store`), each checked against its Lua on a real Redis (`mirror`).
//!
//! `cargo test -p lock-actors --lib model` runs the check CI runs (two clients, three holds
//! each at most; every instant is relative to now, so time itself needs no bound); set
//! `LOCK_MODEL_DEPTH=deep` for three clients. Each run prints the states it explored.
//!
//! Covered so far: the reentrant lock (re-entry with mixed watchdog and fixed leases,
//! renewals delayed or lost, paused clients, unlocks in any order). Still to come: the
//! other kinds, waiters and wake-ups, Redisson peers, and closing clients.

mod clock;
mod fair;
mod mirror;
mod reentrant;
mod server;
mod store;
