//! The client called from outside any tokio runtime (a plain thread driving futures with
//! an executor of its own): every call answers, nothing panics.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::LockClient;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::time::Duration;
use support::RedisServer;

/// A minimal executor that is not tokio: polls `future` on this thread, parking between
/// wake-ups.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

#[test]
fn every_kind_works_from_a_thread_without_a_tokio_runtime() {
    let server = RedisServer::start();
    let url = server.url();
    let outcome = std::thread::spawn(move || {
        let client = block_on(LockClient::from_url(&url)).expect("connects");
        let sides = client.read_write_lock("plain-thread-rw").unwrap();
        for lock in [
            client.lock("plain-thread").unwrap(),
            client.fast_lock("plain-thread-fast").unwrap(),
            client.fenced_lock("plain-thread-fenced").unwrap(),
            client.fair_lock("plain-thread-fair").unwrap(),
            sides.read().clone(),
            sides.write().clone(),
        ] {
            let guard = block_on(lock.acquire()).expect("acquires");
            block_on(guard.unlock()).expect("unlocks");
        }
        let semaphore = client.semaphore("plain-thread-permits").unwrap();
        block_on(semaphore.try_set_permits(1)).expect("sets");
        let permit = block_on(semaphore.acquire(1)).expect("takes a permit");
        block_on(permit.release()).expect("gives it back");
        block_on(client.close());
    })
    .join();
    assert!(
        outcome.is_ok(),
        "the calls panicked outside a tokio runtime"
    );
    let keys = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(server.keys());
    // The fenced lock's token counter and the semaphore's count stay by design.
    let left: Vec<&String> = keys
        .iter()
        .filter(|key| {
            !key.starts_with("redisson_lock_token:") && key.as_str() != "plain-thread-permits"
        })
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
