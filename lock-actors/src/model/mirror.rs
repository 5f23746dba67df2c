//! Each reentrant script (with the shared `set_lease.lua` and the foreign unlock made from
//! the kind's unlock) and its Rust mirror (`super::store`), run side by side on a real
//! Redis over generated inputs: the same starting key (owners' hold counts and a TTL, or no
//! key), the same call, then the same reply, the same hold counts and the same TTL (within
//! the time the round trip took). The scripts as they were before the lease-truth fixes
//! are checked against their mirrors the same way, so the counterexamples the model finds
//! on them are the old scripts', not the mirror's.

use super::server::Server;
use super::store::{Scripts, SetLease, Store};
use crate::keys::LockName;
use crate::lock::kind::{LockKind, Unlocking};
use crate::node::connection::PubSub;
use crate::script::ScriptCall;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redis::Script;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// How far a real key's PTTL may trail the mirror's (the calls' round trips, on a loaded
/// machine). The leases and TTLs generated differ by more wherever the scripts differ.
pub(super) const TTL_SLACK_MS: i64 = 500;

/// `reentrant/acquire.lua` before the fixes: a re-entry set the key's TTL to its lease.
static ACQUIRE_BEFORE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
            redis.call('hincrby', KEYS[1], ARGV[2], 1)
            redis.call('pexpire', KEYS[1], ARGV[1])
            return nil
        end
        return redis.call('pttl', KEYS[1])",
    )
});

/// `reentrant/renew.lua` before the fixes: a renewal set the key's TTL to the lease and
/// answered `1`.
pub(super) static RENEW_BEFORE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local renewed = {}
        for i = 1, #KEYS do
            local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
            if held == 1 then
                redis.call('pexpire', KEYS[i], ARGV[1])
                renewed[i] = 1
            else
                renewed[i] = 0
            end
        end
        return renewed",
    )
});

/// One generated call.
#[derive(Debug, Clone, Copy)]
enum Call {
    Acquire {
        owner: u8,
        lease: u64,
    },
    Renew {
        owner: u8,
        lease: u64,
    },
    Unlock {
        owner: u8,
        lease: u64,
    },
    Reconcile {
        owner: u8,
        lease: u64,
        counted: u32,
    },
    /// `set_lease.lua` (a guard's extend) with `counted` holds the caller knows of.
    SetLease {
        owner: u8,
        lease: u64,
        counted: u32,
    },
    /// The foreign unlock (`Lock::unlock_as`), `lease` its lease for a key without expiry.
    Foreign {
        owner: u8,
        lease: u64,
    },
}

pub(super) fn field(owner: u8) -> String {
    format!("mirror-client:{owner}")
}

/// Puts `store` (at time 0) into Redis under `key`.
pub(super) async fn set_up(connection: &mut MultiplexedConnection, key: &str, store: &Store) {
    let _: () = redis::cmd("DEL")
        .arg(key)
        .query_async(connection)
        .await
        .unwrap();
    for (owner, count) in &store.fields {
        let _: () = redis::cmd("HSET")
            .arg(key)
            .arg(field(*owner))
            .arg(*count)
            .query_async(connection)
            .await
            .unwrap();
    }
    if let (false, Some(at)) = (store.fields.is_empty(), store.expires_at) {
        let _: () = redis::cmd("PEXPIRE")
            .arg(key)
            .arg(at)
            .query_async(connection)
            .await
            .unwrap();
    }
}

/// The key's hold counts and PTTL as Redis has them.
pub(super) async fn read_back(
    connection: &mut MultiplexedConnection,
    key: &str,
) -> (BTreeMap<u8, u32>, i64) {
    let fields: BTreeMap<String, u32> = redis::cmd("HGETALL")
        .arg(key)
        .query_async(connection)
        .await
        .unwrap();
    let pttl: i64 = redis::cmd("PTTL")
        .arg(key)
        .query_async(connection)
        .await
        .unwrap();
    let fields = fields
        .into_iter()
        .map(|(name, count)| {
            let owner = name.rsplit(':').next().unwrap().parse().unwrap();
            (owner, count)
        })
        .collect();
    (fields, pttl)
}

