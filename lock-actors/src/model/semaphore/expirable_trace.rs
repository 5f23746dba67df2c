//! The permit-expirable semaphore's counterexample as a regression test on a real Redis:
//! an acquire whose reply was lost is settled by the library, and a late copy of the
//! acquire (delivered after the settlement, on a connection that was replaced) then runs.
//! The calls are the library's own, so the test fails if either script or the order the
//! actor sends them in lets the late copy take permits for nobody.

use super::super::server::{run_call as run, Server};
use crate::keys::LockName;
use crate::node::connection::PubSub;
use crate::script::ScriptCall;
use crate::semaphore::kind::{Kind, Take, Unanswered};
use crate::semaphore::receipt_key;
use crate::semaphore::{SemaphoreKeys, TRY_SET};

#[tokio::test]
async fn a_late_copy_of_a_settled_expirable_acquire_takes_nothing() {
    let server = Server::start();
    let mut connection = server.connect().await;
    let name = LockName::new("trace-expirable", 512).unwrap();
    let keys = SemaphoreKeys::new(&name, Kind::Expirable);
    let pubsub = PubSub::Classic;
    let mut set = ScriptCall::with_key(TRY_SET.get(pubsub), keys.count.as_str());
    set.key(keys.channel.as_str()).arg(2);
    run(&mut connection, &set).await;

    let rules = Kind::Expirable.rules();
    let receipt = receipt_key(&keys.count, "trace");
    let take = Take {
        permits: 1,
        lease_ms: 60_000,
        receipt: &receipt,
        settle_window_ms: 300_000,
    };
    let (acquire, ids) = rules.acquire_call(&keys, pubsub, &take);
    // The reply is lost: the actor settles the acquire before it has run...
    let unanswered = Unanswered {
        permits: 1,
        ids: &ids,
        receipt: &receipt,
        settle_window_ms: 300_000,
    };
    let settle = rules.settle_call(&keys, pubsub, &unanswered);
    run(&mut connection, &settle).await;
    // ...and then the late copy of the acquire reaches Redis.
    run(&mut connection, &acquire).await;

    let count: i64 = redis::cmd("GET")
        .arg(&keys.count)
        .query_async(&mut connection)
        .await
        .unwrap();
    let out: i64 = redis::cmd("ZCARD")
        .arg(keys.timeouts.as_deref().unwrap())
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(
        (count, out),
        (2, 0),
        "the late copy took a permit nobody holds"
    );
}
