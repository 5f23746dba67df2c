//! ACL users (docs/production.md, "ACL users"): a Redis user with exactly the rules that
//! page lists for a lock kind, scoped to the names under one prefix (`order:`), can use
//! that kind fully — acquire, renewal, a contended wake-up, release, state queries — and
//! is refused every other name. With one rule missing, the error names the command and the key or
//! channel that was refused, at once; a waiter whose subscription is refused fails
//! clearly instead of waiting out its wait.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, ClientConfig, Lock, LockClient, LockError};
use std::time::{Duration, Instant};
use support::RedisServer;

/// Bound for what should happen at once (generous: CI is loaded).
const PROMPT: Duration = Duration::from_secs(5);
/// The watchdog lease of the renewal checks (renewed every third of it).
const SHORT_WATCHDOG: Duration = Duration::from_millis(1500);
/// The lease of a holder whose unlock must wake a waiter: only pub/sub beats it.
const LONG_LEASE: Duration = Duration::from_secs(30);

/// The kinds the ACL table of docs/production.md has a row for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Reentrant,
    Fenced,
    Fast,
    Fair,
    ReadWrite,
    Semaphore,
    Expirable,
}

/// One user's rules: key patterns (`~`), channel patterns (`&`) and commands (`+`).
#[derive(Clone, Debug)]
struct Rules {
    keys: Vec<String>,
    channels: Vec<String>,
    commands: Vec<String>,
}

/// Every client needs these: scripts (loaded at connect, run by hash) and wake-ups.
const COMMON: [&str; 5] = [
    "evalsha",
    "script|load",
    "subscribe",
    "unsubscribe",
    "publish",
];

/// The table of docs/production.md for names under `prefix` (names without braces of
/// their own):
/// key patterns, channel patterns and commands, each list space-separated, `P` standing
/// for the prefix.
fn rules(kind: Kind, prefix: &str) -> Rules {
    const LOCK: &str = "exists hexists hincrby hget pexpire pttl del type";
    const SEMAPHORE: &str = "get set exists del incrby decrby time zremrangebyscore zcard";
    let (keys, channels, commands) = match kind {
        Kind::Reentrant => (
            "P* redisson_lock__channel:{P*",
            "redisson_lock__channel:{P*",
            LOCK.to_string(),
        ),
        Kind::Fenced => (
            "P* redisson_lock__channel:{P* redisson_lock_token:{P*",
            "redisson_lock__channel:{P*",
            format!("{LOCK} incr"),
        ),
        Kind::Fast => (
            "P* redisson_lock__channel:{P*",
            "redisson_lock__channel:{P*",
            "set get pexpire pttl del type".to_string(),
        ),
        Kind::Fair => (
            "P* redisson_lock__channel:{P* redisson_lock_queue:{P* redisson_lock_timeout:{P*",
            "redisson_lock__channel:{P*",
            format!(
                "{LOCK} hset time lindex lpop rpush lrange lrem zadd zincrby zrange zrem zscore"
            ),
        ),
        Kind::ReadWrite => (
            "P* {P* redisson_rwlock:{P*",
            "redisson_rwlock:{P*",
            format!("{LOCK} hset hdel hlen hkeys set"),
        ),
        Kind::Semaphore => (
            "P* {P* redisson_sc:{P*",
            "redisson_sc:{P*",
            SEMAPHORE.to_string(),
        ),
        Kind::Expirable => (
            "P* {P* redisson_sc:{P*",
            "redisson_sc:{P*",
            format!("{SEMAPHORE} zadd zrangebyscore zrem zscore"),
        ),
    };
    let patterns = |list: &str| -> Vec<String> {
        list.split_whitespace()
            .map(|p| p.replace('P', prefix))
            .collect()
    };
    Rules {
        keys: patterns(keys),
        channels: patterns(channels),
        commands: COMMON
            .iter()
            .map(|c| c.to_string())
            .chain(commands.split_whitespace().map(str::to_string))
            .collect(),
    }
}

/// Creates (or replaces) `user` with exactly `rules`, password `pw`.
async fn create_user(server: &RedisServer, user: &str, rules: &Rules) {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(">pw");
    for key in &rules.keys {
        cmd.arg(format!("~{key}"));
    }
    for channel in &rules.channels {
        cmd.arg(format!("&{channel}"));
    }
    for command in &rules.commands {
        cmd.arg(format!("+{command}"));
    }
    let mut admin = server.conn().await;
    let () = cmd.query_async(&mut admin).await.expect("ACL SETUSER");
}

