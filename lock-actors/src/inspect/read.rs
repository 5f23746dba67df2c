//! Reading locks from Redis: which of a batch of keys are locks, and what each holds.
//! Two pipelines per batch (`TYPE`, then every read the kinds need), a third for the
//! read holds' own leases when a lock is shown in detail.

use super::model::{InspectedKind, LockInfo};
use super::shape::{self, StringLock, QUEUE_PREFIX};
use crate::error::LockError;
use crate::keys::LockName;
use crate::node::{Commands, Shard};
use redis::{FromRedisValue, Pipeline, Value};

/// Where a batch's pipelines go: one server of a `SCAN` (listing), or the server of one
/// lock's slot (showing a lock).
#[derive(Clone)]
pub(super) enum Link {
    Shard(Shard),
    Lock(Commands, LockName),
}

impl Link {
    async fn send(&self, pipe: &Pipeline) -> Result<Vec<Value>, LockError> {
        match self {
            Link::Shard(shard) => shard.clone().pipeline(pipe).await,
            Link::Lock(commands, name) => {
                commands
                    .clone()
                    .query::<Vec<Value>>(pipe.clone(), name.clone())
                    .await
            }
        }
    }
}

/// How keys map to the names the inspecting client uses.
#[derive(Clone, Debug)]
pub(super) struct Names {
    /// `billing:` for a client in namespace `billing`.
    pub(super) prefix: Option<String>,
}

impl Names {
    /// The caller's name of `key`, or `None` for a key outside the namespace.
    fn name_of(&self, key: &str) -> Option<String> {
        match &self.prefix {
            Some(prefix) => key.strip_prefix(prefix.as_str()).map(str::to_string),
            None => Some(key.to_string()),
        }
    }
}

/// A key read as a lock candidate.
enum Candidate {
    /// A key of its own: the lock's hash or string.
    Key(LockName),
    /// A fair queue whose lock key may be missing (free lock, queued waiters).
    Queue(LockName),
}

impl Candidate {
    fn name(&self) -> &LockName {
        match self {
            Candidate::Key(name) | Candidate::Queue(name) => name,
        }
    }
}

