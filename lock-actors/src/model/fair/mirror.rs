//! Each fair script and its Rust mirror (`super::store`), run side by side on a real Redis
//! over generated inputs: the same starting keys (hash and TTL, queue, deadlines), the same
//! call through the library's own call builders, then the same reply, hold counts, expiry,
//! queue, deadlines and wake-ups (a subscriber listens on every waiter's channel).
//!
//! The scripts read Redis's clock: `TIME` is read right before and right after the call,
//! the mirror runs at both instants, and what Redis holds must lie between the two answers
//! (its keys' expiries are read as instants, `PEXPIRETIME`, so no round trip blurs them).
//! The generated deadlines and TTLs keep well clear of that interval, so both runs of the
//! mirror take the same branches (asserted).
//!
//! The scripts of lease control run on a fair lock are checked the same way, on cases of
//! their own: the foreign unlock (`Lock::unlock_as`: the fair unlock inside
//! `foreign_begin.lua` and `foreign_end.lua`) and `set_lease.lua` (a guard's extend).
//!
//! The acquire as it was before the lease-truth fixes (a re-entry set the key's TTL to its
//! own lease) is checked the same way; unlock and withdraw have not changed since, and the
//! renewal is the reentrant lock's script, checked against the same mirror by
//! `super::super::mirror`.

use super::super::server::Server;
use super::super::store::{Scripts, Store};
use super::store::{Breakage, FairStore, Outcome};
use crate::keys::LockName;
use crate::lock::kind::{LockKind, PublishingScript, Unlocking};
use crate::model::mirror::{integers, pair};
use crate::node::connection::PubSub;
use crate::script::ScriptCall;
use futures_util::StreamExt;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

/// The re-entry line of `fair/acquire.lua` as it is, and as it was before the fixes.
const REENTRY_NOW: &str =
    "redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))";
const REENTRY_BEFORE: &str = "redis.call('pexpire', KEYS[1], ARGV[1])";

/// `fair/acquire.lua` before the lease-truth fixes: today's, with the re-entry line as it
/// was (the rest of the script has not changed since).
static ACQUIRE_BEFORE: LazyLock<PublishingScript> = LazyLock::new(|| {
    let now = include_str!("../../lock/kind/fair/acquire.lua");
    assert_eq!(
        now.matches(REENTRY_NOW).count(),
        1,
        "the re-entry line moved"
    );
    let before = now.replace(REENTRY_NOW, REENTRY_BEFORE);
    PublishingScript::new(&[include_str!("../../lock/kind/fair/stale.lua"), &before])
});

/// How far past the `TIME` interval a value may lie: `TIME` is read in microseconds and
/// the scripts floor it to milliseconds.
const CLOCK_SLACK_MS: i64 = 2;

/// Which calls a cross-check generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Calls {
    /// The fair kind's own scripts: acquire, unlock, withdraw, renewal.
    Scripts,
    /// The shared scripts of lease control run on a fair lock: the foreign unlock (the
    /// fair unlock inside `foreign_begin.lua` and `foreign_end.lua`) and `set_lease.lua`.
    LeaseControl,
}

/// One generated call.
#[derive(Debug, Clone, Copy)]
enum Call {
    Acquire {
        owner: u8,
        lease: u64,
        allowance: i64,
    },
    Unlock {
        owner: u8,
        lease: u64,
    },
    Withdraw {
        owner: u8,
        allowance: i64,
    },
    Renew {
        owner: u8,
        lease: u64,
    },
    /// The foreign unlock (`Lock::unlock_as`), `lease` its lease for a key without expiry.
    Foreign {
        owner: u8,
        lease: u64,
    },
    /// `set_lease.lua` (a guard's extend) with `counted` holds the caller knows of.
    SetLease {
        owner: u8,
        lease: u64,
        counted: u32,
    },
}

fn field(owner: u8) -> String {
    format!("mirror-client:{owner}")
}

fn owner_of(field: &str) -> u8 {
    field.rsplit(':').next().unwrap().parse().unwrap()
}

