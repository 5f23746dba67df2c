//! What the semaphore actor keeps for each permit-expirable acquire it handed out (the
//! actor side of one `PermitGuard`), below both the actor and its lease keeping.

use super::guard::PermitId;
use crate::lease::status::StatusSender;
use actix::SpawnHandle;
use std::time::{Duration, Instant};

/// Permit-expirable permits of one acquire, held by one [`PermitGuard`](crate::PermitGuard).
pub(crate) struct Grant {
    pub(crate) ids: Vec<PermitId>,
    /// Its guard's status; its deadline is the lease's end (see `PermitHold`).
    pub(crate) status: StatusSender,
    /// A lease-less grant: each id's entry on the node's permit lease list (same order as
    /// `ids`). Empty for a fixed lease.
    pub(crate) watched: Vec<u64>,
    /// A fixed lease: the timer at its end.
    pub(crate) expiry: Option<SpawnHandle>,
    /// A fixed lease: when it surely ends (its acquire's or last update's send time plus
    /// the lease, or earlier while an update is unconfirmed), and the lease.
    pub(crate) fixed: Option<(Instant, Duration)>,
}
