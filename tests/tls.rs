#![cfg(feature = "tls")]
// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]
//! `rediss://`: the client over TLS against redis-server processes that serve TLS only
//! (`--port 0 --tls-port`), with certificates each test makes at run time.

use actix_distributed_lock::{ClientConfig, Lock, LockClient, LockError, LockGuard};
use std::collections::HashSet;
use std::process::Command;
use std::time::{Duration, Instant};
use support::eventually;
use support::tls::TlsMaterial;
use support::topology::{RedisCluster, SentinelSetup};
use support::RedisServer;

/// Set in the child process of [`a_fresh_process_connects_with_no_crypto_setup`]: the URL
/// of the TLS server it connects to.
const CHILD_URL: &str = "ADL_TLS_CHILD_URL";
/// Set with [`CHILD_URL`]: the file of the CA that signed the server's certificate.
const CHILD_CA: &str = "ADL_TLS_CHILD_CA";

/// The client picks its crypto provider itself: a process that never set one up connects,
/// locks and unlocks over TLS. It runs in a child process of its own, since any earlier
/// TLS connection in this test process would have set one up already.
#[test]
fn a_fresh_process_connects_with_no_crypto_setup() {
    if let Ok(url) = std::env::var(CHILD_URL) {
        return child_locks_once(&url);
    }
    let material = TlsMaterial::generate("fresh");
    let server = RedisServer::start_tls(&material, false);
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "a_fresh_process_connects_with_no_crypto_setup",
            "--nocapture",
        ])
        .env(CHILD_URL, server.url())
        .env(CHILD_CA, material.ca_path())
        .output()
        .expect("run the test binary as a child");
    assert!(
        output.status.success(),
        "the child process failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn child_locks_once(url: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let ca = std::fs::read(std::env::var(CHILD_CA).expect("the CA file")).expect("read the CA");
        let config = ClientConfig::new(url)
            .tls_ca_certificate(ca)
            .connect_timeout(Duration::from_secs(10));
        let client = tokio::time::timeout(Duration::from_secs(30), LockClient::connect(config))
            .await
            .expect("connected within 30 s")
            .expect("connected over TLS");
        let guard = client.lock("fresh").unwrap().acquire().await.unwrap();
        guard.unlock().await.unwrap();
    });
}

/// A client configured for `server`, trusting `material`'s CA.
fn trusting(server: &RedisServer, material: &TlsMaterial) -> ClientConfig {
    ClientConfig::new(server.url()).tls_ca_certificate(material.ca_pem.clone())
}

/// Starts `waiter` waiting for the lock `held` holds, waits until `parked` says it waits
/// on its subscription, unlocks `held`, and checks that the unlock woke the waiter: it got
/// the lock within 5 s (generous for a loaded machine), far under the 30 s lease at which
/// it would try again without a wake-up. Then unlocks the waiter's hold.
async fn hand_over<F, Fut>(held: LockGuard, waiter: Lock, parked: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let lease = Duration::from_secs(30);
    let waiting = tokio::spawn(async move {
        let guard = waiter.acquire_timeout(Duration::from_secs(60)).await;
        (Instant::now(), guard)
    });
    parked().await;
    let unlocked_at = Instant::now();
    held.unlock().await.unwrap();
    let (acquired_at, guard) = waiting.await.unwrap();
    let guard = guard.expect("the waiter gets the lock");
    let handoff = acquired_at.duration_since(unlocked_at);
    println!("hand-off over TLS: {handoff:?}");
    assert!(
        handoff < Duration::from_secs(5),
        "hand-off took {handoff:?}; the lease is {lease:?}"
    );
    guard.unlock().await.unwrap();
}

