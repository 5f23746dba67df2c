//! Each latch script and its Rust mirror (`super::store`), run side by side on a real Redis
//! over generated inputs: the same starting key (none, a count, someone else's string or
//! hash), the same call made by the library's own call builders (both pub/sub flavours'
//! scripts are the same but for the publish command; the classic one runs here), then the
//! same reply, the same key after and the same messages published on the latch's channel.

use super::super::server::Server;
use super::store::{Message, Outcome, Scripts, Store, Value, WrongType};
use crate::keys::LockName;
use crate::latch::{count_call, count_down_call, delete_call, try_set_call};
use crate::node::connection::PubSub;
use crate::script::ScriptCall;
use futures_util::StreamExt;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

/// One generated call.
#[derive(Debug, Clone, Copy)]
enum Call {
    TrySet(u64),
    CountDown,
    Delete,
    Count,
}

/// What every case ends with on the channel: every message before it has arrived then.
const END: &str = "end";

fn generate(rng: &mut impl Rng) -> (Store, Call) {
    let value = match rng.random_range(0..12) {
        0..=2 => Value::Missing,
        3 => Value::Text,
        4 => Value::Hash,
        5 => Value::Count(i64::MAX),
        6 => Value::Count(rng.random_range(-3..=0)),
        _ => Value::Count(rng.random_range(1..=4)),
    };
    let call = match rng.random_range(0..4) {
        0 if rng.random_bool(0.1) => Call::TrySet(i64::MAX as u64),
        0 => Call::TrySet(rng.random_range(1..=3)),
        1 => Call::CountDown,
        2 => Call::Delete,
        _ => Call::Count,
    };
    (Store { value }, call)
}

fn invocation(name: &LockName, call: Call) -> ScriptCall {
    let pubsub = PubSub::Classic;
    match call {
        Call::TrySet(count) => try_set_call(name, pubsub, count),
        Call::CountDown => count_down_call(name, pubsub),
        Call::Delete => delete_call(name, pubsub),
        Call::Count => count_call(name),
    }
}

fn run_mirror(store: &mut Store, call: Call) -> Outcome {
    match call {
        Call::TrySet(count) => store.try_set(count as i64),
        Call::CountDown => store.count_down(Scripts::Current),
        Call::Delete => store.delete(),
        Call::Count => Outcome {
            reply: store.count(),
            published: None,
        },
    }
}

/// Puts `store` into Redis, in `pipe`.
fn set_up(pipe: &mut redis::Pipeline, key: &str, store: &Store) {
    pipe.cmd("DEL").arg(key).ignore();
    match store.value {
        Value::Missing => {}
        Value::Count(count) => {
            pipe.cmd("SET").arg(key).arg(count).ignore();
        }
        Value::Text => {
            pipe.cmd("SET").arg(key).arg("hello").ignore();
        }
        Value::Hash => {
            pipe.cmd("HSET").arg(key).arg("field").arg(1).ignore();
        }
    }
}

/// The key as Redis has it, from its `TYPE` and `GET` (nil for a hash).
fn value_of(kind: &str, text: Option<String>) -> Value {
    match (kind, text) {
        ("none", _) => Value::Missing,
        ("hash", _) => Value::Hash,
        ("string", Some(text)) => text.parse().map_or(Value::Text, Value::Count),
        other => panic!("unexpected key {other:?}"),
    }
}

/// The reply as the mirror gives it: a count, or a WRONGTYPE refusal.
fn reply_of(reply: redis::RedisResult<redis::Value>) -> Result<i64, WrongType> {
    match reply {
        Ok(value) => Ok(redis::from_redis_value(value).expect("an integer reply")),
        Err(error) if error.code() == Some("WRONGTYPE") => Err(WrongType),
        Err(error) => panic!("unexpected error {error}"),
    }
}

/// Runs `cases` generated calls against their mirrors.
async fn cross_check(cases: usize) {
    let server = Server::start();
    let mut connection = server.connect().await;
    let name = LockName::new("model-latch", 512).unwrap();
    let key = name.as_str().to_string();
    let channel = name.latch_channel();
    let mut listener = server.pubsub().await;
    listener.subscribe(&channel).await.unwrap();
    let mut messages = listener.on_message();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1a7c);
    let mut loaded = BTreeSet::new();
    for case in 0..cases {
        let (store, call) = generate(&mut rng);
        let invocation = invocation(&name, call);
        let script = invocation.script();
        if loaded.insert(script.get_hash().to_string()) {
            let _: String = script
                .prepare_invoke()
                .load_async(&mut connection)
                .await
                .unwrap();
        }
        let mut setup = redis::pipe();
        set_up(&mut setup, &key, &store);
        let _: () = setup.query_async(&mut connection).await.unwrap();
        let reply = invocation.evalsha().query_async(&mut connection).await;
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut connection)
            .await
            .unwrap();
        let text: Option<String> = match kind.as_str() {
            "string" => redis::cmd("GET")
                .arg(&key)
                .query_async(&mut connection)
                .await
                .unwrap(),
            _ => None,
        };
        let _: () = redis::cmd("PUBLISH")
            .arg(&channel)
            .arg(END)
            .query_async(&mut connection)
            .await
            .unwrap();
        let mut published = Vec::new();
        loop {
            let message = messages.next().await.expect("the listener stays");
            let payload: String = message.get_payload().unwrap();
            if payload == END {
                break;
            }
            published.push(payload);
        }

        let context = format!("case {case}: {store:?}, {call:?}");
        let mut mirror = store;
        let expected = run_mirror(&mut mirror, call);
        assert_eq!(reply_of(reply), expected.reply, "reply: {context}");
        assert_eq!(value_of(&kind, text), mirror.value, "key after: {context}");
        let expected: Vec<&str> = expected.published.iter().map(|m| m.as_str()).collect();
        assert_eq!(published, expected, "published: {context}");
    }
}

#[tokio::test]
async fn the_latch_scripts_and_their_mirrors_agree_on_a_real_redis() {
    cross_check(2_000).await;
}

#[test]
fn the_mirror_publishes_redissons_messages() {
    assert_eq!(Message::NewCount.as_str(), "1");
    assert_eq!(Message::Zero.as_str(), "0");
}
