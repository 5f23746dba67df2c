//! The read-write lock (`LockClient::read_write_lock`) against real redis-server
//! processes: exclusion under randomized load, Redisson's layout, downgrade, reentrancy,
//! the read-unlock message, dead readers, many watched readers, and who waits for whom.
//!
//! The dead reader is the `lock_holder` example run as a child process with `--kind read`
//! (see `tests/faults_process.rs` for the protocol: it prints `acquired <client> <owner>`).

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{
    AcquireOptions, LockClient, LockError, LockGuard, LockOwner, ReadWriteLock, Released,
};
use futures_util::StreamExt;
use rand::{Rng, SeedableRng};
use redis::AsyncCommands;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{client, client_with};
use support::{eventually, RedisServer};
use tokio::time::timeout;

/// Bound for a message or a hand-off that should come at once.
const PROMPT: Duration = Duration::from_secs(5);

/// A reader's field: `<client uuid>:<owner id>`.
fn reader_field(client: &LockClient, owner: LockOwner) -> String {
    format!("{}:{}", client.id(), owner.id())
}

/// A writer's field: `<client uuid>:<owner id>:write`.
fn writer_field(client: &LockClient, owner: LockOwner) -> String {
    format!("{}:{}:write", client.id(), owner.id())
}

/// The key that carries read hold `n` of `field` on lock `name` (a name without braces).
fn timeout_key(name: &str, field: &str, n: u32) -> String {
    format!("{{{name}}}:{field}:rwlock_timeout:{n}")
}

fn rwlock_channel(name: &str) -> String {
    format!("redisson_rwlock:{{{name}}}")
}

