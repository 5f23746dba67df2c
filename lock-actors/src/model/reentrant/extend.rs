//! The reentrant model's extends: a client sets the lease of one of its fixed holds again,
//! longer or shorter (`LockGuard::extend`), by the lock actor's own rules, imported: the TTL
//! the call asks for is what all the owner's holds need with the hold's new end
//! (`update_ttl`); until Redis answers, the hold counts on the earlier of its old end and
//! the new one (`end_while_updating`); once answered, on the new lease from the send, cut
//! to the key's reported PTTL (`end_once_set`); an answer of 0 loses the owner. The call
//! may run in Redis with its answer lost, or be lost itself. It runs in Redis before the
//! calls its client sends after it (they share a connection, in order), unless the model
//! lets it overtake them ([`ReentrantModel::in_order`] off).

use super::{Action, Client, Extend, Kind, ReentrantModel, FIXED, WATCHDOG};
use crate::lock::actor::extend::{end_once_set, end_while_updating, update_ttl};
use crate::model::clock::{at, micros};
use crate::model::store::Store;
use std::time::{Duration, Instant};

/// An instant as model milliseconds (every instant of the model is on its grid).
fn ms(instant: Instant) -> i64 {
    micros(instant) / 1_000
}

impl ReentrantModel {
    /// Client `c`'s extend actions: the steps of its extend on its way, or (none on its
    /// way) an extend of any fixed hold to either fixed lease.
    pub(super) fn extend_actions(&self, c: usize, client: &Client, actions: &mut Vec<Action>) {
        if let Some(extend) = client.extend {
            actions.push(Action::ExtendArrives(c));
            actions.push(Action::ExtendUnanswered(c));
            if extend.ran.is_none() {
                actions.push(Action::ExtendLost(c));
            }
            return;
        }
        for (h, hold) in client.holds.iter().enumerate() {
            if hold.fixed.is_some() {
                for lease in FIXED {
                    actions.push(Action::Extend(c, h, lease));
                }
            }
        }
    }

    /// The lock actor's `ExtendHold`: the call's TTL and hold count, the hold's end while
    /// the call is on its way.
    pub(super) fn send_extend(&self, client: &mut Client, h: usize, lease: u64) {
        let (now, until) = (at(0), at(lease as i64));
        let ends = client
            .holds
            .iter()
            .enumerate()
            .map(|(i, hold)| match i == h {
                true => Some(until),
                false => hold.fixed.map(|(_, end)| at(end)),
            });
        let ttl = update_ttl(
            ends,
            now,
            Duration::from_millis(WATCHDOG),
            Duration::from_millis(lease),
        );
        let counted = client.holds.len() as u32;
        let hold = &mut client.holds[h];
        let Some((old_lease, old_end)) = hold.fixed else {
            return; // only fixed holds are offered
        };
        let pending = end_while_updating(Some(at(old_end)), until).expect("a fixed hold ends");
        hold.fixed = Some((old_lease, ms(pending)));
        hold.extending = true;
        client.extend = Some(Extend {
            lease,
            sent: 0,
            ttl: ttl.as_millis() as u64,
            counted,
            ran: None,
        });
    }

    /// In order ([`ReentrantModel::in_order`]): client `c`'s extend on its way runs in
    /// Redis now, before the call the client sends next; its answer is yet to come.
    pub(super) fn run_extend_first(&self, state: &mut super::State, c: usize) {
        let Some(extend) = state.clients[c].extend.filter(|_| self.in_order) else {
            return;
        };
        let answer = self.run_extend(&mut state.store, c, extend);
        if let Some(extend) = &mut state.clients[c].extend {
            extend.ran = Some(answer);
        }
    }

    /// The extend's answer: what it answered when it ran, or (not run yet) what it answers
    /// running now.
    pub(super) fn run_extend(&self, store: &mut Store, c: usize, extend: Extend) -> i64 {
        extend
            .ran
            .unwrap_or_else(|| self.set_lease(store, c, extend))
    }

    /// Client `c`'s `set_lease.lua` in the model's Redis: the key's PTTL after it, or 0.
    fn set_lease(&self, store: &mut Store, c: usize, extend: Extend) -> i64 {
        let owner = c as u8 + 1;
        match self.kind {
            Kind::Fast => store.fast_set_lease(0, owner, extend.ttl),
            Kind::Reentrant | Kind::Fenced => {
                store.set_lease(self.set_lease, 0, owner, extend.ttl, extend.counted)
            }
        }
    }

    /// The extend's answer (`None`: none came) reaches the client: its hold ends as
    /// `end_once_set` says (no answer: it keeps the earlier end); 0 loses the owner.
    pub(super) fn extend_answered(&self, client: &mut Client, extend: Extend, answer: Option<i64>) {
        let hold = client.holds.iter_mut().find(|hold| hold.extending);
        match (answer, hold) {
            (Some(0), _) => *client = Client::default(),
            (Some(pttl), Some(hold)) => {
                let lease = Duration::from_millis(extend.lease);
                let end = end_once_set(at(extend.sent), lease, pttl);
                hold.fixed = Some((extend.lease, ms(end)));
                hold.extending = false;
            }
            (_, Some(hold)) => hold.extending = false,
            (_, None) => {} // the hold was let go meanwhile
        }
    }
}
