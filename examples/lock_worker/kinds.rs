//! One task of the worker: round after round it takes a lock of a kind from the mix, holds
//! it (re-entering some kinds, writing to the fenced store under fenced locks), and
//! releases it, logging every step in the history schema the checker reads.

use crate::args::{Broken, Kind};
use crate::history::{now_us, History};
use crate::target::{Probe, Stamp};
use actix_distributed_lock::{
    AcquireOptions, Lock, LockClient, LockError, LockGuard, LockOwner, PermitGuard, PermitOptions,
    SemaphoreGuard,
};
use rand::Rng;
use serde_json::{json, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How an acquire or a release failed, in one word for the history.
pub fn error_kind(error: &LockError) -> &'static str {
    match error {
        LockError::Timeout { .. } => "timeout",
        LockError::Unavailable { .. } => "unavailable",
        LockError::NotOwner { .. } => "not_owner",
        LockError::Lost { .. } => "lost",
        LockError::Shutdown => "shutdown",
        LockError::AlreadyHeld { .. } => "already_held",
        LockError::NotReplicated { .. } => "not_replicated",
        _ => "other",
    }
}

/// What one hold took.
enum Held {
    Lock(LockGuard),
    Plain(SemaphoreGuard),
    Permit(PermitGuard),
    /// The broken reader's "hold": nothing was taken.
    Nothing,
}

type Signal = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Held {
    /// Resolves when the library says the hold is lost (never, for kinds that cannot lose).
    fn lost(&self) -> Signal {
        match self {
            Held::Lock(guard) => Box::pin(guard.lost()),
            Held::Permit(guard) => Box::pin(guard.lost()),
            Held::Plain(_) | Held::Nothing => Box::pin(std::future::pending()),
        }
    }

    fn is_lost(&self) -> bool {
        match self {
            Held::Lock(guard) => guard.is_lost(),
            Held::Permit(guard) => guard.is_lost(),
            Held::Plain(_) | Held::Nothing => false,
        }
    }

    fn token(&self) -> u64 {
        match self {
            Held::Lock(guard) => guard.fencing_token().unwrap_or(0),
            _ => 0,
        }
    }

    async fn release(self) -> Result<(), LockError> {
        match self {
            Held::Lock(guard) => guard.unlock().await.map(|_| ()),
            Held::Plain(guard) => guard.release().await,
            Held::Permit(guard) => guard.release().await,
            Held::Nothing => Ok(()),
        }
    }
}

/// What one round chose before acquiring.
struct Round {
    hold: u64,
    kind: Kind,
    lock: String,
    owner: LockOwner,
    field: String,
    lease: Option<Duration>,
}

pub struct Task {
    pub id: usize,
    pub client: LockClient,
    pub probe: Arc<Probe>,
    pub history: Arc<History>,
    pub locks: Vec<String>,
    pub mix: Vec<Kind>,
    pub permits: u32,
    pub lease: Duration,
    pub broken: Option<Broken>,
    /// The process' hold numbers, shared by its tasks.
    pub holds: Arc<AtomicU64>,
    pub stop: watch::Receiver<bool>,
    /// Open holds and waits, for an `exit` to close in the history (`control.rs`).
    pub registry: Arc<crate::control::Holds>,
}

/// A fixed lease both shorter and longer than the watchdog's, or the watchdog (`None`).
fn some_lease() -> Option<Duration> {
    let mut rng = rand::rng();
    rng.random_bool(0.5)
        .then(|| Duration::from_millis(rng.random_range(300..=2500)))
}

fn lease_ms(lease: Option<Duration>) -> Value {
    lease.map_or(Value::Null, |l| json!(l.as_millis() as u64))
}

impl Task {
    pub async fn run(mut self) {
        while !*self.stop.borrow() {
            self.one_round().await;
        }
    }