async fn hash(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> HashMap<String, String> {
    conn.hgetall(name).await.expect("HGETALL")
}

fn fields(entries: &[(&str, &str)]) -> HashMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn sorted(mut keys: Vec<String>) -> Vec<String> {
    keys.sort();
    keys
}

/// Messages published on one channel, read by a plain redis pub/sub connection.
struct Listener {
    messages: redis::aio::PubSubStream,
}

impl Listener {
    async fn subscribe(server: &RedisServer, channel: &str) -> Listener {
        let mut pubsub = server.client().get_async_pubsub().await.expect("pubsub");
        pubsub.subscribe(channel).await.expect("SUBSCRIBE");
        Listener {
            messages: pubsub.into_on_message(),
        }
    }

    /// The next message's payload, which must come within [`PROMPT`].
    async fn next(&mut self) -> String {
        let message = timeout(PROMPT, self.messages.next())
            .await
            .expect("no message published")
            .expect("pub/sub connection closed");
        message.get_payload().expect("a text payload")
    }

    /// Asserts nothing more is published for a while (a negative check, hence the wait).
    async fn assert_quiet(&mut self) {
        let more = timeout(Duration::from_millis(300), self.messages.next()).await;
        if let Ok(Some(message)) = more {
            panic!(
                "unexpected message {:?}",
                message.get_payload::<String>().unwrap_or_default()
            );
        }
    }
}

async fn read_as(rw: &ReadWriteLock, owner: LockOwner) -> LockGuard {
    rw.read()
        .acquire_with(AcquireOptions::new().owner(owner).wait(Duration::ZERO))
        .await
        .expect("read lock")
}

async fn write_as(rw: &ReadWriteLock, owner: LockOwner) -> LockGuard {
    rw.write()
        .acquire_with(AcquireOptions::new().owner(owner).wait(Duration::ZERO))
        .await
        .expect("write lock")
}

/// One recorded hold: from right after acquire returned to right before unlock was called.
#[derive(Debug, Clone, Copy)]
struct Hold {
    write: bool,
    start: Instant,
    end: Instant,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn randomized_readers_and_writers_never_overlap_a_writer_and_readers_share() {
    const NAME: &str = "rw:random";
    const CLIENTS: usize = 2;
    const TASKS_PER_CLIENT: usize = 4;
    const OPERATIONS: usize = 5_000;
    const PER_TASK: usize = OPERATIONS / (CLIENTS * TASKS_PER_CLIENT);
    let seed: u64 = std::env::var("RWLOCK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("RWLOCK_SEED={seed}");
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(client(&server).await);
    }
    let log: Arc<Mutex<Vec<Hold>>> = Arc::new(Mutex::new(Vec::with_capacity(OPERATIONS)));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..TASKS_PER_CLIENT {
            let rw = client.read_write_lock(NAME).unwrap();
            let log = log.clone();
            let task_seed = seed.wrapping_add((c * TASKS_PER_CLIENT + t) as u64 * 0x9E37_79B9);
            let mut rng = rand::rngs::StdRng::seed_from_u64(task_seed);
            tasks.push(tokio::spawn(async move {
                for _ in 0..PER_TASK {
                    let write = rng.random_bool(0.2);
                    let lock = if write { rw.write() } else { rw.read() };
                    let guard = lock.acquire_timeout(Duration::from_secs(30)).await.unwrap();
                    let start = Instant::now();
                    // The protected work: a few scheduler turns, sometimes a millisecond.
                    if rng.random_bool(0.3) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    } else {
                        for _ in 0..rng.random_range(1..4) {
                            tokio::task::yield_now().await;
                        }
                    }
                    let end = Instant::now();
                    let released = guard.unlock().await.unwrap();
                    assert_eq!(released, Released::Unlocked, "write {write}");
                    log.lock().unwrap().push(Hold { write, start, end });
                }
            }));
        }
    }
    for task in tasks {
        timeout(Duration::from_secs(60), task)
            .await
            .expect("a task hangs")
            .unwrap();
    }
    let elapsed = started.elapsed();
    let mut holds = log.lock().unwrap().clone();
    assert_eq!(holds.len(), PER_TASK * CLIENTS * TASKS_PER_CLIENT);
    let writes = holds.iter().filter(|h| h.write).count();
    assert!(writes > 0 && writes < holds.len(), "{writes} writes");

    // Sorted by start, a hold overlaps an earlier one iff it starts before the latest end
    // so far, and a later one iff the next one starts before it ends.
    holds.sort_by_key(|h| h.start);
    let mut latest_end: Option<Instant> = None;
    let mut latest_read_end: Option<Instant> = None;
    let mut writer_overlaps = Vec::new();
    let mut shared_reads = 0;
    for (i, hold) in holds.iter().enumerate() {
        let overlaps_earlier = latest_end.is_some_and(|end| end > hold.start);
        if hold.write {
            let overlaps_later = holds.get(i + 1).is_some_and(|next| next.start < hold.end);
            if overlaps_earlier || overlaps_later {
                writer_overlaps.push(i);
            }
        } else {
            if latest_read_end.is_some_and(|end| end > hold.start) {
                shared_reads += 1;
            }
            latest_read_end = latest_read_end.max(Some(hold.end));
        }
        latest_end = latest_end.max(Some(hold.end));
    }
    assert!(
        writer_overlaps.is_empty(),
        "seed {seed}: {} writer holds overlapped another hold, first at {:?}",
        writer_overlaps.len(),
        writer_overlaps
            .first()
            .map(|&i| &holds[i.saturating_sub(1)..(i + 2).min(holds.len())])
    );
    assert!(
        shared_reads > 0,
        "seed {seed}: no two readers ever held at once"
    );
    println!(
        "{} holds ({writes} writes, {shared_reads} reads shared) in {elapsed:?}",
        holds.len()
    );
    assert_eq!(server.keys().await, Vec::<String>::new());
    for client in &clients {
        assert_eq!(client.watched_holds(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_and_write_holds_use_redissons_layout_and_leave_no_key() {
    const NAME: &str = "doc";
    let server = RedisServer::start();
    let first = client(&server).await;
    let second = client(&server).await;
    let lease_ms = first.config().watchdog_timeout_value().as_millis() as i64;
    let mut conn = server.conn().await;

    let (me, you) = (LockOwner::new(), LockOwner::new());
    let mine = read_as(&first.read_write_lock(NAME).unwrap(), me).await;
    let my_field = reader_field(&first, me);
    let my_timeout = timeout_key(NAME, &my_field, 1);
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "read"), (&my_field, "1")])
    );
    assert_eq!(
        server.keys().await,
        sorted(vec![NAME.to_string(), my_timeout.clone()])
    );
    let value: String = conn.get(&my_timeout).await.unwrap();
    assert_eq!(value, "1");
    for key in [NAME, my_timeout.as_str()] {
        let pttl: i64 = conn.pttl(key).await.unwrap();
        assert!(
            pttl > lease_ms - 2_000 && pttl <= lease_ms,
            "{key}: pttl {pttl}"
        );
    }

    // A second reader, in another client: one more field and one more timeout key.
    let yours = read_as(&second.read_write_lock(NAME).unwrap(), you).await;
    let your_field = reader_field(&second, you);
    let your_timeout = timeout_key(NAME, &your_field, 1);
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "read"), (&my_field, "1"), (&your_field, "1")])
    );
    assert_eq!(
        server.keys().await,
        sorted(vec![
            NAME.to_string(),
            my_timeout.clone(),
            your_timeout.clone()
        ])
    );
    let rw = first.read_write_lock(NAME).unwrap();
    assert_eq!(rw.read().hold_count(me).await.unwrap(), 1);
    assert_eq!(rw.write().hold_count(me).await.unwrap(), 0);
    assert!(rw.read().is_locked().await.unwrap());
    assert!(rw.write().is_locked().await.unwrap());

    assert_eq!(mine.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "read"), (&your_field, "1")])
    );
    assert_eq!(
        server.keys().await,
        sorted(vec![NAME.to_string(), your_timeout])
    );
    assert_eq!(yours.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());

    // A writer: mode `write`, field `uuid:owner:write`, no timeout key.
    let writer = write_as(&rw, me).await;
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "write"), (&writer_field(&first, me), "1")])
    );
    assert_eq!(server.keys().await, vec![NAME.to_string()]);
    let pttl: i64 = conn.pttl(NAME).await.unwrap();
    assert!(pttl > lease_ms - 2_000 && pttl <= lease_ms, "pttl {pttl}");
    assert_eq!(rw.write().hold_count(me).await.unwrap(), 1);
    assert_eq!(rw.read().hold_count(me).await.unwrap(), 0);
    assert_eq!(writer.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
    assert!(!rw.read().is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_on_both_sides_counts_holds() {
    const NAME: &str = "reenter";
    let server = RedisServer::start();
    let client = client(&server).await;
    let other = client_with(&server, |c| c).await;
    let rw = client.read_write_lock(NAME).unwrap();
    let theirs = other.read_write_lock(NAME).unwrap();
    let mut conn = server.conn().await;
    let me = LockOwner::new();
    let field = reader_field(&client, me);

    // Read side: two holds, two timeout keys; the newest goes first.
    let outer = read_as(&rw, me).await;
    let inner = outer.reenter(Duration::ZERO).await.unwrap();
    assert_eq!(rw.read().hold_count(me).await.unwrap(), 2);
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "read"), (&field, "2")])
    );
    assert_eq!(
        server.keys().await,
        sorted(vec![
            NAME.to_string(),
            timeout_key(NAME, &field, 1),
            timeout_key(NAME, &field, 2)
        ])
    );
    assert!(theirs.write().try_acquire().await.unwrap().is_none());
    assert_eq!(
        inner.unlock().await.unwrap(),
        Released::StillHeld { holds: 1 }
    );
    assert_eq!(rw.read().hold_count(me).await.unwrap(), 1);
    assert_eq!(
        server.keys().await,
        sorted(vec![NAME.to_string(), timeout_key(NAME, &field, 1)])
    );
    assert!(theirs.write().try_acquire().await.unwrap().is_none());
    assert_eq!(outer.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());

    // Write side: two holds of one field; free after both.
    let outer = write_as(&rw, me).await;
    let inner = rw
        .write()
        .acquire_with(AcquireOptions::new().owner(me).wait(Duration::ZERO))
        .await
        .unwrap();
    let third = inner.reenter(Duration::ZERO).await.unwrap();
    assert_eq!(rw.write().hold_count(me).await.unwrap(), 3);
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "write"), (&writer_field(&client, me), "3")])
    );
    assert!(theirs.read().try_acquire().await.unwrap().is_none());
    assert!(theirs.write().try_acquire().await.unwrap().is_none());
    assert!(
        rw.write().try_acquire().await.unwrap().is_none(),
        "another local owner is refused too"
    );
    assert_eq!(
        third.unlock().await.unwrap(),
        Released::StillHeld { holds: 2 }
    );
    assert_eq!(
        inner.unlock().await.unwrap(),
        Released::StillHeld { holds: 1 }
    );
    assert_eq!(rw.write().hold_count(me).await.unwrap(), 1);
    assert!(theirs.read().try_acquire().await.unwrap().is_none());
    assert_eq!(outer.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
    let next = theirs
        .write()
        .try_acquire()
        .await
        .unwrap()
        .expect("free after the last write hold");
    next.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_write_then_read_leaves_a_read_lock_until_the_read_unlock() {
    const NAME: &str = "downgrade";
    let server = RedisServer::start();
    let other = client(&server).await;
    let client = client_with(&server, |c| c).await;
    let rw = client.read_write_lock(NAME).unwrap();
    let theirs = other.read_write_lock(NAME).unwrap();
    let mut listener = Listener::subscribe(&server, &rwlock_channel(NAME)).await;
    let mut conn = server.conn().await;
    let me = LockOwner::new();
    let (read, write) = (reader_field(&client, me), writer_field(&client, me));

    let writing = write_as(&rw, me).await;
    let reading = read_as(&rw, me).await;
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "write"), (&write, "1"), (&read, "1")])
    );
    assert_eq!(
        server.keys().await,
        sorted(vec![NAME.to_string(), timeout_key(NAME, &read, 1)])
    );
    assert!(theirs.read().try_acquire().await.unwrap().is_none());
    assert!(theirs.write().try_acquire().await.unwrap().is_none());
    server.reset_stats().await;
    let waiting_rw = theirs.clone();
    let waiting_reader = tokio::spawn(async move {
        let guard = waiting_rw
            .read()
            .acquire_timeout(Duration::from_secs(20))
            .await;
        (Instant::now(), guard)
    });
    // One subscriber is the listener; two refused tries mean the reader subscribed too.
    server.wait_until_parked(&rwlock_channel(NAME), 1).await;

    // The write unlock turns it into a read lock and tells every waiter (`1`): the
    // waiting reader is let in at once, beside the downgraded owner.
    let downgraded_at = Instant::now();
    assert_eq!(writing.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(listener.next().await, "1");
    let (acquired_at, shared) = timeout(PROMPT, waiting_reader)
        .await
        .expect("the downgrade wakes the waiting reader")
        .unwrap();
    let shared = shared.expect("a read lock after the downgrade");
    let handoff = acquired_at - downgraded_at;
    assert!(
        handoff < Duration::from_secs(3),
        "hand-off took {handoff:?}"
    );
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[
            ("mode", "read"),
            (&read, "1"),
            (&reader_field(&other, shared.owner()), "1")
        ])
    );
    let pttl: i64 = conn.pttl(NAME).await.unwrap();
    assert!(pttl > 0, "the downgraded lock has no lease: pttl {pttl}");
    assert_eq!(rw.read().hold_count(me).await.unwrap(), 1);
    assert_eq!(rw.write().hold_count(me).await.unwrap(), 0);

    // Writers wait while the readers share it.
    assert!(theirs.write().try_acquire().await.unwrap().is_none());
    assert_eq!(shared.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "read"), (&read, "1")])
    );

    // The read unlock frees it (and publishes `0` once, for the last hold only: Redisson's
    // read unlock wakes one waiter, a writer, since readers never wait for readers).
    assert_eq!(reading.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(listener.next().await, "0");
    listener.assert_quiet().await;
    assert_eq!(server.keys().await, Vec::<String>::new());
    let writer = theirs
        .write()
        .try_acquire()
        .await
        .unwrap()
        .expect("free after the downgraded read unlock");
    writer.unlock().await.unwrap();
    assert_eq!(
        listener.next().await,
        "1",
        "a freeing write unlock publishes `1` (Redisson: wakes every waiting reader)"
    );
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_unlock_that_frees_it_publishes_0_and_wakes_a_waiting_writer_promptly() {
    const NAME: &str = "wake-writer";
    let server = RedisServer::start();
    let reader = client(&server).await;
    let writer = client(&server).await;
    let lease = writer.config().watchdog_timeout_value();
    let channel = rwlock_channel(NAME);
    let mut listener = Listener::subscribe(&server, &channel).await;
    let held = reader
        .read_write_lock(NAME)
        .unwrap()
        .read()
        .acquire()
        .await
        .unwrap();

    server.reset_stats().await;
    let waiting_lock = writer.read_write_lock(NAME).unwrap();
    let waiting = tokio::spawn(async move {
        let guard = waiting_lock
            .write()
            .acquire_timeout(Duration::from_secs(20))
            .await;
        (Instant::now(), guard)
    });
    // One subscriber is the listener; two refused tries mean the writer subscribed too.
    server.wait_until_parked(&channel, 1).await;
    assert!(server.subscribers(&channel).await >= 2);
    assert!(!waiting.is_finished());

    let released_at = Instant::now();
    assert_eq!(held.unlock().await.unwrap(), Released::Unlocked);
    // Redisson 3.x and 4.x: a read unlock publishes `0` (wake one: the waiters are writers),
    // a write unlock `1` (wake all: the waiters may all be readers). A Redisson writer that
    // has not parked yet when `1` comes misses it and sleeps out the lock's TTL.
    assert_eq!(
        listener.next().await,
        "0",
        "a freeing read unlock publishes `0`"
    );
    let (acquired_at, guard) = timeout(PROMPT, waiting).await.expect("woken").unwrap();
    let guard = guard.expect("the writer acquires");
    let handoff = acquired_at - released_at;
    assert!(
        handoff < lease / 10,
        "hand-off took {handoff:?}, the lease is {lease:?}"
    );
    let mut conn = server.conn().await;
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[
            ("mode", "write"),
            (&writer_field(&writer, guard.owner()), "1")
        ])
    );
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(listener.next().await, "1");
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_waits_for_the_last_reader_and_readers_wait_for_the_writer() {
    const NAME: &str = "turns";
    let server = RedisServer::start();
    let clients = [
        client(&server).await,
        client(&server).await,
        client(&server).await,
    ];
    let lease = clients[0].config().watchdog_timeout_value();
    let channel = rwlock_channel(NAME);
    let mut conn = server.conn().await;
    let first = clients[0]
        .read_write_lock(NAME)
        .unwrap()
        .read()
        .acquire()
        .await
        .unwrap();
    let last = clients[1]
        .read_write_lock(NAME)
        .unwrap()
        .read()
        .acquire()
        .await
        .unwrap();
    let last_field = reader_field(&clients[1], last.owner());

    server.reset_stats().await;
    let rw = clients[2].read_write_lock(NAME).unwrap();
    let writer = tokio::spawn(async move {
        let guard = rw.write().acquire_timeout(Duration::from_secs(20)).await;
        (Instant::now(), guard)
    });
    server.wait_until_parked(&channel, 1).await;

    // One reader leaves: the other still holds, so the writer goes on waiting.
    assert_eq!(first.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "read"), (&last_field, "1")])
    );
    assert!(!writer.is_finished());
    let released_at = Instant::now();
    assert_eq!(last.unlock().await.unwrap(), Released::Unlocked);
    let (acquired_at, guard) = timeout(PROMPT, writer).await.expect("woken").unwrap();
    let writing = guard.expect("the writer acquires after the last reader");
    assert!(acquired_at > released_at);
    assert!(
        acquired_at - released_at < lease / 10,
        "hand-off took {:?}",
        acquired_at - released_at
    );
    let write_field = writer_field(&clients[2], writing.owner());
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "write"), (&write_field, "1")])
    );

    // Readers in two clients wait for the writer; its unlock lets both in together.
    server.reset_stats().await;
    let mut readers = Vec::new();
    for client in &clients[..2] {
        let rw = client.read_write_lock(NAME).unwrap();
        readers.push(tokio::spawn(async move {
            let guard = rw.read().acquire_timeout(Duration::from_secs(20)).await;
            (Instant::now(), guard)
        }));
    }
    server.wait_until_parked(&channel, 2).await;
    assert!(readers.iter().all(|r| !r.is_finished()));
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "write"), (&write_field, "1")])
    );
    let released_at = Instant::now();
    assert_eq!(writing.unlock().await.unwrap(), Released::Unlocked);
    let mut guards = Vec::new();
    let mut expected = vec![("mode".to_string(), "read".to_string())];
    for (client, reader) in clients.iter().zip(readers) {
        let (acquired_at, guard) = timeout(PROMPT, reader).await.expect("woken").unwrap();
        let guard = guard.expect("the reader acquires after the writer");
        assert!(
            acquired_at - released_at < lease / 10,
            "hand-off took {:?}",
            acquired_at - released_at
        );
        expected.push((reader_field(client, guard.owner()), "1".to_string()));
        guards.push(guard);
    }
    assert_eq!(
        hash(&mut conn, NAME).await,
        expected.into_iter().collect::<HashMap<_, _>>(),
        "both readers hold it at once"
    );
    for guard in guards {
        assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    }
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_readers_outlive_the_watchdog_timeout_and_then_leave_nothing() {
    const NAME: &str = "many-readers";
    const READERS: usize = 50;
    /// Every tenth reader also re-enters: its second hold has a timeout key of its own.
    const REENTER_EVERY: usize = 10;
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(1500);
    let clients = [
        client_with(&server, |c| c.watchdog_timeout(watchdog)).await,
        client_with(&server, |c| c.watchdog_timeout(watchdog)).await,
    ];
    let mut guards = Vec::new();
    let mut timeout_keys = Vec::new();
    for i in 0..READERS {
        let client = &clients[i % 2];
        let guard = client
            .read_write_lock(NAME)
            .unwrap()
            .read()
            .acquire_timeout(Duration::from_secs(5))
            .await
            .unwrap();
        let field = reader_field(client, guard.owner());
        timeout_keys.push(timeout_key(NAME, &field, 1));
        if i % REENTER_EVERY == 0 {
            guards.push(guard.reenter(Duration::ZERO).await.unwrap());
            timeout_keys.push(timeout_key(NAME, &field, 2));
        }
        guards.push(guard);
    }
    let holds = READERS + READERS / REENTER_EVERY;
    assert_eq!((guards.len(), timeout_keys.len()), (holds, holds));
    assert_eq!(
        clients[0].watched_holds() + clients[1].watched_holds(),
        READERS
    );
    let any_lost = tokio::spawn(futures_util::future::select_all(
        guards.iter().map(|g| Box::pin(g.lost())),
    ));

    let mut conn = server.conn().await;
    let held_since = Instant::now();
    while held_since.elapsed() < watchdog * 3 {
        // Holding for three leases is the scenario; each look checks every hold is alive.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let mut pipe = redis::pipe();
        pipe.hlen(NAME).pttl(NAME);
        for key in &timeout_keys {
            pipe.pttl(key);
        }
        let (fields, pttls): (usize, Vec<i64>) = {
            let replies: Vec<i64> = pipe.query_async(&mut conn).await.unwrap();
            (replies[0] as usize, replies[1..].to_vec())
        };
        assert_eq!(fields, READERS + 1, "a reader's field vanished");
        for (key, pttl) in std::iter::once(&NAME.to_string())
            .chain(&timeout_keys)
            .zip(&pttls)
        {
            assert!(
                *pttl > 0 && *pttl <= watchdog.as_millis() as i64,
                "{key}: pttl {pttl} after {:?}",
                held_since.elapsed()
            );
        }
        assert!(guards.iter().all(|g| !g.is_lost()), "a guard was lost");
    }
    assert!(!any_lost.is_finished(), "a lost() future fired");
    any_lost.abort();
    assert_eq!(
        server.keys().await.len(),
        holds + 1,
        "the hash and one timeout key per read hold"
    );

    // Each re-entered hold was pushed before its outer hold: it goes first.
    for guard in guards {
        let released = guard.unlock().await.unwrap();
        assert!(
            matches!(
                released,
                Released::Unlocked | Released::StillHeld { holds: 1 }
            ),
            "{released:?}"
        );
    }
    assert_eq!(server.keys().await, Vec::<String>::new());
    assert_eq!(clients[0].watched_holds() + clients[1].watched_holds(), 0);
}

