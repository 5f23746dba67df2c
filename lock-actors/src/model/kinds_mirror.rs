//! The fast lock's scripts (its extend's `set_lease.lua` and its foreign unlock among
//! them) and the fenced acquire, each run beside its Rust mirror
//! (`super::store`) on a real Redis over generated inputs, as `super::mirror` does for the
//! reentrant scripts: the same starting keys, the same call, then the same reply, holder
//! and TTL (within the round trip), and for the fenced acquire the same token counter.

use super::mirror::{field, integers, pair, read_back, same_reply, set_up, TTL_SLACK_MS};
use super::server::{run_call, Server};
use super::store::Store;
use crate::keys::LockName;
use crate::lock::kind::{LockKind, Unlocking};
use crate::node::connection::PubSub;
use crate::script::ScriptCall;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy)]
enum Call {
    FastAcquire {
        owner: u8,
        lease: u64,
    },
    FastUnlock {
        owner: u8,
    },
    FastRenew {
        owner: u8,
        lease: u64,
    },
    FencedAcquire {
        owner: u8,
        lease: u64,
    },
    /// `set_lease.lua` on the string key (a guard's extend).
    FastSetLease {
        owner: u8,
        lease: u64,
    },
    /// The foreign unlock (`Lock::unlock_as`).
    FastForeign {
        owner: u8,
    },
}

async fn query<T: redis::FromRedisValue>(
    connection: &mut MultiplexedConnection,
    command: &mut redis::Cmd,
) -> T {
    command.query_async(connection).await.unwrap()
}

/// Puts a fast lock's string key (its holder, if any) into Redis.
async fn set_up_fast(connection: &mut MultiplexedConnection, key: &str, store: &Store) {
    let _: () = query(connection, redis::cmd("DEL").arg(key)).await;
    if let Some(owner) = store.fields.keys().next() {
        let mut set = redis::cmd("SET");
        set.arg(key).arg(field(*owner));
        if let Some(at) = store.expires_at {
            set.arg("PX").arg(at);
        }
        let _: () = query(connection, &mut set).await;
    }
}

async fn read_back_fast(
    connection: &mut MultiplexedConnection,
    key: &str,
) -> (BTreeMap<u8, u32>, i64) {
    let holder: Option<String> = query(connection, redis::cmd("GET").arg(key)).await;
    let pttl: i64 = query(connection, redis::cmd("PTTL").arg(key)).await;
    let fields = holder
        .map(|name| (name.rsplit(':').next().unwrap().parse().unwrap(), 1))
        .into_iter()
        .collect();
    (fields, pttl)
}

fn generate(rng: &mut impl Rng) -> (Store, Call) {
    let mut store = Store::default();
    let call_kind = rng.random_range(0..6);
    let fenced = call_kind == 3;
    if fenced {
        for owner in 1..=2u8 {
            let count = rng.random_range(0..=2u32);
            if count > 0 && (store.fields.is_empty() || rng.random_bool(0.2)) {
                store.fields.insert(owner, count);
            }
        }
        store.token = rng.random_range(0..5);
    } else if rng.random_bool(0.6) {
        store.fields.insert(rng.random_range(1..=2u8), 1);
    }
    store.expires_at = (!rng.random_bool(0.1)).then(|| rng.random_range(1_500..8_000i64));
    let owner = rng.random_range(1..=3u8);
    let lease = match rng.random_range(0..3) {
        0 => 1_000,
        1 => 3_000,
        _ => rng.random_range(1_000..9_000),
    };
    let call = match call_kind {
        0 => Call::FastAcquire { owner, lease },
        1 => Call::FastUnlock { owner },
        2 => Call::FastRenew { owner, lease },
        3 => Call::FencedAcquire { owner, lease },
        4 => Call::FastSetLease { owner, lease },
        _ => Call::FastForeign { owner },
    };
    (store, call)
}

