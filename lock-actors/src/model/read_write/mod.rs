//! The read-write lock, model-checked: readers with watchdog and fixed leases, writers,
//! re-entries on both sides and the writer's own read holds, renewals delayed or lost,
//! unlocks in any order, the passing of time; checked that Redis keeps every hold its
//! client believes held and that no writer ever overlaps another owner's hold.
//!
//! `store` mirrors the read and write scripts (and the old ones) as pure functions,
//! `mirror` checks them against the Lua on a real Redis, `client` and `model` are the
//! stateright model, `tests` its checks.

mod client;
mod mirror;
mod model;
mod store;
mod tests;
