//! The rules for a lock's requests in flight, with no I/O: what a force-unlock does to the
//! acquires on their way, and what becomes of a lost hold's count in Redis while other
//! calls are out. The lock actor keeps one [`Forces`] and asks [`lost_holds`]; the model
//! check (`model/in_flight`) drives the same two with every interleaving of sends,
//! runs and answers.
//!
//! Both rest on one fact: the calls of one process to one node go down one connection, in
//! the order sent, and Redis runs and answers them in that order. What the process cannot
//! know is where a call it decided to send, or whose answer it has not handled yet, stands
//! relative to another one: that window is what the rules cover.

/// The force-unlocks of one lock key begun by its actor, or seen from another actor of the
/// client on the same key.
///
/// An acquire on its way when a force-unlock is begun (or seen) may have run before it in
/// Redis: the hold it brings back may be deleted already. Such a grant is *stale*: it is not
/// counted as a hold; Redis's count for its owner is settled as for a call whose answer was
/// lost (a reconcile sets it to what the process counts, once nothing is in flight), and its
/// waiter tries again. While a force-unlock of ours is out, no acquire is sent (it could run
/// before the force and be deleted by it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Forces {
    /// Counts the force-unlocks begun or seen.
    epoch: u64,
    /// Force-unlocks sent from here and not answered yet.
    out: u32,
}

impl Forces {
    /// The epoch an acquire is sent in; ask [`stale`](Self::stale) when it is answered.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A force-unlock of ours is about to be sent: every acquire on its way is stale, and
    /// none is sent until it is answered.
    pub(crate) fn begin(&mut self) {
        self.epoch += 1;
        self.out += 1;
    }

    /// Our force-unlock was answered (or failed).
    pub(crate) fn answered(&mut self) {
        self.out = self.out.saturating_sub(1);
    }

    /// Another actor of the client forced the key: every acquire on its way is stale.
    pub(crate) fn seen(&mut self) {
        self.epoch += 1;
    }

    /// Whether an acquire sent in `epoch` was on its way when a force-unlock came.
    pub(crate) fn stale(&self, epoch: u64) -> bool {
        epoch != self.epoch
    }

    /// Whether a force-unlock of ours is out: no acquire may be sent now.
    pub(crate) fn holds_tries(&self) -> bool {
        self.out > 0
    }
}

/// What becomes of the holds Redis may still count for an owner who lost them (a fixed
/// lease that ended a drift allowance before its key, a renewal unconfirmed within its
/// lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum LostHolds {
    /// Nothing is in flight: owner-checked unlocks take them out now. The actor registers
    /// them before it tells the holder, so no caller acts directly on the key meanwhile.
    Clear,
    /// A call is in flight (an acquire of the owner may land on the old field, and an
    /// unlock would then take the new hold's count): each lost hold is a doubt, settled
    /// once every call is answered by setting Redis's count to the process's.
    Settle,
}

/// The rule for a lost hold's count: `in_flight` is whether any call on the lock may still
/// change what Redis counts (an acquire of the actor's, a direct call, a hold not yet
/// absorbed).
pub(crate) fn lost_holds(in_flight: bool) -> LostHolds {
    if in_flight {
        LostHolds::Settle
    } else {
        LostHolds::Clear
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acquire_sent_before_a_force_is_stale_and_none_is_sent_while_it_is_out() {
        let mut forces = Forces::default();
        let before = forces.epoch();
        forces.begin();
        let during = forces.epoch();
        assert!(forces.stale(before));
        assert!(!forces.stale(during));
        assert!(forces.holds_tries());
        forces.answered();
        assert!(!forces.holds_tries());
        forces.seen();
        assert!(forces.stale(during), "a force seen elsewhere stales it too");
    }

    #[test]
    fn lost_holds_are_cleared_only_when_nothing_is_in_flight() {
        assert_eq!(lost_holds(false), LostHolds::Clear);
        assert_eq!(lost_holds(true), LostHolds::Settle);
    }
}
