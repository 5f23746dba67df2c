//! The thread the client's actors live on: an arbiter of the caller's actix system, or a
//! private actix system when the caller runs plain tokio.

use crate::error::LockError;
use actix_rt::{Arbiter, ArbiterHandle, System};
use std::future::Future;
use tokio::sync::oneshot;

/// Where a client's actors and connections run, and how to stop them.
pub(crate) struct ActorRuntime {
    arbiter: ArbiterHandle,
    stop: StopHow,
}

enum StopHow {
    /// We started an arbiter inside the caller's actix system.
    Arbiter,
    /// We started a whole actix system on a thread of our own.
    OwnSystem(System),
}

impl ActorRuntime {
    /// Starts a dedicated arbiter thread (inside actix) or a private system thread (outside).
    pub(crate) fn start() -> Result<Self, LockError> {
        if System::try_current().is_some() {
            let arbiter = Arbiter::new();
            return Ok(ActorRuntime {
                arbiter: arbiter.handle(),
                stop: StopHow::Arbiter,
            });
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("distributed-lock-actors".into())
            .spawn(move || {
                let runner = System::new();
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
        Ok(ActorRuntime {
            arbiter,
            stop: StopHow::OwnSystem(system),
        })
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
        match &self.stop {
            StopHow::Arbiter => {
                self.arbiter.stop();
            }
            StopHow::OwnSystem(system) => system.stop(),
        }
    }
}
