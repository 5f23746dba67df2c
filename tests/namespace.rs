//! Key namespaces (`ClientConfig::namespace`): two clients with different namespaces on
//! one Redis never share a lock of the same name, for every kind; each writes its keys
//! under its mapped name (`alpha:name`), with Redisson's derived keys and channels around
//! the mapped name, and leaves nothing behind. Waiters in one namespace are woken by
//! unlocks in that namespace.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{ClientConfig, Lock, LockClient, LockError};
use std::time::{Duration, Instant};
use support::{client, client_with, RedisServer};

/// Bound for what should happen at once (generous: CI is loaded).
const PROMPT: Duration = Duration::from_secs(5);

async fn namespaced(server: &RedisServer, namespace: &str) -> LockClient {
    let namespace = namespace.to_string();
    client_with(server, move |config| config.namespace(namespace)).await
}

/// The three clients of each test: namespaces `alpha` and `beta`, and none.
async fn three_clients(server: &RedisServer) -> [LockClient; 3] {
    [
        namespaced(server, "alpha").await,
        namespaced(server, "beta").await,
        client(server).await,
    ]
}

/// Every lock kind, by how a client makes its handle for `name`.
type MakeLock = fn(&LockClient, &str) -> Result<Lock, LockError>;

const KINDS: [(&str, MakeLock); 6] = [
    ("reentrant", |c, n| c.lock(n)),
    ("fair", |c, n| c.fair_lock(n)),
    ("fenced", |c, n| c.fenced_lock(n)),
    ("fast", |c, n| c.fast_lock(n)),
    ("read", |c, n| Ok(c.read_write_lock(n)?.read().clone())),
    ("write", |c, n| Ok(c.read_write_lock(n)?.write().clone())),
];

/// After the unlocks of `kind`, only fencing token counters (which never expire) remain.
async fn assert_only_fencing_counters_left(server: &RedisServer, kind: &str) {
    let left: Vec<String> = server
        .keys()
        .await
        .into_iter()
        .filter(|k| !k.starts_with("redisson_lock_token:"))
        .collect();
    assert!(left.is_empty(), "{kind}: left behind {left:?}");
}

/// For every kind: the same name is free to all three clients at once, each holds it
/// under its own key, and everything but the fencing counters is gone after the unlocks.
#[tokio::test]
async fn three_namespaces_hold_the_same_name_at_once_for_every_kind() {
    let server = RedisServer::start();
    let clients = three_clients(&server).await;
    for (kind, make) in KINDS {
        let name = format!("{kind}:{{job}}:1");
        let mut guards = Vec::new();
        for client in &clients {
            let lock = make(client, &name).unwrap();
            assert_eq!(lock.name(), name, "{kind}: name() is the caller's name");
            let guard = lock
                .try_acquire()
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{kind}: {} found the lock busy", lock.key()));
            guards.push(guard);
        }
        assert_eq!(guards[0].key(), format!("alpha:{name}"), "{kind}");
        assert_eq!(guards[1].key(), format!("beta:{name}"), "{kind}");
        assert_eq!(guards[2].key(), name, "{kind}");
        let keys = server.keys().await;
        for key in [
            format!("alpha:{name}"),
            format!("beta:{name}"),
            name.clone(),
        ] {
            assert!(keys.contains(&key), "{kind}: {key} missing in {keys:?}");
        }
        if kind == "fenced" {
            for mapped in [
                format!("alpha:{name}"),
                format!("beta:{name}"),
                name.clone(),
            ] {
                let counter = format!("redisson_lock_token:{mapped}");
                assert!(keys.contains(&counter), "{counter} missing in {keys:?}");
            }
            // Three independent counters: every namespace's first token.
            let tokens: Vec<_> = guards.iter().map(|g| g.fencing_token()).collect();
            assert_eq!(tokens, vec![Some(1); 3], "{kind}");
        }
        if kind == "read" {
            // Each read hold's timeout key sits under the mapped name (Redisson's
            // `{name}:<field>:rwlock_timeout:n`, where `name` has braces of its own).
            for ns in ["alpha:", "beta:"] {
                let prefix = format!("{ns}{name}:");
                assert!(
                    keys.iter()
                        .any(|k| k.starts_with(&prefix) && k.contains(":rwlock_timeout:")),
                    "{kind}: no timeout key under {prefix} in {keys:?}"
                );
            }
        }
        for guard in guards {
            guard.unlock().await.unwrap();
        }
        assert_only_fencing_counters_left(&server, kind).await;
    }
}

