//! Each semaphore script and its Rust mirror (`super::store`), run side by side on a real
//! Redis over generated inputs: the same starting keys (a permit count or none, a receipt or
//! none, a zset of permits some expired and some not), the same call made by the library's
//! own call builders, then the same reply and the same keys.
//!
//! The scripts that read Redis's clock are mirrored at the `TIME` read just before the call
//! and at the one just after: the real reply and expiries must lie between the two mirrors'
//! (and match them exactly where both agree). Expiries are generated well away from those
//! instants, so which permits have expired is the same at both. The plain acquire as it was
//! before receipts is checked against its mirror the same way.

use super::super::server::Server;
use super::store::{Member, Receipt, Scripts, Store, NEVER};
use crate::keys::LockName;
use crate::node::connection::PubSub;
use crate::node::publishing::PublishingScript;
use crate::script::ScriptCall;
use crate::semaphore::kind::{Kind, Take, Unanswered};
use crate::semaphore::lease_entry::renewal_call;
use crate::semaphore::{
    receipt_key, PermitId, SemaphoreKeys, ADD, AVAILABLE, SET, SETTLE, TRY_SET,
};
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

/// How far a receipt's real PTTL may trail the TTL it was given (the round trips).
const TTL_SLACK_MS: i64 = 500;
/// The receipt's lifetime the calls ask for (the library's settle window).
const SETTLE_WINDOW_MS: i64 = 300_000;
/// The TTL a generated receipt starts with, unlike the window, so a rewrite shows.
const SETUP_RECEIPT_TTL_MS: i64 = 100_000;
/// The receipt the generated calls use.
const RECEIPT: Member = 0;
/// Generated permits have expired at least this long before the case starts, or expire
/// at least [`LIVE_MS`] after; a case must end within [`LIVE_MS`] of its start.
const EXPIRED_MS: i64 = 1_000;
const LIVE_MS: i64 = 3_000;
/// The model's names of the permits a generated acquire asks for: from here on.
const NEW_IDS: Member = 1_000;

/// `acquire.lua` before receipts.
static ACQUIRE_BEFORE: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[
        include_str!("../../semaphore/common.lua"),
        "local available = permits_of(KEYS[1])
        local wanted = tonumber(ARGV[1])
        if available >= wanted then
            return {1, redis.call('decrby', KEYS[1], wanted)}
        end
        return {0, available}",
    ])
});

/// The scripts, each checked on its own cases.
#[derive(Debug, Clone, Copy)]
enum Script {
    TrySet,
    Set,
    Add,
    Available,
    Acquire,
    Settle,
    ExpirableAcquire,
    ExpirableRelease,
    ExpirableSettle,
    Renew,
}

/// One generated call.
#[derive(Debug, Clone)]
enum Call {
    TrySet(u32),
    Set { expirable: bool, permits: u32 },
    Add(i64),
    Available { expirable: bool },
    Acquire(u32),
    Settle(u32),
    ExpirableAcquire { lease: u64, permits: u32 },
    ExpirableRelease(Vec<Member>),
    ExpirableSettle(Vec<Member>),
    Renew { lease: u64, ids: Vec<Member> },
}

/// A permit's raw id in Redis.
fn raw(member: Member) -> Vec<u8> {
    let mut raw = vec![0xab; 14];
    raw.extend(member.to_be_bytes());
    raw
}

fn permit_id(member: Member) -> PermitId {
    let hex: String = raw(member).iter().map(|b| format!("{b:02x}")).collect();
    PermitId::parse(&hex).unwrap()
}

/// The semaphore's names in Redis.
struct Names {
    name: LockName,
    plain: SemaphoreKeys,
    expirable: SemaphoreKeys,
    receipt: String,
    timeouts: String,
}

impl Names {
    fn new() -> Self {
        let name = LockName::new("model-semaphore", 512).unwrap();
        let plain = SemaphoreKeys::new(&name, Kind::Plain);
        let expirable = SemaphoreKeys::new(&name, Kind::Expirable);
        let receipt = receipt_key(&plain.count, "model-mirror");
        let timeouts = expirable.timeouts.clone().unwrap();
        Names {
            name,
            plain,
            expirable,
            receipt,
            timeouts,
        }
    }
}

async fn time_ms(connection: &mut MultiplexedConnection) -> i64 {
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(connection).await.unwrap();
    seconds * 1_000 + micros / 1_000
}