    async fn pause(&mut self, max_ms: u64) {
        let ms = rand::rng().random_range(0..=max_ms);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => {}
            _ = self.stop.changed() => {}
        }
    }

    fn log(&self, event: &str, fields: Value) {
        self.history.log(self.id, event, fields);
    }

    fn choose(&self) -> Round {
        let mut rng = rand::rng();
        let kind = self.mix[rng.random_range(0..self.mix.len())];
        let base = &self.locks[rng.random_range(0..self.locks.len())];
        let owner = LockOwner::new();
        let holder = format!("{}:{}", self.client.id(), owner.id());
        let field = match kind {
            Kind::Write => format!("{holder}:write"),
            Kind::Semaphore | Kind::Expirable => String::new(),
            _ => holder,
        };
        let lease = match kind {
            Kind::Semaphore => None,
            _ => some_lease(),
        };
        Round {
            hold: self.holds.fetch_add(1, Ordering::Relaxed) + 1,
            kind,
            lock: kind.lock_name(base),
            owner,
            field,
            lease,
        }
    }

    /// The `Lock` handle of a lock kind (`None` for the semaphores).
    fn handle(&self, kind: Kind, name: &str) -> Result<Option<Lock>, LockError> {
        Ok(Some(match kind {
            Kind::Reentrant => self.client.lock(name)?,
            Kind::Fast => self.client.fast_lock(name)?,
            Kind::Fenced => self.client.fenced_lock(name)?,
            Kind::Fair => self.client.fair_lock(name)?,
            Kind::Read => self.client.read_write_lock(name)?.read().clone(),
            Kind::Write => self.client.read_write_lock(name)?.write().clone(),
            Kind::Semaphore | Kind::Expirable => return Ok(None),
        }))
    }

    async fn acquire(
        &self,
        round: &Round,
        handle: Option<&Lock>,
        wait: Duration,
    ) -> Result<(Held, String), LockError> {
        if round.kind == Kind::Read && self.broken == Some(Broken::SkipMode) {
            return Ok((Held::Nothing, round.field.clone()));
        }
        if let Some(handle) = handle {
            let mut options = AcquireOptions::new().owner(round.owner).wait(wait);
            if let Some(lease) = round.lease {
                options = options.lease(lease);
            }
            let guard = handle.acquire_with(options).await?;
            return Ok((Held::Lock(guard), round.field.clone()));
        }
        if round.kind == Kind::Semaphore {
            let semaphore = self.client.semaphore(&round.lock)?;
            let guard = semaphore.acquire_timeout(1, wait).await?;
            return Ok((Held::Plain(guard), String::new()));
        }
        let semaphore = self.client.expirable_semaphore(&round.lock)?;
        let mut options = PermitOptions::new().wait(wait);
        if let Some(lease) = round.lease {
            options = options.lease(lease);
        }
        let guard = semaphore.acquire_with(options).await?;
        let field = guard.permit_id().to_string();
        Ok((Held::Permit(guard), field))
    }

    async fn one_round(&mut self) {
        let round = self.choose();
        let (hold, kind, lock) = (round.hold, round.kind.name(), round.lock.clone());
        let handle = match self.handle(round.kind, &round.lock) {
            Ok(handle) => handle,
            Err(e) => {
                self.log("error", json!({"what": e.to_string()}));
                return self.pause(200).await;
            }
        };
        let l_before = now_us();
        let t_before = self.probe.time(&lock).await;
        let wait = Duration::from_millis(rand::rng().random_range(0..800));
        self.log(
            "wait",
            json!({"hold": hold, "lock": lock, "kind": kind, "field": round.field, "l": now_us()}),
        );
        let l_call = now_us();
        self.registry.waiting(true);
        let acquired = self.acquire(&round, handle.as_ref(), wait).await;
        self.registry.waiting(false);
        let l_after = now_us();
        let (held, field) = match acquired {
            Ok(held) => held,
            Err(e) => {
                self.log(
                    "acquire_failed",
                    json!({"hold": hold, "lock": lock, "kind": kind, "field": round.field,
                           "error": error_kind(&e), "l_call": l_call, "l_after": l_after}),
                );
                return self.pause(150).await;
            }
        };
        let t_after = self.probe.time(&lock).await;
        let token = held.token();
        let permits =
            matches!(round.kind, Kind::Semaphore | Kind::Expirable).then_some(self.permits);
        self.log(
            "grant",
            json!({
                "hold": hold, "lock": lock, "kind": kind, "field": field, "token": token,
                "lease_ms": lease_ms(round.lease), "permits": permits,
                "l_before": l_before, "t_before": Stamp::json(t_before),
                "l_call": l_call, "l_after": l_after, "t_after": Stamp::json(t_after),
            }),
        );

        // Record lost() the moment it fires, not when this task next looks.
        let (history, probe, id) = (self.history.clone(), self.probe.clone(), self.id);
        let (lost_lock, lost) = (lock.clone(), held.lost());
        let watcher = tokio::spawn(async move {
            lost.await;
            let l = now_us();
            history.log(
                id,
                "lost",
                json!({"hold": hold, "lock": lost_lock, "kind": kind, "token": token, "l": l}),
            );
            let stamp = probe.time(&lost_lock).await;
            history.log(
                id,
                "lost_time",
                json!({"hold": hold, "lock": lost_lock, "token": token, "t": Stamp::json(stamp)}),
            );
        });

        let open = crate::control::Open {
            hold,
            kind,
            lock: lock.clone(),
            token,
            watcher: watcher.abort_handle(),
        };
        if !self.registry.granted(self.id, open) {
            return crate::control::parked().await;
        }
        let nested = self.reenter(&round, handle.as_ref(), &held).await;
        if round.kind == Kind::Fenced {
            self.write_while_holding(&round, &held, token).await;
        } else {
            let hold_ms = self.hold_ms();
            let lost = held.lost();
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(hold_ms)) => {}
                () = lost, if self.broken != Some(Broken::IgnoreLost) => {}
            }
        }
        for (depth, guard) in nested.into_iter().enumerate().rev() {
            let _ = guard.unlock().await;
            self.log(
                "reexit",
                json!({"hold": hold, "lock": lock, "kind": kind, "depth": depth + 1, "l": now_us()}),
            );
        }

        let was_lost = held.is_lost();
        let l_release = now_us();
        let t_release = if was_lost {
            None
        } else {
            self.probe.time(&lock).await
        };
        if !self.registry.releasing(self.id) {
            return crate::control::parked().await;
        }
        self.log(
            "release_start",
            json!({"hold": hold, "lock": lock, "kind": kind, "token": token, "l": l_release,
                   "t": Stamp::json(t_release), "was_lost": was_lost}),
        );
        let result = held.release().await;
        let l_done = now_us();
        let t_done = self.probe.time(&lock).await;
        let outcome = match &result {
            Ok(()) => "ok",
            Err(e) => error_kind(e),
        };
        self.log(
            "release",
            json!({"hold": hold, "lock": lock, "kind": kind, "token": token, "result": outcome,
                   "l": l_done, "t": Stamp::json(t_done)}),
        );
        // After a release lost() never fires; a lost hold's watcher has logged already or
        // is reading TIME (give that a moment: it is the best Redis time of the loss).
        if was_lost {
            let _ = tokio::time::timeout(Duration::from_secs(1), watcher).await;
        } else {
            watcher.abort();
        }
        self.pause(100).await;
    }

    /// Mostly short holds (many grants), some longer than the lease (renewals run).
    fn hold_ms(&self) -> u64 {
        let lease_ms = self.lease.as_millis() as u64;
        let mut rng = rand::rng();
        if rng.random_bool(0.75) {
            rng.random_range(20..=400)
        } else {
            rng.random_range(400..=2 * lease_ms.max(400))
        }
    }

    /// Takes the lock again as the same owner, 0–3 levels deep, each with a watchdog or a
    /// fixed lease of its own (a re-entry must never cut the key's TTL).
    async fn reenter(&self, round: &Round, handle: Option<&Lock>, held: &Held) -> Vec<LockGuard> {
        let mut nested = Vec::new();
        let (Some(handle), Held::Lock(_)) = (handle, held) else {
            return nested;
        };
        if !round.kind.reenters() {
            return nested;
        }
        let depth = rand::rng().random_range(0..=3);
        for level in 1..=depth {
            let lease = some_lease();
            let mut options = AcquireOptions::new()
                .owner(round.owner)
                .wait(Duration::ZERO);
            if let Some(lease) = lease {
                options = options.lease(lease);
            }
            match handle.acquire_with(options).await {
                Ok(guard) => {
                    // A fenced re-entry draws a token of its own (0: none).
                    let token = guard.fencing_token().unwrap_or(0);
                    nested.push(guard);
                    self.log(
                        "reenter",
                        json!({"hold": round.hold, "lock": round.lock, "kind": round.kind.name(),
                               "depth": level, "lease_ms": lease_ms(lease), "token": token,
                               "l": now_us()}),
                    );
                }
                Err(_) => break,
            }
        }
        nested
    }

    /// The fenced store writes of one hold: each after a short stretch of "work" that
    /// follows a look at `is_lost()`; a failed write is retried every 200 ms until it goes
    /// through or `lost()` fires (at most three leases).
    async fn write_while_holding(&self, round: &Round, held: &Held, token: u64) {
        let ignore_lost = self.broken == Some(Broken::IgnoreLost);
        let (id, hold, lock) = (self.id, round.hold, round.lock.as_str());
        let hold_ms = self.hold_ms();
        let writes = rand::rng().random_range(1..=3u64);
        let by = format!("{}/{}", self.history.worker, id);
        let mut pending = writes;
        let retry_until = tokio::time::Instant::now() + 3 * self.lease;
        let mut pause = Duration::from_millis(hold_ms / writes);
        while pending > 0 {
            let lost = held.lost();
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = lost, if !ignore_lost => break,
            }
            // The library says the hold is valid at `l_check` (is_lost() turns at its
            // valid_until): the checker uses that as a lower bound of the hold's end. The
            // broken worker claims the look without taking it.
            let l_check = now_us();
            if !ignore_lost && held.is_lost() {
                break;
            }
            // The work between the check and the write: a pause here (SIGSTOP, a long GC)
            // sends the write after the lock is gone, which only the fencing token stops.
            // Under a fixed lease a quarter of the writes come after such a stall, past the
            // lease's end: another holder may have written meanwhile, and the store must
            // refuse the old token.
            let work = match round.lease {
                Some(lease) if rand::rng().random_bool(0.25) => {
                    lease.as_millis() as u64 + rand::rng().random_range(200..=400)
                }
                _ => rand::rng().random_range(10..=300),
            };
            tokio::time::sleep(Duration::from_millis(work)).await;
            let l_send = now_us();
            let outcome = self.probe.write(lock, token, &by).await;
            let l_recv = now_us();
            match outcome {
                Ok((accepted, t, max)) => {
                    self.log(
                        "write",
                        json!({"hold": hold, "lock": lock, "kind": "fenced", "token": token,
                               "accepted": accepted, "t": t, "max_before": max,
                               "l_check": l_check, "l_send": l_send, "l_recv": l_recv}),
                    );
                    pending -= 1;
                    pause = Duration::from_millis(hold_ms / writes);
                }
                Err(e) => {
                    self.log(
                        "write_failed",
                        json!({"hold": hold, "lock": lock, "kind": "fenced", "token": token,
                               "error": e, "l_check": l_check, "l_send": l_send}),
                    );
                    if tokio::time::Instant::now() > retry_until {
                        break;
                    }
                    pause = Duration::from_millis(200);
                }
            }
        }
    }
}
