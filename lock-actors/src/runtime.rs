//! Where clients' actors run: one actix thread per process, shared by every client, and on
//! it one scope per client, so that stopping a client stops its own actors and tasks only.
//!
//! A scope is a tokio `LocalSet` run as one task of the shared thread: whatever a client
//! starts there (actors, their futures, requests handed over by [`ActorRuntime::run`])
//! lands in its own set, and dropping the set drops all of it, while the thread and every
//! other client's scope go on.
//!
//! A scope also counts its client's *errands* (see [`Errands`]): releases and withdraws
//! already on their way to Redis, which a graceful close lets finish before the scope goes.

use crate::error::LockError;
use actix::dev::channel;
use actix::{Actor, Addr, Context};
use actix_rt::{ArbiterHandle, System};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::LocalSet;

/// The name of the shared actor thread.
const THREAD_NAME: &str = "distributed-lock-actors";

/// An actor's mailbox size: actix's own default (`DEFAULT_CAPACITY`, not exported).
const MAILBOX: usize = 16;

/// The shared thread's arbiter, once started. A fresh thread is started if it ever died.
static SHARED: Mutex<Option<ArbiterHandle>> = Mutex::new(None);

/// Work for a client's scope, run on the shared thread inside the scope.
enum Command {
    Run(Box<dyn FnOnce() + Send>),
    Stop,
}

/// A client's scope on the shared actor thread: starts actors and futures in it.
///
/// Cheap to clone; every clone feeds the same scope. Once the scope stopped, nothing starts
/// (`spawn` says `false`, actors come back disconnected).
#[derive(Clone)]
pub(crate) struct Scope {
    commands: mpsc::UnboundedSender<Command>,
    errands: Errands,
}

impl Scope {
    /// The client's errands: take one for a release or withdraw that must reach Redis
    /// before a graceful close stops the scope.
    pub(crate) fn errands(&self) -> &Errands {
        &self.errands
    }

    /// Runs `fut` in the scope. False when the scope has stopped.
    pub(crate) fn spawn<F>(&self, fut: F) -> bool
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.run_there(move || {
            tokio::task::spawn_local(fut);
        })
    }

    /// Starts an actor in the scope (as actix's `start_in_arbiter`) and returns its address
    /// at once; the address is disconnected if the scope has stopped.
    pub(crate) fn start<A, F>(&self, f: F) -> Addr<A>
    where
        A: Actor<Context = Context<A>>,
        F: FnOnce(&mut Context<A>) -> A + Send + 'static,
    {
        let (tx, rx) = channel::channel(MAILBOX);
        self.run_there(move || {
            let mut ctx = Context::with_receiver(rx);
            let actor = f(&mut ctx);
            tokio::task::spawn_local(ctx.into_future(actor));
        });
        Addr::new(tx)
    }

    /// Stops the scope: every actor and task in it is dropped (a task may stop its own
    /// scope; it is dropped with the rest).
    pub(crate) fn stop(&self) {
        let _ = self.commands.send(Command::Stop);
    }

    fn run_there(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.commands.send(Command::Run(Box::new(job))).is_ok()
    }
}

/// Where a client's actors and connections run, and how to stop them.
///
/// Always the process's shared actor thread, also inside the caller's actix system (an
/// arbiter of the caller's system would do, but its runtime is dropped by actix where we
/// cannot make the teardown safe). Actor addresses work across systems.
pub(crate) struct ActorRuntime {
    scope: Scope,
}

impl ActorRuntime {
    /// Opens the client's scope on the shared actor thread, starting the thread on first use.
    pub(crate) fn start() -> Result<Self, LockError> {
        let (commands, receiver) = mpsc::unbounded_channel();
        // Handed over through a cell: if the shared thread turns out dead, the same receiver
        // goes to a fresh one.
        let receiver = Arc::new(Mutex::new(Some(receiver)));
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        for _ in 0..2 {
            let arbiter = match shared.as_ref() {
                Some(arbiter) => arbiter.clone(),
                None => shared.insert(start_thread()?).clone(),
            };
            let cell = receiver.clone();
            let accepted = arbiter.spawn_fn(move || {
                let taken = cell.lock().unwrap_or_else(PoisonError::into_inner).take();
                if let Some(receiver) = taken {
                    actix_rt::spawn(serve(receiver));
                }
            });
            if accepted {
                return Ok(ActorRuntime {
                    scope: Scope {
                        commands,
                        errands: Errands::default(),
                    },
                });
            }
            *shared = None; // the thread is gone: start another
        }
        Err(LockError::invalid_config(
            "the actor thread does not take work",
        ))
    }

    /// The client's scope, to start its actors and tasks in.
    pub(crate) fn arbiter(&self) -> &Scope {
        &self.scope
    }

