//! How an actor answers later: a reply slot an actor fills once Redis has answered
//! ([`Deferred`], the `Result` of the lock and semaphore actors' messages), and a message
//! that is handled even if its asker left and even if it went out with the actor's last
//! address ([`Detached`], sent with [`send_detached`] or [`post`]). Below both actors,
//! which share it.

use crate::error::LockError;
use actix::dev::{MessageResponse, OneshotSender, ToEnvelope};
use actix::{Actor, Addr, Handler, Message};
use std::cell::RefCell;
use std::rc::Rc;
use tokio::sync::oneshot;

/// A reply a lock or semaphore actor sends later, once Redis has answered.
///
/// It hands actix's own reply channel to the actor, so the actor can see when the asker
/// has gone away (a cancelled acquire: a grant that arrives too late is given back) and
/// so no extra task sits between the two. You never build one; it is the `Result` type of
/// the actors' handlers, and `addr.send(msg).await` yields the message's result as usual.
pub struct Deferred<T>(pub(crate) ReplySlot<T>);

/// Where the actor finds the reply channel of one request.
pub(crate) struct ReplySlot<T>(Rc<RefCell<SlotState<T>>>);

enum SlotState<T> {
    /// The handler has not returned yet; a reply made now waits here.
    Early(Option<T>),
    /// actix has handed over the channel.
    Open(OneshotSender<T>),
    /// A [`Detached`] request: the reply goes down its own channel.
    Forward(oneshot::Sender<T>),
    /// Replied, or there was no one to reply to.
    Done,
}

impl<T> Clone for ReplySlot<T> {
    fn clone(&self) -> Self {
        ReplySlot(self.0.clone())
    }
}

impl<T> ReplySlot<T> {
    pub(crate) fn new() -> Self {
        ReplySlot(Rc::new(RefCell::new(SlotState::Early(None))))
    }

    /// Sends the reply; gives it back when the asker is gone.
    pub(crate) fn send(&self, value: T) -> Result<(), T> {
        let mut state = self.0.borrow_mut();
        match std::mem::replace(&mut *state, SlotState::Done) {
            SlotState::Early(_) => {
                *state = SlotState::Early(Some(value));
                Ok(())
            }
            SlotState::Open(tx) => tx.send(value),
            SlotState::Forward(tx) => tx.send(value),
            SlotState::Done => Err(value),
        }
    }

    /// Resolves when the asker drops its request (or it has been answered).
    pub(crate) fn closed(&self) -> impl std::future::Future<Output = ()> + 'static
    where
        T: 'static,
    {
        let slot = self.clone();
        std::future::poll_fn(move |cx| match &mut *slot.0.borrow_mut() {
            SlotState::Open(tx) => tx.poll_closed(cx),
            SlotState::Forward(tx) => tx.poll_closed(cx),
            SlotState::Done => std::task::Poll::Ready(()),
            // The handler has not returned yet (it does before the actor polls again).
            SlotState::Early(_) => {
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
    }

    /// The asker dropped its request (or was already answered).
    pub(crate) fn is_closed(&self) -> bool {
        match &*self.0.borrow() {
            SlotState::Early(_) => false,
            SlotState::Open(tx) => tx.is_closed(),
            SlotState::Forward(tx) => tx.is_closed(),
            SlotState::Done => true,
        }
    }

    /// A slot whose reply goes down `tx`.
    pub(crate) fn forwarding(tx: oneshot::Sender<T>) -> Self {
        let slot = ReplySlot::new();
        slot.forward(tx);
        slot
    }

    /// Sends the reply down `tx` (now, if it is made already).
    fn forward(&self, tx: oneshot::Sender<T>) {
        let mut state = self.0.borrow_mut();
        match std::mem::replace(&mut *state, SlotState::Done) {
            SlotState::Early(Some(value)) => {
                let _ = tx.send(value);
            }
            SlotState::Early(None) => *state = SlotState::Forward(tx),
            SlotState::Open(_) | SlotState::Forward(_) | SlotState::Done => {}
        }
    }
}

impl<T> Deferred<T> {
    /// A reply that is known at once.
    pub(crate) fn ready(value: T) -> Self {
        let slot = ReplySlot::new();
        // A fresh slot is Early and always accepts.
        let _ = slot.send(value);
        Deferred(slot)
    }
}

impl<A, M, T> MessageResponse<A, M> for Deferred<T>
where
    A: Actor,
    M: Message<Result = T>,
    T: 'static,
{
    fn handle(self, _ctx: &mut A::Context, tx: Option<OneshotSender<T>>) {
        let mut state = self.0 .0.borrow_mut();
        let Some(tx) = tx else {
            // `do_send`: nobody listens for the reply.
            *state = SlotState::Done;
            return;
        };
        match std::mem::replace(&mut *state, SlotState::Done) {
            SlotState::Early(Some(value)) => {
                let _ = tx.send(value);
            }
            SlotState::Early(None) => *state = SlotState::Open(tx),
            SlotState::Open(_) | SlotState::Forward(_) | SlotState::Done => {}
        }
    }
}

/// A request that is carried out even if its asker stops waiting, and even if the address
/// it went to was the actor's last one. Sent with [`send_detached`] or [`post`]; its actor
/// passes `message` to its own handler and the reply down `reply`.
///
/// Two ways actix would otherwise drop it, each of which would leave a hold taken (and
/// renewed) with nobody to let it go:
/// - a message sent with `send` whose reply future was dropped before the actor's turn is
///   skipped;
/// - an actor stops once no address of it is left and it has nothing running, without
///   looking at its mailbox: a message that arrives while the actor finishes a step, from a
///   sender that then drops the last address (a guard's release), is never handled. So the
///   message carries an address of its actor itself (`_keeper`), dropped when the handler is
///   done with it.
pub(crate) struct Detached<M: Message> {
    pub(crate) message: M,
    pub(crate) reply: oneshot::Sender<M::Result>,
    _keeper: Box<dyn Send>,
}

impl<M: Message> Message for Detached<M> {
    type Result = ();
}

impl<M: Message> Detached<M> {
    /// `message` for the actor `to` refers to (its address or a recipient), detached, and
    /// the future of its reply (`Shutdown` if the actor is gone).
    pub(crate) fn new<K: Clone + Send + 'static>(
        to: &K,
        message: M,
    ) -> (
        Self,
        impl std::future::Future<Output = Result<M::Result, LockError>> + Send + 'static,
    )
    where
        M::Result: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let answer = async move { answer.await.map_err(|_| LockError::Shutdown) };
        let detached = Detached {
            message,
            reply,
            _keeper: Box::new(to.clone()),
        };
        (detached, answer)
    }

    /// `message` for the actor `to` refers to, detached, with nobody waiting for its reply.
    pub(crate) fn unanswered<K: Clone + Send + 'static>(to: &K, message: M) -> Self {
        Detached {
            message,
            reply: oneshot::channel().0,
            _keeper: Box::new(to.clone()),
        }
    }
}