/// Runs `call` as the Lua script of `scripts`; the reply as the mirror gives it (an array,
/// or an integer as one element).
async fn run_lua(
    connection: &mut MultiplexedConnection,
    scripts: Scripts,
    kind: LockKind,
    name: &LockName,
    call: Call,
) -> Option<Vec<i64>> {
    let invocation = match (scripts, call) {
        (Scripts::Current | Scripts::RenewIgnoresOwner, Call::Acquire { owner, lease }) => {
            kind.acquire(name, &field(owner), lease, false, 0, PubSub::Classic)
        }
        (Scripts::Before, Call::Acquire { owner, lease }) => {
            let mut invocation = ScriptCall::with_key(&ACQUIRE_BEFORE, name.as_str());
            invocation.arg(lease).arg(field(owner));
            invocation
        }
        (_, Call::Renew { owner, lease }) => {
            let script = match scripts {
                Scripts::Before => &RENEW_BEFORE,
                _ => kind.renew_script(),
            };
            let mut invocation = ScriptCall::new(script);
            invocation.arg(lease);
            kind.add_renewal(&mut invocation, name, &field(owner));
            invocation
        }
        (_, Call::Unlock { owner, lease }) => {
            kind.unlock(name, &field(owner), lease, PubSub::Classic)
        }
        (
            _,
            Call::Reconcile {
                owner,
                lease,
                counted,
            },
        ) => kind.reconcile(
            name,
            &field(owner),
            lease,
            counted as usize,
            PubSub::Classic,
        ),
        (
            _,
            Call::SetLease {
                owner,
                lease,
                counted,
            },
        ) => kind.set_lease(name, &field(owner), lease, counted as usize),
        (_, Call::Foreign { owner, lease }) => kind.release(
            Unlocking::Foreign,
            name,
            &field(owner),
            lease,
            PubSub::Classic,
        ),
    };
    let _: String = invocation
        .script()
        .prepare_invoke()
        .load_async(connection)
        .await
        .unwrap();
    let reply: redis::Value = invocation.evalsha().query_async(connection).await.unwrap();
    integers(reply)
}