    /// Runs `fut` in the client's scope and hands its output back to the caller's task.
    pub(crate) async fn run<F, T>(&self, fut: F) -> Result<T, LockError>
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let accepted = self.scope.spawn(async move {
            let _ = tx.send(fut.await);
        });
        if !accepted {
            return Err(LockError::Shutdown);
        }
        rx.await.map_err(|_| LockError::Shutdown)
    }

    /// Waits, inside the scope, until no errand of this client is left, or `bound` has
    /// passed; at once if the scope has stopped. Run on the actor thread, so everything an
    /// actor did before (taking an errand for a withdraw in the turn that answered a timed-out
    /// waiter, say) is counted.
    pub(crate) async fn finish_errands(&self, bound: Duration) {
        let errands = self.scope.errands.clone();
        let waiting = self.run(async move {
            let _ = tokio::time::timeout(bound, errands.finished()).await;
        });
        // Err: the scope has stopped, and its errands with it.
        let _ = waiting.await;
    }

    /// Stops every actor and task of this client (renewals end, its connections close once
    /// their last handle is gone); the thread and other clients go on.
    pub(crate) fn stop(&self) {
        self.scope.stop();
    }
}

/// The releases and withdraws a client has started and Redis has not answered yet: what
/// [`LockClient::close`](crate::LockClient::close) waits for before it stops the client.
///
/// Each one is an [`Errand`], taken where the work starts (a dropped guard takes it before
/// its release message leaves, so no window opens between the drop and the actor's turn)
/// and dropped once Redis answered (or the work was dropped with the scope). Cheap to
/// clone; every clone counts the same errands.
#[derive(Clone, Default)]
pub(crate) struct Errands(Arc<watch::Sender<usize>>);

impl Errands {
    /// Counts one errand until the value returned is dropped.
    pub(crate) fn start(&self) -> Errand {
        self.0.send_modify(|running| *running += 1);
        Errand(self.0.clone())
    }

    /// How many errands are running now.
    pub(crate) fn running(&self) -> usize {
        *self.0.borrow()
    }

    /// Resolves once no errand is running.
    pub(crate) async fn finished(&self) {
        let mut running = self.0.subscribe();
        // Err only when every sender is gone, and `self` is one.
        let _ = running.wait_for(|running| *running == 0).await;
    }
}

/// One release or withdraw under way (see [`Errands`]); it ends when this is dropped.
#[must_use = "the errand ends when this is dropped: keep it until Redis has answered"]
pub(crate) struct Errand(Arc<watch::Sender<usize>>);

impl Drop for Errand {
    fn drop(&mut self) {
        self.0
            .send_modify(|running| *running = running.saturating_sub(1));
    }
}

/// Tells an actor that its client is closing: it fails its waiters with
/// [`LockError::Shutdown`], lets what leaves Redis finish (a fair waiter's withdraw), and
/// keeps the errand until it has nothing more to send.
pub(crate) struct Closing(pub(crate) Errand);

impl actix::Message for Closing {
    type Result = ();
}

/// One client's scope: runs what it is sent inside its own `LocalSet` until told to stop
/// (or every sender is gone), then drops the set with everything started in it.
async fn serve(mut commands: mpsc::UnboundedReceiver<Command>) {
    let scope = LocalSet::new();
    scope
        .run_until(async {
            // Run inside the set: `spawn_local` (and actix's `spawn`) put tasks into it.
            while let Some(Command::Run(job)) = commands.recv().await {
                job();
            }
        })
        .await;
    // Refuse further work before dropping the actors: a dropped actor may try to start one.
    drop(commands);
    drop(scope);
}

/// Starts the shared actor thread: an actix system that runs until the process ends.
fn start_thread() -> Result<ArbiterHandle, LockError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            let runner = System::new();
            // Dropping a scope drops its actors, and actix polls each live actor's futures
            // one last time while dropping it; a future first polled then may start a timer
            // (redis's response timeout, our own timeouts), which needs a runtime context.
            // Scopes are dropped inside the running system, so the context is there; keep
            // it entered around `run` too, for the system's own teardown.
            let handle = runner.runtime().tokio_runtime().handle().clone();
            let _context = handle.enter();
            // The receiver waits right below; if it is gone there is nobody to serve.
            if tx.send(actix_rt::Arbiter::current()).is_ok() {
                // Runs until the process ends: nothing stops the shared system.
                let _ = runner.run();
            }
        })
        .map_err(|e| LockError::invalid_config(format!("cannot start the actor thread: {e}")))?;
    rx.recv()
        .map_err(|_| LockError::invalid_config("the actor thread died while starting"))
}
