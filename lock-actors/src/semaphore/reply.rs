//! The reply a semaphore actor sends once Redis has answered, and how it sees a caller leave.

use actix::dev::{MessageResponse, OneshotSender};
use actix::{Actor, Message};
use std::cell::RefCell;
use std::rc::Rc;

/// A reply the semaphore actor sends later, once Redis has answered.
///
/// It holds actix's own reply channel, so the actor sees when the asker has gone away (a
/// dropped acquire future) and can give back permits granted too late. You never build
/// one: it is the `Result` type of [`SemaphoreActor`](crate::SemaphoreActor)'s handlers,
/// and `addr.send(msg).await` yields the message's result as usual.
pub struct PermitReply<T>(pub(crate) Slot<T>);

/// Where the actor finds the reply channel of one request.
pub(crate) struct Slot<T>(Rc<RefCell<SlotState<T>>>);

enum SlotState<T> {
    /// The handler has not returned yet; a reply made now waits here.
    Early(Option<T>),
    /// actix has handed over the channel.
    Open(OneshotSender<T>),
    /// Replied, or there was no one to reply to.
    Done,
}

impl<T> Clone for Slot<T> {
    fn clone(&self) -> Self {
        Slot(self.0.clone())
    }
}

impl<T> Slot<T> {
    pub(crate) fn new() -> Self {
        Slot(Rc::new(RefCell::new(SlotState::Early(None))))
    }

    /// Sends the reply; hands it back when the asker is gone (so a guard in it is dropped,
    /// and its drop gives the permits back).
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

    /// The asker dropped its request (or was already answered).
    pub(crate) fn is_closed(&self) -> bool {
        match &*self.0.borrow() {
            SlotState::Early(_) => false,
            SlotState::Open(tx) => tx.is_closed(),
            SlotState::Done => true,
        }
    }
}

impl<T> PermitReply<T> {
    /// A reply known at once.
    pub(crate) fn ready(value: T) -> Self {
        let slot = Slot::new();
        // A fresh slot is Early and always accepts.
        let _ = slot.send(value);
        PermitReply(slot)
    }
}

impl<A, M, T> MessageResponse<A, M> for PermitReply<T>
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