/// A starting state with every instant relative to the moment it is written.
#[derive(Debug, Clone)]
struct Start {
    fields: BTreeMap<u8, u32>,
    ttl: Option<i64>,
    queue: Vec<u8>,
    deadlines: BTreeMap<u8, i64>,
}

impl Start {
    /// The mirror's store, with instants on Redis's clock from `t0`.
    fn at(&self, t0: i64) -> FairStore {
        FairStore {
            hash: Store {
                fields: self.fields.clone(),
                expires_at: self
                    .ttl
                    .map(|ttl| t0 + ttl)
                    .filter(|_| !self.fields.is_empty()),
                token: 0,
            },
            queue: self.queue.clone(),
            deadlines: self.deadlines.iter().map(|(&o, &d)| (o, t0 + d)).collect(),
        }
    }
}

/// A deadline well clear of now: passed (a dead waiter's) or far enough ahead.
fn deadline(rng: &mut impl Rng) -> i64 {
    if rng.random_bool(0.3) {
        -rng.random_range(600..6_000)
    } else {
        rng.random_range(1_500..15_000)
    }
}

fn generate(rng: &mut impl Rng, calls: Calls) -> (Start, Call) {
    let mut fields = BTreeMap::new();
    if rng.random_bool(0.6) {
        for owner in 1..=2u8 {
            let count = rng.random_range(0..=2u32);
            if count > 0 {
                fields.insert(owner, count);
            }
        }
    }
    // A TTL long enough not to run out during the calls, or (rarely) none.
    let ttl = (!rng.random_bool(0.1)).then(|| rng.random_range(1_500..8_000i64));
    let mut queue: Vec<u8> = Vec::new();
    for _ in 0..rng.random_range(0..=3) {
        let owner = rng.random_range(1..=4u8);
        // Now and then an owner twice (a hand-made state: the scripts must not care).
        if !queue.contains(&owner) || rng.random_bool(0.1) {
            queue.push(owner);
        }
    }
    let mut deadlines = BTreeMap::new();
    for &owner in &queue {
        // Now and then an entry without a deadline (dropped as dead at once).
        if rng.random_bool(0.9) {
            deadlines.insert(owner, deadline(rng));
        }
    }
    // Now and then a deadline without an entry; never with a hash that has no expiry (the
    // acquire then fails in Lua on an empty queue, as the mirror would).
    if (ttl.is_some() || fields.is_empty()) && rng.random_bool(0.1) {
        deadlines.insert(rng.random_range(1..=4u8), deadline(rng));
    }
    let start = Start {
        fields,
        ttl,
        queue,
        deadlines,
    };
    let owner = rng.random_range(1..=4u8);
    let lease = match rng.random_range(0..4) {
        0 => 1_000,
        1 => 3_000,
        2 => 4_500,
        _ => rng.random_range(1_000..9_000),
    };
    let allowance = match rng.random_range(0..3) {
        0 => 3_000,
        1 => 5_000,
        _ => rng.random_range(1..12_000),
    };
    let call = match (calls, rng.random_range(0..20)) {
        (Calls::Scripts, 0..8) => Call::Acquire {
            owner,
            lease,
            allowance,
        },
        (Calls::Scripts, 8..12) => Call::Unlock { owner, lease },
        (Calls::Scripts, 12..17) => Call::Withdraw { owner, allowance },
        (Calls::Scripts, _) => Call::Renew { owner, lease },
        (Calls::LeaseControl, 0..12) => Call::Foreign { owner, lease },
        (Calls::LeaseControl, _) => Call::SetLease {
            owner,
            lease,
            counted: rng.random_range(0..=3),
        },
    };
    (start, call)
}

/// Redis's clock in milliseconds (floored, as the scripts' `fair_now`).
async fn time(connection: &mut MultiplexedConnection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(connection).await.unwrap();
    secs * 1_000 + micros / 1_000
}