/// A reply as the mirrors give it: nil → `None`, an integer → one element, an array of
/// integers → its elements.
pub(super) fn integers(reply: redis::Value) -> Option<Vec<i64>> {
    let integer = |value: &redis::Value| match value {
        redis::Value::Int(n) => *n,
        other => panic!("unexpected element {other:?}"),
    };
    match reply {
        redis::Value::Nil => None,
        // A status `OK` (an acquire's first hold of its owner) as no element.
        redis::Value::Okay => Some(Vec::new()),
        redis::Value::Int(n) => Some(vec![n]),
        redis::Value::Array(items) => Some(items.iter().map(integer).collect()),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// A pair reply (the foreign unlock's) as [`integers`] reads it.
pub(super) fn pair((a, b): (i64, i64)) -> Vec<i64> {
    vec![a, b]
}

/// Whether a real reply matches the mirror's at time 0: a PTTL (one element above 1)
/// trails the mirror's by the round trip at most, like the keys'; anything else is exact.
pub(super) fn same_reply(real: &Option<Vec<i64>>, model: &Option<Vec<i64>>) -> bool {
    match (real.as_deref(), model.as_deref()) {
        (Some(&[real]), Some(&[model])) if real > 1 && model > 1 => {
            (0..=TTL_SLACK_MS).contains(&(model - real))
        }
        _ => real == model,
    }
}

/// Runs `call` on the mirror at time 0.
fn run_mirror(store: &mut Store, scripts: Scripts, call: Call) -> Option<Vec<i64>> {
    let one = |n: i64| vec![n];
    match call {
        Call::Acquire { owner, lease } => {
            // The current script says when a grant is the owner's first hold.
            let first = scripts != Scripts::Before && store.free_at(0);
            match store.acquire(scripts, 0, owner, lease) {
                None if first => Some(Vec::new()),
                reply => reply.map(one),
            }
        }
        Call::Renew { owner, lease } => Some(one(store.renew(scripts, 0, owner, lease))),
        Call::Unlock { owner, lease } => store.unlock(0, owner, lease).map(one),
        Call::Reconcile {
            owner,
            lease,
            counted,
        } => Some(one(store.reconcile(0, owner, lease, counted))),
        Call::SetLease {
            owner,
            lease,
            counted,
        } => Some(one(store.set_lease(
            SetLease::Current,
            0,
            owner,
            lease,
            counted,
        ))),
        Call::Foreign { owner, lease } => store.foreign_unlock(0, owner, lease).map(pair),
    }
}

fn generate(rng: &mut impl Rng) -> (Store, Call) {
    let mut store = Store::default();
    for owner in 1..=2u8 {
        let count = rng.random_range(0..=3u32);
        if count > 0 {
            store.fields.insert(owner, count);
        }
    }
    // A TTL long enough not to run out during the round trips, or (rarely) none.
    store.expires_at = (!rng.random_bool(0.1)).then(|| rng.random_range(1_500..8_000i64));
    let owner = rng.random_range(1..=3u8);
    let lease = match rng.random_range(0..4) {
        0 => 1_000,
        1 => 3_000,
        2 => 4_500,
        _ => rng.random_range(1_000..9_000),
    };
    let counted = rng.random_range(0..=3);
    let call = match rng.random_range(0..6) {
        0 => Call::Acquire { owner, lease },
        1 => Call::Renew { owner, lease },
        2 => Call::Unlock { owner, lease },
        3 => Call::Reconcile {
            owner,
            lease,
            counted,
        },
        4 => Call::SetLease {
            owner,
            lease,
            counted,
        },
        _ => Call::Foreign { owner, lease },
    };
    (store, call)
}

async fn cross_check(scripts: Scripts, kind: LockKind, cases: usize) {
    let server = Server::start();
    let mut connection = server.connect().await;
    let name = LockName::new("model-mirror", 512).unwrap();
    let key = name.as_str().to_string();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    for case in 0..cases {
        let (start, call) = generate(&mut rng);
        set_up(&mut connection, &key, &start).await;
        let lua = run_lua(&mut connection, scripts, kind, &name, call).await;
        let (fields, pttl) = read_back(&mut connection, &key).await;
        let mut mirror = start.clone();
        let mirrored = run_mirror(&mut mirror, scripts, call);
        let context = format!("case {case} ({scripts:?}): {start:?}, {call:?}");
        assert!(
            same_reply(&lua, &mirrored),
            "reply {lua:?} vs {mirrored:?}: {context}"
        );
        assert_eq!(fields, mirror.fields, "hold counts: {context}");
        let model_pttl = mirror.pttl(0);
        if model_pttl < 0 || pttl < 0 {
            assert_eq!(pttl, model_pttl, "TTL: {context}");
        } else {
            assert!(
                model_pttl - pttl >= 0 && model_pttl - pttl <= TTL_SLACK_MS,
                "TTL {pttl} vs the mirror's {model_pttl}: {context}"
            );
        }
    }
    if kind.polls() {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut connection)
            .await
            .unwrap();
        assert!(
            !stats.contains("cmdstat_publish:"),
            "a {kind:?} script published"
        );
    }
}

#[tokio::test]
async fn the_reentrant_scripts_and_their_mirrors_agree_on_a_real_redis() {
    cross_check(Scripts::Current, LockKind::Reentrant, 2_000).await;
}

#[tokio::test]
async fn the_scripts_before_the_lease_truth_fixes_and_their_mirrors_agree_on_a_real_redis() {
    cross_check(Scripts::Before, LockKind::Reentrant, 2_000).await;
}

#[tokio::test]
async fn the_spin_scripts_and_their_mirrors_agree_on_a_real_redis() {
    // Its acquire and renewal are the reentrant ones; its unlock and reconcile are the
    // reentrant unlock with a `publish` that tells nobody, called without a channel key.
    cross_check(Scripts::Current, LockKind::Spin, 1_000).await;
}

#[tokio::test]
async fn two_holds_nobody_counts_are_undone_by_two_reconciles_on_a_real_redis() {
    // The model's trace for the reconcile rule as it was: two tries of one owner whose
    // callers left both ran, so Redis counts two holds the process does not. One reconcile
    // per doubt, each undoing one hold while Redis counts more than the process, leaves
    // nothing (the old rule, exactly one more, undid neither).
    let server = Server::start();
    let mut connection = server.connect().await;
    let name = LockName::new("model-reconcile", 512).unwrap();
    let key = name.as_str().to_string();
    let start = Store {
        fields: BTreeMap::from([(1, 2)]),
        expires_at: Some(30_000),
        token: 0,
    };
    set_up(&mut connection, &key, &start).await;
    let reconcile = Call::Reconcile {
        owner: 1,
        lease: 30_000,
        counted: 0,
    };
    let (current, reentrant) = (Scripts::Current, LockKind::Reentrant);
    assert_eq!(
        run_lua(&mut connection, current, reentrant, &name, reconcile).await,
        Some(vec![0]),
        "the first undoes one hold"
    );
    assert_eq!(
        run_lua(&mut connection, current, reentrant, &name, reconcile).await,
        Some(vec![1]),
        "the second frees the lock"
    );
    let (fields, pttl) = read_back(&mut connection, &key).await;
    assert!(fields.is_empty() && pttl == -2, "{fields:?} {pttl}");
    assert_eq!(
        run_lua(&mut connection, current, reentrant, &name, reconcile).await,
        Some(vec![-1]),
        "nothing more to undo"
    );
}
