//! Leases and the watchdog: what keeps a hold alive and what tells its holder the moment it
//! is lost.
//!
//! - `status`: where a hold stands, shared by its keeper and its guards (a status, a
//!   deadline on the guard's own clock, a notify).
//! - `ends`: lease arithmetic: how long a renewal's answer keeps a hold, and the lease an
//!   owner's remaining holds need.
//! - `loss` and `control`: a hold's loss and its lease as seen from outside its guard.
//! - `list`: the node's lease lists (watchdog-leased lock holds, lease-less permits), each
//!   entry with the instant it surely ends; the lock's and the semaphore's entries are
//!   theirs (`lock/lease_entry.rs`, `semaphore/lease_entry.rs`).
//! - `renewal`: the watchdog itself: renews every entry each lease/3 in batches, and reports
//!   a loss the moment an entry's end passes unconfirmed.

pub(crate) mod control;
pub(crate) mod ends;
pub(crate) mod list;
pub(crate) mod loss;
pub(crate) mod renewal;
pub(crate) mod status;