async fn query<T: redis::FromRedisValue>(
    connection: &mut MultiplexedConnection,
    cmd: &mut redis::Cmd,
) -> T {
    cmd.query_async(connection).await.unwrap()
}

/// Writes `start` with its instants from `t0`.
async fn set_up(connection: &mut MultiplexedConnection, name: &LockName, start: &Start, t0: i64) {
    let (hash, queue, timeouts) = (
        name.as_str(),
        name.fair_queue_key(),
        name.fair_timeout_key(),
    );
    let _: () = query(
        connection,
        redis::cmd("DEL").arg(hash).arg(&queue).arg(&timeouts),
    )
    .await;
    for (owner, count) in &start.fields {
        let _: () = query(
            connection,
            redis::cmd("HSET").arg(hash).arg(field(*owner)).arg(*count),
        )
        .await;
    }
    if let (false, Some(ttl)) = (start.fields.is_empty(), start.ttl) {
        let _: () = query(connection, redis::cmd("PEXPIREAT").arg(hash).arg(t0 + ttl)).await;
    }
    for owner in &start.queue {
        let _: () = query(
            connection,
            redis::cmd("RPUSH").arg(&queue).arg(field(*owner)),
        )
        .await;
    }
    for (owner, at) in &start.deadlines {
        let _: () = query(
            connection,
            redis::cmd("ZADD")
                .arg(&timeouts)
                .arg(t0 + at)
                .arg(field(*owner)),
        )
        .await;
    }
}

/// The keys as Redis holds them: hold counts, expiry (`PEXPIRETIME`: -2 no key, -1 none),
/// queue and deadlines.
async fn read_back(
    connection: &mut MultiplexedConnection,
    name: &LockName,
) -> (BTreeMap<u8, u32>, i64, Vec<u8>, BTreeMap<u8, f64>) {
    let fields: BTreeMap<String, u32> =
        query(connection, redis::cmd("HGETALL").arg(name.as_str())).await;
    let expiry: i64 = query(connection, redis::cmd("PEXPIRETIME").arg(name.as_str())).await;
    let queue: Vec<String> = query(
        connection,
        redis::cmd("LRANGE")
            .arg(name.fair_queue_key())
            .arg(0)
            .arg(-1),
    )
    .await;
    let deadlines: Vec<(String, f64)> = query(
        connection,
        redis::cmd("ZRANGE")
            .arg(name.fair_timeout_key())
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES"),
    )
    .await;
    (
        fields.into_iter().map(|(f, n)| (owner_of(&f), n)).collect(),
        expiry,
        queue.iter().map(|f| owner_of(f)).collect(),
        deadlines
            .into_iter()
            .map(|(f, at)| (owner_of(&f), at))
            .collect(),
    )
}

/// The library's call for `call` (the acquire of `scripts`).
fn invocation(scripts: Scripts, name: &LockName, call: Call) -> ScriptCall {
    let kind = LockKind::Fair;
    match call {
        Call::Acquire {
            owner,
            lease,
            allowance,
        } => {
            let mut invocation = kind.acquire(
                name,
                &field(owner),
                lease,
                false,
                allowance as u64,
                PubSub::Classic,
            );
            if scripts == Scripts::Before {
                // The same keys and arguments, on the script as it was.
                let mut before =
                    ScriptCall::with_key(ACQUIRE_BEFORE.get(PubSub::Classic), name.as_str());
                for key in invocation.key_names().into_iter().skip(1) {
                    before.key(key);
                }
                before
                    .arg(lease)
                    .arg(field(owner))
                    .arg(allowance)
                    .arg(crate::keys::UNLOCK_MESSAGE);
                invocation = before;
            }
            invocation
        }
        Call::Unlock { owner, lease } => kind.unlock(name, &field(owner), lease, PubSub::Classic),
        Call::Withdraw { owner, allowance } => kind
            .withdraw(name, &field(owner), allowance as u64, PubSub::Classic)
            .expect("the fair lock withdraws"),
        Call::Renew { owner, lease } => {
            let mut invocation = ScriptCall::new(kind.renew_script());
            invocation.arg(lease);
            kind.add_renewal(&mut invocation, name, &field(owner));
            invocation
        }
        Call::Foreign { owner, lease } => kind.release(
            Unlocking::Foreign,
            name,
            &field(owner),
            lease,
            PubSub::Classic,
        ),
        Call::SetLease {
            owner,
            lease,
            counted,
        } => kind.set_lease(name, &field(owner), lease, counted as usize),
    }
}

