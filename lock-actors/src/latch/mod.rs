//! The count-down latch: Redisson's `RCountDownLatch` layout and messages, the messages its
//! actor takes, and the actor that parks local waiters until the count reaches zero.
//!
//! # Layout in Redis (Redisson's; the scripts are ours)
//!
//! | what | where | notes |
//! |---|---|---|
//! | the count | string `name` | set once by `try_set_count` (only if none is set); `DECR` by a count-down; deleted when it reaches zero |
//! | the channel | `redisson_countdownlatch__channel__{name}` | `0` when the count reaches zero (or the latch is deleted), `1` when a count is set |
//!
//! A latch with no key is open: its count is zero. Waiters, Java's and ours alike, read
//! the count again on every message and wait while it is above zero, so a message only
//! ever means "look again". Unlike every other derived name, Redisson puts the whole name
//! in the channel's braces, so on a Redis Cluster a latch name must have no brace of its
//! own (its key and its channel would land on two slots, which Redisson's own scripts
//! fail on too).
//!
//! Where ours differs: Redisson's delete publishes `1`, which leaves its untimed waiters
//! asleep on an open latch; ours publishes `0`, so Java's and ours wake and find it open.

mod actor;

pub use actor::LatchActor;
pub(crate) use actor::LatchRegistry;
#[cfg(test)]
pub(crate) use actor::{nobody_waits, FALLBACK_POLL};

use crate::error::LockError;
use crate::keys::LockName;
use crate::node::connection::PubSub;
use crate::node::publishing::PublishingScript;
use crate::script::ScriptCall;
use actix::Message;
use redis::Script;
use std::sync::LazyLock;
use std::time::Duration;

/// The helpers every latch script starts with.
const COMMON: &str = include_str!("common.lua");

pub(crate) static TRY_SET: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[COMMON, include_str!("try_set.lua")]));
pub(crate) static COUNT_DOWN: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[COMMON, include_str!("count_down.lua")]));
pub(crate) static DELETE: LazyLock<PublishingScript> =
    LazyLock::new(|| PublishingScript::new(&[COMMON, include_str!("delete.lua")]));
pub(crate) static COUNT: LazyLock<Script> =
    LazyLock::new(|| Script::new(&[COMMON, include_str!("count.lua")].join("\n")));

/// The call of `script` (one of the publishing latch scripts) on latch `name`: its key
/// and its channel.
fn publishing_call(script: &'static Script, name: &LockName) -> ScriptCall {
    let mut call = ScriptCall::with_key(script, name.as_str());
    call.key(name.latch_channel());
    call
}

/// `try_set.lua` on latch `name` for `count`, publishing with `pubsub`.
pub(crate) fn try_set_call(name: &LockName, pubsub: PubSub, count: u64) -> ScriptCall {
    let mut call = publishing_call(TRY_SET.get(pubsub), name);
    call.arg(count);
    call
}

/// `count_down.lua` on latch `name`, publishing with `pubsub`.
pub(crate) fn count_down_call(name: &LockName, pubsub: PubSub) -> ScriptCall {
    publishing_call(COUNT_DOWN.get(pubsub), name)
}

/// `delete.lua` on latch `name`, publishing with `pubsub`.
pub(crate) fn delete_call(name: &LockName, pubsub: PubSub) -> ScriptCall {
    publishing_call(DELETE.get(pubsub), name)
}

/// `count.lua` on latch `name`.
pub(crate) fn count_call(name: &LockName) -> ScriptCall {
    ScriptCall::with_key(&COUNT, name.as_str())
}

/// The largest count a latch takes (Redis counts in signed 64 bits).
pub(crate) const MOST_COUNT: u64 = i64::MAX as u64;

/// A stored count as a latch reads it: what is not above zero is an open latch.
pub(crate) fn open_count(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}

/// Ask a [`LatchActor`] to set the latch's count to `count`, unless a count is set
/// (Redisson's `trySetCount`); replies whether it did. `count` must be at least 1.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::TrySetCount;
///
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.count_down_latch("batch:7")?.actor()?;
/// let first = actor.send(TrySetCount { count: 3 }).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrySetCount {
    /// The count to set, from 1 to `i64::MAX`.
    pub count: u64,
}

impl Message for TrySetCount {
    type Result = Result<bool, LockError>;
}

/// Ask a [`LatchActor`] to count the latch down by one (Redisson's `countDown`); replies
/// the count left (0 once it reached zero, and for a latch with no count set).
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::CountDown;
///
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let left = client.count_down_latch("batch:7")?.actor()?.send(CountDown).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountDown;

impl Message for CountDown {
    type Result = Result<u64, LockError>;
}

/// Ask a [`LatchActor`] for the latch's count (Redisson's `getCount`); 0 when it is open.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::GetCount;
///
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let count = client.count_down_latch("batch:7")?.actor()?.send(GetCount).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetCount;

impl Message for GetCount {
    type Result = Result<u64, LockError>;
}

/// Ask a [`LatchActor`] to delete the latch, which opens it; replies whether a count was
/// set.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::DeleteLatch;
///
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let existed = client.count_down_latch("batch:7")?.actor()?.send(DeleteLatch).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteLatch;

impl Message for DeleteLatch {
    type Result = Result<bool, LockError>;
}

/// Ask a [`LatchActor`] to answer once the latch's count is zero (Redisson's `await`):
/// `Ok(())` then; [`LockError::Timeout`] when `wait` ran out first (`None`: no bound).
///
/// # Cancel safety
///
/// Dropping the `send` future withdraws the waiter: it leaves the actor's queue, and once
/// no one waits the actor drops its subscription to the latch's channel.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::AwaitLatch;
/// use std::time::Duration;
///
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.count_down_latch("batch:7")?.actor()?;
/// actor.send(AwaitLatch { wait: Some(Duration::from_secs(30)) }).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwaitLatch {
    /// How long to wait at most; `None` waits until the count is zero, however long.
    pub wait: Option<Duration>,
}

impl Message for AwaitLatch {
    type Result = Result<(), LockError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_counts_at_or_below_zero_are_an_open_latch() {
        assert_eq!(open_count(3), 3);
        assert_eq!(open_count(0), 0);
        assert_eq!(open_count(-1), 0);
        assert_eq!(MOST_COUNT, 9_223_372_036_854_775_807);
    }
}
