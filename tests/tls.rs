#![cfg(feature = "tls")]
//! `rediss://`: the client over TLS against redis-server processes that serve TLS only
//! (`--port 0 --tls-port`), with certificates each test makes at run time.

mod support;

use actix_distributed_lock::{ClientConfig, LockClient};
use std::process::Command;
use std::time::Duration;
use support::tls::TlsMaterial;
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