#[tokio::test]
async fn a_key_holding_other_data_is_wrong_type_on_both_sides_and_untouched() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut conn = server.conn().await;
    let _: () = conn.set("rw:string", "payload").await.unwrap();
    let _: () = conn.rpush("rw:list", &["a", "b"]).await.unwrap();
    for name in ["rw:string", "rw:list"] {
        let rw = client.read_write_lock(name).unwrap();
        for side in [rw.read(), rw.write()] {
            let started = Instant::now();
            let error = side.acquire_timeout(Duration::from_secs(20)).await;
            assert!(
                matches!(error, Err(LockError::WrongType { name: ref n }) if n == name),
                "{name} {:?}: {error:?}",
                side.kind()
            );
            assert!(started.elapsed() < Duration::from_secs(2), "{name}: waited");
            let forced = side.force_unlock().await;
            assert!(
                matches!(forced, Err(LockError::WrongType { .. })),
                "{name}: {forced:?}"
            );
        }
    }
    let value: String = conn.get("rw:string").await.unwrap();
    assert_eq!(value, "payload");
    let list: Vec<String> = conn.lrange("rw:list", 0, -1).await.unwrap();
    assert_eq!(list, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(
        server.keys().await,
        vec!["rw:list".to_string(), "rw:string".to_string()],
        "no timeout key or other data was written"
    );
    assert_eq!(client.watched_holds(), 0);
}