#[tokio::test]
async fn the_fast_and_fenced_scripts_and_their_mirrors_agree_on_a_real_redis() {
    let server = Server::start();
    let mut connection = server.connect().await;
    let name = LockName::new("model-kinds", 512).unwrap();
    let key = name.as_str().to_string();
    let token_key = name.fencing_token_key();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xfa57);
    for case in 0..2_000 {
        let (start, call) = generate(&mut rng);
        let mut mirror = start.clone();
        let context = format!("case {case}: {start:?}, {call:?}");
        let fast = !matches!(call, Call::FencedAcquire { .. });
        if fast {
            set_up_fast(&mut connection, &key, &start).await;
        } else {
            set_up(&mut connection, &key, &start).await;
            let _: () = query(
                &mut connection,
                redis::cmd("SET").arg(&token_key).arg(start.token),
            )
            .await;
        }
        let one = |n: i64| vec![n];
        let (lua, mirrored) = match call {
            Call::FastAcquire { owner, lease } => (
                LockKind::Fast.acquire(&name, &field(owner), lease, false, 0, PubSub::Classic),
                mirror.fast_acquire(0, owner, lease).map(one),
            ),
            Call::FastUnlock { owner } => (
                LockKind::Fast.unlock(&name, &field(owner), 1_000, PubSub::Classic),
                mirror.fast_unlock(0, owner).map(one),
            ),
            Call::FastRenew { owner, lease } => {
                let mut invocation = ScriptCall::new(LockKind::Fast.renew_script());
                invocation.arg(lease);
                LockKind::Fast.add_renewal(&mut invocation, &name, &field(owner));
                let renewed = mirror.renew(super::store::Scripts::Current, 0, owner, lease);
                (invocation, Some(one(renewed)))
            }
            Call::FencedAcquire { owner, lease } => (
                LockKind::Reentrant.acquire(&name, &field(owner), lease, true, 0, PubSub::Classic),
                {
                    let first = mirror.free_at(0);
                    match mirror.fenced_acquire(0, owner, lease) {
                        Ok(token) if first => Some(vec![token as i64, 0]),
                        Ok(token) => Some(one(token as i64)),
                        Err(pttl) => Some(one(pttl)),
                    }
                },
            ),
            // The caller counts its one hold.
            Call::FastSetLease { owner, lease } => (
                LockKind::Fast.set_lease(&name, &field(owner), lease, 1),
                Some(one(mirror.fast_set_lease(0, owner, lease))),
            ),
            Call::FastForeign { owner } => (
                LockKind::Fast.release(
                    Unlocking::Foreign,
                    &name,
                    &field(owner),
                    1_000,
                    PubSub::Classic,
                ),
                mirror.fast_foreign_unlock(0, owner).map(pair),
            ),
        };
        let real = integers(run_call(&mut connection, &lua).await);
        let (fields, pttl) = if fast {
            read_back_fast(&mut connection, &key).await
        } else {
            read_back(&mut connection, &key).await
        };
        // Tokens are exact; a PTTL in a reply trails the mirror's by the round trip.
        let granted_token =
            matches!(call, Call::FencedAcquire { .. }) && mirror.token != start.token;
        if granted_token {
            assert_eq!(real, mirrored, "token: {context}");
        } else {
            assert!(
                same_reply(&real, &mirrored),
                "reply {real:?} vs {mirrored:?}: {context}"
            );
        }
        assert_eq!(fields, mirror.fields, "holders: {context}");
        let model_pttl = mirror.pttl(0);
        if model_pttl < 0 || pttl < 0 {
            assert_eq!(pttl, model_pttl, "TTL: {context}");
        } else {
            assert!(
                (0..=TTL_SLACK_MS).contains(&(model_pttl - pttl)),
                "TTL {pttl} vs the mirror's {model_pttl}: {context}"
            );
        }
        if !fast {
            let token: u64 = query(&mut connection, redis::cmd("GET").arg(&token_key)).await;
            assert_eq!(token, mirror.token, "token: {context}");
        }
    }
}