async fn connect_as(server: &RedisServer, user: &str, watchdog: Duration) -> LockClient {
    let url = format!("redis://{user}:pw@127.0.0.1:{}/", server.port());
    let config = ClientConfig::new(url)
        .watchdog_timeout(watchdog)
        .default_wait(PROMPT);
    support::clients::connect(config, user).await
}

fn lock_of(kind: Kind, client: &LockClient, name: &str) -> Lock {
    match kind {
        Kind::Reentrant => client.lock(name),
        Kind::Fenced => client.fenced_lock(name),
        Kind::Fast => client.fast_lock(name),
        Kind::Fair => client.fair_lock(name),
        Kind::ReadWrite => client.read_write_lock(name).map(|rw| rw.write().clone()),
        Kind::Semaphore | Kind::Expirable => unreachable!("not a lock"),
    }
    .expect("a valid name")
}

/// The channel a waiter on lock `name` of `kind` listens on (`waiter`: its owner field).
fn wake_channel(kind: Kind, name: &str, waiter: &str) -> String {
    match kind {
        Kind::Fair => format!("redisson_lock__channel:{{{name}}}:{waiter}"),
        Kind::ReadWrite => format!("redisson_rwlock:{{{name}}}"),
        Kind::Semaphore | Kind::Expirable => format!("redisson_sc:{{{name}}}"),
        _ => format!("redisson_lock__channel:{{{name}}}"),
    }
}

/// Checks `error` is the ACL refusal of `command` on `target` (a key or channel, or ""
/// for a command refused as a whole), named in its text, and not retried.
#[track_caller]
fn assert_denied(error: &LockError, command: &str, target: &str) {
    let LockError::Denied {
        command: got_command,
        target: got_target,
        ..
    } = error
    else {
        panic!("expected LockError::Denied of {command} on `{target}`, got {error:?} ({error})");
    };
    assert_eq!(got_command, command, "{error}");
    assert!(
        got_target.contains(target),
        "the target names `{target}`: {error}"
    );
    let text = error.to_string();
    assert!(text.contains(command) && text.contains(target), "{text}");
    assert_eq!(error.server_code(), Some("NOPERM"), "{error:?}");
    assert!(!error.is_transient(), "{error:?}");
}

/// Keys left in Redis but for fencing counters.
async fn assert_clean(server: &RedisServer) {
    support::eventually("no lock key is left", PROMPT, || async {
        server
            .keys()
            .await
            .iter()
            .all(|k| k.starts_with("redisson_lock_token:"))
    })
    .await;
}

/// Waits two watchdog leases (time passing is what is tested: only renewals keep a hold that
/// long) and fails at once if `lost` resolves meanwhile.
async fn stays_held_through_two_leases(lost: impl std::future::Future, what: &str) {
    let outcome = tokio::time::timeout(SHORT_WATCHDOG * 2, lost).await;
    assert!(
        outcome.is_err(),
        "{what}: renewal failed, the hold was lost"
    );
}

/// A server with a user that has exactly `kind`'s rules, and two clients of that user.
async fn two_clients_of_a_user_with_the_rules_of(
    kind: Kind,
) -> (RedisServer, LockClient, LockClient) {
    let server = RedisServer::start();
    let user = format!("{kind:?}").to_lowercase();
    create_user(&server, &user, &rules(kind, "order:")).await;
    let holder = connect_as(&server, &user, SHORT_WATCHDOG).await;
    let other = connect_as(&server, &user, SHORT_WATCHDOG).await;
    (server, holder, other)
}

