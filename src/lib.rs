//! Redisson-compatible distributed locks for Rust, built as actix actors over Redis.
//!
//! This crate is the facade: it re-exports the runtime crate's handles, guards and errors
//! and the `#[distributed_lock]` attribute. Start at [`LockClient`]; the
//! [guide](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/docs/guide.md)
//! shows every kind with examples.
//!
//! | feature | what it adds |
//! |---|---|
//! | `web` (default) | actix-web glue: `#[distributed_lock]` on handlers, lock errors as 409/503 responses |
//! | `tls` | `rediss://` connections (rustls with the `ring` provider) |
//! | `metrics` | counters, histograms and gauges through the [`metrics`](https://docs.rs/metrics) facade |
//! | `inspector` | `LockClient::inspector()` and an actix-web page that lists holders and waiters (turns on `web`) |
//! | `cli` | the `lock-inspect` command (`cargo install actix-distributed-lock --features cli`) |
//!
//! More, in the repository's `docs/`:
//! [in production](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/docs/production.md)
//! (timeouts, Cluster, Sentinel, TLS, ACL users, metrics),
//! [Redisson interop](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/docs/redisson.md),
//! [guarantees](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/docs/guarantees.md),
//! [the inspector](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/docs/inspector.md),
//! [performance](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/docs/performance.md)
//! and [design](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/docs/design.md).
//!
//! # Which lock should I use?
//!
//! The README's [table of kinds](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/README.md#which-lock-should-i-use) is the one answer: what each
//! kind is for and the call that takes it. Every kind comes from a [`LockClient`] method
//! ([`LockClient::lock`] is the default, reentrant lock); [`LockKind`] says what each lock kind
//! stores in Redis, and [`RedLock`]'s own page says when a lock over several nodes is worth it.
//!
//! # Example
//!
//! ```no_run
//! use actix_distributed_lock::LockClient;
//! use std::time::Duration;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = LockClient::from_url("redis://127.0.0.1:6379/").await?;
//!     let lock = client.lock("order:42")?;
//!     let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
//!     // ... pay the order exactly once ...
//!     guard.unlock().await?;
//!     client.close().await; // see "Closing the client"
//!     Ok(())
//! }
//! ```
//!
//! # Closing the client
//!
//! A guard dropped (or a wait given up) just before a program ends is released (withdrawn)
//! in the background; [`LockClient::close`] waits for that, then stops the client. Call it
//! before returning from `main`, and in an actix-web server once the server has stopped:
//!
//! ```no_run
//! use actix_distributed_lock::LockClient;
//! use actix_web::{web, App, HttpServer};
//!
//! #[actix_web::main]
//! async fn main() -> std::io::Result<()> {
//!     let locks = LockClient::from_url("redis://127.0.0.1:6379/").await.expect("redis");
//!     let data = web::Data::new(locks.clone());
//!     HttpServer::new(move || App::new().app_data(data.clone()))
//!         .bind(("127.0.0.1", 8080))?
//!         .run()
//!         .await?; // returns once the server has stopped (Ctrl-C, SIGTERM)
//!     locks.close().await; // the last requests' releases reach Redis
//!     Ok(())
//! }
//! ```
//!
//! Without it, dropping the last clone finishes those releases in the background and logs a
//! warning, but a process that exits first loses them: a dropped lock can stay taken for its
//! whole lease, a plain semaphore's dropped permits can be lost for good, and a fair lock
//! waiter that gave up can hold up the queue until its deadline ([`LockClient::shutdown`]
//! says what it leaves behind).

// docs.rs (`--cfg docsrs`, nightly) shows which feature each gated item needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

// What users name, listed one by one: the handles, guards, options and errors at the root;
// what other actors send the lock and semaphore actors under `messages`.
#[cfg(feature = "inspector")]
#[cfg_attr(docsrs, doc(cfg(feature = "inspector")))]
pub use lock_actors::inspect;
pub use lock_actors::messages;
#[cfg(feature = "web")]
#[cfg_attr(docsrs, doc(cfg(feature = "web")))]
pub use lock_actors::web;
#[doc(hidden)]
pub use lock_actors::Deferred;
pub use lock_actors::SpinBackoff;
pub use lock_actors::{
    current, default_client, fencing_token, redact_url, set_default_client, AcquireOptions,
    ClientConfig, CurrentLock, Deployment, Lock, LockActor, LockClient, LockError, LockGuard,
    LockKind, LockName, LockOwner, MultiLock, MultiLockGuard, NodeSupervisor,
    PermitExpirableSemaphore, PermitGuard, PermitOptions, ReadWriteLock, RedLock, RedLockGuard,
    Released, ReplicaSync, ReplicaSyncMode, Semaphore, SemaphoreActor, SemaphoreGuard, ServerReply,
    ShardedSubscriptionMode, MAX_NAMESPACE_LEN,
};
pub use lock_actors::{CountDownLatch, LatchActor};
/// The `redis` crate the library is built on: name this one (`actix_distributed_lock::redis`)
/// rather than a `redis` dependency of your own, so both use one version.
///
/// ```
/// use actix_distributed_lock::redis;
/// let client = redis::Client::open("redis://127.0.0.1:6379/").unwrap();
/// assert_eq!(client.get_connection_info().addr().to_string(), "127.0.0.1:6379");
/// ```
pub use redis;

