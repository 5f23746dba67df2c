//! Driving a lock from another actix actor with messages.
//!
//! `ReportWriter` is an ordinary actor. It keeps one `LockOwner` for its whole life (so its
//! own acquisitions re-enter the lock instead of blocking each other), keeps the address of
//! the lock's actor, and keeps the `LockGuard`s it is given in its state:
//!
//! 1. `Acquire` — takes `report:daily`, stores the guard;
//! 2. `Acquire` again with the same owner — re-enters (hold count 2), stores the second guard;
//! 3. `GetState` — reads the hold count from Redis;
//! 4. `Release { owner }` — gives back the newest hold (hold count 1), then drops the guards:
//!    the released one does nothing, the other releases the last hold in the background.
//!
//! Run it against a throwaway Redis:
//!
//! ```text
//! redis-server --port 23456 --save "" --daemonize yes
//! cargo run --example actor_messages -- redis://127.0.0.1:23456/
//! redis-cli -p 23456 shutdown nosave
//! ```

use actix::prelude::*;
use actix_distributed_lock::messages::{Acquire, GetState, LockState, Release, Released};
use actix_distributed_lock::{LockActor, LockClient, LockError, LockGuard, LockOwner};
use std::time::Duration;

const LOCK_NAME: &str = "report:daily";

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Writes the daily report while holding `report:daily`.
struct ReportWriter {
    /// Who this actor is to the lock: the same owner every time, so it can re-enter.
    owner: LockOwner,
    /// The lock's actor; holding its address keeps it alive.
    lock: Addr<LockActor>,
    /// One guard per hold, newest last.
    guards: Vec<LockGuard>,
}

impl Actor for ReportWriter {
    type Context = Context<Self>;
}

/// Take the lock (again, if this actor already holds it).
struct Take;

impl Message for Take {
    type Result = Result<(), Failure>;
}

impl Handler<Take> for ReportWriter {
    type Result = ResponseActFuture<Self, Result<(), Failure>>;

    fn handle(&mut self, _: Take, _: &mut Context<Self>) -> Self::Result {
        let request = self.lock.send(Acquire {
            owner: self.owner,
            lease: None, // the watchdog keeps it alive while we hold it
            wait: Duration::from_secs(5),
        });
        Box::pin(request.into_actor(self).map(|reply, act, _| {
            let guard = reply??;
            act.guards.push(guard);
            println!(
                "[writer] acquired `{LOCK_NAME}` (guards kept in my state: {})",
                act.guards.len()
            );
            Ok(())
        }))
    }
}

/// Read the lock's state in Redis, with this actor's hold count.
struct Inspect;

impl Message for Inspect {
    type Result = Result<LockState, Failure>;
}

impl Handler<Inspect> for ReportWriter {
    type Result = ResponseFuture<Result<LockState, Failure>>;

    fn handle(&mut self, _: Inspect, _: &mut Context<Self>) -> Self::Result {
        let request = self.lock.send(GetState {
            owner: Some(self.owner),
        });
        Box::pin(async move { Ok(request.await??) })
    }
}

/// Release the newest hold through the lock actor, then drop every guard.
struct Finish;

impl Message for Finish {
    type Result = Result<Released, Failure>;
}

impl Handler<Finish> for ReportWriter {
    type Result = ResponseActFuture<Self, Result<Released, Failure>>;

    fn handle(&mut self, _: Finish, _: &mut Context<Self>) -> Self::Result {
        let request = self.lock.send(Release { owner: self.owner });
        Box::pin(request.into_actor(self).map(|reply, act, _| {
            let released = reply??;
            println!("[writer] Release {{ owner }} -> {released:?}");
            // The newest guard's hold was just released: dropping it sends nothing. Dropping
            // the older one releases the last hold in the background.
            let dropped = act.guards.len();
            act.guards.clear();
            println!("[writer] dropped {dropped} guards");
            Ok(released)
        }))
    }
}

#[actix::main]
async fn main() -> Result<(), Failure> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_string());
    // Inside an actix system the client runs its actors on an arbiter of their own.
    let client = LockClient::from_url(&url).await?;
    println!("connected to {} as client {}", redact(&url), client.id());

    let owner = LockOwner::new();
    let writer = ReportWriter {
        owner,
        lock: client.lock_actor(LOCK_NAME)?,
        guards: Vec::new(),
    }
    .start();

    writer.send(Take).await??;
    let state = writer.send(Inspect).await??;
    println!(
        "after one Acquire:  locked = {}, my holds = {}, ttl = {:?}",
        state.locked, state.hold_count, state.ttl
    );

    writer.send(Take).await??; // same owner: re-enters instead of waiting
    let state = writer.send(Inspect).await??;
    println!(
        "after re-entering:  locked = {}, my holds = {}",
        state.locked, state.hold_count
    );
    println!(
        "in Redis: hash `{LOCK_NAME}`, field `{}:{}` = {}",
        client.id(),
        owner.id(),
        state.hold_count
    );

    // Another owner cannot get in meanwhile.
    let stranger = client.lock(LOCK_NAME)?.try_acquire().await?;
    println!(
        "another owner's try_acquire: {}",
        if stranger.is_some() {
            "got it (?!)"
        } else {
            "busy"
        }
    );

    let released = writer.send(Finish).await??;
    assert_eq!(released, Released::StillHeld { holds: 1 });

    // The dropped guard's release runs in the background; wait (bounded) until Redis shows it.
    let lock = client.lock(LOCK_NAME)?;
    let freed = tokio::time::timeout(Duration::from_secs(5), async {
        while lock.is_locked().await? {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok::<(), LockError>(())
    })
    .await;
    match freed {
        Ok(result) => {
            result?;
            println!("after dropping the guards: `{LOCK_NAME}` is free");
        }
        Err(_) => return Err(format!("`{LOCK_NAME}` was still held 5 s after the drop").into()),
    }

    writer.send(Finish).await?.map_or_else(
        |error| println!("a second Release {{ owner }} is refused: {error}"),
        |released| println!("a second Release {{ owner }} unexpectedly gave {released:?}"),
    );
    client.close().await;
    Ok(())
}

/// The URL without its password, for printing.
fn redact(url: &str) -> String {
    actix_distributed_lock::redact_url(url)
}