/// Lets `$actor` take any message it handles [`Detached`]: the handler runs as for the
/// message itself and its answer (whatever kind of response it is) goes down the detached
/// reply. Every change documented to go on once polled goes this way
/// (`LockClient::ask_detached`), so it is carried out whenever its future is dropped.
macro_rules! handles_detached {
    ($actor:ty) => {
        impl<M> actix::Handler<$crate::reply::Detached<M>> for $actor
        where
            $actor: actix::Handler<M>,
            M: actix::Message + 'static,
            M::Result: Send,
        {
            type Result = ();

            fn handle(&mut self, msg: $crate::reply::Detached<M>, ctx: &mut actix::Context<Self>) {
                let response = <Self as actix::Handler<M>>::handle(self, msg.message, ctx);
                actix::dev::MessageResponse::<Self, M>::handle(response, ctx, Some(msg.reply));
            }
        }
    };
}
pub(crate) use handles_detached;

/// Sends `message` to `actor` so that it is handled whether or not the returned future is
/// awaited to the end (see [`Detached`]); the future yields the handler's reply, or
/// `Shutdown` if the actor is gone.
pub(crate) fn send_detached<A, M>(
    actor: &Addr<A>,
    message: M,
) -> impl std::future::Future<Output = Result<M::Result, LockError>> + Send + 'static
where
    A: Actor + Handler<Detached<M>>,
    A::Context: ToEnvelope<A, Detached<M>>,
    M: Message + Send + 'static,
    M::Result: Send + 'static,
{
    let (detached, answer) = Detached::new(actor, message);
    actor.do_send(detached);
    answer
}

/// Sends `message` to `actor` so that it is handled even if this was the last address of
/// the actor (see [`Detached`]); nobody waits for the reply. What a sender uses for a
/// message that must not be lost (a release, a hold to adopt, a doubt to settle).
pub(crate) fn post<A, M>(actor: &Addr<A>, message: M)
where
    A: Actor + Handler<Detached<M>>,
    A::Context: ToEnvelope<A, Detached<M>>,
    M: Message + Send + 'static,
    M::Result: Send + 'static,
{
    actor.do_send(Detached::unanswered(actor, message));
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix::prelude::*;
    use std::sync::mpsc;
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    /// Reports each message it handled on `handled`; `Step` runs a step that blocks its
    /// thread at a barrier twice, so a test can send while the actor is inside a step.
    struct Reporter {
        handled: mpsc::Sender<()>,
        barrier: Arc<Barrier>,
    }

    impl Actor for Reporter {
        type Context = Context<Self>;
    }

    struct Step;
    impl Message for Step {
        type Result = ();
    }

    impl Handler<Step> for Reporter {
        type Result = ();
        fn handle(&mut self, _: Step, ctx: &mut Context<Self>) {
            let barrier = self.barrier.clone();
            // Finishes outside the mailbox, as a Redis reply does.
            ctx.spawn(fut::ready(()).map(move |(), _, _| {
                barrier.wait(); // the test may send now
                barrier.wait(); // it has sent and dropped its address
            }));
        }
    }

    struct Bump;
    impl Message for Bump {
        type Result = ();
    }

    impl Handler<Detached<Bump>> for Reporter {
        type Result = ();
        fn handle(&mut self, _: Detached<Bump>, _: &mut Context<Self>) {
            let _ = self.handled.send(());
        }
    }

    #[test]
    fn a_posted_message_is_handled_when_its_sender_dropped_the_last_address_mid_step() {
        let (handled, reports) = mpsc::channel();
        let barrier = Arc::new(Barrier::new(2));
        let _system = actix::System::new(); // what an arbiter needs; this thread only sends
        let arbiter = actix::Arbiter::new();
        let step_barrier = barrier.clone();
        let (tx, rx) = mpsc::channel();
        arbiter.spawn(async move {
            let addr = Reporter::start(Reporter {
                handled,
                barrier: step_barrier,
            });
            tx.send(addr).unwrap();
        });
        let addr = rx.recv().unwrap();
        addr.do_send(Step);
        barrier.wait(); // the actor is inside its step
        post(&addr, Bump);
        drop(addr); // the last address
        barrier.wait();
        // An actor that stops without handling it drops `handled`: the wait ends at once.
        let outcome = reports.recv_timeout(Duration::from_secs(10));
        arbiter.stop();
        assert_eq!(outcome, Ok(()), "the posted message was not handled");
    }
}
