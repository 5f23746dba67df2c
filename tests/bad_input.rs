//! Bad input gets a clear error, never a panic, and leaves Redis exactly as it was.
//!
//! "Unchanged" is checked byte for byte: [`snapshot`] takes every key's type, `DUMP`
//! (serialized value) and whether it has an expiry, before and after the bad call. After the
//! bad input, each test also proves the client still works, so nothing in its actor system
//! died on the way.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::{Acquire, GetState, Release, Renew};
use actix_distributed_lock::{
    AcquireOptions, ClientConfig, LockClient, LockError, LockOwner, Released,
};
use std::time::Duration;
use support::client;
use support::RedisServer;

/// Bound for anything that should answer in milliseconds.
const PROMPT: Duration = Duration::from_secs(5);

/// One key as Redis has it: name, type, serialized value, and whether it expires.
#[derive(Debug, PartialEq, Eq)]
struct KeyImage {
    key: String,
    kind: String,
    dump: Vec<u8>,
    expires: bool,
}

/// Every key in the server, sorted, with its exact value.
async fn snapshot(server: &RedisServer) -> Vec<KeyImage> {
    let mut conn = server.conn().await;
    let mut images = Vec::new();
    for key in server.keys().await {
        let (kind, dump, pttl): (String, Vec<u8>, i64) = redis::pipe()
            .cmd("TYPE")
            .arg(&key)
            .cmd("DUMP")
            .arg(&key)
            .cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("TYPE/DUMP/PTTL");
        images.push(KeyImage {
            key,
            kind,
            dump,
            expires: pttl >= 0,
        });
    }
    images
}

/// Plants data that is not ours (a string and a held lock of someone else), so "nothing
/// written" is checked against a non-empty database.
async fn plant_bystanders(server: &RedisServer) {
    let mut conn = server.conn().await;
    let () = redis::pipe()
        .cmd("SET")
        .arg("bystander:string")
        .arg("keep me")
        .ignore()
        .cmd("HSET")
        .arg("bystander:lock")
        .arg("0b7f3f0e-java-uuid:1")
        .arg(1)
        .ignore()
        .cmd("PEXPIRE")
        .arg("bystander:lock")
        .arg(600_000)
        .ignore()
        .query_async(&mut conn)
        .await
        .expect("plant bystanders");
}

async fn calls_of_writes(server: &RedisServer) -> u64 {
    let mut total = 0;
    for cmd in [
        "eval", "evalsha", "hincrby", "hset", "set", "del", "pexpire", "publish",
    ] {
        total += server.command_calls(cmd).await;
    }
    total
}

/// The client is still alive: a normal lock can be taken and released on it.
async fn assert_client_still_works(client: &LockClient) {
    let lock = client.lock("health:check").expect("a good name");
    let guard = tokio::time::timeout(PROMPT, lock.acquire_timeout(PROMPT))
        .await
        .expect("acquire answers promptly")
        .expect("a free lock is granted");
    assert_eq!(
        tokio::time::timeout(PROMPT, guard.unlock())
            .await
            .expect("unlock answers promptly")
            .expect("unlock succeeds"),
        Released::Unlocked
    );
}

fn expect_invalid_name<T: std::fmt::Debug>(result: Result<T, LockError>, what: &str) -> String {
    match result {
        Err(error @ LockError::InvalidName { .. }) => error.to_string(),
        other => panic!("{what}: expected InvalidName, got {other:?}"),
    }
}

fn expect_invalid_config<T: std::fmt::Debug>(result: Result<T, LockError>, what: &str) -> String {
    match result {
        Err(error @ LockError::InvalidConfig { .. }) => error.to_string(),
        other => panic!("{what}: expected InvalidConfig, got {other:?}"),
    }
}

fn expect_wrong_type<T: std::fmt::Debug>(
    result: Result<T, LockError>,
    name: &str,
    what: &str,
) -> String {
    match result {
        Err(ref error @ LockError::WrongType { name: ref n }) => {
            assert_eq!(n, name, "{what}: WrongType names the key");
            error.to_string()
        }
        other => panic!("{what}: expected WrongType, got {other:?}"),
    }
}

