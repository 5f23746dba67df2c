//! One read-write lock as the model's Redis holds it, and the read and write kinds' scripts
//! as pure functions over it: the Rust mirrors of `lock/kind/read/*.lua`,
//! `lock/kind/write/*.lua` and the write side's renewal (the reentrant kind's), as they are
//! ([`Scripts::Current`]) and as they were before the key's TTL became the truth
//! ([`Scripts::Before`]), and both kinds' `set_lease.lua` (a guard's extend) and foreign
//! unlock (`Lock::unlock_as`). `super::mirror` runs each Lua script and its mirror on a real
//! Redis over generated inputs and compares them, so the model cannot drift from the
//! scripts.
//!
//! The lock is the hash (`mode`, a hold count per reader, `<owner>:write` for the writer)
//! with its TTL, and one key per read hold, `{name}:<reader>:rwlock_timeout:<n>`, with a
//! TTL of its own. Time is the model's clock in milliseconds (relative: the model keeps
//! `now` at 0 and shifts every instant back as time passes); a key whose expiry is at or
//! before `now` is gone, as in Redis.

use crate::model::store::{foreign_end, SetLease};

/// The owners a store has room for (`1..=OWNERS`), and the timeout keys of each reader
/// (`1..=TIMEOUTS`): enough for the model's clients and the cross-check's cases.
pub(crate) const OWNERS: usize = 3;
pub(crate) const TIMEOUTS: usize = 4;

/// Which scripts the model's Redis runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scripts {
    /// The scripts of this crate as they are.
    Current,
    /// As they were before the lease-truth fixes: a read renewal set the hash and every
    /// timeout key of the reader to the lease (answering `1`), and so did the write side's
    /// renewal; a write unlock with holds left set the hash to the lease it was sent, and
    /// the last one turned the lock into a read lock without looking at the read holds'
    /// timeouts; a read unlock left the reader's remaining timeout keys as they were.
    Before,
}

/// The hash's `mode` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Mode {
    Read,
    Write,
}

/// The lock's keys. The hash exists exactly while it has a `mode` (every script writes
/// `mode` with the first hold and deletes the hash with the last). Plain arrays (owner
/// `o` at `o - 1`, a count of 0 for no field): the model clones and hashes a store for
/// every state it explores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Store {
    pub(crate) mode: Option<Mode>,
    /// Each reader's hold count (field `<owner>`).
    readers: [u32; OWNERS],
    /// Each writer's hold count (field `<owner>:write`).
    writers: [u32; OWNERS],
    /// When the hash expires (`None`: never).
    pub(crate) expires_at: Option<i64>,
    /// When each read hold's timeout key `{name}:<reader>:rwlock_timeout:<n>` expires
    /// (`None`: no such key; the scripts always give these a TTL).
    timeouts: [[Option<i64>; TIMEOUTS]; OWNERS],
}

impl Store {
    /// `reader`'s hold count (0: no field).
    pub(crate) fn reader(&self, reader: u8) -> u32 {
        self.readers[usize::from(reader) - 1]
    }

    pub(crate) fn set_reader(&mut self, reader: u8, count: u32) {
        self.readers[usize::from(reader) - 1] = count;
    }

    /// `writer`'s hold count (0: no field).
    pub(crate) fn writer(&self, writer: u8) -> u32 {
        self.writers[usize::from(writer) - 1]
    }

    pub(crate) fn set_writer(&mut self, writer: u8, count: u32) {
        self.writers[usize::from(writer) - 1] = count;
    }

