//! Each read-write script and its Rust mirror (`super::store`), run side by side on a real
//! Redis over generated inputs: the same starting keys (the hash's mode, hold counts and
//! TTL, the read holds' timeout keys and theirs), the same call through the library's own
//! call builders, then the same reply, the same hash and the same TTLs (within the time the
//! round trip took). The scripts as they were before the lease-truth fixes are checked
//! against their mirrors the same way, so the counterexamples the model finds on them are
//! the old scripts', not the mirror's.

use super::store::{Mode, Scripts, Store, OWNERS};
use crate::keys::{LockName, READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};
use crate::lock::kind::{LockKind, Unlocking};
use crate::model::mirror::{integers, pair, RENEW_BEFORE};
use crate::model::server::Server;
use crate::model::store::SetLease;
use crate::node::connection::PubSub;
use crate::node::publishing::PublishingScript;
use crate::script::ScriptCall;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redis::Script;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// How far a real key's PTTL may trail the mirror's (the calls' round trips, on a loaded
/// machine). The leases and TTLs generated differ by more wherever the scripts differ.
const TTL_SLACK_MS: i64 = 500;
/// How many timeout keys of each owner are looked at (more than the store has room for:
/// a stray key would show).
const MAX_N: u32 = 6;

/// `read/renew.lua` before the fixes: the hash and every timeout key of the reader set to
/// the lease, answering `1`.
static READ_RENEW_BEFORE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local renewed = {}
        for i = 1, #KEYS / 2 do
            local key, tag, field = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
            local ok, count = pcall(redis.call, 'hget', key, field)
            count = ok and tonumber(count)
            if count then
                redis.call('pexpire', key, ARGV[1])
                for n = count, 1, -1 do
                    redis.call('pexpire', tag .. ':' .. field .. ':rwlock_timeout:' .. n, ARGV[1])
                end
                renewed[i] = 1
            else
                renewed[i] = 0
            end
        end
        return renewed",
    )
});

/// `write/unlock.lua` before the fixes: holds left set the hash to the lease sent; the
/// last one turned the lock into a read lock (keeping the hash's TTL) when other fields
/// remained.
static WRITE_UNLOCK_BEFORE: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&[
        "if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
            return nil
        end
        local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
        if holds > 0 then
            redis.call('pexpire', KEYS[1], ARGV[2])
            return 0
        end
        redis.call('hdel', KEYS[1], ARGV[3])
        if redis.call('hlen', KEYS[1]) == 1 then
            redis.call('del', KEYS[1])
            publish(KEYS[2], ARGV[1])
            return 1
        end
        redis.call('hset', KEYS[1], 'mode', 'read')
        publish(KEYS[2], ARGV[4])
        return 1",
    ])
});