fn expect_not_owner<T: std::fmt::Debug>(
    result: Result<T, LockError>,
    name: &str,
    what: &str,
) -> String {
    match result {
        Err(ref error @ LockError::NotOwner { name: ref n }) => {
            assert_eq!(n, name, "{what}: NotOwner names the lock");
            error.to_string()
        }
        other => panic!("{what}: expected NotOwner, got {other:?}"),
    }
}

#[tokio::test]
async fn empty_name_is_invalid_name() {
    let server = RedisServer::start();
    plant_bystanders(&server).await;
    let client = client(&server).await;
    let before = snapshot(&server).await;
    server.reset_stats().await;

    let text = expect_invalid_name(client.lock(""), "client.lock(\"\")");
    assert!(text.contains("empty"), "says the name is empty: {text}");
    let text = expect_invalid_name(client.lock_actor(""), "client.lock_actor(\"\")");
    assert!(text.contains("empty"), "says the name is empty: {text}");

    assert_eq!(calls_of_writes(&server).await, 0, "nothing sent to Redis");
    assert_eq!(snapshot(&server).await, before);
    assert_client_still_works(&client).await;
}

#[tokio::test]
async fn one_mebibyte_name_is_invalid_name_and_writes_nothing() {
    let server = RedisServer::start();
    plant_bystanders(&server).await;
    let client = client(&server).await;
    let before = snapshot(&server).await;
    server.reset_stats().await;

    let huge = "n".repeat(1 << 20);
    let text = expect_invalid_name(client.lock(&huge), "client.lock(1 MiB)");
    assert!(
        text.contains("1048576") && text.contains("4096"),
        "says how long the name is and what the limit is: {text}"
    );
    assert!(
        text.len() < 512,
        "the message must not echo a 1 MiB name ({} bytes)",
        text.len()
    );
    expect_invalid_name(client.lock_actor(&huge), "client.lock_actor(1 MiB)");
    // One byte over the limit is refused too; the limit itself is fine.
    expect_invalid_name(client.lock(&"n".repeat(4097)), "client.lock(4097 bytes)");
    assert!(client.lock(&"n".repeat(4096)).is_ok());

    assert_eq!(calls_of_writes(&server).await, 0, "nothing sent to Redis");
    assert_eq!(snapshot(&server).await, before);
    assert_eq!(client.active_locks(), 0, "no actor was started for it");
    assert_client_still_works(&client).await;
}

#[tokio::test]
async fn names_with_control_characters_are_invalid_name() {
    let server = RedisServer::start();
    plant_bystanders(&server).await;
    let client = client(&server).await;
    let before = snapshot(&server).await;
    server.reset_stats().await;

    for name in [
        "a\nb",
        "a\0b",
        "\tlead",
        "trail\r",
        "bell\u{7}",
        "del\u{7f}",
    ] {
        let text = expect_invalid_name(client.lock(name), &format!("client.lock({name:?})"));
        assert!(
            text.contains("control character"),
            "says what is wrong: {text}"
        );
        expect_invalid_name(
            client.lock_actor(name),
            &format!("client.lock_actor({name:?})"),
        );
    }

    assert_eq!(calls_of_writes(&server).await, 0, "nothing sent to Redis");
    assert_eq!(snapshot(&server).await, before);
    assert_client_still_works(&client).await;
}

