//! Composed locks built from ordinary [`Lock`] handles: [`MultiLock`] (all of several locks,
//! or none) and [`RedLock`] (a majority of independent Redis nodes).
//!
//! Neither adds scripts or keys of its own: every member is an ordinary lock of its kind on
//! its node, taken, renewed and released through that node's lock actors, so a Java service
//! locking one member with Redisson still excludes us.

mod multi;
mod redlock;

pub use multi::{MultiLock, MultiLockGuard};
pub use redlock::{RedLock, RedLockGuard};

use crate::error::LockError;
use crate::handle::Lock;
use crate::lock::{LockGuard, Released};
use crate::node::identity::ServerIdentity;
use futures_util::future::join_all;
use std::sync::Arc;
use std::time::Duration;

/// One member of a composed lock: the handle, the (redacted) address of its node, which
/// orders members, and the identity its server reports, which tells servers apart.
#[derive(Clone)]
pub(crate) struct Member {
    pub(crate) lock: Lock,
    pub(crate) node: Arc<str>,
    pub(crate) server: ServerIdentity,
}

impl Member {
    pub(crate) fn new(lock: Lock) -> Result<Member, LockError> {
        let node = lock.client().node()?;
        let (label, server) = (node.commands.label().into(), node.server.clone());
        Ok(Member {
            lock,
            node: label,
            server,
        })
    }

    /// True when both members are on one Redis server (by its `run_id`, or by the same
    /// address when the server would not tell), whatever database each uses.
    pub(crate) fn shares_server(&self, other: &Member) -> bool {
        self.node == other.node || self.server.shares_server(&other.server)
    }
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("node", &self.node)
            .field("kind", &self.lock.kind())
            .field("name", &self.lock.name())
            .finish()
    }
}

/// Releases every guard at once, in parallel, and waits for each report at most `bound`.
///
/// A release is sent before its first await completes, so a report given up on here still
/// completes in the background; the hold then expires at its lease at the latest.
pub(crate) async fn release_all(
    guards: Vec<(Arc<str>, LockGuard)>,
    bound: Duration,
) -> Vec<Result<Released, LockError>> {
    join_all(guards.into_iter().map(|(node, guard)| async move {
        match tokio::time::timeout(bound, guard.unlock()).await {
            Ok(report) => report,
            Err(_) => Err(LockError::Unavailable {
                node: node.to_string(),
                reason: format!(
                    "no answer to the release within {bound:?}; it completes in the background \
                     or the hold expires at its lease"
                ),
            }),
        }
    }))
    .await
}