/// `read/unlock.lua` before the fixes: the reader's remaining timeout keys were left as
/// they were (the one that goes is the last, whichever hold was let go).
static READ_UNLOCK_BEFORE: LazyLock<PublishingScript> = LazyLock::new(|| {
    PublishingScript::new(&["local mode = redis.call('hget', KEYS[1], 'mode')
        if mode == false or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
            return nil
        end
        local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
        if holds == 0 then
            redis.call('hdel', KEYS[1], ARGV[3])
        end
        redis.call('del', KEYS[3] .. ':' .. (holds + 1))
        if redis.call('hlen', KEYS[1]) > 1 then
            local longest = -3
            for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
                local count = tonumber(redis.call('hget', KEYS[1], field))
                if count then
                    for n = count, 1, -1 do
                        local key = KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. n
                        longest = math.max(longest, redis.call('pttl', key))
                    end
                end
            end
            if longest > 0 then
                if mode == 'write' then
                    longest = math.max(longest, redis.call('pttl', KEYS[1]))
                end
                redis.call('pexpire', KEYS[1], longest)
                return 0
            end
            if mode == 'write' then
                return 0
            end
        end
        redis.call('del', KEYS[1])
        publish(KEYS[2], ARGV[1])
        return 1"])
});

/// One generated call.
#[derive(Debug, Clone, Copy)]
enum Call {
    ReadAcquire {
        owner: u8,
        lease: u64,
    },
    ReadRenew {
        owner: u8,
        lease: u64,
    },
    ReadUnlock {
        owner: u8,
        lease: u64,
    },
    WriteAcquire {
        owner: u8,
        lease: u64,
    },
    WriteRenew {
        owner: u8,
        lease: u64,
    },
    WriteUnlock {
        owner: u8,
        lease: u64,
    },
    /// `set_lease.lua` (a guard's extend) with `counted` holds the caller knows of.
    ReadSetLease {
        owner: u8,
        lease: u64,
        counted: u32,
    },
    WriteSetLease {
        owner: u8,
        lease: u64,
        counted: u32,
    },
    /// The foreign unlock (`Lock::unlock_as`), `lease` its lease for a hash without expiry.
    ReadForeign {
        owner: u8,
        lease: u64,
    },
    WriteForeign {
        owner: u8,
        lease: u64,
    },
}

fn reader(owner: u8) -> String {
    format!("mirror-client:{owner}")
}

fn writer(owner: u8) -> String {
    LockKind::Write.field(reader(owner))
}

fn timeout_key(name: &LockName, owner: u8, n: u32) -> String {
    format!("{}:{n}", name.read_timeout_prefix(&reader(owner)))
}

/// Every key the generated cases may touch.
fn all_keys(name: &LockName) -> Vec<String> {
    let mut keys = vec![name.as_str().to_string()];
    for owner in 1..=OWNERS as u8 {
        keys.extend((1..=MAX_N).map(|n| timeout_key(name, owner, n)));
    }
    keys
}

/// Puts `store` (at time 0) into Redis.
async fn set_up(connection: &mut MultiplexedConnection, name: &LockName, store: &Store) {
    let mut pipe = redis::pipe();
    pipe.del(all_keys(name)).ignore();
    let key = name.as_str();
    if let Some(mode) = store.mode {
        let mode = match mode {
            Mode::Read => "read",
            Mode::Write => "write",
        };
        pipe.hset(key, "mode", mode).ignore();
        for (owner, count) in store.readers() {
            pipe.hset(key, reader(owner), count).ignore();
        }
        for (owner, count) in store.writers() {
            pipe.hset(key, writer(owner), count).ignore();
        }
        if let Some(at) = store.expires_at {
            pipe.pexpire(key, at).ignore();
        }
    }
    for ((owner, n), at) in store.timeouts() {
        pipe.cmd("SET")
            .arg(timeout_key(name, owner, n))
            .arg(1)
            .arg("PX")
            .arg(at)
            .ignore();
    }
    let _: () = pipe.query_async(connection).await.unwrap();
}

/// What Redis holds after a call: the hash's fields, its PTTL, and each timeout key's PTTL
/// (-2: none).
#[derive(Debug)]
struct Observed {
    fields: BTreeMap<String, String>,
    pttl: i64,
    timeouts: BTreeMap<(u8, u32), i64>,
}

async fn read_back(connection: &mut MultiplexedConnection, name: &LockName) -> Observed {
    let (fields, pttl): (BTreeMap<String, String>, i64) = redis::pipe()
        .hgetall(name.as_str())
        .pttl(name.as_str())
        .query_async(connection)
        .await
        .unwrap();
    let slots: Vec<(u8, u32)> = (1..=OWNERS as u8)
        .flat_map(|owner| (1..=MAX_N).map(move |n| (owner, n)))
        .collect();
    let mut pipe = redis::pipe();
    for &(owner, n) in &slots {
        pipe.pttl(timeout_key(name, owner, n));
    }
    let pttls: Vec<i64> = pipe.query_async(connection).await.unwrap();
    Observed {
        fields,
        pttl,
        timeouts: slots.into_iter().zip(pttls).collect(),
    }
}

/// The hash's fields as the mirror has them, spelt as in Redis.
fn fields_of(store: &Store) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    if let Some(mode) = store.mode {
        let mode = match mode {
            Mode::Read => "read",
            Mode::Write => "write",
        };
        fields.insert("mode".to_string(), mode.to_string());
    }
    for (owner, count) in store.readers() {
        fields.insert(reader(owner), count.to_string());
    }
    for (owner, count) in store.writers() {
        fields.insert(writer(owner), count.to_string());
    }
    fields
}

/// The call `call` makes as the library builds it (the old scripts where they differed).
fn invocation(scripts: Scripts, name: &LockName, call: Call) -> ScriptCall {
    let (read, write) = (LockKind::Read, LockKind::Write);
    let pubsub = PubSub::Classic;
    match (scripts, call) {
        (_, Call::ReadAcquire { owner, lease }) => {
            read.acquire(name, &reader(owner), lease, false, 0, pubsub)
        }
        (_, Call::ReadRenew { owner, lease }) => {
            let script = match scripts {
                Scripts::Current => read.renew_script(),
                Scripts::Before => &READ_RENEW_BEFORE,
            };
            let mut invocation = ScriptCall::new(script);
            invocation.arg(lease);
            read.add_renewal(&mut invocation, name, &reader(owner));
            invocation
        }
        (Scripts::Current, Call::ReadUnlock { owner, lease }) => {
            read.unlock(name, &reader(owner), lease, pubsub)
        }
        // The same keys and arguments as now.
        (Scripts::Before, Call::ReadUnlock { owner, lease }) => {
            let mut invocation =
                ScriptCall::with_key(READ_UNLOCK_BEFORE.get(pubsub), name.as_str());
            invocation
                .key(name.rwlock_channel())
                .key(name.read_timeout_prefix(&reader(owner)))
                .key(name.hash_tagged())
                .arg(UNLOCK_MESSAGE)
                .arg(lease)
                .arg(reader(owner));
            invocation
        }
        (_, Call::WriteAcquire { owner, lease }) => {
            write.acquire(name, &writer(owner), lease, false, 0, pubsub)
        }
        (_, Call::WriteRenew { owner, lease }) => {
            let script = match scripts {
                Scripts::Current => write.renew_script(),
                Scripts::Before => &RENEW_BEFORE,
            };
            let mut invocation = ScriptCall::new(script);
            invocation.arg(lease);
            write.add_renewal(&mut invocation, name, &writer(owner));
            invocation
        }
        (Scripts::Current, Call::WriteUnlock { owner, lease }) => {
            write.unlock(name, &writer(owner), lease, pubsub)
        }
        // As the library called it then: the name and the channel; the freed message, the
        // lease, the field and the message for a lock left to the writer's read holds.
        (Scripts::Before, Call::WriteUnlock { owner, lease }) => {
            let mut invocation =
                ScriptCall::with_key(WRITE_UNLOCK_BEFORE.get(pubsub), name.as_str());
            invocation
                .key(name.rwlock_channel())
                .arg(READ_UNLOCK_MESSAGE)
                .arg(lease)
                .arg(writer(owner))
                .arg(READ_UNLOCK_MESSAGE);
            invocation
        }
        (
            _,
            Call::ReadSetLease {
                owner,
                lease,
                counted,
            },
        ) => read.set_lease(name, &reader(owner), lease, counted as usize),
        (
            _,
            Call::WriteSetLease {
                owner,
                lease,
                counted,
            },
        ) => write.set_lease(name, &writer(owner), lease, counted as usize),
        (_, Call::ReadForeign { owner, lease }) => {
            read.release(Unlocking::Foreign, name, &reader(owner), lease, pubsub)
        }
        (_, Call::WriteForeign { owner, lease }) => {
            write.release(Unlocking::Foreign, name, &writer(owner), lease, pubsub)
        }
    }
}

/// Runs `call` as the Lua script of `scripts`; the reply as the mirror gives it.
async fn run_lua(
    connection: &mut MultiplexedConnection,
    scripts: Scripts,
    name: &LockName,
    call: Call,
) -> Option<Vec<i64>> {
    let invocation = invocation(scripts, name, call);
    let _: String = invocation
        .script()
        .prepare_invoke()
        .load_async(connection)
        .await
        .unwrap();
    let reply: redis::Value = invocation.evalsha().query_async(connection).await.unwrap();
    integers(reply)
}

/// Runs `call` on the mirror at time 0.
fn run_mirror(store: &mut Store, scripts: Scripts, call: Call) -> Option<Vec<i64>> {
    let one = |n: i64| vec![n];
    let current = SetLease::Current;
    match call {
        // The scripts say when a grant is the owner's first hold (a status OK: no element).
        Call::ReadAcquire { owner, lease } => {
            let first = store.at(0).reader(owner) == 0;
            match store.read_acquire(0, owner, lease) {
                None if first => Some(Vec::new()),
                reply => reply.map(one),
            }
        }
        Call::ReadRenew { owner, lease } => Some(one(store.read_renew(scripts, 0, owner, lease))),
        Call::ReadUnlock { owner, lease } => store.read_unlock(scripts, 0, owner, lease).map(one),
        Call::WriteAcquire { owner, lease } => {
            let first = store.at(0).writer(owner) == 0;
            match store.write_acquire(0, owner, lease) {
                None if first => Some(Vec::new()),
                reply => reply.map(one),
            }
        }
        Call::WriteRenew { owner, lease } => Some(one(store.write_renew(scripts, 0, owner, lease))),
        Call::WriteUnlock { owner, lease } => store.write_unlock(scripts, 0, owner, lease).map(one),
        Call::ReadSetLease {
            owner,
            lease,
            counted,
        } => Some(one(store.read_set_lease(current, 0, owner, lease, counted))),
        Call::WriteSetLease {
            owner,
            lease,
            counted,
        } => Some(one(store.write_set_lease(current, 0, owner, lease, counted))),
        Call::ReadForeign { owner, lease } => store.read_foreign_unlock(0, owner, lease).map(pair),
        Call::WriteForeign { owner, lease } => {
            store.write_foreign_unlock(0, owner, lease).map(pair)
        }
    }
}

/// A TTL long enough not to run out during the round trips.
fn ttl(rng: &mut impl Rng) -> i64 {
    rng.random_range(1_500..8_000i64)
}

/// A starting lock: mostly shapes the scripts make (readers; a writer with or without its
/// own read holds), sometimes odd ones (a reader beside a writer of another owner, a writer
/// field in a read lock), with the read holds' timeout keys there or gone and now and then
/// a leftover key past a reader's count.
fn generate_store(rng: &mut impl Rng) -> Store {
    let mut store = Store::default();
    let odd = rng.random_bool(0.1);
    store.mode = match rng.random_range(0..10) {
        0 | 1 => None,
        2..=5 => Some(Mode::Read),
        _ => Some(Mode::Write),
    };
    match store.mode {
        None => {}
        Some(Mode::Read) => {
            for owner in 1..=2u8 {
                let count = rng.random_range(0..=3u32);
                store.set_reader(owner, count);
            }
            if store.readers().next().is_none() {
                store.set_reader(rng.random_range(1..=2), 1);
            }
            if odd {
                store.set_writer(rng.random_range(1..=2), 1);
            }
        }
        Some(Mode::Write) => {
            let owner = rng.random_range(1..=2u8);
            store.set_writer(owner, rng.random_range(1..=3));
            store.set_reader(owner, rng.random_range(0..=2u32));
            if odd {
                store.set_reader(3 - owner, 1);
            }
        }
    }
    if store.mode.is_some() {
        store.expires_at = (!rng.random_bool(0.1)).then(|| ttl(rng));
    }
    for owner in 1..=2u8 {
        let count = store.reader(owner);
        for n in 1..=count {
            if rng.random_bool(0.85) {
                store.set_timeout(owner, n, Some(ttl(rng)));
            }
        }
        if rng.random_bool(0.2) {
            store.set_timeout(owner, count + 1, Some(ttl(rng)));
        }
    }
    store
}

fn generate(rng: &mut impl Rng) -> (Store, Call) {
    let store = generate_store(rng);
    let owner = rng.random_range(1..=OWNERS as u8);
    let lease = match rng.random_range(0..4) {
        0 => 1_000,
        1 => 3_000,
        2 => 4_500,
        _ => rng.random_range(1_000..9_000),
    };
    let counted = rng.random_range(0..=3);
    let call = match rng.random_range(0..10) {
        0 => Call::ReadAcquire { owner, lease },
        1 => Call::ReadRenew { owner, lease },
        2 => Call::ReadUnlock { owner, lease },
        3 => Call::WriteAcquire { owner, lease },
        4 => Call::WriteRenew { owner, lease },
        5 => Call::WriteUnlock { owner, lease },
        6 => Call::ReadSetLease {
            owner,
            lease,
            counted,
        },
        7 => Call::WriteSetLease {
            owner,
            lease,
            counted,
        },
        8 => Call::ReadForeign { owner, lease },
        _ => Call::WriteForeign { owner, lease },
    };
    (store, call)
}

/// A real PTTL (`real`) against the mirror's (`model`) at time 0: equal when either is
/// not a positive TTL, else trailing it by the round trip at most.
fn same_ttl(real: i64, model: i64) -> bool {
    if real <= 0 || model <= 0 {
        real == model
    } else {
        (0..=TTL_SLACK_MS).contains(&(model - real))
    }
}

async fn cross_check(scripts: Scripts, cases: usize) {
    let server = Server::start();
    let mut connection = server.connect().await;
    let name = LockName::new("model-rw", 512).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    for case in 0..cases {
        let (start, call) = generate(&mut rng);
        set_up(&mut connection, &name, &start).await;
        let lua = run_lua(&mut connection, scripts, &name, call).await;
        let real = read_back(&mut connection, &name).await;
        let mut mirror = start;
        let mirrored = run_mirror(&mut mirror, scripts, call);
        let context = format!("case {case} ({scripts:?}): {start:?}, {call:?}");
        match (lua.as_deref(), mirrored.as_deref()) {
            // A PTTL in a reply trails the mirror's by the round trip, like the keys'.
            (Some(&[real]), Some(&[model])) if real > 1 && model > 1 => {
                assert!(same_ttl(real, model), "reply {real} vs {model}: {context}")
            }
            (real, model) => assert_eq!(real, model, "reply: {context}"),
        }
        assert_eq!(real.fields, fields_of(&mirror), "hash: {context}");
        let model_pttl = mirror.pttl(0);
        assert!(
            same_ttl(real.pttl, model_pttl),
            "hash TTL {} vs the mirror's {model_pttl}: {context}",
            real.pttl
        );
        for (&(owner, n), &pttl) in &real.timeouts {
            let model = mirror.timeout_pttl(0, owner, n);
            assert!(
                same_ttl(pttl, model),
                "timeout key {owner}:{n}: TTL {pttl} vs the mirror's {model}: {context}"
            );
        }
    }
}

#[tokio::test]
async fn the_read_write_scripts_and_their_mirrors_agree_on_a_real_redis() {
    cross_check(Scripts::Current, 2_000).await;
}

#[tokio::test]
async fn the_read_write_scripts_before_the_lease_truth_fixes_and_their_mirrors_agree() {
    cross_check(Scripts::Before, 2_000).await;
}