async fn run_lua(
    connection: &mut MultiplexedConnection,
    invocation: &ScriptCall,
) -> Option<Vec<i64>> {
    let _: String = invocation
        .script()
        .prepare_invoke()
        .load_async(connection)
        .await
        .unwrap();
    integers(invocation.evalsha().query_async(connection).await.unwrap())
}

/// Runs `call` on the mirror at `now`: its reply (an integer as one element), and what it
/// did besides.
fn run_mirror(
    store: &mut FairStore,
    scripts: Scripts,
    now: i64,
    call: Call,
) -> (Option<Vec<i64>>, Outcome) {
    let none = Breakage::None;
    let outcome = match call {
        Call::Acquire {
            owner,
            lease,
            allowance,
        } => store.acquire(scripts, none, now, owner, lease, allowance),
        Call::Unlock { owner, lease } => store.unlock(none, now, owner, lease),
        Call::Withdraw { owner, allowance } => store.withdraw(none, now, owner, allowance),
        Call::Renew { owner, lease } => Outcome {
            reply: Some(store.renew(scripts, now, owner, lease)),
            ..Outcome::default()
        },
        Call::Foreign { owner, lease } => {
            let (reply, outcome) = store.foreign_unlock(now, owner, lease);
            return (reply.map(pair), outcome);
        }
        Call::SetLease {
            owner,
            lease,
            counted,
        } => Outcome {
            reply: Some(store.set_lease(now, owner, lease, counted)),
            ..Outcome::default()
        },
    };
    let reply = match outcome.first {
        true => Some(Vec::new()),
        false => outcome.reply.map(|n| vec![n]),
    };
    (reply, outcome)
}

/// Whether `real` lies between the mirror's values at the two ends of the interval.
fn between(real: f64, a: i64, b: i64) -> bool {
    let (low, high) = (a.min(b) - CLOCK_SLACK_MS, a.max(b) + CLOCK_SLACK_MS);
    (low as f64..=high as f64).contains(&real)
}

/// Mirrors a store's expiry as `PEXPIRETIME` reads.
fn expiry(store: &FairStore) -> i64 {
    match (store.hash.fields.is_empty(), store.hash.expires_at) {
        (true, _) => -2,
        (false, None) => -1,
        (false, Some(at)) => at,
    }
}