/// Connects with `config`, bounded; the error if it fails, and how long it took.
async fn try_connect(config: ClientConfig) -> (Result<LockClient, LockError>, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(30), LockClient::connect(config))
        .await
        .expect("LockClient::connect returned within 30 s");
    (result, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connects_locks_and_unlocks_over_tls() {
    let material = TlsMaterial::generate("single");
    let server = RedisServer::start_tls(&material, false);
    let client = support::clients::connect(trusting(&server, &material), "the TLS server").await;
    let guard = client.lock("tls:order:1").unwrap().acquire().await.unwrap();
    assert_eq!(server.keys().await, vec!["tls:order:1".to_string()]);
    let other = support::clients::connect(trusting(&server, &material), "the TLS server").await;
    assert!(
        other
            .lock("tls:order:1")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a second client must not get the held lock"
    );
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// The unlock reaches the waiter through its pub/sub subscription, which goes over TLS too:
/// the hand-off comes long before the lease (the waiter's fallback timer) would end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_the_unlock_over_tls() {
    let material = TlsMaterial::generate("wake");
    let server = RedisServer::start_tls(&material, false);
    let holder = support::clients::connect(trusting(&server, &material), "the TLS server").await;
    let waiter = support::clients::connect(trusting(&server, &material), "the TLS server").await;
    let held = holder.lock("handoff").unwrap().acquire().await.unwrap();
    hand_over(held, waiter.lock("handoff").unwrap(), || {
        server.wait_until_parked("redisson_lock__channel:{handoff}", 1)
    })
    .await;
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// The application's own TLS `redis::Client`, built with its CA and client certificate,
/// is all a lock client needs (`ClientConfig::from_client`): no TLS setting is given again,
/// and a server that requires client certificates takes both of its connections (the
/// waiter is woken through the subscription).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_from_the_applications_tls_client_takes_its_certificates() {
    let material = TlsMaterial::generate("own");
    let server = RedisServer::start_tls(&material, true);
    // The application's crypto provider, before it builds its client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let app = actix_distributed_lock::redis::Client::build_with_tls(
        server.url(),
        material.certificates(),
    )
    .expect("the application's TLS client");
    let config = ClientConfig::from_client(&app);
    assert!(config.url().starts_with("rediss://"), "{}", config.url());
    let holder = support::clients::connect(config.clone(), "the mutual-TLS server").await;
    let waiter = support::clients::connect(config, "the mutual-TLS server").await;
    let held = holder.lock("own:handoff").unwrap().acquire().await.unwrap();
    hand_over(held, waiter.lock("own:handoff").unwrap(), || {
        server.wait_until_parked("redisson_lock__channel:{own:handoff}", 1)
    })
    .await;
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// A server that requires client certificates (`tls-auth-clients yes`) refuses a client
/// without one with a clear error, in bounded time, and takes one with the certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_needs_the_client_certificate() {
    let material = TlsMaterial::generate("mutual");
    let server = RedisServer::start_tls(&material, true);
    let connect_timeout = Duration::from_secs(3);

    let without = trusting(&server, &material).connect_timeout(connect_timeout);
    let (refused, took) = try_connect(without).await;
    let err = refused.expect_err("a client without a certificate is refused");
    println!("without a client certificate, after {took:?}: {err}");
    assert!(err.is_unavailable(), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("127.0.0.1") && text.contains("TLS") && text.contains("client certificate"),
        "the error names the node and says the server wants a client certificate: {text}"
    );
    assert!(
        took < connect_timeout + Duration::from_secs(5),
        "took {took:?}"
    );

    let with = trusting(&server, &material)
        .tls_client_certificate(
            material.client_cert_pem.clone(),
            material.client_key_pem.clone(),
        )
        .connect_timeout(connect_timeout);
    let client = support::clients::connect(with, "the mutual-TLS server").await;
    let guard = client.lock("mtls").unwrap().acquire().await.unwrap();
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// A server whose certificate another CA signed is refused with an error that says so and
/// names the node (its password redacted), within the connect timeout: no hang, no panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_is_a_clear_error_not_a_hang() {
    let material = TlsMaterial::generate("server");
    let stranger = TlsMaterial::generate("stranger");
    let server = RedisServer::start_tls(&material, false);
    let connect_timeout = Duration::from_secs(3);
    let url = format!("rediss://:secret-pw@127.0.0.1:{}/", server.port());
    let config = ClientConfig::new(url)
        .tls_ca_certificate(stranger.ca_pem.clone())
        .connect_timeout(connect_timeout);
    let (result, took) = try_connect(config).await;
    let err = result.expect_err("a server signed by another CA is refused");
    println!("signed by another CA, after {took:?}: {err}");
    let text = err.to_string();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(
        text.contains("TLS certificate verification failed") && text.contains("127.0.0.1"),
        "the error says what failed, and where: {text}"
    );
    assert!(!text.contains("secret-pw"), "the password leaked: {text}");
    assert!(
        took < connect_timeout + Duration::from_secs(5),
        "took {took:?}"
    );

    // The system trust store does not know the test CA either.
    let config = ClientConfig::new(server.url()).connect_timeout(connect_timeout);
    let err = try_connect(config)
        .await
        .0
        .expect_err("an unknown CA is refused");
    assert!(
        err.to_string()
            .contains("TLS certificate verification failed"),
        "{err}"
    );
}

/// The loudly named insecure mode connects whatever the certificate; the `#insecure` URL
/// fragment does not turn verification off: it is refused, pointing at that method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_is_off_only_through_the_loud_method() {
    let material = TlsMaterial::generate("insecure");
    let server = RedisServer::start_tls(&material, false);

    let fragment = format!("{}#insecure", server.url());
    let (result, _) = try_connect(ClientConfig::new(fragment.clone())).await;
    match result {
        Err(LockError::InvalidConfig { reason }) => assert!(
            reason.contains("danger_accept_invalid_certificates"),
            "the error points at the method: {reason}"
        ),
        other => panic!(
            "#insecure must be refused, got {:?}",
            other.map(|_| "a client")
        ),
    }

    let insecure = ClientConfig::new(server.url()).danger_accept_invalid_certificates();
    let client = support::clients::connect(insecure, "the TLS server, unverified").await;
    let guard = client.lock("insecure").unwrap().acquire().await.unwrap();
    guard.unlock().await.unwrap();
    // With the loud method, the fragment is allowed too (it says the same).
    let both = ClientConfig::new(fragment).danger_accept_invalid_certificates();
    support::clients::connect(both, "the TLS server, unverified").await;
}