/// A lock kind run by a user with exactly its rules.
async fn lock_kind_works_with_its_rules(kind: Kind) {
    let (server, holder, other) = two_clients_of_a_user_with_the_rules_of(kind).await;
    let name = "order:acl";
    let lock = lock_of(kind, &holder, name);

    // Acquire and renewal: held through two watchdog leases.
    let guard = lock.acquire().await.expect("acquire");
    stays_held_through_two_leases(guard.lost(), &format!("{kind:?}")).await;
    assert!(lock.is_locked().await.unwrap(), "{kind:?}: renewed");
    assert!(lock.remaining_ttl().await.unwrap().is_some());
    assert_eq!(lock.hold_count(guard.owner()).await.unwrap(), 1);
    guard.unlock().await.expect("release");

    // A contended wake-up: the holder's long lease leaves only pub/sub to wake the waiter.
    let guard = lock
        .acquire_with(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap();
    let owner = actix_distributed_lock::LockOwner::new();
    let contender = lock_of(kind, &other, name);
    let waiter = tokio::spawn(async move {
        let options = AcquireOptions::new()
            .owner(owner)
            .wait(Duration::from_secs(60));
        (contender.acquire_with(options).await, Instant::now())
    });
    let field = format!("{}:{}", other.id(), owner.id());
    server
        .wait_for_subscribers(&wake_channel(kind, name, &field), 1)
        .await;
    let released = Instant::now();
    guard.unlock().await.expect("release wakes");
    let (woken, at) = tokio::time::timeout(PROMPT, waiter)
        .await
        .unwrap_or_else(|_| panic!("{kind:?}: the unlock did not wake the waiter"))
        .unwrap();
    assert!(at - released < PROMPT);
    woken.expect("the waiter's grant").unlock().await.unwrap();

    // Any other name is refused, naming its key (a free fast lock is taken with SET).
    let error = lock_of(kind, &holder, "invoice:1")
        .acquire()
        .await
        .expect_err("a name outside the prefix");
    let command = if kind == Kind::Fast { "SET" } else { "EVALSHA" };
    assert_denied(&error, command, "`invoice:1`");
    assert_clean(&server).await;
}

/// A semaphore kind run by a user with exactly its rules.
async fn semaphore_kind_works_with_its_rules(kind: Kind) {
    let (server, holder, other) = two_clients_of_a_user_with_the_rules_of(kind).await;
    let name = "order:pool";
    // Each branch holds the one permit, starts a waiter for it on the other client, and
    // returns the waiter and the release to wake it with.
    type Release = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), LockError>>>>;
    let (waiter, release): (tokio::task::JoinHandle<_>, Release) = match kind {
        Kind::Semaphore => {
            let semaphore = holder.semaphore(name).unwrap();
            assert!(semaphore.try_set_permits(1).await.unwrap());
            let permit = semaphore.acquire(1).await.expect("acquire");
            let contender = other.semaphore(name).unwrap();
            let waiter = tokio::spawn(async move {
                let permit = contender.acquire_timeout(1, Duration::from_secs(60)).await;
                (permit.map(drop), Instant::now())
            });
            (waiter, Box::pin(permit.release()))
        }
        _ => {
            let semaphore = holder.expirable_semaphore(name).unwrap();
            assert!(semaphore.try_set_permits(1).await.unwrap());
            // Lease-less: renewed while held.
            let permit = semaphore.acquire(1).await.expect("acquire");
            stays_held_through_two_leases(permit.lost(), &format!("{kind:?} permit")).await;
            assert_eq!(semaphore.available_permits().await.unwrap(), 0);
            let contender = other.expirable_semaphore(name).unwrap();
            let waiter = tokio::spawn(async move {
                let permit = contender.acquire_timeout(1, Duration::from_secs(60)).await;
                let permit = match permit {
                    Ok(permit) => permit.release().await,
                    Err(error) => Err(error),
                };
                (permit, Instant::now())
            });
            (waiter, Box::pin(permit.release()))
        }
    };
    server
        .wait_for_subscribers(&wake_channel(kind, name, ""), 1)
        .await;
    let released = Instant::now();
    release.await.expect("release");
    let (woken, at) = tokio::time::timeout(PROMPT, waiter)
        .await
        .unwrap_or_else(|_| panic!("{kind:?}: the release did not wake the waiter"))
        .unwrap();
    woken.expect("the waiter's permit");
    assert!(at - released < PROMPT);
    let error = match kind {
        Kind::Semaphore => {
            holder
                .semaphore("invoice:pool")
                .unwrap()
                .try_set_permits(1)
                .await
        }
        _ => {
            let semaphore = holder.expirable_semaphore("invoice:pool").unwrap();
            semaphore.try_set_permits(1).await
        }
    }
    .expect_err("a name outside the prefix");
    assert_denied(&error, "EVALSHA", "invoice:pool");
}

/// One test per kind, each running `$case(Kind::$kind)`.
macro_rules! per_kind {
    ($($test:ident => $case:ident($kind:ident);)*) => {
        $(
            #[tokio::test]
            async fn $test() {
                $case(Kind::$kind).await;
            }
        )*
    };
}

