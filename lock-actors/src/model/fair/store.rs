//! One fair lock as the model's Redis holds it: the reentrant hash (owner → hold count, with
//! its TTL), the queue of waiters (`redisson_lock_queue:{name}`, oldest first) and their
//! deadlines (`redisson_lock_timeout:{name}`, owner → the ms its place ages out), and the
//! fair kind's scripts as pure functions over them: the Rust mirrors of
//! `lock/kind/fair/*.lua` (with `stale.lua` joined in front where the scripts join it).
//! Each returns what the script replies and which waiter's channel it published on, so the
//! model can deliver (or lose) the wake-up. `super::mirror` runs each Lua script and its
//! mirror on a real Redis over generated inputs and compares them.
//!
//! Every instant (the hash's expiry, the deadlines, `now`) is on one clock in milliseconds:
//! Redis's `TIME` in the cross-check, the model's relative clock (now = 0) in the model.
//! The fair lock's renewal is the reentrant one (`Store::renew`), so it is not restated.

use super::super::store::{foreign_end, Scripts, SetLease, Store};
use std::collections::BTreeMap;

/// A deliberately broken script, to show the model's properties catch what it breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Breakage {
    /// The scripts as they are.
    None,
    /// An unlock that frees the lock but wakes nobody.
    SilentUnlock,
    /// An acquire that takes a free lock whoever heads the queue.
    Barging,
    /// A withdraw that leaves the queue but keeps its deadline.
    KeptDeadline,
}

/// The fair lock's keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct FairStore {
    /// The lock's hash and its expiry.
    pub(crate) hash: Store,
    /// The queue, oldest first (an owner may appear twice only in a hand-made state).
    pub(crate) queue: Vec<u8>,
    /// Owner → the instant its place ages out.
    pub(crate) deadlines: BTreeMap<u8, i64>,
}

/// What a script did besides changing the keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The script's reply (`None`: nil, or the status `OK` when `first`).
    pub(crate) reply: Option<i64>,
    /// An acquire made the owner's first hold (the script replies a status `OK`).
    pub(crate) first: bool,
    /// The waiter whose channel it published on (each script publishes once at most).
    pub(crate) woke: Option<u8>,
    /// The queue heads it dropped as dead (their deadlines had passed).
    pub(crate) dropped: Vec<u8>,
}

impl FairStore {
    fn exists(&self) -> bool {
        !self.hash.fields.is_empty()
    }

    /// `stale.lua`'s `drop_stale_heads`: pops the heads whose deadline is at or before `now`
    /// (or who have none); with `publish`, the first live head is published to.
    fn drop_stale_heads(&mut self, now: i64, publish: bool, outcome: &mut Outcome) {
        while let Some(&head) = self.queue.first() {
            if self.deadlines.get(&head).is_some_and(|&at| at > now) {
                if publish {
                    outcome.woke = Some(head);
                }
                return;
            }
            self.queue.remove(0);
            self.deadlines.remove(&head);
            outcome.dropped.push(head);
        }
    }

    /// `fair/acquire.lua`: nil taken (or re-entered), else the ms to wait at most before
    /// calling again (the lock's PTTL, or the head's time left when the lock is free).
    /// `Scripts::Before`: a re-entry set the key's TTL to its own lease.
    pub(crate) fn acquire(
        &mut self,
        scripts: Scripts,
        breakage: Breakage,
        now: i64,
        owner: u8,
        lease: u64,
        allowance: i64,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        self.hash.expire(now);
        self.drop_stale_heads(now, false, &mut outcome);
        if !self.exists() {
            let head = self.queue.first().copied();
            if head.is_some_and(|head| head != owner) && !outcome.dropped.is_empty() {
                outcome.woke = head;
            }
            if head.is_none_or(|head| head == owner) || breakage == Breakage::Barging {
                if head == Some(owner) {
                    self.queue.remove(0);
                }
                if breakage == Breakage::Barging {
                    self.queue.retain(|&waiter| waiter != owner);
                }
                self.deadlines.remove(&owner);
                // Everyone behind moves up one place.
                for deadline in self.deadlines.values_mut() {
                    *deadline -= allowance;
                }
                self.hash.fields.insert(owner, 1);
                self.hash.expires_at = Some(now + lease as i64);
                outcome.first = true;
                return outcome;
            }
        } else if let Some(count) = self.hash.fields.get_mut(&owner) {
            *count += 1;
            let ttl = match scripts {
                Scripts::Before => lease as i64,
                _ => self.hash.pttl(now).max(lease as i64),
            };
            self.hash.expires_at = Some(now + ttl.max(0));
            return outcome;
        }
        // Wait in line: join at the back, or keep the place (and deadline) it has.
        if !self.deadlines.contains_key(&owner) {
            let last = self.queue.last().and_then(|last| self.deadlines.get(last));
            let ahead = match last {
                Some(&deadline) => deadline - now,
                None => self.hash.pttl(now),
            };
            self.deadlines.insert(owner, ahead + allowance + now);
            self.queue.push(owner);
        }
        let mut ttl = self.hash.pttl(now);
        if ttl < 0 {
            // Free, but an earlier waiter goes first: it has until its deadline.
            let head = self.queue[0];
            ttl = self.deadlines[&head] - now;
        }
        outcome.reply = Some(ttl.max(1));
        outcome
    }

