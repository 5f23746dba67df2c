//! A lock client built from the application's own `redis::Client`
//! (`ClientConfig::from_client`): the connections it opens use that client's settings as
//! they are (user, password, database; over TLS, its certificates: `tests/tls.rs`).

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::redis::{self, AsyncCommands};
use actix_distributed_lock::{ClientConfig, LockClient};
use std::time::Duration;
use support::RedisServer;

/// The application's client logs in as an ACL user with a password, on database 2, and the
/// default user is off: a lock client that did not take every one of those settings could
/// not connect, or would lock in another database. Both connections (commands and the
/// subscription a waiter is woken through) are exercised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_from_the_applications_redis_client_takes_its_user_password_and_database() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "app", "on", ">s3cret", "~*", "&*", "+@all"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "off"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = |db: u8| format!("redis://app:s3cret@127.0.0.1:{}/{db}", server.port());
    let app = redis::Client::open(url(2)).unwrap();
    let config = ClientConfig::from_client(&app).watchdog_timeout(Duration::from_secs(3));
    assert!(
        !format!("{config:?}").contains("s3cret") && !config.url().contains("s3cret"),
        "the password shows in {config:?}"
    );
    let client = LockClient::connect(config.clone()).await.unwrap();
    let rival = LockClient::connect(config).await.unwrap();
    let guard = client.lock("order:7").unwrap().acquire().await.unwrap();
    let other = rival.lock("order:7").unwrap();
    let waiter = tokio::spawn(async move { other.acquire_timeout(Duration::from_secs(10)).await });
    let mut db2 = app.get_multiplexed_async_connection().await.unwrap();
    let mut db0 = redis::Client::open(url(0))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    assert!(db2.exists::<_, bool>("order:7").await.unwrap());
    assert!(!db0.exists::<_, bool>("order:7").await.unwrap());
    // The waiter is woken through the subscription, which logged in the same way.
    support::eventually("the waiter is subscribed", Duration::from_secs(5), || {
        let mut db2 = db2.clone();
        async move {
            let subscribers: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg("redisson_lock__channel:{order:7}")
                .query_async(&mut db2)
                .await
                .unwrap();
            subscribers.first().is_some_and(|(_, n)| *n > 0)
        }
    })
    .await;
    guard.unlock().await.unwrap();
    let second = waiter
        .await
        .unwrap()
        .expect("the waiter takes the lock once it is unlocked");
    second.unlock().await.unwrap();
    client.close().await;
    rival.close().await;
    assert!(!db2.exists::<_, bool>("order:7").await.unwrap());
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "on"])
        .query_async(&mut db2)
        .await
        .unwrap();
}