/// Puts `store` (expiries already absolute) into Redis, in `pipe`.
fn set_up(pipe: &mut redis::Pipeline, names: &Names, store: &Store) {
    pipe.cmd("DEL")
        .arg(&names.plain.count)
        .arg(&names.receipt)
        .arg(&names.timeouts)
        .ignore();
    if let Some(count) = store.count {
        pipe.cmd("SET").arg(&names.plain.count).arg(count).ignore();
    }
    if let Some(receipt) = store.receipts.get(&RECEIPT) {
        pipe.cmd("SET")
            .arg(&names.receipt)
            .arg(receipt.as_str())
            .arg("PX")
            .arg(SETUP_RECEIPT_TTL_MS)
            .ignore();
    }
    for (member, expiry) in &store.timeouts {
        pipe.cmd("ZADD")
            .arg(&names.timeouts)
            .arg(*expiry)
            .arg(raw(*member))
            .ignore();
    }
}

/// What one case's round trip brings back: the clock before and after the call, its
/// reply, and the keys after it (count, receipt, the receipt's PTTL, the zset).
type Outcome = (
    (i64, i64),
    redis::Value,
    (i64, i64),
    Option<i64>,
    Option<String>,
    i64,
    Vec<(Vec<u8>, f64)>,
);

/// Sets `store` up, runs `call` between two reads of Redis's clock and reads the keys
/// back, in one round trip: the instants before and after (ms), the reply as the mirror
/// gives it, the store as Redis has it and the receipt's PTTL. Loads each script once.
async fn run_lua(
    connection: &mut MultiplexedConnection,
    loaded: &mut BTreeSet<String>,
    names: &Names,
    (store, call): (&Store, &ScriptCall),
    known: &BTreeMap<Vec<u8>, Member>,
) -> (i64, Vec<i64>, i64, Store, i64) {
    let script = call.script();
    if loaded.insert(script.get_hash().to_string()) {
        let _: String = script
            .prepare_invoke()
            .load_async(connection)
            .await
            .unwrap();
    }
    let mut pipe = redis::pipe();
    set_up(&mut pipe, names, store);
    pipe.cmd("TIME")
        .add_command(call.evalsha().into_owned())
        .cmd("TIME")
        .cmd("GET")
        .arg(&names.plain.count)
        .cmd("GET")
        .arg(&names.receipt)
        .cmd("PTTL")
        .arg(&names.receipt)
        .cmd("ZRANGE")
        .arg(&names.timeouts)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES");
    let (before, reply, after, count, receipt, pttl, timeouts): Outcome =
        pipe.query_async(connection).await.unwrap();
    let reply = match reply {
        redis::Value::Int(n) => vec![n],
        redis::Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                redis::Value::Int(n) => n,
                other => panic!("unexpected item {other:?}"),
            })
            .collect(),
        other => panic!("unexpected reply {other:?}"),
    };
    let receipts = receipt
        .map(|value| match value.as_str() {
            "taken" => (RECEIPT, Receipt::Taken),
            "settled" => (RECEIPT, Receipt::Settled),
            other => panic!("receipt {other:?}"),
        })
        .into_iter()
        .collect();
    let timeouts = timeouts
        .into_iter()
        .map(|(id, expiry)| (known[&id], expiry as i64))
        .collect();
    let real = Store {
        count,
        receipts,
        timeouts,
    };
    let ms = |(seconds, micros): (i64, i64)| seconds * 1_000 + micros / 1_000;
    (ms(before), reply, ms(after), real, pttl)
}