/// TLS settings with a plain `redis://` URL are a mistake the client names at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_settings_need_a_rediss_url() {
    let material = TlsMaterial::generate("plain");
    let server = RedisServer::start();
    let config = ClientConfig::new(server.url()).tls_ca_certificate(material.ca_pem.clone());
    match try_connect(config).await.0 {
        Err(LockError::InvalidConfig { reason }) => {
            assert!(reason.contains("not a rediss:// URL"), "{reason}")
        }
        other => panic!(
            "expected InvalidConfig, got {:?}",
            other.map(|_| "a client")
        ),
    }
    let bad_pem = ClientConfig::new("rediss://127.0.0.1:1/").tls_ca_certificate("not a PEM");
    let err = bad_pem.validate().expect_err("unreadable CA PEM");
    assert!(err.to_string().contains("tls_ca_certificate"), "{err}");
}

/// A Redis Cluster over TLS (client connections, the cluster bus and replication): locks on
/// every primary, found through the seeds' `rediss://` and the nodes the cluster names,
/// and a wake-up through sharded pub/sub over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_locks_on_every_primary_and_wakes_waiters() {
    let material = TlsMaterial::generate("cluster");
    let cluster = RedisCluster::start_tls(3, 1, &material);
    let seeds = cluster.primary_urls();
    assert!(
        seeds.iter().all(|url| url.starts_with("rediss://")),
        "{seeds:?}"
    );
    let config = || {
        ClientConfig::cluster(cluster.primary_urls())
            .tls_ca_certificate(material.ca_pem.clone())
            .default_wait(Duration::from_secs(20))
    };
    let holder = support::clients::connect(config(), "the TLS cluster").await;
    let waiter = support::clients::connect(config(), "the TLS cluster").await;

    let names: Vec<String> = (0..30).map(|i| format!("tls-order:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(holder.lock(name).unwrap().acquire().await.expect("acquire"));
    }
    let owners: HashSet<u16> = names.iter().map(|n| cluster.primary_for_key(n)).collect();
    assert_eq!(owners.len(), 3, "the names landed on {owners:?}");
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(cluster.keys_on_all(), expected);

    let mut guards = guards.into_iter();
    let first = guards.next().expect("the contended lock's guard");
    let channel = format!("redisson_lock__channel:{{{}}}", names[0]);
    hand_over(first, waiter.lock(&names[0]).unwrap(), || {
        eventually(
            "the waiter subscribed on the lock's shard",
            Duration::from_secs(10),
            || std::future::ready(cluster.sharded_subscribers(&channel) >= 1),
        )
    })
    .await;
    for guard in guards {
        guard.unlock().await.expect("unlock");
    }
    assert_eq!(cluster.keys_on_all(), Vec::<String>::new());
}

/// Sentinel over TLS: the sentinels and the data nodes serve TLS only; the client asks the
/// sentinels over TLS, locks on the primary they name over TLS, and hears the unlock on
/// its TLS subscription.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_over_tls_finds_the_primary_and_locks_there() {
    let material = TlsMaterial::generate("sentinel");
    let setup = SentinelSetup::start_tls(&material);
    let sentinels = setup.sentinel_urls();
    assert!(
        sentinels.iter().all(|url| url.starts_with("rediss://")),
        "{sentinels:?}"
    );
    let config = || {
        ClientConfig::sentinel(setup.sentinel_urls(), setup.master_name())
            .tls_ca_certificate(material.ca_pem.clone())
    };
    let holder = support::clients::connect(config(), "the TLS sentinels").await;
    let waiter = support::clients::connect(config(), "the TLS sentinels").await;
    let held = holder
        .lock("sentinel-tls")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let primary = RedisServerProbe(setup.primary_port());
    assert_eq!(primary.keys(), vec!["sentinel-tls".to_string()]);

    hand_over(held, waiter.lock("sentinel-tls").unwrap(), || {
        eventually(
            "the waiter subscribed on the primary",
            Duration::from_secs(10),
            || {
                std::future::ready(
                    primary.subscribers("redisson_lock__channel:{sentinel-tls}") >= 1,
                )
            },
        )
    })
    .await;
    assert_eq!(primary.keys(), Vec::<String>::new());
}

/// Blocking questions to one TLS data node (through the support's TLS connections).
struct RedisServerProbe(u16);

impl RedisServerProbe {
    fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let mut conn = support::helper_client(self.0)
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("a TLS connection to the data node");
        cmd.query(&mut conn).expect("the data node answers")
    }

    fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.query(redis::cmd("KEYS").arg("*"));
        keys.sort();
        keys
    }

    fn subscribers(&self, channel: &str) -> i64 {
        let counts: Vec<(String, i64)> =
            self.query(redis::cmd("PUBSUB").arg("NUMSUB").arg(channel));
        counts.first().map_or(0, |(_, n)| *n)
    }
}