#[tokio::test]
async fn zero_and_sub_millisecond_leases_are_invalid_config() {
    let server = RedisServer::start();
    plant_bystanders(&server).await;
    let client = client(&server).await;
    let before = snapshot(&server).await;
    server.reset_stats().await;

    let name = "lease:bad";
    let lock = client.lock(name).unwrap();
    // Held for the whole test, so the lock actor stays the same one throughout.
    let actor = client.lock_actor(name).unwrap();
    for lease in [
        Duration::ZERO,
        Duration::from_micros(500),
        Duration::from_nanos(1),
    ] {
        let options = AcquireOptions::new().lease(lease);
        let text = expect_invalid_config(
            tokio::time::timeout(PROMPT, lock.acquire_with(options))
                .await
                .expect("answers at once"),
            &format!("acquire_with(lease {lease:?})"),
        );
        assert!(text.contains("lease"), "names the bad setting: {text}");

        let owner = LockOwner::new();
        let reply = actor
            .send(Acquire {
                owner,
                lease: Some(lease),
                wait: Duration::from_secs(1),
            })
            .await
            .expect("the actor answers");
        expect_invalid_config(reply, &format!("Acquire {{ lease: {lease:?} }}"));
        let reply = actor
            .send(Renew { owner, lease })
            .await
            .expect("the actor answers");
        expect_invalid_config(reply, &format!("Renew {{ lease: {lease:?} }}"));
    }
    assert_eq!(calls_of_writes(&server).await, 0, "nothing sent to Redis");
    assert_eq!(snapshot(&server).await, before);

    // The smallest lease Redis can express is accepted; it runs out on its own.
    let guard = lock
        .acquire_with(
            AcquireOptions::new()
                .lease(Duration::from_millis(1))
                .wait(PROMPT),
        )
        .await
        .expect("a 1 ms lease is valid");
    tokio::time::timeout(PROMPT, guard.lost())
        .await
        .expect("a 1 ms lease runs out");
    drop(guard);
    // lost() fires when the lease may have run out, counted from when the acquire was sent;
    // Redis counts from when it ran the script, so the key may outlive it by a round trip.
    support::eventually("the 1 ms lock expires in Redis", PROMPT, || async {
        snapshot(&server).await == before
    })
    .await;
    assert_client_still_works(&client).await;
}

#[tokio::test]
async fn key_holding_a_string_is_wrong_type_and_untouched() {
    let server = RedisServer::start();
    plant_bystanders(&server).await;
    let client = client(&server).await;
    let name = "feature:flags";
    let mut conn = server.conn().await;
    let () = redis::cmd("SET")
        .arg(name)
        .arg("dark-mode=on")
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = snapshot(&server).await;

    let lock = client.lock(name).unwrap();
    let actor = client.lock_actor(name).unwrap();
    // The default wait is 30 s: a wrong type must fail at once, not after the wait.
    let result = tokio::time::timeout(PROMPT, lock.acquire())
        .await
        .expect("WrongType is reported at once");
    let text = expect_wrong_type(result, name, "acquire");
    assert!(
        text.contains(name) && text.contains("untouched"),
        "says which key and that it was left alone: {text}"
    );
    let result = tokio::time::timeout(PROMPT, lock.try_acquire())
        .await
        .expect("answers at once");
    expect_wrong_type(result, name, "try_acquire");
    let result = tokio::time::timeout(
        PROMPT,
        lock.acquire_with(AcquireOptions::new().lease(Duration::from_secs(5))),
    )
    .await
    .expect("answers at once");
    expect_wrong_type(result, name, "acquire_with(fixed lease)");
    let reply = actor
        .send(Acquire {
            owner: LockOwner::new(),
            lease: None,
            wait: Duration::from_secs(10),
        })
        .await
        .expect("the actor answers");
    expect_wrong_type(reply, name, "Acquire message");

    expect_wrong_type(lock.is_locked().await, name, "is_locked");
    expect_wrong_type(lock.remaining_ttl().await, name, "remaining_ttl");
    expect_wrong_type(lock.hold_count(LockOwner::new()).await, name, "hold_count");
    expect_wrong_type(lock.force_unlock().await, name, "force_unlock");
    let reply = actor
        .send(GetState {
            owner: Some(LockOwner::new()),
        })
        .await
        .expect("the actor answers");
    expect_wrong_type(reply, name, "GetState message");

    let value: String = redis::cmd("GET")
        .arg(name)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "dark-mode=on");
    let ttl: i64 = redis::cmd("TTL")
        .arg(name)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(ttl, -1, "no expiry was put on the string");
    assert_eq!(snapshot(&server).await, before);
    assert_client_still_works(&client).await;
}

#[tokio::test]
async fn key_holding_a_list_is_wrong_type_and_untouched() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "jobs:queue";
    let mut conn = server.conn().await;
    let () = redis::cmd("RPUSH")
        .arg(name)
        .arg("job-1")
        .arg("job-2")
        .query_async(&mut conn)
        .await
        .map(|_: i64| ())
        .unwrap();
    let before = snapshot(&server).await;

    let lock = client.lock(name).unwrap();
    let result = tokio::time::timeout(PROMPT, lock.acquire())
        .await
        .expect("answers at once");
    expect_wrong_type(result, name, "acquire");
    expect_wrong_type(lock.is_locked().await, name, "is_locked");
    expect_wrong_type(lock.force_unlock().await, name, "force_unlock");

    assert_eq!(snapshot(&server).await, before);
    assert_client_still_works(&client).await;
}

