//! The one way the integration tests make a [`LockClient`]: against a [`RedisServer`], a
//! URL, a [`RedisCluster`] or a [`SentinelSetup`], each with an optional tweak of the
//! configuration, and each bounded, so a client that cannot connect fails the test with a
//! clear message instead of hanging it.

use super::topology::{RedisCluster, SentinelSetup};
use super::RedisServer;
use actix_distributed_lock::{ClientConfig, LockClient};
use std::time::Duration;

/// How long a client may take to connect before the test fails (generous: CI is loaded).
pub const CONNECT_BOUND: Duration = Duration::from_secs(30);

/// A client of `server` with the default configuration.
pub async fn client(server: &RedisServer) -> LockClient {
    client_at(&server.url(), |config| config).await
}

/// A client of `server` whose configuration `tune` adjusts.
pub async fn client_with(
    server: &RedisServer,
    tune: impl FnOnce(ClientConfig) -> ClientConfig,
) -> LockClient {
    client_at(&server.url(), tune).await
}

/// A client of the server at `url` (a proxy, say) whose configuration `tune` adjusts.
pub async fn client_at(url: &str, tune: impl FnOnce(ClientConfig) -> ClientConfig) -> LockClient {
    connect(tune(ClientConfig::new(url)), url).await
}

/// A client of `cluster` (its primaries as seeds, a 20 s default wait: slot moves are slow),
/// whose configuration `tune` adjusts.
pub async fn cluster_client(
    cluster: &RedisCluster,
    tune: impl FnOnce(ClientConfig) -> ClientConfig,
) -> LockClient {
    let config =
        ClientConfig::cluster(cluster.primary_urls()).default_wait(Duration::from_secs(20));
    connect(tune(config), "the cluster").await
}

/// A client of the primary that `setup`'s sentinels follow (short timeouts, so failovers
/// are noticed quickly), whose configuration `tune` adjusts.
pub async fn sentinel_client(
    setup: &SentinelSetup,
    tune: impl FnOnce(ClientConfig) -> ClientConfig,
) -> LockClient {
    let config = ClientConfig::sentinel(setup.sentinel_urls(), setup.master_name())
        .response_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(2));
    connect(tune(config), "the sentinels").await
}

/// A client with exactly `config` (its nodes named as `to` in a failure).
pub async fn connect(config: ClientConfig, to: &str) -> LockClient {
    tokio::time::timeout(CONNECT_BOUND, LockClient::connect(config))
        .await
        .unwrap_or_else(|_| panic!("the client did not connect to {to} in {CONNECT_BOUND:?}"))
        .unwrap_or_else(|e| panic!("the client could not connect to {to}: {e}"))
}