async fn cross_check(scripts: Scripts, calls: Calls, cases: usize) {
    let server = Server::start();
    let mut connection = server.connect().await;
    let (_, port): (String, u16) =
        query(&mut connection, redis::cmd("CONFIG").arg("GET").arg("port")).await;
    let name = LockName::new("model-fair-mirror", 512).unwrap();
    // Every waiter's channel, and a fence that marks the end of one case's wake-ups.
    let fence = name.fair_waiter_channel("fence");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut subscriber = client.get_async_pubsub().await.unwrap();
    for owner in 1..=4 {
        subscriber
            .subscribe(name.fair_waiter_channel(&field(owner)))
            .await
            .unwrap();
    }
    subscriber.subscribe(&fence).await.unwrap();
    let mut messages = subscriber.into_on_message();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xfa1e);
    let mut woken = 0;
    for case in 0..cases {
        let (start, mut call) = generate(&mut rng, calls);
        if scripts == Scripts::Before {
            if let Call::Renew { owner, lease } = call {
                // The renewal is the reentrant lock's (checked there): exercise the acquire.
                call = Call::Acquire {
                    owner,
                    lease,
                    allowance: 3_000,
                };
            }
        }
        let t0 = time(&mut connection).await;
        set_up(&mut connection, &name, &start, t0).await;
        let invocation = invocation(scripts, &name, call);
        let before = time(&mut connection).await;
        let lua = run_lua(&mut connection, &invocation).await;
        let after = time(&mut connection).await;
        let (fields, real_expiry, queue, deadlines) = read_back(&mut connection, &name).await;
        let _: () = query(&mut connection, redis::cmd("PUBLISH").arg(&fence).arg("0")).await;
        let mut published = Vec::new();
        loop {
            let message = tokio::time::timeout(Duration::from_secs(10), messages.next())
                .await
                .expect("the fence arrives")
                .expect("the subscription stays");
            let channel = message.get_channel_name().to_string();
            if channel == fence {
                break;
            }
            published.push(owner_of(&channel));
        }
        let context = format!("case {case} ({scripts:?}): {start:?}, {call:?}");
        assert!(
            after - t0 < 1_000,
            "the calls took {} ms: {context}",
            after - t0
        );
        // The mirror at both ends of the interval the script ran in.
        let (mut early, mut late) = (start.at(t0), start.at(t0));
        let (early_reply, at_early) = run_mirror(&mut early, scripts, before, call);
        let (late_reply, at_late) = run_mirror(&mut late, scripts, after, call);
        assert_eq!(at_early.woke, at_late.woke, "branches: {context}");
        assert_eq!(early.hash.fields, late.hash.fields, "branches: {context}");
        assert_eq!(early.queue, late.queue, "branches: {context}");
        match (
            lua.as_deref(),
            early_reply.as_deref(),
            late_reply.as_deref(),
        ) {
            (Some(&[real]), Some(&[a]), Some(&[b])) => {
                assert!(
                    between(real as f64, a, b),
                    "reply {real} vs {a}..{b}: {context}"
                )
            }
            (real, model, _) => assert_eq!(real, model, "reply: {context}"),
        }
        assert_eq!(fields, early.hash.fields, "hold counts: {context}");
        let (a, b) = (expiry(&early), expiry(&late));
        if a < 0 || b < 0 {
            assert_eq!((real_expiry, real_expiry), (a, b), "expiry: {context}");
        } else {
            assert!(
                between(real_expiry as f64, a, b),
                "expiry {real_expiry} vs {a}..{b}: {context}"
            );
        }
        assert_eq!(queue, early.queue, "queue: {context}");
        assert!(
            deadlines.keys().eq(early.deadlines.keys()),
            "deadlines {deadlines:?} vs {:?}: {context}",
            early.deadlines
        );
        for (owner, &real) in &deadlines {
            let (a, b) = (early.deadlines[owner], late.deadlines[owner]);
            assert!(
                between(real, a, b),
                "deadline of {owner}: {real} vs {a}..{b}: {context}"
            );
        }
        assert_eq!(
            published,
            Vec::from_iter(at_early.woke),
            "wake-ups: {context}"
        );
        woken += published.len();
    }
    // The generated cases wake waiters often enough for the comparison to mean something
    // (of the lease-control calls, only a foreign unlock of an owner's last hold wakes).
    let wanted = match calls {
        Calls::Scripts => cases / 20,
        Calls::LeaseControl => cases / 100,
    };
    assert!(woken > wanted, "only {woken} wake-ups in {cases} cases");
}

#[tokio::test]
async fn the_fair_scripts_and_their_mirrors_agree_on_a_real_redis() {
    cross_check(Scripts::Current, Calls::Scripts, 2_000).await;
}

#[tokio::test]
async fn the_fair_foreign_unlock_and_set_lease_and_their_mirrors_agree_on_a_real_redis() {
    cross_check(Scripts::Current, Calls::LeaseControl, 1_000).await;
}

#[tokio::test]
async fn the_fair_acquire_before_the_lease_truth_fixes_and_its_mirror_agree_on_a_real_redis() {
    cross_check(Scripts::Before, Calls::Scripts, 2_000).await;
}