#[tokio::test]
async fn double_release_through_actor_messages_is_not_owner() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "report:weekly";
    let actor = client.lock_actor(name).unwrap();
    let owner = LockOwner::new();

    let guard = actor
        .send(Acquire {
            owner,
            lease: None,
            wait: Duration::from_secs(1),
        })
        .await
        .expect("the actor answers")
        .expect("a free lock is granted");

    let first = actor
        .send(Release { owner })
        .await
        .expect("the actor answers");
    assert_eq!(first, Ok(Released::Unlocked));
    assert!(server.keys().await.is_empty(), "the first release freed it");

    // Someone else takes the lock: the second release must not touch their hold.
    let other = client
        .lock(name)
        .unwrap()
        .acquire_with(AcquireOptions::new().wait(PROMPT))
        .await
        .unwrap();
    let before = snapshot(&server).await;

    let second = actor
        .send(Release { owner })
        .await
        .expect("the actor answers");
    let text = expect_not_owner(second, name, "second Release");
    assert!(text.contains(name), "names the lock: {text}");
    assert_eq!(snapshot(&server).await, before);

    // The guard of the already-released hold does nothing when dropped. The GetState
    // after it is handled after the drop's message, so the check below sees its effect.
    drop(guard);
    let state = actor
        .send(GetState {
            owner: Some(other.owner()),
        })
        .await
        .expect("the actor answers")
        .unwrap();
    assert!(state.locked);
    assert_eq!(state.hold_count, 1);
    assert_eq!(snapshot(&server).await, before);

    assert_eq!(other.unlock().await.unwrap(), Released::Unlocked);
    assert!(server.keys().await.is_empty());
    assert_client_still_works(&client).await;
}

#[tokio::test]
async fn unlock_after_our_own_force_unlock_is_not_owner() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "import:csv";
    let lock = client.lock(name).unwrap();

    let guard = lock.acquire().await.unwrap();
    assert!(lock.force_unlock().await.unwrap(), "it was held");
    tokio::time::timeout(PROMPT, guard.lost())
        .await
        .expect("the holder is told its lock is gone");
    assert!(server.keys().await.is_empty());

    let other = lock
        .acquire_with(AcquireOptions::new().wait(PROMPT))
        .await
        .unwrap();
    let before = snapshot(&server).await;

    let text = expect_not_owner(guard.unlock().await, name, "unlock after force_unlock");
    assert!(text.contains(name), "names the lock: {text}");
    assert_eq!(
        snapshot(&server).await,
        before,
        "the new holder's lock is intact"
    );

    assert_eq!(other.unlock().await.unwrap(), Released::Unlocked);
    assert!(server.keys().await.is_empty());
    assert_client_still_works(&client).await;
}

#[tokio::test]
async fn unlock_after_force_unlock_by_another_process_is_not_owner() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let admin = support::client(&server).await;
    let name = "export:pdf";

    let guard = client.lock(name).unwrap().acquire().await.unwrap();
    // Another process force-unlocks it (our actor does not hear of it), then a third party
    // (a Redisson service) takes the lock.
    assert!(admin.lock(name).unwrap().force_unlock().await.unwrap());
    let mut conn = server.conn().await;
    let () = redis::pipe()
        .cmd("HSET")
        .arg(name)
        .arg("5c1e2f0a-java-uuid:42")
        .arg(1)
        .ignore()
        .cmd("PEXPIRE")
        .arg(name)
        .arg(30_000)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = snapshot(&server).await;

    let text = expect_not_owner(
        guard.unlock().await,
        name,
        "unlock after a foreign force-unlock",
    );
    assert!(text.contains(name), "names the lock: {text}");
    assert_eq!(
        snapshot(&server).await,
        before,
        "the Java holder's lock is intact"
    );

    let () = redis::cmd("DEL")
        .arg(name)
        .query_async(&mut conn)
        .await
        .map(|_: i64| ())
        .unwrap();
    assert_client_still_works(&client).await;
    assert!(server.keys().await.is_empty());
}