/// The call as the library builds it, and the ids it asks for (a permit-expirable acquire).
fn invocation(scripts: Scripts, names: &Names, call: &Call) -> (ScriptCall, Vec<Vec<u8>>) {
    let pubsub = PubSub::Classic;
    let keys = |expirable: bool| match expirable {
        true => &names.expirable,
        false => &names.plain,
    };
    let built = match call {
        Call::TrySet(permits) => {
            let mut call = ScriptCall::with_key(TRY_SET.get(pubsub), names.plain.count.as_str());
            call.key(names.plain.channel.as_str()).arg(*permits);
            call
        }
        Call::Set { expirable, permits } => {
            let mut call = keys(*expirable).invocation(SET.get(pubsub));
            call.arg(*permits);
            call
        }
        Call::Add(delta) => {
            let mut call = ScriptCall::with_key(ADD.get(pubsub), names.plain.count.as_str());
            call.key(names.plain.channel.as_str()).arg(*delta);
            call
        }
        Call::Available { expirable } => keys(*expirable).invocation(AVAILABLE.get(pubsub)),
        Call::Acquire(wanted) if scripts == Scripts::Before => {
            let mut call =
                ScriptCall::with_key(ACQUIRE_BEFORE.get(pubsub), names.plain.count.as_str());
            call.arg(*wanted);
            call
        }
        Call::Acquire(wanted) => {
            let take = Take {
                permits: *wanted,
                lease_ms: 0,
                receipt: &names.receipt,
                settle_window_ms: SETTLE_WINDOW_MS as u64,
            };
            Kind::Plain
                .rules()
                .acquire_call(&names.plain, pubsub, &take)
                .0
        }
        Call::Settle(permits) => {
            let mut call = names.plain.invocation(SETTLE.get(pubsub));
            call.key(names.receipt.as_str())
                .arg(*permits)
                .arg(SETTLE_WINDOW_MS);
            call
        }
        Call::ExpirableAcquire { lease, permits } => {
            let take = Take {
                permits: *permits,
                lease_ms: *lease,
                receipt: &names.receipt,
                settle_window_ms: SETTLE_WINDOW_MS as u64,
            };
            let (call, ids) = Kind::Expirable
                .rules()
                .acquire_call(&names.expirable, pubsub, &take);
            return (call, ids.into_iter().map(|id| id.raw).collect());
        }
        Call::ExpirableRelease(ids) => {
            let ids: Vec<PermitId> = ids.iter().map(|id| permit_id(*id)).collect();
            let permits = ids.len() as u32;
            Kind::Expirable
                .rules()
                .give_back_call(&names.expirable, pubsub, permits, &ids)
        }
        Call::ExpirableSettle(ids) => {
            let ids: Vec<PermitId> = ids.iter().map(|id| permit_id(*id)).collect();
            let unanswered = Unanswered {
                permits: ids.len() as u32,
                ids: &ids,
                receipt: &names.receipt,
                settle_window_ms: SETTLE_WINDOW_MS as u64,
            };
            Kind::Expirable
                .rules()
                .settle_call(&names.expirable, pubsub, &unanswered)
        }
        Call::Renew { lease, ids } => {
            let mut call = renewal_call(&names.name, *lease, pubsub);
            for id in ids {
                call.arg(raw(*id));
            }
            call
        }
    };
    (built, Vec::new())
}

/// Runs `call` on the mirror at `now`.
fn run_mirror(store: &mut Store, scripts: Scripts, now: i64, call: &Call) -> Vec<i64> {
    let clock = |expirable: bool| expirable.then_some(now);
    match call {
        Call::TrySet(permits) => vec![store.try_set(*permits)],
        Call::Set { expirable, permits } => vec![store.set(clock(*expirable), *permits)],
        Call::Add(delta) => vec![store.add(*delta)],
        Call::Available { expirable } => vec![store.available(clock(*expirable))],
        Call::Acquire(wanted) => store.acquire(scripts, RECEIPT, *wanted).to_vec(),
        Call::Settle(permits) => vec![store.settle(scripts, RECEIPT, *permits)],
        Call::ExpirableAcquire { lease, permits } => {
            let ids: Vec<Member> = (0..*permits as Member).map(|i| NEW_IDS + i).collect();
            store.expirable_acquire(scripts, now, (*lease, RECEIPT), &ids)
        }
        Call::ExpirableRelease(ids) => store.expirable_release(scripts, now, ids).to_vec(),
        Call::ExpirableSettle(ids) => store.expirable_settle(scripts, now, RECEIPT, ids).to_vec(),
        Call::Renew { lease, ids } => store.renew(scripts, now, *lease, ids),
    }
}

/// A starting store (expiries relative to the case's start) and a call.
fn generate(rng: &mut impl Rng, script: Script) -> (Store, Call) {
    let mut store = Store {
        count: (!rng.random_bool(0.1)).then(|| rng.random_range(-1..=4)),
        ..Store::default()
    };
    match rng.random_range(0..3) {
        0 => {}
        1 => {
            store.receipts.insert(RECEIPT, Receipt::Taken);
        }
        _ => {
            store.receipts.insert(RECEIPT, Receipt::Settled);
        }
    }
    for _ in 0..rng.random_range(0..=3) {
        let expiry = match rng.random_range(0..20) {
            0 => NEVER,
            1..=8 => -rng.random_range(EXPIRED_MS..=8_000),
            _ => rng.random_range(LIVE_MS..=9_000),
        };
        store.timeouts.insert(rng.random_range(1..=6), expiry);
    }
    let lease = match rng.random_range(0..4) {
        0 => 1_000,
        1 => 3_000,
        2 => 4_500,
        _ => rng.random_range(1_000..9_000),
    };
    let ids: Vec<Member> = (0..rng.random_range(1..=3))
        .map(|_| rng.random_range(1..=8))
        .collect();
    let permits = rng.random_range(1..=3u32);
    let call = match script {
        Script::TrySet => Call::TrySet(permits),
        Script::Set => Call::Set {
            expirable: rng.random_bool(0.5),
            permits: rng.random_range(0..=3),
        },
        Script::Add => Call::Add(rng.random_range(-2..=3)),
        Script::Available => Call::Available {
            expirable: rng.random_bool(0.5),
        },
        Script::Acquire => Call::Acquire(permits),
        Script::Settle => Call::Settle(permits),
        Script::ExpirableAcquire => Call::ExpirableAcquire { lease, permits },
        Script::ExpirableRelease => Call::ExpirableRelease(ids),
        Script::ExpirableSettle => Call::ExpirableSettle(ids),
        Script::Renew => Call::Renew { lease, ids },
    };
    (store, call)
}