// ---------------------------------------------------------------------------------------
// Dead readers: a `lock_holder --kind read` child process, killed with SIGKILL.

/// A `lock_holder` child holding a read lock; SIGKILLed and reaped on drop.
struct ChildReader {
    child: Child,
    /// `<client-id>:<owner-id>`: the reader's field in the lock's hash.
    field: String,
}

impl ChildReader {
    async fn start(server: &RedisServer, name: &str, watchdog_ms: u64) -> ChildReader {
        let mut child = Command::new(support::lock_holder_binary())
            .arg(server.url())
            .arg(name)
            .args(["--kind", "read", "--watchdog-ms", &watchdog_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn lock_holder");
        let stdout = child.stdout.take().expect("piped stdout");
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        });
        let line = timeout(Duration::from_secs(30), line)
            .await
            .expect("lock_holder printed nothing within 30 s")
            .unwrap()
            .expect("read lock_holder's stdout");
        let ids: Vec<&str> = line
            .trim()
            .strip_prefix("acquired ")
            .unwrap_or_else(|| panic!("expected `acquired <client> <owner>`, got `{line}`"))
            .split(' ')
            .collect();
        let [client, owner] = ids[..] else {
            panic!("expected `acquired <client> <owner>`, got `{line}`");
        };
        ChildReader {
            field: format!("{client}:{owner}"),
            child,
        }
    }

