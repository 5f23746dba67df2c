//! The thread the client's actors live on: a private actix system of the client's own,
//! whether or not the caller runs inside actix.

use crate::error::LockError;
use actix_rt::{Arbiter, ArbiterHandle, System};
use std::future::Future;
use tokio::sync::oneshot;

/// Where a client's actors and connections run, and how to stop them.
///
/// Always a private system on a thread of its own, also inside the caller's actix system
/// (an arbiter of the caller's system would do, but its runtime is dropped by actix where
/// we cannot make the teardown safe; see `start`). Actor addresses work across systems.
pub(crate) struct ActorRuntime {
    arbiter: ArbiterHandle,
    system: System,
}

impl ActorRuntime {
    /// Starts the client's actor thread and its actix system.
    pub(crate) fn start() -> Result<Self, LockError> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("distributed-lock-actors".into())
            .spawn(move || {
                let runner = System::new();
                // When the system stops, the runtime drops its actors, and actix polls each
                // live actor's futures one last time while dropping it. A future first
                // polled then starts a timer (redis's response timeout, our own timeouts),
                // which panics ("no reactor running") unless a runtime context is entered:
                // the runtime is dropped outside its own `block_on`. Entering the runtime's
                // handle around `run` keeps that last poll legal; the runtime itself is
                // still alive then (actix drops its task set before the tokio runtime).
                let handle = runner.runtime().tokio_runtime().handle().clone();
                let _context = handle.enter();
                // The receiver waits right below; if it is gone there is nobody to serve.
                if tx.send((System::current(), Arbiter::current())).is_ok() {
                    // Returns when `System::stop` is called by `ActorRuntime::stop`.
                    let _ = runner.run();
                }
            })
            .map_err(|e| {
                LockError::invalid_config(format!("cannot start the actor thread: {e}"))
            })?;
        let (system, arbiter) = rx
            .recv()
            .map_err(|_| LockError::invalid_config("the actor thread died while starting"))?;
        Ok(ActorRuntime { arbiter, system })
    }

    pub(crate) fn arbiter(&self) -> &ArbiterHandle {
        &self.arbiter
    }

    /// Runs `fut` on the actor thread and hands its output back to the caller's task.
    pub(crate) async fn run<F, T>(&self, fut: F) -> Result<T, LockError>
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let accepted = self.arbiter.spawn(async move {
            let _ = tx.send(fut.await);
        });
        if !accepted {
            return Err(LockError::Shutdown);
        }
        rx.await.map_err(|_| LockError::Shutdown)
    }

    /// Stops every actor of the client: renewals end, connections close.
    pub(crate) fn stop(&self) {
        self.system.stop();
    }
}
