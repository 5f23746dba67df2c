//! One reentrant lock key as the model's Redis holds it, and the reentrant kind's scripts
//! as pure functions over it: the Rust mirrors of `lock/kind/reentrant/*.lua`, as they are
//! ([`Scripts::Current`]) and as they were before the key's TTL became the truth
//! ([`Scripts::Before`]: the re-entry and the renewal set the lease outright, the renewal
//! answered `1`). The scripts every kind shares are mirrored here too, for the hash kinds
//! and the fast lock's string: `set_lease.lua` (a guard's extend, [`SetLease`]) and the
//! foreign unlock (`foreign_begin.lua`, the kind's unlock, `foreign_end.lua`).
//! `super::mirror` runs each Lua script and its mirror on a real Redis over generated
//! inputs and compares them, so the model cannot drift from the scripts.
//!
//! Time is the model's clock in milliseconds (relative: the model keeps `now` at 0 and
//! shifts every instant back as time passes); a key whose expiry is at or before `now` is
//! gone, as in Redis.

use std::collections::BTreeMap;

/// Which scripts the model's Redis runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scripts {
    /// The scripts of this crate as they are.
    Current,
    /// The re-entry and renewal as they were before the lease-truth fixes: both set the
    /// key's TTL to their own lease, whatever the other holds sharing it need.
    Before,
    /// A broken renewal that extends the key whoever holds it (the negative control of the
    /// honest-renewal property); the other scripts as they are.
    RenewIgnoresOwner,
}

/// Which `set_lease.lua` the model's Redis runs (a guard's extend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SetLease {
    /// The script as it is: where other fields hold the key too, or the field has holds
    /// the caller does not count, the key's TTL only ever grows.
    Current,
    /// A broken one that sets the key's TTL to the caller's lease whatever the other
    /// holds on it need (the negative control of the extend checks).
    Unconditional,
}

/// The lock's hash: owner → hold count, and when the key expires (`None`: never); for a
/// fast lock, its one holder (count 1). `token` is the fenced lock's counter, a key of its
/// own that never expires.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Store {
    pub(crate) fields: BTreeMap<u8, u32>,
    pub(crate) expires_at: Option<i64>,
    pub(crate) token: u64,
}

impl Store {
    /// Drops the key if it has expired by `now`.
    pub(crate) fn expire(&mut self, now: i64) {
        if self.expires_at.is_some_and(|at| at <= now) {
            self.fields.clear();
            self.expires_at = None;
        }
    }

    fn exists(&self) -> bool {
        !self.fields.is_empty()
    }

    /// Whether an acquire at `now` would find no key (its grant is the owner's first hold,
    /// which the acquire scripts say in their reply).
    pub(crate) fn free_at(&self, now: i64) -> bool {
        let mut at = self.clone();
        at.expire(now);
        !at.exists()
    }

    /// `PTTL`: -2 without the key, -1 without an expiry.
    pub(crate) fn pttl(&self, now: i64) -> i64 {
        match (self.exists(), self.expires_at) {
            (false, _) => -2,
            (true, None) => -1,
            (true, Some(at)) => at - now,
        }
    }

    fn pexpire(&mut self, now: i64, ms: i64) {
        self.expires_at = Some(now + ms.max(0));
    }

    /// `reentrant/acquire.lua`: `None` taken (or re-entered), `Some(pttl)` held by another.
    pub(crate) fn acquire(
        &mut self,
        scripts: Scripts,
        now: i64,
        owner: u8,
        lease: u64,
    ) -> Option<i64> {
        self.expire(now);
        if !self.exists() {
            self.fields.insert(owner, 1);
            self.pexpire(now, lease as i64);
            return None;
        }
        if let Some(count) = self.fields.get_mut(&owner) {
            *count += 1;
            let ttl = match scripts {
                Scripts::Before => lease as i64,
                _ => self.pttl(now).max(lease as i64),
            };
            self.pexpire(now, ttl);
            return None;
        }
        Some(self.pttl(now))
    }

    /// Another client's acquire (the models' peers), at the model's `now` of 0: whether it
    /// took the lock.
    pub(crate) fn peer_acquire(&mut self, owner: u8, lease: u64) -> bool {
        self.acquire(Scripts::Current, 0, owner, lease).is_none()
    }

    /// `reentrant/renew.lua` for one key: the key's PTTL after the renewal (`Before`: `1`),
    /// or 0 when the owner holds nothing.
    pub(crate) fn renew(&mut self, scripts: Scripts, now: i64, owner: u8, lease: u64) -> i64 {
        self.expire(now);
        if scripts == Scripts::RenewIgnoresOwner && self.exists() {
            self.pexpire(now, self.pttl(now).max(lease as i64));
            return self.pttl(now);
        }
        if !self.fields.contains_key(&owner) {
            return 0;
        }
        match scripts {
            Scripts::Current | Scripts::RenewIgnoresOwner => {
                let left = self.pttl(now);
                if left != -1 && left < lease as i64 {
                    self.pexpire(now, lease as i64);
                    return lease as i64;
                }
                left
            }
            Scripts::Before => {
                self.pexpire(now, lease as i64);
                1
            }
        }
    }