    /// The readers' and the writers' fields: `(owner, count)`.
    pub(crate) fn readers(&self) -> impl Iterator<Item = (u8, u32)> + '_ {
        fields(&self.readers)
    }

    pub(crate) fn writers(&self) -> impl Iterator<Item = (u8, u32)> + '_ {
        fields(&self.writers)
    }

    /// When `reader`'s timeout key `n` expires, if it is there.
    pub(crate) fn timeout(&self, reader: u8, n: u32) -> Option<i64> {
        let n = usize::try_from(n).ok()?.checked_sub(1)?;
        *self.timeouts[usize::from(reader) - 1].get(n)?
    }

    pub(crate) fn set_timeout(&mut self, reader: u8, n: u32, at: Option<i64>) {
        let slot = &mut self.timeouts[usize::from(reader) - 1][n as usize - 1];
        *slot = at;
    }

    /// Every timeout key: `((reader, n), expiry)`.
    pub(crate) fn timeouts(&self) -> impl Iterator<Item = ((u8, u32), i64)> + '_ {
        (1..=OWNERS as u8).flat_map(move |reader| {
            (1..=TIMEOUTS as u32).filter_map(move |n| Some(((reader, n), self.timeout(reader, n)?)))
        })
    }

    /// Every instant moves back by `ms` (the model's clock advanced).
    pub(crate) fn shift(&mut self, ms: i64) {
        self.expires_at = self.expires_at.map(|at| at - ms);
        for at in self.timeouts.iter_mut().flatten().flatten() {
            *at -= ms;
        }
    }

    /// Drops the timeout keys no script reads before writing them again: those past a
    /// reader's count (an acquire sets key `count + 1`, the rest read keys `1..=count`).
    pub(crate) fn forget_unread(&mut self) {
        for (keys, &count) in self.timeouts.iter_mut().zip(&self.readers) {
            for slot in keys.iter_mut().skip(count as usize) {
                *slot = None;
            }
        }
    }

    /// The same keys with owner `o` as `rename(o)`.
    pub(crate) fn renamed(&self, rename: impl Fn(u8) -> u8) -> Store {
        let mut renamed = Store {
            mode: self.mode,
            expires_at: self.expires_at,
            ..Store::default()
        };
        for o in 1..=OWNERS as u8 {
            let to = usize::from(rename(o)) - 1;
            let from = usize::from(o) - 1;
            renamed.readers[to] = self.readers[from];
            renamed.writers[to] = self.writers[from];
            renamed.timeouts[to] = self.timeouts[from];
        }
        renamed
    }

    /// The store as a call at `now` finds it (what expired by then gone).
    pub(crate) fn at(&self, now: i64) -> Store {
        let mut at = *self;
        at.expire(now);
        at
    }

    /// Drops every key that has expired by `now`.
    pub(crate) fn expire(&mut self, now: i64) {
        if self.expires_at.is_some_and(|at| at <= now) {
            self.delete();
        }
        for slot in self.timeouts.iter_mut().flatten() {
            if slot.is_some_and(|at| at <= now) {
                *slot = None;
            }
        }
    }

    /// `DEL` of the hash (the timeout keys stay).
    fn delete(&mut self) {
        self.mode = None;
        self.readers = [0; OWNERS];
        self.writers = [0; OWNERS];
        self.expires_at = None;
    }

    /// `HLEN`: `mode` and the owners' fields.
    fn hlen(&self) -> usize {
        usize::from(self.mode.is_some()) + self.readers().count() + self.writers().count()
    }

    /// The hash's `PTTL`: -2 without it, -1 without an expiry.
    pub(crate) fn pttl(&self, now: i64) -> i64 {
        match (self.mode, self.expires_at) {
            (None, _) => -2,
            (Some(_), None) => -1,
            (Some(_), Some(at)) => at - now,
        }
    }

    /// A timeout key's `PTTL`: -2 without it.
    pub(crate) fn timeout_pttl(&self, now: i64, reader: u8, n: u32) -> i64 {
        self.timeout(reader, n).map_or(-2, |at| at - now)
    }

    /// `PEXPIRE` of the hash: a TTL of 0 or less deletes it, as in Redis.
    fn pexpire(&mut self, now: i64, ms: i64) {
        if self.mode.is_none() {
            return;
        }
        if ms <= 0 {
            self.delete();
        } else {
            self.expires_at = Some(now + ms);
        }
    }

    /// `PEXPIRE` of a timeout key (nothing without it).
    fn pexpire_timeout(&mut self, now: i64, reader: u8, n: u32, ms: i64) {
        if self.timeout(reader, n).is_some() {
            self.set_timeout(reader, n, (ms > 0).then_some(now + ms));
        }
    }

    /// The renewal scripts' `extend`: a key with a TTL below `lease` gets `lease`; what it
    /// has left after (-1 for a key without expiry).
    fn extend_timeout(&mut self, now: i64, reader: u8, n: u32, lease: i64) {
        let left = self.timeout_pttl(now, reader, n);
        if left != -1 && left < lease {
            self.pexpire_timeout(now, reader, n, lease);
        }
    }

    fn extend(&mut self, now: i64, lease: i64) -> i64 {
        let left = self.pttl(now);
        if left != -1 && left < lease {
            self.pexpire(now, lease);
            return lease;
        }
        left
    }

    /// The longest PTTL of the timeout keys of the read holds the readers count (-3 when
    /// none is there): what the unlocks set the hash to while others hold it.
    fn longest_read_hold(&self, now: i64, writers_too: bool) -> i64 {
        let mut longest = -3;
        for (reader, count) in self.readers() {
            for n in 1..=count {
                longest = longest.max(self.timeout_pttl(now, reader, n));
            }
        }
        // `read/unlock.lua` looks a writer's field up as a reader's too: it has no timeout
        // keys (-2).
        if writers_too && self.writers().next().is_some() {
            longest = longest.max(-2);
        }
        longest
    }

    /// `read/acquire.lua`: `None` taken (or re-entered), `Some(pttl)` held by a writer.
    pub(crate) fn read_acquire(&mut self, now: i64, reader: u8, lease: u64) -> Option<i64> {
        self.expire(now);
        let lease = lease as i64;
        match self.mode {
            None => {
                self.mode = Some(Mode::Read);
                self.set_reader(reader, 1);
                self.set_timeout(reader, 1, Some(now + lease));
                self.pexpire(now, lease);
                None
            }
            Some(mode) if mode == Mode::Read || self.writer(reader) > 0 => {
                let hold = self.reader(reader) + 1;
                self.set_reader(reader, hold);
                self.set_timeout(reader, hold, Some(now + lease));
                let left = self.pttl(now);
                self.pexpire(now, left.max(lease));
                None
            }
            Some(_) => Some(self.pttl(now)),
        }
    }

    /// `read/renew.lua` for one lock: the hash's PTTL after the renewal (`Before`: `1`),
    /// or 0 when the reader holds nothing.
    pub(crate) fn read_renew(&mut self, scripts: Scripts, now: i64, reader: u8, lease: u64) -> i64 {
        self.expire(now);
        let count = self.reader(reader);
        if count == 0 {
            return 0;
        }
        let lease = lease as i64;
        match scripts {
            Scripts::Current => {
                for n in (1..=count).rev() {
                    self.extend_timeout(now, reader, n, lease);
                }
                self.extend(now, lease)
            }
            Scripts::Before => {
                self.pexpire(now, lease);
                for n in (1..=count).rev() {
                    self.pexpire_timeout(now, reader, n, lease);
                }
                1
            }
        }
    }

    /// `read/unlock.lua`: `None` not a reader, `Some(0)` others (or the writer) still hold
    /// it, `Some(1)` freed. The hold's timeout key that goes is the reader's last one
    /// (`n` = its count before), whichever hold the reader let go; the one left last keeps
    /// at least `lease`, what the reader's remaining holds need (`Before`: `lease` unused).
    pub(crate) fn read_unlock(
        &mut self,
        scripts: Scripts,
        now: i64,
        reader: u8,
        lease: u64,
    ) -> Option<i64> {
        self.expire(now);
        let mode = self.mode?;
        let count = self.reader(reader);
        if count == 0 {
            return None;
        }
        let holds = count - 1;
        self.set_reader(reader, holds);
        self.set_timeout(reader, holds + 1, None);
        if scripts == Scripts::Current && holds > 0 {
            let left = self.timeout_pttl(now, reader, holds);
            if left != -1 && left < lease as i64 {
                self.set_timeout(reader, holds, Some(now + lease as i64));
            }
        }
        if self.hlen() > 1 {
            let mut longest = self.longest_read_hold(now, true);
            if longest > 0 {
                if mode == Mode::Write {
                    longest = longest.max(self.pttl(now));
                }
                self.pexpire(now, longest);
                return Some(0);
            }
            if mode == Mode::Write {
                return Some(0);
            }
        }
        self.delete();
        Some(1)
    }

    /// `write/acquire.lua`: `None` taken (or re-entered), `Some(pttl)` held by others.
    pub(crate) fn write_acquire(&mut self, now: i64, writer: u8, lease: u64) -> Option<i64> {
        self.expire(now);
        let lease = lease as i64;
        match self.mode {
            None => {
                self.mode = Some(Mode::Write);
                self.set_writer(writer, 1);
                self.pexpire(now, lease);
                None
            }
            Some(Mode::Write) if self.writer(writer) > 0 => {
                self.set_writer(writer, self.writer(writer) + 1);
                let left = self.pttl(now);
                self.pexpire(now, left.max(lease));
                None
            }
            Some(_) => Some(self.pttl(now)),
        }
    }

    /// The write side's renewal (`reentrant/renew.lua` on `<owner>:write`): the hash's PTTL
    /// after it (`Before`: `1`), or 0 when the writer holds nothing.
    pub(crate) fn write_renew(
        &mut self,
        scripts: Scripts,
        now: i64,
        writer: u8,
        lease: u64,
    ) -> i64 {
        self.expire(now);
        if self.writer(writer) == 0 {
            return 0;
        }
        match scripts {
            Scripts::Current => self.extend(now, lease as i64),
            Scripts::Before => {
                self.pexpire(now, lease as i64);
                1
            }
        }
    }

    /// `write/unlock.lua`: `None` not the writer, `Some(0)` still held (holds left: the
    /// hash kept `lease`, what the writer's other holds need), `Some(1)` freed, or turned
    /// into a read lock when the writer's own read holds remain.
    pub(crate) fn write_unlock(
        &mut self,
        scripts: Scripts,
        now: i64,
        writer: u8,
        lease: u64,
    ) -> Option<i64> {
        self.expire(now);
        if self.mode != Some(Mode::Write) {
            return None;
        }
        let count = self.writer(writer);
        if count == 0 {
            return None;
        }
        let holds = count - 1;
        self.set_writer(writer, holds);
        if holds > 0 {
            let ttl = match scripts {
                Scripts::Current => (lease as i64).max(self.longest_read_hold(now, false)),
                Scripts::Before => lease as i64,
            };
            self.pexpire(now, ttl);
            return Some(0);
        }
        match scripts {
            Scripts::Current => {
                if self.hlen() > 1 {
                    let longest = self.longest_read_hold(now, false);
                    if longest > 0 {
                        self.mode = Some(Mode::Read);
                        self.pexpire(now, longest);
                        return Some(1);
                    }
                }
                self.delete();
            }
            Scripts::Before => {
                if self.hlen() == 1 {
                    self.delete();
                } else {
                    self.mode = Some(Mode::Read);
                }
            }
        }
        Some(1)
    }

    /// `set_lease.lua` for `reader` (the read kind, its timeout keys given): 0 when it holds
    /// nothing; else each of its timeout keys set to `ttl` (only lengthened when it has more
    /// holds than the `counted` the caller knows of), and the hash's PTTL after
    /// [`set_hash_lease`](Self::set_hash_lease).
    pub(crate) fn read_set_lease(
        &mut self,
        script: SetLease,
        now: i64,
        reader: u8,
        ttl: u64,
        counted: u32,
    ) -> i64 {
        self.expire(now);
        let holds = self.reader(reader);
        if self.mode.is_none() || holds == 0 {
            return 0;
        }
        let uncounted = holds > counted;
        for n in 1..=holds {
            if !uncounted || self.timeout_pttl(now, reader, n) < ttl as i64 {
                self.set_timeout(reader, n, Some(now + ttl as i64));
            }
        }
        self.set_hash_lease(script, now, ttl, uncounted)
    }

    /// `set_lease.lua` for `writer` (the write kind, no timeout keys): 0 when it holds
    /// nothing, else the hash's PTTL after [`set_hash_lease`](Self::set_hash_lease).
    pub(crate) fn write_set_lease(
        &mut self,
        script: SetLease,
        now: i64,
        writer: u8,
        ttl: u64,
        counted: u32,
    ) -> i64 {
        self.expire(now);
        let holds = self.writer(writer);
        if self.mode.is_none() || holds == 0 {
            return 0;
        }
        self.set_hash_lease(script, now, ttl, holds > counted)
    }

    /// The end of `set_lease.lua`: the hash's TTL becomes `ttl`, or the larger of `ttl` and
    /// what it has left when other fields than the caller's hold it (`mode` aside) or the
    /// caller's field has holds it does not count (`uncounted`); its PTTL after.
    fn set_hash_lease(&mut self, script: SetLease, now: i64, ttl: u64, uncounted: bool) -> i64 {
        let others = self.hlen() - 2;
        let mut ttl = ttl as i64;
        if (others > 0 || uncounted) && script == SetLease::Current {
            ttl = ttl.max(self.pttl(now));
        }
        self.pexpire(now, ttl);
        self.pttl(now)
    }

    /// The read kind's foreign unlock (`foreign_begin.lua`, `read/unlock.lua` with the
    /// hash's own PTTL as the lease the reader's holds left keep, `foreign_end.lua`): `None`
    /// not a reader, `Some((1, 0))` freed, `Some((0, n))` `n` holds of the reader left.
    pub(crate) fn read_foreign_unlock(
        &mut self,
        now: i64,
        reader: u8,
        lease: u64,
    ) -> Option<(i64, i64)> {
        self.foreign_unlock(now, lease, |store, lease| {
            let unlocked = store.read_unlock(Scripts::Current, now, reader, lease)?;
            Some((unlocked, store.reader(reader)))
        })
    }

    /// The write kind's foreign unlock, as [`read_foreign_unlock`](Self::read_foreign_unlock)
    /// with `write/unlock.lua`.
    pub(crate) fn write_foreign_unlock(
        &mut self,
        now: i64,
        writer: u8,
        lease: u64,
    ) -> Option<(i64, i64)> {
        self.foreign_unlock(now, lease, |store, lease| {
            let unlocked = store.write_unlock(Scripts::Current, now, writer, lease)?;
            Some((unlocked, store.writer(writer)))
        })
    }

    /// A foreign unlock around `unlock` (given the lease, it answers the unlock's reply and
    /// the holds of the field after it).
    fn foreign_unlock(
        &mut self,
        now: i64,
        lease: u64,
        unlock: impl FnOnce(&mut Self, u64) -> Option<(i64, u32)>,
    ) -> Option<(i64, i64)> {
        self.expire(now);
        let lease = self.foreign_lease(now, lease);
        let (unlocked, holds) = unlock(self, lease)?;
        Some(foreign_end(unlocked, || holds.into()))
    }

    /// What `foreign_begin.lua` hands the unlock as its lease: the hash's PTTL when it has
    /// one left, else `lease`.
    fn foreign_lease(&self, now: i64, lease: u64) -> u64 {
        u64::try_from(self.pttl(now))
            .ok()
            .filter(|&left| left > 0)
            .unwrap_or(lease)
    }
}

/// The fields of a count array: `(owner, count)` for each count above 0.
fn fields(counts: &[u32; OWNERS]) -> impl Iterator<Item = (u8, u32)> + '_ {
    (1..=OWNERS as u8)
        .zip(counts)
        .filter(|&(_, &count)| count > 0)
        .map(|(owner, &count)| (owner, count))
}
