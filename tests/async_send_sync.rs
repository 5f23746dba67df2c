//! Pins the auto traits of the public API, in the style of tokio's `tests/async_send_sync.rs`:
//! this file stops compiling if a handle or guard loses `Send`/`Sync`/`'static`, or an
//! acquire (or release) future loses `Send`, so a regression cannot land silently. Handles
//! go into `tokio::spawn`ed tasks, `web::Data` and actor state; futures are awaited in
//! spawned tasks.
//!
//! Nothing here runs against Redis: the functions below are type-checked, never called.
#![allow(dead_code, unused_must_use, clippy::too_many_arguments)]

use actix_distributed_lock::messages::{
    Acquire, AcquireExpirablePermits, AcquireFenced, AcquirePermits, AddPermits, AvailablePermits,
    ForceRelease, GetState, LockState, Release, ReleasePermit, ReleasePermits, Renew, SetPermits,
    TrySetPermits,
};
use actix_distributed_lock::web::{LockClientData, LockRejection};
use actix_distributed_lock::{
    distributed_lock, AcquireOptions, ClientConfig, Lock, LockActor, LockClient, LockError,
    LockGuard, LockKind, LockName, LockOwner, MultiLock, MultiLockGuard, PermitExpirableSemaphore,
    PermitGuard, PermitOptions, ReadWriteLock, RedLock, RedLockGuard, Released, Semaphore,
    SemaphoreActor, SemaphoreGuard,
};
use std::time::Duration;

fn send_sync_static<T: Send + Sync + 'static>() {}
fn send_static<T: Send + 'static>() {}
fn send<T: Send>(_: &T) {}

/// `assert_send_sync!(A, B, …)`: each type is `Send + Sync + 'static`, checked at compile time.
macro_rules! assert_send_sync {
    ($($ty:ty),* $(,)?) => { $( const _: fn() = send_sync_static::<$ty>; )* };
}

// Handles and guards users keep.
assert_send_sync!(
    LockClient,
    Lock,
    LockGuard,
    ReadWriteLock,
    Semaphore,
    SemaphoreGuard,
    PermitExpirableSemaphore,
    PermitGuard,
    MultiLock,
    MultiLockGuard,
    RedLock,
    RedLockGuard,
);
// Values that travel with them.
assert_send_sync!(
    LockOwner,
    LockError,
    LockKind,
    LockName,
    ClientConfig,
    AcquireOptions,
    PermitOptions,
    Released,
    LockClientData,
);
// The hold an annotated body reaches with `current()`, moved into spawned tasks.
assert_send_sync!(actix_distributed_lock::CurrentLock);
// Actor messages and replies (sent across threads to the actors).
assert_send_sync!(
    Acquire,
    AcquireFenced,
    Release,
    Renew,
    ForceRelease,
    GetState,
    LockState,
    AcquirePermits,
    AcquireExpirablePermits,
    ReleasePermits,
    ReleasePermit,
    TrySetPermits,
    SetPermits,
    AddPermits,
    AvailablePermits,
);
// Actor addresses and the web rejection are `Send` (actix's `Addr` is `Send`, not `Sync`
// for every actor; a response value only moves).
const _: fn() = send_static::<actix::Addr<LockActor>>;
const _: fn() = send_static::<actix::Addr<SemaphoreActor>>;
const _: fn() = send_static::<LockRejection>;

#[distributed_lock("bounds:<id>", client = client)]
async fn annotated(client: &LockClient, id: u64) -> Result<(), LockError> {
    Ok(())
}

/// Every acquire future (and the futures that end a hold) is `Send`.
async fn futures_are_send(
    client: LockClient,
    lock: Lock,
    rw: ReadWriteLock,
    multi: MultiLock,
    red: RedLock,
    semaphore: Semaphore,
    expirable: PermitExpirableSemaphore,
    guard: LockGuard,
    multi_guard: MultiLockGuard,
    red_guard: RedLockGuard,
    permits: SemaphoreGuard,
    permit: PermitGuard,
) {
    let wait = Duration::from_secs(1);
    send(&LockClient::from_url("redis://127.0.0.1/"));
    send(&LockClient::connect(ClientConfig::new(
        "redis://127.0.0.1/",
    )));

    send(&lock.acquire());
    send(&lock.acquire_timeout(wait));
    send(&lock.try_acquire());
    send(&lock.acquire_with(AcquireOptions::new()));
    send(&rw.read().acquire());
    send(&rw.write().acquire_timeout(wait));
    send(&multi.acquire());
    send(&multi.acquire_timeout(wait));
    send(&multi.try_acquire());
    send(&multi.acquire_with(AcquireOptions::new()));
    send(&red.acquire());
    send(&red.acquire_timeout(wait));
    send(&red.try_acquire());
    send(&red.acquire_with(AcquireOptions::new()));
    send(&semaphore.acquire(1));
    send(&semaphore.acquire_timeout(1, wait));
    send(&semaphore.try_acquire(1));
    send(&expirable.acquire(1));
    send(&expirable.acquire_timeout(1, wait));
    send(&expirable.try_acquire(1));
    send(&expirable.acquire_with(PermitOptions::new()));
    send(&annotated(&client, 1));

    send(&guard.reenter(wait));
    send(&guard.lost());
    send(&multi_guard.lost());
    send(&red_guard.lost());
    send(&permit.lost());
    send(&guard.unlock());
    send(&multi_guard.unlock());
    send(&red_guard.unlock());
    send(&permits.release());
    send(&permit.release());
}

#[test]
fn the_bounds_are_checked_when_this_file_compiles() {
    // The assertions above are compile-time; reaching this test means they all hold.
    send_sync_static::<LockClient>();
}

// The inspector: kept in `web::Data` and moved into tasks; its futures awaited in spawned
// tasks (the inspector page streams a watch from one).
#[cfg(feature = "inspector")]
mod inspector {
    use super::{send, send_sync_static};
    use actix_distributed_lock::inspect::{
        Change, ForceUnlocked, Holder, InspectedKind, Inspector, LockInfo, LockWatch, Waiter,
        WatchEvent,
    };

    assert_send_sync!(
        Inspector,
        LockInfo,
        Holder,
        Waiter,
        InspectedKind,
        ForceUnlocked,
        Change,
        WatchEvent,
    );
    const _: fn() = super::send_static::<LockWatch>;

    fn futures_are_send(inspector: Inspector, mut watch: LockWatch) {
        send(&inspector.list(None));
        send(&inspector.show("a"));
        send(&inspector.force_unlock("a"));
        send(&inspector.force_unlock_if("a", &[]));
        send(&watch.next());
    }
}

// The count-down latch: its handle and messages travel like the others; its futures are
// awaited in spawned tasks.
mod latch {
    use super::{send, send_static, send_sync_static};
    use actix_distributed_lock::messages::{
        AwaitLatch, CountDown, DeleteLatch, GetCount, TrySetCount,
    };
    use actix_distributed_lock::{CountDownLatch, LatchActor};
    use std::time::Duration;

    assert_send_sync!(
        CountDownLatch,
        TrySetCount,
        CountDown,
        GetCount,
        DeleteLatch,
        AwaitLatch
    );
    const _: fn() = send_static::<actix::Addr<LatchActor>>;

    fn futures_are_send(latch: CountDownLatch) {
        send(&latch.try_set_count(1));
        send(&latch.count_down());
        send(&latch.count());
        send(&latch.delete());
        send(&latch.wait());
        send(&latch.wait_timeout(Duration::from_secs(1)));
    }
}