    /// `reentrant/unlock.lua`: `None` not the owner, `Some(0)` still held (the key's TTL
    /// set to `lease`, what the owner's other holds need), `Some(1)` freed.
    pub(crate) fn unlock(&mut self, now: i64, owner: u8, lease: u64) -> Option<i64> {
        self.expire(now);
        let count = self.fields.get_mut(&owner)?;
        if *count > 1 {
            *count -= 1;
            self.pexpire(now, lease as i64);
            return Some(0);
        }
        self.fields.clear();
        self.expires_at = None;
        Some(1)
    }

    /// `reconcile.lua` in front of the reentrant unlock: undoes one of `owner`'s holds when
    /// Redis counts more than the `counted` the process has (the unlock's reply), else -1.
    pub(crate) fn reconcile(&mut self, now: i64, owner: u8, lease: u64, counted: u32) -> i64 {
        self.expire(now);
        if self.fields.get(&owner).copied().unwrap_or(0) <= counted {
            return -1;
        }
        self.unlock(now, owner, lease).unwrap_or(-1)
    }

    /// `reentrant/fenced_acquire.lua`: `Ok(token)` taken (or re-entered) with a token above
    /// every earlier one, `Err(pttl)` held by another.
    pub(crate) fn fenced_acquire(&mut self, now: i64, owner: u8, lease: u64) -> Result<u64, i64> {
        self.expire(now);
        let fresh = !self.exists();
        if !fresh && !self.fields.contains_key(&owner) {
            return Err(self.pttl(now));
        }
        self.token += 1;
        *self.fields.entry(owner).or_insert(0) += 1;
        let ttl = if fresh {
            lease as i64
        } else {
            self.pttl(now).max(lease as i64)
        };
        self.pexpire(now, ttl);
        Ok(self.token)
    }

    /// `fast/acquire.lua`: `None` taken, `Some(pttl)` held (by anyone: a fast lock is not
    /// reentrant).
    pub(crate) fn fast_acquire(&mut self, now: i64, owner: u8, lease: u64) -> Option<i64> {
        self.expire(now);
        if self.exists() {
            return Some(self.pttl(now));
        }
        self.fields.insert(owner, 1);
        self.pexpire(now, lease as i64);
        None
    }

    /// `fast/unlock.lua`: `Some(1)` freed, `None` not the holder.
    pub(crate) fn fast_unlock(&mut self, now: i64, owner: u8) -> Option<i64> {
        self.expire(now);
        if !self.fields.contains_key(&owner) {
            return None;
        }
        self.fields.clear();
        self.expires_at = None;
        Some(1)
    }

    /// `set_lease.lua` on a hash: 0 when `owner` holds nothing; else the key's PTTL after
    /// its TTL became `ttl`, or (other fields hold it too, or `owner` has more holds than
    /// the `counted` the caller knows of) the larger of `ttl` and what it had left.
    pub(crate) fn set_lease(
        &mut self,
        script: SetLease,
        now: i64,
        owner: u8,
        ttl: u64,
        counted: u32,
    ) -> i64 {
        self.expire(now);
        let Some(&holds) = self.fields.get(&owner) else {
            return 0;
        };
        let shared = self.fields.len() > 1 || holds > counted;
        let mut ttl = ttl as i64;
        if shared && script == SetLease::Current {
            ttl = ttl.max(self.pttl(now));
        }
        self.pexpire(now, ttl);
        self.pttl(now)
    }

    /// `set_lease.lua` on a fast lock's string: 0 when `owner` is not its holder, else the
    /// key's PTTL after its TTL became `ttl` (one hold: nothing else to keep).
    pub(crate) fn fast_set_lease(&mut self, now: i64, owner: u8, ttl: u64) -> i64 {
        self.expire(now);
        if !self.fields.contains_key(&owner) {
            return 0;
        }
        self.pexpire(now, ttl as i64);
        self.pttl(now)
    }

    /// The lease `foreign_begin.lua` hands the kind's unlock: the key's own PTTL when it
    /// has one left, else `lease`.
    pub(crate) fn foreign_lease(&self, now: i64, lease: u64) -> u64 {
        u64::try_from(self.pttl(now))
            .ok()
            .filter(|&left| left > 0)
            .unwrap_or(lease)
    }

    /// The foreign unlock of the reentrant (and spin) kind: `foreign_begin.lua`, the
    /// reentrant unlock with the key's own PTTL as its lease, `foreign_end.lua`. `None` the
    /// owner holds nothing, `Some((1, 0))` freed, `Some((0, n))` `n` holds of it left.
    pub(crate) fn foreign_unlock(&mut self, now: i64, owner: u8, lease: u64) -> Option<(i64, i64)> {
        self.expire(now);
        let lease = self.foreign_lease(now, lease);
        let unlocked = self.unlock(now, owner, lease)?;
        Some(foreign_end(unlocked, || {
            self.fields.get(&owner).map_or(0, |&n| i64::from(n))
        }))
    }

    /// The fast lock's foreign unlock: its unlock inside the same prelude and ending.
    pub(crate) fn fast_foreign_unlock(&mut self, now: i64, owner: u8) -> Option<(i64, i64)> {
        Some(foreign_end(self.fast_unlock(now, owner)?, || 0))
    }
}

/// `foreign_end.lua`: the kind's unlock replied `unlocked` (0 holds remain, 1 freed); the
/// reply `{0, holds()}` or `{1, 0}`.
pub(crate) fn foreign_end(unlocked: i64, holds: impl FnOnce() -> i64) -> (i64, i64) {
    match unlocked {
        0 => (0, holds()),
        _ => (1, 0),
    }
}
