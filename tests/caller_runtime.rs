//! A client is used from many runtimes (actix-web's workers, a job's own runtime, a test's),
//! and any of them may end while the client lives on. Whatever a call does on the way (a
//! reconnect after Redis went away, its backoff timer, the new connection's socket) must
//! not belong to the runtime of the caller that happened to trigger it.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{LockError, RedLock};
use std::time::Duration;
use support::{client, RedisServer};

/// How long the connection's own reconnect after the kill takes to give up (a refused
/// connect, a backoff of at most 200 ms, a second refused connect), with room to spare.
const FIRST_RECONNECT_DONE: Duration = Duration::from_secs(1);

#[test]
fn a_reconnect_started_by_a_caller_whose_runtime_ended_does_not_break_the_client() {
    let mut server = RedisServer::start();
    let main = tokio::runtime::Runtime::new().unwrap();
    let client = main.block_on(client(&server));
    let lock = client.fast_lock("caller-runtime").unwrap();
    main.block_on(async { lock.acquire().await.unwrap().unlock().await.unwrap() });

    server.stop();
    // The connection saw the server go and tried to reconnect on its own; let that attempt
    // end, so the next call is the one that starts the next reconnect.
    std::thread::sleep(FIRST_RECONNECT_DONE);
    {
        // A caller on a runtime of its own (an actix-web worker, say) finds the connection
        // gone: its call fails and starts a reconnect. The reconnect's first connect is
        // refused and it arms its backoff timer; then the caller's runtime ends.
        let worker = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        worker.block_on(async {
            // A read of the lock's state runs in the caller's task (no actor in between).
            let refused = lock.is_locked().await;
            assert!(
                matches!(refused, Err(LockError::Unavailable { .. })),
                "with the server down, a read must fail as unavailable, got {refused:?}"
            );
            tokio::time::sleep(Duration::from_millis(30)).await;
        });
        drop(worker);
    }

    server.restart();
    main.block_on(async {
        let guard = tokio::time::timeout(
            Duration::from_secs(20),
            lock.acquire_timeout(Duration::from_secs(15)),
        )
        .await
        .expect("the client never served again after the caller's runtime ended")
        .expect("an acquire after the server came back");
        guard
            .unlock()
            .await
            .expect("unlock after the server came back");
        client.close().await;
    });
}

/// RedLock asks its nodes from the caller's task, and a node that has not answered when the
/// attempt ends is still waited for. When the caller's runtime ends first, that request is
/// dropped there, settled by its node's client, and the client goes on serving.
#[test]
fn a_redlock_request_left_in_flight_by_a_runtime_that_ended_is_settled() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let main = tokio::runtime::Runtime::new().unwrap();
    let clients: Vec<_> = main.block_on(async {
        let mut clients = Vec::new();
        for server in &servers {
            clients.push(
                support::client_with(server, |c| c.response_timeout(Duration::from_secs(1))).await,
            );
        }
        clients
    });
    let lock = RedLock::new(&clients, "caller-runtime:redlock").unwrap();
    // Every connection and script cache warm, so the pause below is the only delay.
    main.block_on(async { lock.acquire().await.unwrap().unlock().await.unwrap() });

    servers[2].pause();
    {
        let worker = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        worker.block_on(async {
            let guard = lock.acquire_timeout(Duration::from_secs(5)).await.unwrap();
            // The paused node's request stays out (awaited for the node timeout, then kept
            // in flight until it is answered).
            assert_eq!(guard.nodes_held(), 2, "the quorum without the paused node");
            guard.unlock().await.unwrap();
        });
        // The paused node's request is still out: the runtime ends under it.
        drop(worker);
    }
    servers[2].resume();

    main.block_on(async {
        // The paused node runs the acquire it was sent once it wakes; nobody holds that
        // grant, so it is given back.
        support::eventually(
            "the grant the paused node gave after the caller's runtime ended is released",
            Duration::from_secs(15),
            || async { servers[2].keys().await.is_empty() },
        )
        .await;
        let guard = tokio::time::timeout(
            Duration::from_secs(20),
            lock.acquire_timeout(Duration::from_secs(15)),
        )
        .await
        .expect("the clients never served again after the caller's runtime ended")
        .expect("a RedLock acquire after the caller's runtime ended");
        support::eventually(
            "the hold is on every node",
            Duration::from_secs(5),
            || async { guard.nodes_held() == 3 },
        )
        .await;
        guard.unlock().await.unwrap();
        for client in &clients {
            client.close().await;
        }
        for server in &servers {
            assert!(server.keys().await.is_empty(), "a key was left behind");
        }
    });
}