    /// SIGKILL, then reap: when this returns the process is gone.
    fn kill_and_reap(&mut self) {
        self.child.kill().expect("SIGKILL lock_holder");
        self.child.wait().expect("reap lock_holder");
    }
}

impl Drop for ChildReader {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_reader_frees_the_lock_for_a_writer_after_its_lease() {
    const NAME: &str = "dead-reader";
    const WATCHDOG_MS: u64 = 1500;
    /// Rounding between Redis' millisecond clock and ours.
    const SLACK: Duration = Duration::from_millis(50);
    let server = RedisServer::start();
    let mut dead = ChildReader::start(&server, NAME, WATCHDOG_MS).await;
    let mut conn = server.conn().await;
    let dead_timeout = timeout_key(NAME, &dead.field, 1);
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "read"), (&dead.field, "1")])
    );
    let writer = client(&server).await;
    let rw = writer.read_write_lock(NAME).unwrap();
    assert!(rw.write().try_acquire().await.unwrap().is_none());

    // Renewals only push the expiry later, so this is a floor for when it can end.
    let pttl: i64 = conn.pttl(NAME).await.unwrap();
    let killed_at = Instant::now();
    dead.kill_and_reap();
    let left = Duration::from_millis(pttl as u64);
    assert!(
        left > Duration::from_millis(WATCHDOG_MS / 2),
        "the watchdog let the lease run down to {left:?}"
    );
    let guard = rw
        .write()
        .acquire_timeout(Duration::from_secs(10))
        .await
        .expect("the writer gets in once the dead reader's lease ran out");
    let took = killed_at.elapsed();
    assert!(
        took + SLACK >= left,
        "got in {took:?} after the kill, but {left:?} of the reader's lease was left"
    );
    assert!(
        took < Duration::from_millis(WATCHDOG_MS) + Duration::from_secs(1),
        "got in {took:?} after the kill; the reader's lease is {WATCHDOG_MS} ms"
    );
    let exists: bool = conn.exists(&dead_timeout).await.unwrap();
    assert!(!exists, "the dead reader's timeout key outlived its lease");
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[
            ("mode", "write"),
            (&writer_field(&writer, guard.owner()), "1")
        ])
    );
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_readers_leftover_field_does_not_outlive_the_live_reader() {
    const NAME: &str = "dead-and-live";
    let server = RedisServer::start();
    let mut dead = ChildReader::start(&server, NAME, 1500).await;
    // The live reader keeps the default 30 s lease: a writer's timer cannot be what
    // wakes it after the live reader's unlock.
    let live_client = client(&server).await;
    let writer_client = client(&server).await;
    let lease = live_client.config().watchdog_timeout_value();
    let live = live_client
        .read_write_lock(NAME)
        .unwrap()
        .read()
        .acquire()
        .await
        .unwrap();
    let live_field = reader_field(&live_client, live.owner());
    let mut conn = server.conn().await;
    dead.kill_and_reap();

    server.reset_stats().await;
    let rw = writer_client.read_write_lock(NAME).unwrap();
    let writer = tokio::spawn(async move {
        let guard = rw.write().acquire_timeout(Duration::from_secs(20)).await;
        (Instant::now(), guard)
    });
    let channel = rwlock_channel(NAME);
    server.wait_until_parked(&channel, 1).await;

    let dead_timeout = timeout_key(NAME, &dead.field, 1);
    eventually(
        "the dead reader's timeout key expires",
        Duration::from_secs(5),
        || {
            let mut conn = conn.clone();
            let key = dead_timeout.clone();
            async move { !conn.exists::<_, bool>(&key).await.unwrap() }
        },
    )
    .await;
    // Its field stays while the live reader keeps the hash (as in Redisson); the lock is
    // still read-locked, so the writer still waits.
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[("mode", "read"), (&dead.field, "1"), (&live_field, "1")])
    );
    assert!(!writer.is_finished());

    let released_at = Instant::now();
    assert_eq!(live.unlock().await.unwrap(), Released::Unlocked);
    let (acquired_at, guard) = timeout(PROMPT, writer).await.expect("woken").unwrap();
    let guard = guard.expect("the writer acquires after the live reader");
    assert!(
        acquired_at - released_at < lease / 10,
        "hand-off took {:?}: the unlock did not free the lock",
        acquired_at - released_at
    );
    assert_eq!(
        hash(&mut conn, NAME).await,
        fields(&[
            ("mode", "write"),
            (&writer_field(&writer_client, guard.owner()), "1")
        ]),
        "the dead reader's field was cleared"
    );
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test]
async fn a_read_unlock_under_a_write_hold_never_shortens_the_writers_lease() {
    const NAME: &str = "read-under-write";
    let server = RedisServer::start();
    let locks = client(&server).await;
    let rw = locks.read_write_lock(NAME).unwrap();
    let mut conn = server.conn().await;
    let me = LockOwner::new();
    let hold = |lease: Duration| {
        AcquireOptions::new()
            .owner(me)
            .wait(Duration::ZERO)
            .lease(lease)
    };
    let writing = rw
        .write()
        .acquire_with(hold(Duration::from_secs(60)))
        .await
        .expect("write lock");
    // Two short read holds of the writer's own owner, then one of them released.
    let short = Duration::from_secs(2);
    let first = rw.read().acquire_with(hold(short)).await.expect("read 1");
    let second = rw.read().acquire_with(hold(short)).await.expect("read 2");
    assert_eq!(
        first.unlock().await.unwrap(),
        Released::StillHeld { holds: 1 }
    );
    let pttl: i64 = conn.pttl(NAME).await.unwrap();
    assert!(
        pttl > 30_000,
        "a read unlock cut the writer's 60 s lease to {pttl} ms (the read hold left)"
    );
    second.unlock().await.unwrap();
    let pttl: i64 = conn.pttl(NAME).await.unwrap();
    assert!(pttl > 30_000, "the last read unlock cut it to {pttl} ms");
    assert_eq!(writing.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
}