/// The locks among `keys` (raw, as `SCAN` returned them), in no particular order. Keys
/// that are not locks are skipped; nothing is written.
pub(super) async fn read(
    link: &Link,
    keys: &[Vec<u8>],
    names: &Names,
    detail: bool,
) -> Result<Vec<LockInfo>, LockError> {
    let mut candidates = Vec::new();
    for key in keys {
        let Ok(key) = std::str::from_utf8(key) else {
            continue;
        };
        if shape::is_companion(key) {
            continue;
        }
        let candidate = match shape::name_of_derived(key, QUEUE_PREFIX) {
            Some(name) => LockName::new(&name, usize::MAX).map(Candidate::Queue),
            None => LockName::new(key, usize::MAX).map(Candidate::Key),
        };
        if let Ok(candidate) = candidate {
            candidates.push(candidate);
        }
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let mut types = redis::pipe();
    for candidate in &candidates {
        types.cmd("TYPE").arg(candidate.name().as_str());
    }
    let types = link.send(&types).await?;

    // What each candidate needs read, in one pipeline; `plans` remembers the layout.
    let mut reads = redis::pipe();
    let mut plans = Vec::new();
    for (candidate, kind) in candidates.iter().zip(&types) {
        let kind = type_name(kind);
        let plan = match (candidate, kind.as_str()) {
            (Candidate::Key(name), "hash") => {
                reads
                    .cmd("HGETALL")
                    .arg(name.as_str())
                    .cmd("PTTL")
                    .arg(name.as_str())
                    .cmd("GET")
                    .arg(name.fencing_token_key());
                queue_reads(&mut reads, name);
                Plan::Hash
            }
            (Candidate::Key(name), "string") => {
                let timeouts = crate::semaphore::timeouts_key(name.as_str());
                reads
                    .cmd("GET")
                    .arg(name.as_str())
                    .cmd("PTTL")
                    .arg(name.as_str())
                    .cmd("ZRANGE")
                    .arg(timeouts)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES");
                // A count-down latch has a semaphore's shape: only its waiters tell it.
                let latch = name.latch_channel();
                reads
                    .cmd("PUBSUB")
                    .arg("NUMSUB")
                    .arg(&latch)
                    .cmd("PUBSUB")
                    .arg("SHARDNUMSUB")
                    .arg(&latch);
                Plan::String
            }
            // A queue with no lock key: a fair lock between holders. With a lock key, the
            // lock is read through that key (if the pattern matched it).
            (Candidate::Queue(name), "list") => {
                reads.cmd("EXISTS").arg(name.as_str());
                queue_reads(&mut reads, name);
                Plan::Queue
            }
            _ => Plan::Skip,
        };
        plans.push(plan);
    }
    if plans.iter().all(|p| matches!(p, Plan::Skip)) {
        return Ok(Vec::new());
    }
    reads.cmd("TIME");
    let replies = link.send(&reads).await?;
    let now = replies.last().and_then(shape::time_ms).unwrap_or(0);

    let mut found = Vec::new();
    let mut at = 0;
    for (candidate, plan) in candidates.iter().zip(plans) {
        let name = candidate.name();
        let width = plan.width();
        let Some(part) = replies.get(at..at + width) else {
            break;
        };
        at += width;
        let Some(caller_name) = names.name_of(name.as_str()) else {
            continue;
        };
        let lock = match plan {
            Plan::Hash => hash_info(name, caller_name, part, now),
            Plan::String => string_info(name, caller_name, part, now),
            Plan::Queue => queue_info(name, caller_name, part, now),
            Plan::Skip => None,
        };
        found.extend(lock);
    }
    if detail {
        read_hold_leases(link, &mut found).await?;
    }
    Ok(found)
}

/// The per-candidate layout of the reads pipeline.
enum Plan {
    /// HGETALL, PTTL, GET token, LRANGE queue, ZRANGE timeouts.
    Hash,
    /// GET, PTTL, ZRANGE permit timeouts, the latch channel's classic and sharded
    /// subscribers.
    String,
    /// EXISTS lock, LRANGE queue, ZRANGE timeouts.
    Queue,
    Skip,
}

impl Plan {
    fn width(&self) -> usize {
        match self {
            Plan::Hash | Plan::String => 5,
            Plan::Queue => 3,
            Plan::Skip => 0,
        }
    }
}

fn queue_reads(pipe: &mut Pipeline, name: &LockName) {
    pipe.cmd("LRANGE")
        .arg(name.fair_queue_key())
        .arg(0)
        .arg(-1)
        .cmd("ZRANGE")
        .arg(name.fair_timeout_key())
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES");
}

fn type_name(value: &Value) -> String {
    String::from_redis_value_ref(value).unwrap_or_default()
}

fn empty(name: &LockName, caller_name: String, kind: InspectedKind) -> LockInfo {
    LockInfo {
        name: caller_name,
        key: name.as_str().to_string(),
        kind,
        mode: None,
        holders: Vec::new(),
        ttl_ms: None,
        waiters: Vec::new(),
        permits: None,
        fencing_token: None,
        count: None,
    }
}

/// A score list (`ZRANGE … WITHSCORES`) as (member, whole ms).
fn scored<M: FromRedisValue>(value: &Value) -> Vec<(M, i64)> {
    Vec::<(M, f64)>::from_redis_value_ref(value)
        .map(|pairs| pairs.into_iter().map(|(m, s)| (m, s as i64)).collect())
        .unwrap_or_default()
}

fn hash_info(name: &LockName, caller: String, part: &[Value], now: i64) -> Option<LockInfo> {
    let fields = Vec::<(String, String)>::from_redis_value_ref(&part[0]).ok()?;
    let (mode, holders) = shape::hash_lock(&fields)?;
    let token = Option::<i64>::from_redis_value_ref(&part[2]).ok().flatten();
    let queue = Vec::<String>::from_redis_value_ref(&part[3]).unwrap_or_default();
    let timeouts = scored::<String>(&part[4]);
    let kind = match mode {
        Some(_) => InspectedKind::ReadWrite,
        None => shape::hash_kind(token, !queue.is_empty() || !timeouts.is_empty()),
    };
    let mut lock = empty(name, caller, kind);
    lock.mode = mode;
    lock.holders = holders;
    lock.ttl_ms = shape::ttl(&part[1]);
    lock.fencing_token = token.filter(|_| kind == InspectedKind::Fenced);
    if kind == InspectedKind::Fair {
        lock.waiters = shape::waiters(&queue, &timeouts, now);
    }
    Some(lock)
}

fn string_info(name: &LockName, caller: String, part: &[Value], now: i64) -> Option<LockInfo> {
    let value = String::from_redis_value_ref(&part[0]).ok()?;
    let ttl = shape::ttl(&part[1]);
    match shape::string_lock(&value)? {
        StringLock::Fast(holder) => {
            let mut lock = empty(name, caller, InspectedKind::Fast);
            lock.holders = vec![holder];
            lock.ttl_ms = ttl;
            Some(lock)
        }
        StringLock::Permits(available) => {
            let held = scored::<Vec<u8>>(&part[2]);
            let awaited = subscribers(&part[3]) + subscribers(&part[4]) > 0;
            if held.is_empty() && awaited {
                let mut lock = empty(name, caller, InspectedKind::Latch);
                lock.count = Some(available);
                lock.ttl_ms = ttl;
                return Some(lock);
            }
            let kind = if held.is_empty() {
                InspectedKind::Semaphore
            } else {
                InspectedKind::ExpirableSemaphore
            };
            let mut lock = empty(name, caller, kind);
            lock.permits = Some(available);
            lock.holders = shape::permits(&held, now);
            lock.ttl_ms = ttl;
            Some(lock)
        }
    }
}

/// The subscriber count of a `PUBSUB NUMSUB` / `SHARDNUMSUB` reply for one channel.
fn subscribers(value: &Value) -> i64 {
    Vec::<(String, i64)>::from_redis_value_ref(value)
        .ok()
        .and_then(|counts| counts.first().map(|(_, n)| *n))
        .unwrap_or(0)
}

fn queue_info(name: &LockName, caller: String, part: &[Value], now: i64) -> Option<LockInfo> {
    if i64::from_redis_value_ref(&part[0]).ok()? != 0 {
        return None;
    }
    let queue = Vec::<String>::from_redis_value_ref(&part[1]).ok()?;
    let timeouts = scored::<String>(&part[2]);
    let mut lock = empty(name, caller, InspectedKind::Fair);
    lock.waiters = shape::waiters(&queue, &timeouts, now);
    (!lock.waiters.is_empty()).then_some(lock)
}

/// Fills in each read hold's own lease: the TTL of its newest timeout key
/// (`{name}:<field>:rwlock_timeout:<count>`), as Redisson keeps one per re-entry.
async fn read_hold_leases(link: &Link, locks: &mut [LockInfo]) -> Result<(), LockError> {
    let mut pipe = redis::pipe();
    let mut slots = Vec::new();
    for (i, lock) in locks.iter().enumerate() {
        if lock.kind != InspectedKind::ReadWrite {
            continue;
        }
        let Ok(name) = LockName::new(&lock.key, usize::MAX) else {
            continue;
        };
        for (j, holder) in lock.holders.iter().enumerate() {
            if !holder.write {
                let key = format!(
                    "{}:{}",
                    name.read_timeout_prefix(&holder.field),
                    holder.count
                );
                pipe.cmd("PTTL").arg(key);
                slots.push((i, j));
            }
        }
    }
    if slots.is_empty() {
        return Ok(());
    }
    let replies = link.send(&pipe).await?;
    for ((i, j), reply) in slots.into_iter().zip(&replies) {
        locks[i].holders[j].ttl_ms = shape::ttl(reply);
    }
    Ok(())
}