#[tokio::test]
async fn invalid_client_configs_are_invalid_config() {
    let server = RedisServer::start();
    let url = server.url();

    async fn connect(config: ClientConfig) -> Result<LockClient, LockError> {
        tokio::time::timeout(PROMPT, LockClient::connect(config))
            .await
            .expect("connect answers promptly")
    }

    let text = expect_invalid_config(
        connect(ClientConfig::new(&url).watchdog_timeout(Duration::ZERO)).await,
        "watchdog_timeout 0",
    );
    assert!(
        text.contains("watchdog_timeout"),
        "names the setting: {text}"
    );
    expect_invalid_config(
        connect(ClientConfig::new(&url).watchdog_timeout(Duration::from_micros(500))).await,
        "watchdog_timeout 500 µs",
    );

    let text = expect_invalid_config(
        connect(ClientConfig::new(&url).renew_every(Duration::from_secs(30))).await,
        "renew interval == watchdog timeout",
    );
    assert!(text.contains("renew interval"), "names the setting: {text}");
    expect_invalid_config(
        connect(
            ClientConfig::new(&url)
                .watchdog_timeout(Duration::from_secs(5))
                .renew_every(Duration::from_secs(6)),
        )
        .await,
        "renew interval > watchdog timeout",
    );
    expect_invalid_config(
        connect(ClientConfig::new(&url).renew_every(Duration::ZERO)).await,
        "renew interval 0",
    );

    let text = expect_invalid_config(connect(ClientConfig::new("not a url")).await, "not a url");
    assert!(text.contains("URL"), "says the URL is the problem: {text}");
    expect_invalid_config(connect(ClientConfig::new("")).await, "empty URL");

    // The usual first mistakes: another scheme, or an address without one. The message
    // says what is wrong and which forms are accepted.
    let text = expect_invalid_config(connect(ClientConfig::new("http://x")).await, "http URL");
    assert!(
        text.contains("http:// is not a Redis scheme") && text.contains("accepted: redis://"),
        "{text}"
    );
    assert!(
        text.contains("`tls` feature"),
        "says rediss:// needs tls: {text}"
    );
    let text = expect_invalid_config(
        connect(ClientConfig::new("127.0.0.1:6379")).await,
        "address without a scheme",
    );
    assert!(
        text.contains("no scheme (write redis://host:port/)"),
        "{text}"
    );

    // A malformed URL with a password: refused, and the password is not in the message.
    let text = expect_invalid_config(
        connect(ClientConfig::new("redis://app:hunter2@127.0.0.1:notaport/")).await,
        "malformed URL with a password",
    );
    assert!(!text.contains("hunter2"), "password leaked: {text}");

    // A good config on the same server still works.
    let client = connect(ClientConfig::new(&url)).await.unwrap();
    assert_client_still_works(&client).await;
    assert!(server.keys().await.is_empty());
}

/// `LockError`'s contract: "Every variant names the lock (or the node) it is about, so a
/// log line is enough to act on." Checked here for the bad inputs that concern a known lock.
#[tokio::test]
async fn input_errors_name_the_lock_they_are_about() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut problems = Vec::new();

    // A refused lease on lock `lease:named`.
    let name = "lease:named";
    let actor = client.lock_actor(name).unwrap();
    let result = client
        .lock(name)
        .unwrap()
        .acquire_with(AcquireOptions::new().lease(Duration::ZERO))
        .await;
    let text = expect_invalid_config(result, "zero lease");
    if !text.contains(name) {
        problems.push(format!("zero lease on `{name}`: {text:?}"));
    }
    let reply = actor
        .send(Renew {
            owner: LockOwner::new(),
            lease: Duration::ZERO,
        })
        .await
        .expect("the actor answers");
    let text = expect_invalid_config(reply, "Renew zero lease");
    if !text.contains(name) {
        problems.push(format!("Renew with zero lease on `{name}`: {text:?}"));
    }

    // A name refused for a control character: shown escaped, so the caller can find it.
    let text = expect_invalid_name(client.lock("order\n42"), "control character");
    if !text.contains(r"order\n42") {
        problems.push(format!("control character in `order\\n42`: {text:?}"));
    }

    // The variants that do carry the name.
    let timeout = LockError::timeout("t:1", Duration::from_secs(1));
    for (error, name) in [
        (timeout, "t:1"),
        (LockError::NotOwner { name: "n:1".into() }, "n:1"),
        (LockError::Lost { name: "l:1".into() }, "l:1"),
        (LockError::WrongType { name: "w:1".into() }, "w:1"),
    ] {
        assert!(error.to_string().contains(name), "{error}");
    }

    assert_client_still_works(&client).await;
    assert!(server.keys().await.is_empty());
    assert!(
        problems.is_empty(),
        "errors that do not name their lock:\n{}",
        problems.join("\n")
    );
}

