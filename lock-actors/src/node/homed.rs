//! A call on a node's connection as the awaiting task sees it: polled inside the
//! connection's home runtime, and bounded by a timer of the awaiting task's own runtime.
//!
//! Whatever the call starts on the way (the redis crate's reconnect task, its backoff
//! timer, a new connection's socket and driver) then belongs to the runtime the connection
//! was opened on, never to that of a caller that happened to trigger it and may end first;
//! the bound, armed when the call is first polled, belongs to the caller, which polls it
//! (to the home runtime when the caller runs in none: any executor may await a call).
//! One flat future, so the call's own future is not copied into layer after layer.

use pin_project_lite::pin_project;
use redis::RedisResult;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::time::Sleep;

pin_project! {
    /// `call`, polled inside `home`, failing as a response timeout once `limit` has passed.
    pub(crate) struct Homed<'h, F> {
        #[pin]
        call: F,
        #[pin]
        timer: Option<Sleep>,
        limit: Option<Duration>,
        home: &'h Handle,
    }
}

impl<'h, F> Homed<'h, F> {
    /// `call` on a connection opened on `home`; bounded by `limit` if there is one (else
    /// the connection times its calls itself).
    pub(crate) fn new(home: &'h Handle, limit: Option<Duration>, call: F) -> Self {
        Homed {
            call,
            timer: None,
            limit,
            home,
        }
    }
}

impl<T, F: Future<Output = RedisResult<T>>> Future for Homed<'_, F> {
    type Output = RedisResult<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(limit) = this.limit.take() {
            // First poll, in the awaiting task's runtime: the timer is that runtime's. A
            // caller outside any tokio runtime (an executor of its own) gets one of the
            // home runtime's, which runs on the client's own thread.
            let _home = Handle::try_current().is_err().then(|| this.home.enter());
            this.timer.set(Some(tokio::time::sleep(limit)));
        }
        {
            let _home = this.home.enter();
            if let Poll::Ready(reply) = this.call.poll(cx) {
                return Poll::Ready(reply);
            }
        }
        match this.timer.as_pin_mut().map(|timer| timer.poll(cx)) {
            // As the redis crate reports its own response timeout.
            Some(Poll::Ready(())) => Poll::Ready(Err(std::io::Error::from(
                std::io::ErrorKind::TimedOut,
            )
            .into())),
            _ => Poll::Pending,
        }
    }
}