per_kind! {
    a_reentrant_lock_user_needs_only_its_rules => lock_kind_works_with_its_rules(Reentrant);
    a_fenced_lock_user_needs_only_its_rules => lock_kind_works_with_its_rules(Fenced);
    a_fast_lock_user_needs_only_its_rules => lock_kind_works_with_its_rules(Fast);
    a_fair_lock_user_needs_only_its_rules => lock_kind_works_with_its_rules(Fair);
    a_semaphore_user_needs_only_its_rules => semaphore_kind_works_with_its_rules(Semaphore);
    an_expirable_semaphore_user_needs_only_its_rules => semaphore_kind_works_with_its_rules(Expirable);
}

#[tokio::test]
async fn a_read_write_lock_user_needs_only_its_rules() {
    lock_kind_works_with_its_rules(Kind::ReadWrite).await;
    // Readers too: a read hold's timeout keys are `{order:..}:..:rwlock_timeout:n`.
    let server = RedisServer::start();
    create_user(&server, "rw", &rules(Kind::ReadWrite, "order:")).await;
    let client = connect_as(&server, "rw", SHORT_WATCHDOG).await;
    let doc = client.read_write_lock("order:doc").unwrap();
    let first = doc.read().acquire().await.expect("read");
    let second = doc
        .read()
        .acquire_with(AcquireOptions::new().owner(actix_distributed_lock::LockOwner::new()))
        .await
        .expect("a second reader");
    let either_lost = futures_util::future::select(Box::pin(first.lost()), Box::pin(second.lost()));
    stays_held_through_two_leases(either_lost, "read holds").await;
    assert!(doc.read().is_locked().await.unwrap(), "read holds renewed");
    first.unlock().await.unwrap();
    second.unlock().await.unwrap();
    assert_clean(&server).await;
}

/// `rules` of the reentrant lock with `change` applied.
fn reentrant_without(change: impl FnOnce(&mut Rules)) -> Rules {
    let mut rules = rules(Kind::Reentrant, "order:");
    change(&mut rules);
    rules
}

/// Without PUBLISH, the unlock that frees the lock is refused, naming PUBLISH and the
/// channel, and changes nothing.
#[tokio::test]
async fn without_publish_the_unlock_names_publish_and_the_channel() {
    let server = RedisServer::start();
    let rules = reentrant_without(|r| r.commands.retain(|c| *c != "publish"));
    create_user(&server, "nopublish", &rules).await;
    let client = connect_as(&server, "nopublish", SHORT_WATCHDOG).await;
    let guard = client.lock("order:1").unwrap().acquire().await.unwrap();
    let started = Instant::now();
    let error = guard.unlock().await.expect_err("the unlock cannot publish");
    assert!(started.elapsed() < PROMPT);
    assert_denied(&error, "PUBLISH", "redisson_lock__channel:{order:1}");
    let keys = server.keys().await;
    assert_eq!(
        keys,
        vec!["order:1".to_string()],
        "the hold is left as it was"
    );
}

/// Without the channel pattern, a waiter's SUBSCRIBE is refused: the waiter fails at once
/// naming SUBSCRIBE and the channel (it does not wait out its wait for a wake-up that
/// cannot come), and the unlock's PUBLISH is refused naming the channel.
#[tokio::test]
async fn without_the_channel_a_waiter_fails_at_once_naming_subscribe_and_the_channel() {
    let server = RedisServer::start();
    let rules = reentrant_without(|r| r.channels.clear());
    create_user(&server, "nochannel", &rules).await;
    let client = connect_as(&server, "nochannel", SHORT_WATCHDOG).await;
    let lock = client.lock("order:2").unwrap();
    let guard = lock
        .acquire_with(AcquireOptions::new().lease(LONG_LEASE))
        .await
        .unwrap();
    // Another process's waiter: a local one would wait behind the holder in its queue.
    let other = connect_as(&server, "nochannel", SHORT_WATCHDOG).await;
    let waiter = other.lock("order:2").unwrap();
    let started = Instant::now();
    let error = tokio::time::timeout(
        Duration::from_secs(60),
        waiter.acquire_timeout(Duration::from_secs(20)),
    )
    .await
    .expect("the waiter answers within its wait")
    .expect_err("the waiter cannot subscribe");
    let took = started.elapsed();
    assert_denied(&error, "SUBSCRIBE", "redisson_lock__channel:{order:2}");
    assert!(
        took < PROMPT,
        "failed at once, not after its wait: {took:?}"
    );
    let error = guard.unlock().await.expect_err("the unlock cannot publish");
    assert_denied(&error, "PUBLISH", "redisson_lock__channel:{order:2}");
}