/// A lease Redis cannot express (PEXPIRE refuses `now + lease` past `i64::MAX` ms) must be
/// refused before anything is written. Otherwise the acquire script has already run
/// HINCRBY when PEXPIRE fails, scripts do not roll back, and a hold with no expiry is left
/// behind that no guard will ever release.
#[tokio::test]
async fn absurdly_long_lease_is_invalid_config_and_leaves_no_lock() {
    let server = RedisServer::start();
    plant_bystanders(&server).await;
    let client = client(&server).await;
    let before = snapshot(&server).await;
    let name = "lease:forever";
    let lock = client.lock(name).unwrap();
    let actor = client.lock_actor(name).unwrap();
    let mut problems = Vec::new();

    for lease in [
        Duration::from_millis(i64::MAX as u64),
        Duration::from_millis(u64::MAX),
    ] {
        let result = tokio::time::timeout(
            PROMPT,
            lock.acquire_with(AcquireOptions::new().lease(lease).wait(Duration::ZERO)),
        )
        .await
        .expect("answers at once");
        match result {
            Err(LockError::InvalidConfig { .. }) => {}
            other => problems.push(format!("acquire with lease {lease:?}: {other:?}")),
        }
        let after = snapshot(&server).await;
        if after != before {
            let left: Vec<_> = after.iter().filter(|k| !before.contains(k)).collect();
            problems.push(format!("lease {lease:?} left behind: {left:?}"));
            // Clear it so the next case starts from the same state.
            let mut conn = server.conn().await;
            let _: i64 = redis::cmd("DEL")
                .arg(name)
                .query_async(&mut conn)
                .await
                .unwrap();
        }

        let reply = actor
            .send(Renew {
                owner: LockOwner::new(),
                lease,
            })
            .await
            .expect("the actor answers");
        match reply {
            Err(LockError::InvalidConfig { .. }) => {}
            other => problems.push(format!("Renew with lease {lease:?}: {other:?}")),
        }
    }

    assert_eq!(snapshot(&server).await, before);
    assert_client_still_works(&client).await;
    assert!(
        problems.is_empty(),
        "absurd leases were not refused up front:\n{}",
        problems.join("\n")
    );
}

/// The same for the watchdog lease: a client whose every acquire would leave a permanent
/// lock must not start.
#[tokio::test]
async fn absurdly_long_watchdog_timeout_is_invalid_config() {
    let server = RedisServer::start();
    let config =
        ClientConfig::new(server.url()).watchdog_timeout(Duration::from_millis(i64::MAX as u64));
    let result = tokio::time::timeout(PROMPT, LockClient::connect(config))
        .await
        .expect("connect answers promptly");
    let client = match result {
        Err(LockError::InvalidConfig { .. }) => return,
        Err(other) => panic!("expected InvalidConfig, got {other:?}"),
        Ok(client) => client,
    };
    // It started: show what an ordinary acquire then does to Redis.
    let outcome = tokio::time::timeout(PROMPT, client.lock("job:any").unwrap().try_acquire())
        .await
        .expect("answers at once");
    let mut conn = server.conn().await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg("job:any")
        .query_async(&mut conn)
        .await
        .unwrap();
    panic!(
        "a watchdog_timeout of i64::MAX ms was accepted; try_acquire then gave {outcome:?} \
         and left keys {:?} (PTTL of job:any: {pttl})",
        server.keys().await
    );
}