    /// `fair/unlock.lua`: nil not the owner, 0 still held (the key's TTL set to `lease`), 1
    /// freed (dead heads dropped, the first live one woken).
    pub(crate) fn unlock(
        &mut self,
        breakage: Breakage,
        now: i64,
        owner: u8,
        lease: u64,
    ) -> Outcome {
        let mut outcome = Outcome {
            reply: self.hash.unlock(now, owner, lease),
            ..Outcome::default()
        };
        if outcome.reply == Some(1) {
            self.drop_stale_heads(now, breakage != Breakage::SilentUnlock, &mut outcome);
        }
        outcome
    }

    /// `fair/withdraw.lua`: 1 it was in the queue, 0 it was not. Everyone behind it loses one
    /// allowance; if the lock is free, whoever heads the queue now is woken (dead or not).
    pub(crate) fn withdraw(
        &mut self,
        breakage: Breakage,
        now: i64,
        owner: u8,
        allowance: i64,
    ) -> Outcome {
        let mut behind = false;
        for &waiter in &self.queue {
            if behind {
                // ZINCRBY adds a member that has no score.
                *self.deadlines.entry(waiter).or_insert(0) -= allowance;
            } else if waiter == owner {
                behind = true;
            }
        }
        if breakage != Breakage::KeptDeadline {
            self.deadlines.remove(&owner);
        }
        let before = self.queue.len();
        self.queue.retain(|&waiter| waiter != owner);
        let removed = before - self.queue.len();
        self.hash.expire(now);
        let mut outcome = Outcome {
            reply: Some(removed.min(1) as i64),
            ..Outcome::default()
        };
        if removed > 0 && !self.exists() {
            outcome.woke = self.queue.first().copied();
        }
        outcome
    }

    /// The fair kind's foreign unlock (`foreign_begin.lua`, `fair/unlock.lua` with the
    /// key's own PTTL as the lease the holds left keep, `foreign_end.lua`): the reply
    /// (`None` not the owner, `(1, 0)` freed, `(0, n)` `n` holds of it left) and what the
    /// unlock did besides.
    pub(crate) fn foreign_unlock(
        &mut self,
        now: i64,
        owner: u8,
        lease: u64,
    ) -> (Option<(i64, i64)>, Outcome) {
        self.hash.expire(now);
        let lease = self.hash.foreign_lease(now, lease);
        let outcome = self.unlock(Breakage::None, now, owner, lease);
        let holds = self.hash.fields.get(&owner).map_or(0, |&n| i64::from(n));
        (outcome.reply.map(|r| foreign_end(r, || holds)), outcome)
    }

    /// `set_lease.lua` on the hash (the reentrant one, `Store::set_lease`): the queue is
    /// not touched.
    pub(crate) fn set_lease(&mut self, now: i64, owner: u8, ttl: u64, counted: u32) -> i64 {
        self.hash
            .set_lease(SetLease::Current, now, owner, ttl, counted)
    }

    /// The watchdog's renewal: the reentrant one (`Store::renew`).
    pub(crate) fn renew(&mut self, scripts: Scripts, now: i64, owner: u8, lease: u64) -> i64 {
        self.hash.renew(scripts, now, owner, lease)
    }
}
