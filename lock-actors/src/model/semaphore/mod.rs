//! The semaphores, model-checked. `store` mirrors the semaphore scripts as pure functions,
//! and `mirror` checks each mirror against its Lua on a real Redis. `plain` models the
//! plain semaphore: lost replies settled by receipts, releases, closes and deaths. The
//! permit-expirable semaphore is in `expirable` (fixed and watchdog leases, renewals
//! delayed, unanswered or lost, expiry and reclaim, releases of lost permits, closes and
//! deaths), with its bounds and negative controls in `expirable_checks`.

mod expirable;
mod expirable_checks;
mod expirable_trace;
mod mirror;
mod plain;
mod store;

use super::deep;
