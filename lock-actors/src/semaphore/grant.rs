//! What the semaphore actor keeps for each permit-expirable acquire it handed out (the
//! actor side of one `PermitGuard`), below both the actor and its lease keeping.

use super::guard::{PermitId, PermitStatus};
use actix::SpawnHandle;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Permit-expirable permits of one acquire, held by one [`PermitGuard`](crate::PermitGuard).
pub(crate) struct Grant {
    pub(crate) ids: Vec<PermitId>,
    pub(crate) lease: Option<Duration>,
    pub(crate) status: watch::Sender<PermitStatus>,
    /// Past this instant the lease may have run out in Redis: no renewal was confirmed.
    pub(crate) valid_until: Instant,
    pub(crate) expiry: Option<SpawnHandle>,
}
