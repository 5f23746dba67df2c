//! `LockClient`: the cheap-to-clone handle users hold. It owns its node's actors (the
//! registries of lock and semaphore actors, see `actors`) and the renewal service (see
//! `crate::lease::renewal`); the handles of every lock kind start from it.

mod actors;

pub(crate) use actors::{NodeActors, Registered};

use crate::config::ClientConfig;
use crate::error::LockError;
use crate::keys::LockName;
use crate::lock::{all_scripts, LockActor, LockKind, LockOwner};
use crate::node::Node;
use crate::reply::{send_detached, Detached};
use crate::runtime::ActorRuntime;
use actix::dev::ToEnvelope;
use actix::{Addr, Handler, MailboxError, Message};
use arc_swap::ArcSwapOption;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The entry point: a connection to one Redis node and the actors that lock on it.
///
/// Build one per process (it is cheap to clone; clones share everything) and hand clones to
/// tasks, actors or actix-web's `app_data`. It works inside `#[actix_web::main]` / actix
/// systems and from plain `#[tokio::main]` alike: its actors run on a private actix system
/// thread of its own. Its futures may be awaited from any executor, tokio or not (a call's
/// response timeout is armed on the caller's tokio runtime when there is one, else on the
/// client's own thread); `tests/outside_tokio.rs` drives every kind from a plain thread.
///
/// Each client has its own uuid (or the id configured with [`ClientConfig::client_id`]),
/// which prefixes every owner it writes to Redis, and keeps two connections to the node
/// (commands, subscriptions) however many locks it handles.
///
/// End it with [`close`](LockClient::close) (`client.close().await`) before the program
/// returns or the server stops: the releases of guards dropped just before reach Redis, and
/// nothing is left behind. [`shutdown`](LockClient::shutdown) stops its actors at once:
/// renewal ends, held locks expire at their lease, and releases still on their way are cut
/// off. Dropping the last clone without `close` finishes the releases already on their way in
/// the background, as `close` would (the drop does not wait), logs a warning that counts
/// them, then stops; a process that exits first loses them.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{ClientConfig, LockClient};
/// use std::time::Duration;
///
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let config = ClientConfig::new("redis://127.0.0.1:6379/")
///         .default_wait(Duration::from_secs(5));
///     let client = LockClient::connect(config).await?;
///     let guard = client.lock("stock:sku-1")?.acquire().await?;
///     // ... decrement the stock ...
///     guard.unlock().await?;
///     client.close().await;
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct LockClient {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    id: Arc<str>,
    config: Arc<ClientConfig>,
    /// Taken at shutdown, so that the node's connections close although clones of the
    /// client live on (its actors, which also hold the node, stop with the runtime's scope).
    actors: ArcSwapOption<NodeActors>,
    runtime: ActorRuntime,
    shut_down: AtomicBool,
}

impl ClientInner {
    /// Stops the client's actors and lets go of its node. The node is marked stopped
    /// first: from then on every release refuses with `Shutdown`, whether an actor still
    /// runs for a moment or not.
    fn stop(&self) {
        if let Some(actors) = self.actors.swap(None) {
            actors.stop();
        }
        self.runtime.stop();
    }
}

/// The last clone dropped without [`close`](LockClient::close): releases and withdraws
/// already on their way to Redis (a guard dropped just before, permits given back, a fair
/// waiter that gave up) are finished in the background, bounded by the response timeout, as
/// `close` would; the drop itself never waits. A warning says what was left in flight: it
/// is lost if the process exits before it is done, and a plain semaphore's permits given
/// back that way stay taken for good.
impl Drop for ClientInner {
    fn drop(&mut self) {
        let scope = self.runtime.arbiter();
        let in_flight = scope.errands().running();
        if self.shut_down.load(Ordering::SeqCst) || in_flight == 0 {
            return self.stop();
        }
        let Some(actors) = self.actors.swap(None) else {
            return self.stop();
        };
        let bound = self.config.response_timeout;
        tracing::warn!(
            client = %self.id,
            in_flight,
            "lock client dropped without close(): {in_flight} release(s) or withdraw(s) of \
             dropped guards, given-back permits or abandoned waits were still on their way to \
             Redis; finishing them in the background (at most {bound:?}). Call \
             `client.close().await` before the program ends: what is unfinished when the \
             process exits stays in Redis (a lock until its lease ends, a plain semaphore's \
             permits for good)"
        );
        actors.close();
        let (errands, stopping) = (scope.errands().clone(), scope.clone());
        let flushing = scope.spawn(async move {
            let _ = tokio::time::timeout(bound, errands.finished()).await;
            actors.stop();
            stopping.stop();
        });
        if !flushing {
            self.runtime.stop();
        }
    }
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockClient")
            .field("id", &self.inner.id)
            .field("config", &self.inner.config)
            .finish()
    }
}