/// Wraps an `async fn` in acquire / release of a distributed lock.
///
/// ```no_run
/// use actix_distributed_lock::distributed_lock;
/// use actix_web::{post, web, HttpResponse};
///
/// #[post("/orders/{id}/pay")]
/// #[distributed_lock("order:<id>", wait = "5s")]
/// async fn pay(id: web::Path<u64>) -> HttpResponse {
///     // runs while holding lock `order:42` for POST /orders/42/pay
///     HttpResponse::Ok().finish()
/// }
/// ```
///
/// # The template
///
/// `<param>` and `<param.field.sub>` (or `<self.field>` in a method) bind to the function's
/// parameters, including bindings inside destructured parameters, and are formatted with
/// `Display` (`web::Path<T>` and `web::Json<T>` display their inner value; fields are
/// reached through them). Everything else is literal, braces included: `"{order}:<id>"`
/// keeps the Redis Cluster hash tag `{order}`. A parameter's name in braces (`"order:{id}"`
/// in a fn with a parameter `id`) is a compile error that suggests `<id>`: it would lock
/// the same text for every call. Durations are strings with a unit (`wait = "5s"`).
///
/// # Options
///
/// | option | meaning | default |
/// |---|---|---|
/// | `wait = "5s"` | how long to wait for a busy lock, in `humantime`'s syntax (`"250ms"`, `"5s"`, `"2m"`, `"1h"`, combined: `"1m30s"` or `"1m 30s"`; whole milliseconds); `"0s"` tries once | the client's `default_wait` |
/// | `lease = "30s"` | a fixed lease, no watchdog | watchdog lease, renewed while the body runs |
/// | `kind = reentrant` | the lock kind: `reentrant`, `fair`, `read`, `write`, `fast` (non-reentrant: a nested call is `AlreadyHeld`), `fenced` or `spin` (no pub/sub: waiters back off); or permits of a semaphore: `semaphore` (no lease) or `expirable_semaphore` (set its permits at start-up with `try_set_permits`; permits are not reentrant: a nested call takes more). Checked at compile time: each name is a variant of one enum the runtime matches | `reentrant` |
/// | `permits = 2` | how many permits the body holds (semaphore kinds only) | `1` |
/// | `client = expr` | the client: a `LockClient`, a reference to one, an `Arc`, or `web::Data<LockClient>` | see below |
/// | `on_fail = path` | a `fn(LockError) -> E` whose result is returned as `Err(E)` | see below |
/// | `on_lost = stop` | drop the body when the lock is lost: a handler answers 503 `{"error":"lock_lost","lock":…}`, a plain fn returns `LockError::Lost` (through `on_fail` or `E::from`); `keep_running` lets the body run on and check [`current`] | `keep_running` |
/// | `retry_after = "2s"` | the `Retry-After` of a handler's 409, in whole seconds rounded up (handlers without `on_fail` only) | the shorter of the holder's remaining TTL and the handler's typical hold (see below) |
///
/// # Where the client comes from, and what a failure returns
///
/// - **actix-web handlers** (no `client =`, and a free fn that is actix-web's: it has an
///   actix-web route attribute written below `#[distributed_lock]` (`#[get]`, `#[post]`,
///   `#[route]`, `#[actix_web::put]`, …), or a parameter whose type is written as
///   actix-web's (`HttpRequest`, `web::Path<_>`, `web::Json<_>`, `web::Data<_>`,
///   `actix_web::…`), or it returns `HttpResponse`/`impl Responder`). A type that is only
///   *named* like an extractor (`&std::path::Path`, your own `Path` or `Json`, or an
///   extractor imported bare as `Path<_>`) does not make a handler: write `web::Path<_>`.
///   In a handler, the client comes from `App::app_data(web::Data::new(client))` through a hidden
///   extractor, and is a clear 500 when missing. The return type becomes
///   `Either<LockRejection, T>`: a wait that times out is 409 Conflict with
///   `{"error":"lock_timeout","lock":"order:42","waited_ms":…}` and `Retry-After` in whole
///   seconds, rounded up, at least 1: `retry_after = "…"` when given, else the shorter of
///   the holder's remaining TTL and the time this handler's own holds typically last in this
///   process (a running average; a watchdog keeps a busy lock's TTL near its whole lease, 30 s
///   by default, however short its holds, so the TTL alone would send clients away for 30 s),
///   else the TTL until the handler has completed a hold;
///   Redis unreachable is 503 (see [`web::LockRejection`]). With `on_fail`, the signature is
///   unchanged and failures return `Err(on_fail(error))`.
/// - **Any other async fn or method**: the client is `client = expr`, else the one set with
///   [`set_default_client`]. The function must return `Result<_, E>`: a failure returns
///   `Err(on_fail(error))`, or `Err(E::from(error))` without `on_fail`.
///
/// # Guarantees
///
/// - The lock is released on every exit path: normal return (awaited before the function
///   returns), `?` and early `return`, panic and a dropped future (in the background).
/// - With `kind = fenced` every hold draws a fencing token, readable in the body with
///   [`fencing_token`].
/// - Inside the body, [`current`] is the hold of the innermost annotated call: its name,
///   fencing token, and whether it is lost ([`CurrentLock`] says what it gives for a
///   MultiLock and for permits).
/// - Several templates (`#[distributed_lock("order:<id>", "stock:<sku>")]`) take a
///   [`MultiLock`]: all of them or none, in a canonical order, one wait for the set; a 409
///   names the member that was busy.
/// - The function's attributes, doc comments, visibility, generics and parameters are kept.
///
/// # Who holds the lock: nested calls, side-by-side calls, spawned tasks
///
/// Each annotated call locks as one [`LockOwner`] (inside the body,
/// [`LockOwner::current`] returns it). Which one:
///
/// - **Nested calls re-enter.** A call made inside the body of an annotated call that holds
///   the same lock (same client, same name) locks as that call's owner: its hold count goes
///   up, nothing waits.
/// - **Side-by-side calls never share a hold.** Calls running at once in one task
///   (`join!(pay(o), pay(o))`, `select!`, a `FuturesUnordered`) are two holders, and a
///   distributed lock exists to keep two holders out. Inside a body that holds the lock,
///   they re-enter one at a time: the second waits (within its own `wait`) until the first
///   has finished and released. For a lock no enclosing call holds, each call is a fresh
///   owner, so they exclude each other through Redis as two processes would.
/// - **An owner you set is used.** Calls run inside `owner.scope(…)` ([`LockOwner::scope`])
///   lock as `owner` (side-by-side calls for one lock again take turns).
/// - **A spawned task is another owner.** `tokio::spawn` starts a task without its parent's
///   calls, so a spawned task that takes a lock its parent holds waits for the parent to
///   release it; if the parent awaits the task meanwhile, the task's `wait` runs out
///   ([`LockError::Timeout`]). To let a spawned task work under the parent's hold, give it
///   the owner: `tokio::spawn(LockOwner::current().unwrap().scope(work))`. It then re-enters
///   the parent's hold, and it is up to you that the task ends before the parent releases.
///
/// ```no_run
/// use actix_distributed_lock::{distributed_lock, LockClient, LockError};
///
/// #[distributed_lock("order:<id>", client = client)]
/// async fn pay(client: &LockClient, id: u64) -> Result<(), LockError> { Ok(()) }
///
/// #[distributed_lock("order:<id>", client = client)]
/// async fn settle(client: &LockClient, id: u64) -> Result<(), LockError> {
///     pay(client, id).await?; // nested: re-enters `order:<id>`
///     let (a, b) = tokio::join!(pay(client, id), pay(client, id)); // one at a time
///     a.and(b)
/// }
/// ```
///
/// # Compile errors
///
/// These are compile errors on the offending token, never failures at run time: an unknown
/// placeholder (the message lists the parameters), a non-async fn, a malformed duration, a
/// zero lease, an unknown option, kind or `on_lost` value, an option given twice, an empty
/// template; `on_lost = stop` with `kind = semaphore` (its permits are never lost);
/// `lease` with `kind = semaphore` (its permits have no lease: use `expirable_semaphore`);
/// `permits` with a lock kind (or no kind) and `permits = 0`; several templates with
/// `kind = fenced` or a semaphore kind. A fn that is not a handler and does not return
/// `Result<_, E>` with `E: From<LockError>` (or an `E` that `on_fail` makes) is told so on
/// its return type (a type alias of a `Result` is fine); a field a template names that the
/// parameter lacks is reported on the template; a handler needs the `web` feature.
///
/// # Example outside actix-web
///
/// ```no_run
/// use actix_distributed_lock::{distributed_lock, LockClient, LockError};
///
/// #[distributed_lock("report:<day>", client = client, wait = "0s")]
/// async fn build_report(client: &LockClient, day: &str) -> Result<(), LockError> {
///     // only one process builds a given day's report at a time
///     Ok(())
/// }
/// ```
pub use lock_macros::distributed_lock;

#[doc(hidden)]
pub use lock_actors::macro_support as __private;

mod web_gate;

/// Compiles the README's examples as doc tests, so they stay correct as written.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The `docs/` pages' examples, compiled as doc tests like the README's.
#[cfg(doctest)]
pub mod docs_doctests {
    #[doc = include_str!("../docs/guide.md")]
    pub struct Guide;
    // The pages' snippets use the features they are about, as a reader would turn them on.
    #[cfg(feature = "tls")]
    #[doc = include_str!("../docs/production.md")]
    pub struct Production;
    #[cfg(feature = "inspector")]
    #[doc = include_str!("../docs/inspector.md")]
    pub struct Inspector;
}
