//! The inspect_list scenario: `Inspector::list` over 100,000 locks of every kind
//! (written in Redisson's layout with pipelined commands) and some keys that are not locks,
//! in a database of its own; the median of a few runs against the 2 s target.

use super::*;

/// Locks written.
pub(crate) const INSPECT_LOCKS: usize = 100_000;
/// Keys that are not locks, written beside them (strings, hashes, lists).
pub(crate) const INSPECT_OTHER_KEYS: usize = 10_000;
/// Timed runs of `list`; the reported figure is the median.
#[cfg(feature = "inspect")]
const INSPECT_RUNS: usize = 5;
/// The target.
pub(crate) const INSPECT_TARGET_MS: f64 = 2000.0;
/// The database the scenario writes to (emptied after).
#[cfg(feature = "inspect")]
const INSPECT_DB: u8 = 1;

#[derive(Clone, Copy)]
pub(crate) struct InspectList {
    pub(crate) median_ms: f64,
    pub(crate) listed: usize,
}

#[cfg(not(feature = "inspect"))]
pub(crate) async fn inspect_list(_url: &str, rows: &mut Vec<Row>) -> Option<InspectList> {
    eprintln!("[inspect_list] skipped: build with `--features inspect` (scripts/bench does)");
    rows.push(Row::new("inspect_list", "list of 100,000 locks, ms", None));
    None
}

#[cfg(feature = "inspect")]
pub(crate) async fn inspect_list(url: &str, rows: &mut Vec<Row>) -> Option<InspectList> {
    let url = format!("{}/{INSPECT_DB}", url.trim_end_matches('/'));
    eprintln!(
        "[inspect_list] writing {INSPECT_LOCKS} locks of every kind and {INSPECT_OTHER_KEYS} other keys"
    );
    let mut conn = plain_connection(&url).await;
    let started = Instant::now();
    write_locks(&mut conn).await;
    eprintln!(
        "[inspect_list] written in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let client = connect(ClientConfig::new(url.as_str())).await;
    let inspector = client.inspector();
    let mut runs = Vec::with_capacity(INSPECT_RUNS);
    let mut listed = 0;
    for run in 0..INSPECT_RUNS {
        let started = Instant::now();
        let locks = inspector.list(None).await.expect("inspector list");
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        listed = locks.len();
        eprintln!(
            "[inspect_list] run {}: {listed} locks in {ms:.0} ms",
            run + 1
        );
        runs.push(ms);
    }
    client.shutdown();
    redis::cmd("FLUSHDB")
        .query_async::<()>(&mut conn)
        .await
        .expect("FLUSHDB");
    let run = InspectList {
        median_ms: median(&mut runs),
        listed,
    };
    rows.push(
        Row::new(
            "inspect_list",
            "list of 100,000 locks, ms (median of 5)",
            Some(run.median_ms),
        )
        .target("<= 2000 ms", Some(run.median_ms <= INSPECT_TARGET_MS)),
    );
    rows.push(
        Row::new("inspect_list", "locks listed", Some(listed as f64))
            .target("100000", Some(listed == INSPECT_LOCKS)),
    );
    Some(run)
}

/// The locks, in Redisson's layout: per ten, four reentrant (one re-entered), one fenced,
/// one read and one write hold of a read-write lock, one fast, one fair with a waiter, and
/// one semaphore (every other one permit-expirable, with a permit out). Then the other keys.
#[cfg(feature = "inspect")]
async fn write_locks(conn: &mut MultiplexedConnection) {
    const LEASE_MS: u64 = 600_000;
    const CLIENT: &str = "5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64;
    for batch in (0..INSPECT_LOCKS).collect::<Vec<_>>().chunks(2000) {
        let mut pipe = redis::pipe();
        for &i in batch {
            let name = format!("bench:inspect:{i}");
            let owner = format!("{CLIENT}:{i}");
            match i % 10 {
                0..=3 => {
                    pipe.hset(&name, &owner, if i % 10 == 3 { 2 } else { 1 })
                        .pexpire(&name, LEASE_MS as i64);
                }
                4 => {
                    pipe.hset(&name, &owner, 1)
                        .pexpire(&name, LEASE_MS as i64)
                        .set(format!("redisson_lock_token:{{{name}}}"), i);
                }
                5 => {
                    pipe.hset_multiple(&name, &[("mode", "read"), (owner.as_str(), "1")])
                        .pexpire(&name, LEASE_MS as i64)
                        .pset_ex(format!("{{{name}}}:{owner}:rwlock_timeout:1"), 1, LEASE_MS);
                }
                6 => {
                    pipe.pset_ex(&name, &owner, LEASE_MS);
                }
                7 => {
                    let waiter = format!("{CLIENT}:{}", i + INSPECT_LOCKS);
                    pipe.hset(&name, &owner, 1)
                        .pexpire(&name, LEASE_MS as i64)
                        .rpush(format!("redisson_lock_queue:{{{name}}}"), &waiter)
                        .zadd(
                            format!("redisson_lock_timeout:{{{name}}}"),
                            &waiter,
                            now_ms + LEASE_MS + 300_000,
                        );
                }
                8 if i % 20 == 18 => {
                    pipe.set(&name, 2).zadd(
                        format!("{{{name}}}:timeout"),
                        format!("{i:016x}"),
                        now_ms + LEASE_MS,
                    );
                }
                8 => {
                    pipe.set(&name, 3);
                }
                _ => {
                    pipe.hset_multiple(
                        &name,
                        &[("mode", "write"), (format!("{owner}:write").as_str(), "1")],
                    )
                    .pexpire(&name, LEASE_MS as i64);
                }
            }
        }
        pipe.query_async::<()>(conn).await.expect("write the locks");
    }
    let mut pipe = redis::pipe();
    for i in 0..INSPECT_OTHER_KEYS {
        let key = format!("bench:other:{i}");
        match i % 3 {
            0 => pipe.set(&key, "hello"),
            1 => pipe.hset(&key, "field", "value"),
            _ => pipe.rpush(&key, "item"),
        };
    }
    pipe.query_async::<()>(conn)
        .await
        .expect("write the other keys");
}