/// A wait too long to add to `Instant::now()` (here `Duration::MAX`) must be refused or
/// treated as "very long", never panic the lock actor. The panic takes the actor down with
/// the state of every other holder and waiter of that lock name.
#[tokio::test]
async fn unbounded_wait_neither_panics_nor_hurts_the_current_holder() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut problems = Vec::new();

    for (case, wait) in [Duration::MAX, Duration::from_secs(u64::MAX / 2)]
        .into_iter()
        .enumerate()
    {
        let name = format!("queue:drain:{case}");
        let lock = client.lock(&name).unwrap();
        let holder = lock.acquire().await.unwrap();

        // Either the request is refused at once, or it parks like any waiter (it is still
        // waiting a moment later): both are fine.
        let acquiring = lock.acquire_timeout(wait);
        let outcome = tokio::select! {
            result = acquiring => Some(result),
            () = tokio::time::sleep(Duration::from_millis(300)) => None,
        };
        match outcome {
            None | Some(Err(LockError::InvalidConfig { .. })) => {}
            Some(other) => problems.push(format!("acquire_timeout({wait:?}): {other:?}")),
        }

        if holder.is_lost() {
            problems.push(format!(
                "{wait:?}: the current holder's guard was reported lost"
            ));
        }
        match tokio::time::timeout(PROMPT, holder.unlock()).await {
            Ok(Ok(Released::Unlocked)) => {}
            other => problems.push(format!("{wait:?}: the holder's unlock gave {other:?}")),
        }
        let after = server.keys().await;
        if !after.is_empty() {
            problems.push(format!(
                "{wait:?}: left in Redis after the holder's unlock: {after:?}"
            ));
            let mut conn = server.conn().await;
            let _: i64 = redis::cmd("DEL")
                .arg(&name)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    }

    assert_client_still_works(&client).await;
    assert!(
        problems.is_empty(),
        "an unbounded wait broke the lock actor:\n{}",
        problems.join("\n")
    );
}

/// `ClientConfig::default_wait(Duration::MAX)`: refused at connect, or acquire works.
#[tokio::test]
async fn unbounded_default_wait_is_refused_or_harmless() {
    let server = RedisServer::start();
    let config = ClientConfig::new(server.url()).default_wait(Duration::MAX);
    let result = tokio::time::timeout(PROMPT, LockClient::connect(config))
        .await
        .expect("connect answers promptly");
    let client = match result {
        Err(LockError::InvalidConfig { .. }) => return,
        Err(other) => panic!("expected InvalidConfig or a working client, got {other:?}"),
        Ok(client) => client,
    };
    let outcome = tokio::time::timeout(PROMPT, client.lock("free:lock").unwrap().acquire())
        .await
        .expect("a free lock answers at once");
    match outcome {
        Ok(guard) => assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked),
        Err(error) => panic!(
            "default_wait(Duration::MAX) was accepted at connect, \
             but acquiring a free lock then fails with {error:?}"
        ),
    }
    assert!(server.keys().await.is_empty());
}

/// `LockClient::lock_actor` is the entry point for actor messages, so the address it hands
/// out must be live. Right after the last address of an idle lock actor is dropped, the
/// actor is stopping but still registered (and `Addr::connected()` is still true), so
/// `lock_actor` can hand out its address and the first message fails with
/// `MailboxError::Closed`. (`LockClient::ask` retries this case internally; a user holding
/// the address cannot tell it from a shut-down client.)
#[tokio::test]
async fn lock_actor_never_hands_out_a_stopped_actor() {
    let server = RedisServer::start();
    let client = client(&server).await;
    const ROUNDS: usize = 5000;
    for round in 0..ROUNDS {
        // Each round drops its address, so the next one asks an idle name afresh.
        let actor = client.lock_actor("idle:lock").unwrap();
        let reply = tokio::time::timeout(PROMPT, actor.send(GetState { owner: None }))
            .await
            .expect("the actor answers promptly");
        match reply {
            Ok(state) => assert!(!state.unwrap().locked),
            Err(mailbox) => panic!(
                "round {round} of {ROUNDS}: client.lock_actor(\"idle:lock\") returned the \
                 address of a stopped actor; send failed with {mailbox:?}"
            ),
        }
    }
    assert!(server.keys().await.is_empty());
    assert_client_still_works(&client).await;
}
