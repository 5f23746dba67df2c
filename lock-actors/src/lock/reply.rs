use actix::dev::{MessageResponse, OneshotSender};
use actix::{Actor, Message};
use std::cell::RefCell;
use std::rc::Rc;

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
            SlotState::Done => true,
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
            SlotState::Open(_) | SlotState::Done => {}
        }
    }
}