fn between(real: i64, one: i64, other: i64) -> bool {
    one.min(other) <= real && real <= one.max(other)
}

/// Runs `cases` generated calls of each of `checked` against its mirror.
async fn cross_check(scripts: Scripts, checked: &[Script], cases: usize) {
    let server = Server::start();
    let mut connection = server.connect().await;
    let names = Names::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5e3a);
    let mut loaded = BTreeSet::new();
    // The last instant read from Redis's clock: the case's expiries are relative to it.
    let mut start = time_ms(&mut connection).await;
    for case in 0..cases * checked.len() {
        let (relative, call) = generate(&mut rng, checked[case % checked.len()]);
        let mut store = relative.clone();
        for expiry in store.timeouts.values_mut() {
            if *expiry < NEVER {
                *expiry += start;
            }
        }
        let (invocation, new_ids) = invocation(scripts, &names, &call);
        let mut known: BTreeMap<Vec<u8>, Member> =
            (1..=8).map(|member| (raw(member), member)).collect();
        known.extend(new_ids.into_iter().zip(NEW_IDS..));
        let (before, reply, after, real, pttl) = run_lua(
            &mut connection,
            &mut loaded,
            &names,
            (&store, &invocation),
            &known,
        )
        .await;
        let context = format!("case {case} ({scripts:?}): {relative:?} at {start}, {call:?}");
        assert!(
            after - start < LIVE_MS,
            "the case took {} ms, past the margin of its expiries: {context}",
            after - start
        );
        let (mut early, mut late) = (store.clone(), store.clone());
        let early_reply = run_mirror(&mut early, scripts, before, &call);
        let late_reply = run_mirror(&mut late, scripts, after, &call);
        // What does not depend on the instant is the same at both ends.
        assert_eq!(early.count, late.count, "{context}");
        assert_eq!(early.receipts, late.receipts, "{context}");
        assert_eq!(early_reply.len(), late_reply.len(), "{context}");

        assert_eq!(reply.len(), early_reply.len(), "reply {reply:?}: {context}");
        for ((real, one), other) in reply.iter().zip(&early_reply).zip(&late_reply) {
            assert!(
                between(*real, *one, *other),
                "reply {reply:?} vs {early_reply:?}..{late_reply:?}: {context}"
            );
        }
        assert_eq!(real.count, early.count, "count: {context}");
        assert_eq!(real.receipts, early.receipts, "receipt: {context}");
        if !real.receipts.is_empty() {
            let given = if early.receipts == store.receipts {
                SETUP_RECEIPT_TTL_MS
            } else {
                SETTLE_WINDOW_MS
            };
            assert!(
                pttl <= given && pttl >= given - TTL_SLACK_MS,
                "receipt TTL {pttl} vs {given}: {context}"
            );
        }
        let members = |store: &Store| store.timeouts.keys().copied().collect::<Vec<_>>();
        assert_eq!(members(&real), members(&early), "permits: {context}");
        assert_eq!(members(&late), members(&early), "{context}");
        for (id, expiry) in &real.timeouts {
            assert!(
                between(*expiry, early.timeouts[id], late.timeouts[id]),
                "expiry of {id}: {expiry} vs {}..{}: {context}",
                early.timeouts[id],
                late.timeouts[id]
            );
        }
        start = after;
    }
}

#[tokio::test]
async fn the_plain_semaphore_scripts_and_their_mirrors_agree_on_a_real_redis() {
    let scripts = [
        Script::TrySet,
        Script::Set,
        Script::Add,
        Script::Available,
        Script::Acquire,
        Script::Settle,
    ];
    cross_check(Scripts::Current, &scripts, 2_000).await;
}

#[tokio::test]
async fn the_permit_expirable_scripts_and_their_mirrors_agree_on_a_real_redis() {
    let scripts = [
        Script::ExpirableAcquire,
        Script::ExpirableRelease,
        Script::ExpirableSettle,
        Script::Renew,
    ];
    cross_check(Scripts::Current, &scripts, 2_000).await;
}

#[tokio::test]
async fn the_plain_acquire_before_receipts_and_its_mirror_agree_on_a_real_redis() {
    cross_check(Scripts::Before, &[Script::Acquire], 2_000).await;
}