impl LockClient {
    /// Validates `config`, connects to Redis and starts the client's actors.
    ///
    /// Fails with [`LockError::InvalidConfig`] for a bad setting or URL, and with
    /// [`LockError::Unavailable`] when Redis cannot be reached within the connect timeout.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{ClientConfig, LockClient};
    /// # async fn demo() -> Result<(), actix_distributed_lock::LockError> {
    /// let client = LockClient::connect(ClientConfig::new("redis://127.0.0.1/")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(config: ClientConfig) -> Result<Self, LockError> {
        config.validate()?;
        let config = Arc::new(config);
        let id: Arc<str> = match config.client_id_value() {
            Some(id) => id.into(),
            None => uuid::Uuid::new_v4().to_string().into(),
        };
        let runtime = ActorRuntime::start()?;
        let connecting = Node::connect(config.clone(), id.clone(), &runtime, all_scripts());
        let node = match connecting.await {
            Ok(node) => node,
            Err(error) => {
                runtime.stop();
                return Err(error);
            }
        };
        tracing::debug!(client = %id, node = node.commands.label(), "lock client connected");
        crate::telemetry::describe();
        Ok(LockClient {
            inner: Arc::new(ClientInner {
                actors: ArcSwapOption::from_pointee(NodeActors::start(node, id.clone())),
                id,
                config,
                runtime,
                shut_down: AtomicBool::new(false),
            }),
        })
    }

    /// [`connect`](LockClient::connect) with the default settings.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::LockClient;
    /// # async fn demo() -> Result<(), actix_distributed_lock::LockError> {
    /// let client = LockClient::from_url("redis://127.0.0.1/").await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_url(url: &str) -> Result<Self, LockError> {
        Self::connect(ClientConfig::new(url)).await
    }

    /// The address of the actor for lock `name`, for sending it messages from other actors.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let actor = client.lock_actor("order:42")?;
    /// # Ok(()) }
    /// ```
    pub fn lock_actor(&self, name: &str) -> Result<Addr<LockActor>, LockError> {
        self.lock_actor_of(LockKind::Reentrant, name)
    }

    /// The address of the actor for the `kind` lock `name` (each kind of lock on a name
    /// has its own actor). A fair lock has one actor per owner: ask
    /// [`fair_lock_actor`](LockClient::fair_lock_actor) for the one that takes it; the actor
    /// this returns for [`LockKind::Fair`] answers state queries and force unlocks only.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::LockKind;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let readers = client.lock_actor_of(LockKind::Read, "doc:7")?;
    /// # Ok(()) }
    /// ```
    pub fn lock_actor_of(&self, kind: LockKind, name: &str) -> Result<Addr<LockActor>, LockError> {
        let name = self.name(name)?;
        Ok(self.actors()?.lock_actor(kind, &name, None))
    }

    /// The actor that takes the fair lock `name` for `owner` (a fair lock has one actor
    /// per waiting owner, each waiting in the Redis queue on its own channel). Acquire
    /// messages for other owners sent to it are refused with
    /// [`LockError::InvalidConfig`].
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{messages::Acquire, LockOwner};
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
    /// let me = LockOwner::new();
    /// let actor = client.fair_lock_actor("printer", me)?;
    /// let guard = actor.send(Acquire { owner: me, lease: None, wait: Duration::from_secs(5) }).await??;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock_actor(
        &self,
        name: &str,
        owner: LockOwner,
    ) -> Result<Addr<LockActor>, LockError> {
        let name = self.name(name)?;
        Ok(self
            .actors()?
            .lock_actor(LockKind::Fair, &name, Some(owner)))
    }

    /// Checks a lock name against this client's limits.
    pub(crate) fn name(&self, name: &str) -> Result<LockName, LockError> {
        self.mapped_name(name)
    }

    /// Checks a lock, semaphore or latch name and maps it into this client's namespace, if
    /// any: the one place a caller's name becomes a key.
    ///
    /// A name whose braces are not one non-empty hash tag (`a{b`, `x{}y`) is refused on
    /// every deployment, not only on a cluster (where its key and channel would land in two
    /// slots): code that works on one server must not fail when it moves to a cluster.
    pub(crate) fn mapped_name(&self, name: &str) -> Result<LockName, LockError> {
        let config = &self.inner.config;
        let mapped = match config.namespace_value() {
            Some(namespace) => LockName::namespaced(namespace, name, config.max_name_len),
            None => LockName::new(name, config.max_name_len),
        }?;
        if !mapped.shares_one_slot() {
            return Err(LockError::InvalidName {
                reason: format!(
                    "`{mapped}` has braces that are not one non-empty hash tag, so on a Redis \
                     Cluster its key and its channel would land in different slots; use \
                     balanced braces around a non-empty tag (`order:{{42}}`) or none"
                ),
            });
        }
        Ok(mapped)
    }

    /// This client's id: the first part of every owner field it writes. A uuid of its own,
    /// or the one configured with [`ClientConfig::client_id`].
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) {
    /// assert_eq!(client.id().len(), 36);
    /// # }
    /// ```
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The settings in force.
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) {
    /// println!("watchdog lease: {:?}", client.config().watchdog_timeout_value());
    /// # }
    /// ```
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// How many lock actors this client runs now (one per lock name in use).
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) {
    /// println!("{} locks in use", client.active_locks());
    /// # }
    /// ```
    pub fn active_locks(&self) -> usize {
        self.inner
            .actors
            .load()
            .as_ref()
            .map_or(0, |actors| actors.lock_actors())
    }

    /// How many holds the watchdog is keeping alive now.
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) {
    /// assert_eq!(client.watched_holds(), 0);
    /// # }
    /// ```
    pub fn watched_holds(&self) -> usize {
        self.inner
            .actors
            .load()
            .as_ref()
            .map_or(0, |actors| actors.watchdog.len())
    }

    /// Ends the client gracefully, for every clone, and resolves once it has stopped: the
    /// way to end a program or a server that used it, so that it leaves nothing behind in
    /// Redis.
    ///
    /// In order:
    /// 1. Later calls (acquires, re-entries, reads, semaphore calls) get
    ///    [`LockError::Shutdown`]; so do acquires still waiting, and a fair lock waiter
    ///    leaves the lock's Redis queue.
    /// 2. Every release already started is finished: guards of every kind that were dropped
    ///    (their release runs in the background), permits given back, waiters that gave up
    ///    or timed out leaving a fair lock's queue, grants that reached a waiter who had
    ///    left given back.
    /// 3. The client stops as with [`shutdown`](LockClient::shutdown).
    ///
    /// Holds of guards still alive are not released: they expire at their lease (renewal
    /// ends at step 3), and a plain semaphore's permits stay taken. Release or drop the
    /// guards before closing. Waiting for step 2 takes at most the client's
    /// [response timeout](crate::ClientConfig::response_timeout); what Redis has not
    /// answered by then is left as [`shutdown`](LockClient::shutdown) leaves it. Closing
    /// again, or from another clone, waits likewise and then returns; after a shutdown it
    /// returns at once.
    ///
    /// # Cancel safety
    ///
    /// Step 1 happens on the first poll. Dropping the future after that leaves the client
    /// refusing calls but not stopped: its actors still finish what they started; close it
    /// again, or shut it down, to stop it.
    ///
    /// # Example
    ///
    /// A `#[tokio::main]` program: release, close, return.
    ///
    /// ```no_run
    /// use actix_distributed_lock::LockClient;
    ///
    /// #[tokio::main]
    /// async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     let client = LockClient::from_url("redis://127.0.0.1/").await?;
    ///     {
    ///         let _guard = client.lock("report:daily")?.acquire().await?;
    ///         // ... write the report; `?` may leave early, the guard is dropped either way
    ///     }
    ///     client.close().await; // the dropped guard's release reaches Redis before we exit
    ///     Ok(())
    /// }
    /// ```
    ///
    /// An actix-web server closes it once `HttpServer::run` has returned (the server has
    /// stopped and its last requests have dropped their guards): see "Closing the client"
    /// in the docs of the `actix-distributed-lock` crate.
    pub fn close(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let inner = self.inner.clone();
        async move {
            if !inner.shut_down.swap(true, Ordering::SeqCst) {
                tracing::debug!(client = %inner.id, "lock client closing");
            }
            if let Some(actors) = inner.actors.load_full() {
                actors.close();
            }
            inner
                .runtime
                .finish_errands(inner.config.response_timeout)
                .await;
            inner.stop();
        }
    }

    /// Stops the client's actors now, for every clone: waiters and later calls get
    /// [`LockError::Shutdown`], renewal ends.
    ///
    /// Nothing more is sent to Redis, so this leaves behind whatever was not finished:
    /// the holds of guards dropped a moment before (their release runs in the background)
    /// stay until their lease runs out, permits of a plain semaphore given back that way
    /// stay taken for good, and a fair lock waiter that gave up a moment before keeps its
    /// place in the lock's queue until its deadline
    /// ([`ClientConfig::fair_wait_timeout`](crate::ClientConfig::fair_wait_timeout)),
    /// holding up every waiter behind it. Use [`close`](LockClient::close) to end a
    /// program or a server; this is for when it must stop at once.
    ///
    /// Dropping the last clone of a client (lock handles and semaphore handles hold one;
    /// guards do not) is a shutdown once the releases already on their way are finished in
    /// the background (see [`LockClient`]): a guard still alive then answers
    /// [`unlock`](crate::LockGuard::unlock) with [`LockError::Shutdown`], and its hold
    /// expires at its lease.
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) {
    /// client.shutdown();
    /// # }
    /// ```
    pub fn shutdown(&self) {
        if !self.inner.shut_down.swap(true, Ordering::SeqCst) {
            tracing::debug!(client = %self.inner.id, "lock client shutting down");
        }
        // Also when a close has begun: it is cut short.
        self.inner.stop();
    }

    /// `Err(Shutdown)` once the client is closing or stopped: for calls that do not go
    /// through [`actors`](Self::actors) (a lock handle's fast path).
    pub(crate) fn check_open(&self) -> Result<(), LockError> {
        if self.inner.shut_down.load(Ordering::SeqCst) {
            return Err(LockError::Shutdown);
        }
        Ok(())
    }

    pub(crate) fn node(&self) -> Result<Arc<Node>, LockError> {
        Ok(self.actors()?.node.clone())
    }

    /// The node's actors (registries and renewal), unless the client was shut down.
    pub(crate) fn actors(&self) -> Result<Arc<NodeActors>, LockError> {
        if self.inner.shut_down.load(Ordering::SeqCst) {
            return Err(LockError::Shutdown);
        }
        self.inner.actors.load_full().ok_or(LockError::Shutdown)
    }

    /// Sends `msg` to the actor `key` names (a lock's, a semaphore's or a latch's), once more
    /// to a fresh actor if that one had just stopped. A request whose future is dropped
    /// before the actor's turn is skipped: right for acquires (a cancelled one is withdrawn;
    /// thousands cancelled at once cost the actor nothing) and reads.
    pub(crate) async fn ask<A, M>(&self, key: A::Key, msg: M) -> Result<M::Result, LockError>
    where
        A: Registered + Handler<M>,
        M: Message + Clone + Send + 'static,
        M::Result: Send,
        A::Context: ToEnvelope<A, M>,
    {
        for _ in 0..2 {
            let actors = self.actors()?;
            let actor = actors.find::<A>(&key);
            match actor.send(msg.clone()).await {
                Ok(reply) => return Ok(reply),
                Err(MailboxError::Closed) => A::evict(&actors, &key, &actor),
                Err(MailboxError::Timeout) => break,
            }
        }
        Err(LockError::Shutdown)
    }

    /// Sends `msg` to the actor `key` names, detached (see [`Detached`]): it is handled
    /// whether or not the returned future is polled again after its first poll, which sends
    /// it. For the changes documented to go on once polled (releases, permits set or added,
    /// lease updates, force-unlocks, a latch's count).
    pub(crate) async fn ask_detached<A, M>(
        &self,
        key: A::Key,
        msg: M,
    ) -> Result<M::Result, LockError>
    where
        A: Registered + Handler<Detached<M>>,
        M: Message + Send + 'static,
        M::Result: Send + 'static,
        A::Context: ToEnvelope<A, Detached<M>>,
    {
        let actors = self.actors()?;
        let mut actor = actors.find::<A>(&key);
        if !actor.connected() {
            // It had just stopped: a fresh one takes the message.
            A::evict(&actors, &key, &actor);
            actor = actors.find::<A>(&key);
        }
        send_detached(&actor, msg).await
    }
}