/// A waiter is woken by an unlock in its own namespace (the channel is mapped the same way
/// by both clients of that namespace), and never by one in another namespace. The lease is
/// long (30 s watchdog), so a wake-up within `PROMPT` can only come from the channel.
#[tokio::test]
async fn waiters_are_woken_within_their_namespace_for_every_kind() {
    let server = RedisServer::start();
    let [alpha, beta, plain] = three_clients(&server).await;
    let alpha2 = namespaced(&server, "alpha").await;
    for (kind, make) in KINDS {
        // Two readers share a lock; a writer is the contender for a read hold.
        let contender: MakeLock = if kind == "read" {
            |c, n| Ok(c.read_write_lock(n)?.write().clone())
        } else {
            make
        };
        let name = format!("wake:{kind}");
        let holder = make(&alpha, &name).unwrap().acquire().await.unwrap();
        let waiter_lock = contender(&alpha2, &name).unwrap();
        let waiter = tokio::spawn(async move {
            waiter_lock
                .acquire_timeout(Duration::from_secs(60))
                .await
                .map(|guard| (guard, Instant::now()))
        });
        // The waiter is parked on alpha's channel: wait until it subscribed.
        let channel = match kind {
            "read" | "write" => format!("redisson_rwlock:{{alpha:{name}}}"),
            "fair" => String::new(),
            _ => format!("redisson_lock__channel:{{alpha:{name}}}"),
        };
        if channel.is_empty() {
            // A fair waiter waits on its own channel and in alpha's queue.
            support::eventually("the fair waiter queued", PROMPT, || async {
                server
                    .keys()
                    .await
                    .contains(&format!("redisson_lock_queue:{{alpha:{name}}}"))
            })
            .await;
        } else {
            server.wait_for_subscribers(&channel, 1).await;
        }
        // Other namespaces take and free the same name meanwhile: alpha's waiter sleeps on.
        for other in [&beta, &plain] {
            let guard = make(other, &name).unwrap().try_acquire().await.unwrap();
            let guard = guard.unwrap_or_else(|| panic!("{kind}: busy across namespaces"));
            guard.unlock().await.unwrap();
        }
        assert!(!waiter.is_finished(), "{kind}: woken by another namespace");
        let released = Instant::now();
        holder.unlock().await.unwrap();
        let (guard, woken) = tokio::time::timeout(PROMPT, waiter)
            .await
            .unwrap_or_else(|_| panic!("{kind}: the waiter was not woken by alpha's unlock"))
            .unwrap()
            .unwrap();
        assert!(woken - released < PROMPT, "{kind}");
        assert_eq!(guard.key(), format!("alpha:{name}"));
        guard.unlock().await.unwrap();
        assert_only_fencing_counters_left(&server, kind).await;
    }
}

/// Semaphores of both kinds: one permit each in two namespaces and none, all taken at
/// once; the counts, the permit zset and the channel are under the mapped names.
#[tokio::test]
async fn semaphores_of_different_namespaces_are_different_semaphores() {
    let server = RedisServer::start();
    let clients = three_clients(&server).await;
    let mut permits = Vec::new();
    let mut expirable = Vec::new();
    for client in &clients {
        let semaphore = client.semaphore("pool").unwrap();
        assert!(semaphore.try_set_permits(1).await.unwrap());
        assert_eq!(semaphore.name(), "pool");
        let guard = semaphore.try_acquire(1).await.unwrap();
        permits.push(guard.expect("the plain semaphore has a permit in every namespace"));
        let semaphore = client.expirable_semaphore("slots").unwrap();
        assert!(semaphore.try_set_permits(1).await.unwrap());
        let guard = semaphore.try_acquire(1).await.unwrap();
        expirable.push(guard.expect("the expirable semaphore has a permit in every namespace"));
    }
    let keys = server.keys().await;
    for key in [
        "alpha:pool",
        "beta:pool",
        "pool",
        "alpha:slots",
        "beta:slots",
        "slots",
        "{alpha:slots}:timeout",
        "{beta:slots}:timeout",
        "{slots}:timeout",
    ] {
        assert!(keys.contains(&key.to_string()), "{key} missing in {keys:?}");
    }
    // A release in alpha publishes on alpha's channel only.
    let mut admin = server.conn().await;
    for (guard, namespace) in permits.into_iter().zip(["alpha:", "beta:", ""]) {
        let channel = format!("redisson_sc:{{{namespace}pool}}");
        let mut pubsub = server.client().get_async_pubsub().await.unwrap();
        pubsub.subscribe(&channel).await.unwrap();
        guard.release().await.unwrap();
        let mut messages = pubsub.on_message();
        let message = tokio::time::timeout(PROMPT, futures_util::StreamExt::next(&mut messages))
            .await
            .unwrap_or_else(|_| panic!("no release message on {channel}"));
        assert!(message.is_some(), "{channel}");
    }
    for guard in expirable {
        guard.release().await.unwrap();
    }
    let counts: Vec<Option<i64>> = redis::cmd("MGET")
        .arg(&["alpha:pool", "beta:pool", "pool"])
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(counts, vec![Some(1); 3]);
}

/// A namespace is checked when the client starts: the rules of a name, plus no braces
/// and no trailing separator.
#[tokio::test]
async fn a_bad_namespace_is_refused_at_connect() {
    for bad in ["", "a\nb", "{billing}", "billing:", &"n".repeat(101)] {
        let config = ClientConfig::new("redis://127.0.0.1:1/").namespace(bad);
        let error = LockClient::connect(config)
            .await
            .expect_err("a bad namespace is refused");
        assert!(
            matches!(&error, LockError::InvalidConfig { reason } if reason.contains("namespace")),
            "{bad:?}: {error:?}"
        );
    }
}

/// Errors name the lock as the caller gave it, not its mapped key.
#[tokio::test]
async fn errors_name_the_lock_without_the_namespace() {
    let server = RedisServer::start();
    let alpha = namespaced(&server, "alpha").await;
    let alpha2 = namespaced(&server, "alpha").await;
    let guard = alpha.lock("order:9").unwrap().acquire().await.unwrap();
    let error = alpha2
        .lock("order:9")
        .unwrap()
        .acquire_timeout(Duration::from_millis(50))
        .await
        .expect_err("busy");
    assert_eq!(
        error,
        LockError::Timeout {
            name: "order:9".into(),
            waited: match &error {
                LockError::Timeout { waited, .. } => *waited,
                other => panic!("{other:?}"),
            },
            by_this_client: false,
        }
    );
    guard.unlock().await.unwrap();
}