/// Without the key pattern of the channel (scripts name the channel as a key, as
/// Redisson's do), the acquire works and the unlock is refused naming that key.
#[tokio::test]
async fn without_the_channel_key_the_unlock_names_the_key() {
    let server = RedisServer::start();
    let rules = reentrant_without(|r| r.keys.retain(|k| k == "order:*"));
    create_user(&server, "nochannelkey", &rules).await;
    let client = connect_as(&server, "nochannelkey", SHORT_WATCHDOG).await;
    let guard = client.lock("order:3").unwrap().acquire().await.unwrap();
    let error = guard
        .unlock()
        .await
        .expect_err("the channel key is refused");
    assert_denied(&error, "EVALSHA", "redisson_lock__channel:{order:3}");
    let text = error.to_string();
    assert!(
        !text.contains("`order:3`,"),
        "only the refused key is named: {text}"
    );
}

/// The error of acquiring lock `name` of `kind` as a user with `kind`'s rules changed by
/// `change`.
async fn refused_acquire(kind: Kind, change: impl FnOnce(&mut Rules), name: &str) -> LockError {
    let server = RedisServer::start();
    let mut rules = rules(kind, "order:");
    change(&mut rules);
    create_user(&server, "changed", &rules).await;
    let client = connect_as(&server, "changed", SHORT_WATCHDOG).await;
    lock_of(kind, &client, name)
        .acquire()
        .await
        .expect_err("the acquire is refused")
}

/// Without EVALSHA nothing can lock: the acquire is refused naming EVALSHA.
#[tokio::test]
async fn without_evalsha_the_acquire_names_evalsha() {
    let without = |r: &mut Rules| r.commands.retain(|c| *c != "evalsha");
    let error = refused_acquire(Kind::Reentrant, without, "order:4").await;
    assert_denied(&error, "EVALSHA", "");
}

/// A fair lock user without the queue's key pattern is refused naming the queue key.
#[tokio::test]
async fn without_the_fair_queue_key_the_acquire_names_it() {
    let without = |r: &mut Rules| r.keys.retain(|k| !k.starts_with("redisson_lock_queue:"));
    let error = refused_acquire(Kind::Fair, without, "order:5").await;
    assert_denied(&error, "EVALSHA", "key `redisson_lock_queue:{order:5}`");
}

/// The read-only inspecting user of docs/inspector.md: it lists, shows and watches every
/// kind, and a force-unlock is refused naming what it lacks, with nothing changed.
#[cfg(feature = "inspector")]
#[tokio::test]
async fn a_read_only_inspector_user_lists_shows_and_watches_but_cannot_force_unlock() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("inspector")
        .arg("reset")
        .arg("on")
        .arg(">pw")
        .arg("%R~*")
        .arg("&redisson_*")
        .arg("+scan")
        .arg("+type")
        .arg("+hgetall")
        .arg("+pttl")
        .arg("+get")
        .arg("+lrange")
        .arg("+zrange")
        .arg("+exists")
        .arg("+time")
        .arg("+subscribe")
        .arg("+unsubscribe")
        .query_async(&mut admin)
        .await
        .expect("ACL SETUSER");
    let owner = support::client(&server).await;
    let held = owner.lock("order:1").unwrap().acquire().await.unwrap();
    let reader = owner.read_write_lock("order:2").unwrap();
    let _read = reader.read().acquire().await.unwrap();
    let inspector = connect_as(&server, "inspector", SHORT_WATCHDOG).await;

    let locks = inspector.inspector().list(None).await.unwrap();
    let names: Vec<&str> = locks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["order:1", "order:2"]);
    let shown = inspector
        .inspector()
        .show("order:2")
        .await
        .unwrap()
        .unwrap();
    assert!(
        shown.holders[0].ttl_ms.is_some(),
        "a read hold's own lease: {shown:?}"
    );
    let mut watch = inspector.inspector().watch("order:1").unwrap();
    let first = tokio::time::timeout(PROMPT, watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        first.lock.unwrap().holders[0].client_id.as_deref(),
        Some(owner.id())
    );
    server
        .wait_for_subscribers("redisson_lock__channel:{order:1}", 1)
        .await;

    let refused = inspector
        .inspector()
        .force_unlock("order:1")
        .await
        .unwrap_err();
    assert!(refused.is_denied(), "{refused:?}");
    assert!(!held.is_lost());
    assert!(owner.lock("order:1").unwrap().is_locked().await.unwrap());
    drop(held);
}
