//! One semaphore as the model's Redis holds it, and the semaphore scripts as pure functions
//! over it: the Rust mirrors of `semaphore/*.lua` (with the helpers of `common.lua`), as they
//! are ([`Scripts::Current`]), with the plain acquire as it was before receipts
//! ([`Scripts::Before`]), or with one script broken on purpose ([`Scripts::Broken`], the
//! negative controls). `super::mirror` runs each Lua script and its mirror on a real Redis
//! over generated inputs and compares them, so the model cannot drift from the scripts.
//!
//! Time is in milliseconds: the scripts that read Redis's clock take it as `now` (the model
//! keeps `now` at 0 and every expiry relative to it; the cross-check passes the epoch time).
//! A permit whose expiry is at or before `now` has expired, as the scripts count it.
//! Receipts keep no TTL here: they live the settle window (minutes), far beyond anything
//! the model runs through, and the cross-check checks the TTL the scripts give them.

use std::collections::BTreeMap;

/// A permit id or a receipt, as the model names them (the library: 16 random bytes, a
/// request uuid).
pub(crate) type Member = u16;

/// The expiry Redisson gives lease-less permits: they never expire.
pub(crate) const NEVER: i64 = 922_337_203_685_477;

/// Which scripts the model's Redis runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scripts {
    /// The scripts of this crate as they are.
    Current,
    /// The semaphores before acquires were settled: the plain acquire left no receipt, so
    /// nothing told whether an acquire whose reply was lost took its permits (and
    /// `settle.lua` did not exist); a permit-expirable acquire whose reply was lost was
    /// given back by id (`expirable_release.lua`, unchanged since) and left no marker, and
    /// its acquire read none (the current script when no marker exists). Every other script
    /// is unchanged since.
    Before,
    /// The current scripts with one broken on purpose.
    Broken(Defect),
}

/// A deliberately broken script, which the checker must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Defect {
    /// `renew.lua` writing the new expiry whether or not the permit is still recorded
    /// (no `XX`, no check that it has not expired).
    RenewIgnoresRecord,
    /// `expirable_release.lua` adding every id it is given back to the count, recorded
    /// (still out) or not (released already, or reclaimed after expiring).
    ReleaseIgnoresRecord,
    /// `settle.lua` and `expirable_settle.lua` leaving no marker for an acquire that has
    /// not run, so a late copy of it takes its permits after all.
    SettleLeavesNoMarker,
}

/// What a plain acquire's receipt says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Receipt {
    /// The acquire took its permits (`taken`).
    Taken,
    /// A settlement came first: a late copy of the acquire must take nothing (`settled`).
    Settled,
}

impl Receipt {
    /// The receipt's value in Redis.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Receipt::Taken => "taken",
            Receipt::Settled => "settled",
        }
    }
}

/// The semaphore's keys: the permit count (`None`: no key), the plain acquires' receipts
/// and the permit-expirable semaphore's zset of permit id → expiry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Store {
    pub(crate) count: Option<i64>,
    pub(crate) receipts: BTreeMap<Member, Receipt>,
    pub(crate) timeouts: BTreeMap<Member, i64>,
}

impl Store {
    /// `permits_of`: the count, 0 without the key.
    fn permits(&self) -> i64 {
        self.count.unwrap_or(0)
    }

    /// `INCRBY` of the count (a missing key counts as 0).
    fn incrby(&mut self, by: i64) -> i64 {
        let after = self.permits() + by;
        self.count = Some(after);
        after
    }

    /// `common.lua`'s `reclaim`: every permit expired by `now` leaves the zset and goes
    /// back to the count (which holds `available`).
    fn reclaim(&mut self, now: i64, available: i64) -> i64 {
        let before = self.timeouts.len();
        self.timeouts.retain(|_, expiry| *expiry > now);
        let expired = (before - self.timeouts.len()) as i64;
        if expired == 0 {
            return available;
        }
        self.incrby(expired)
    }

    /// Every expiry moves `step` closer to `now` (the model's clock advances); an expired
    /// permit stays expired, at `now` (how long ago it expired changes nothing).
    pub(crate) fn shift(&mut self, step: i64) {
        for expiry in self.timeouts.values_mut() {
            if *expiry < NEVER {
                *expiry = (*expiry - step).max(0);
            }
        }
    }

    /// `try_set.lua`: 1 set, 0 the key existed.
    pub(crate) fn try_set(&mut self, permits: u32) -> i64 {
        if self.count.is_some() {
            return 0;
        }
        self.count = Some(i64::from(permits));
        1
    }

    /// `set.lua`; `now` for a permit-expirable semaphore (its expired permits go first, and
    /// the count becomes `permits` less those still out). Returns the count after.
    pub(crate) fn set(&mut self, now: Option<i64>, permits: u32) -> i64 {
        let mut after = i64::from(permits);
        if let Some(now) = now {
            self.timeouts.retain(|_, expiry| *expiry > now);
            after -= self.timeouts.len() as i64;
        }
        self.count = Some(after);
        after
    }

    /// `add.lua`: the count after.
    pub(crate) fn add(&mut self, delta: i64) -> i64 {
        self.incrby(delta)
    }

    /// `available.lua`; `now` for a permit-expirable semaphore (expired permits go back
    /// first).
    pub(crate) fn available(&mut self, now: Option<i64>) -> i64 {
        let available = self.permits();
        match now {
            Some(now) => self.reclaim(now, available),
            None => available,
        }
    }

    /// `acquire.lua` with receipt `receipt`: `[1, available after]` taken, `[0, available]`
    /// too few, `[-1, available]` settled already, `[-2, 0]` no key (permits never set).
    /// [`Scripts::Before`]: no receipt, and no key is too few.
    pub(crate) fn acquire(&mut self, scripts: Scripts, receipt: Member, wanted: u32) -> [i64; 2] {
        let available = self.permits();
        let with_receipt = scripts != Scripts::Before;
        if with_receipt && self.receipts.contains_key(&receipt) {
            return [-1, available];
        }
        let wanted = i64::from(wanted);
        if available >= wanted {
            if with_receipt {
                self.receipts.insert(receipt, Receipt::Taken);
            }
            return [1, self.incrby(-wanted)];
        }
        if with_receipt && self.count.is_none() {
            return [-2, 0];
        }
        [0, available]
    }

    /// `settle.lua` for the acquire of `receipt` (for `permits`): 1 it had taken them, now
    /// given back; 0 it took nothing (and, marked settled, never will).
    pub(crate) fn settle(&mut self, scripts: Scripts, receipt: Member, permits: u32) -> i64 {
        match self.receipts.get(&receipt) {
            Some(Receipt::Taken) => {
                self.receipts.remove(&receipt);
                self.incrby(i64::from(permits));
                1
            }
            Some(Receipt::Settled) => 0,
            None => {
                if scripts != Scripts::Broken(Defect::SettleLeavesNoMarker) {
                    self.receipts.insert(receipt, Receipt::Settled);
                }
                0
            }
        }
    }

    /// `expirable_acquire.lua` at `now` for permits `ids` with lease `lease` and receipt
    /// `receipt`: `[-1, available]` settled already (nothing changed), `[1, available
    /// after]` taken, `[0, available, ms until the next permit expires or -1]` too few
    /// (expired permits went back to the count first either way), `[-2, 0]` too few and no
    /// key (permits never set). [`Scripts::Before`]: no marker is read.
    pub(crate) fn expirable_acquire(
        &mut self,
        scripts: Scripts,
        now: i64,
        (lease, receipt): (u64, Member),
        ids: &[Member],
    ) -> Vec<i64> {
        let available = self.permits();
        if scripts != Scripts::Before && self.receipts.contains_key(&receipt) {
            return vec![-1, available];
        }
        let available = self.reclaim(now, available);
        let wanted = ids.len() as i64;
        if available >= wanted {
            self.incrby(-wanted);
            for id in ids {
                self.timeouts.insert(*id, now + lease as i64);
            }
            return vec![1, available - wanted];
        }
        if self.count.is_none() {
            return vec![-2, 0];
        }
        let upcoming = self
            .timeouts
            .values()
            .filter(|&&expiry| expiry > now && expiry < NEVER)
            .min();
        vec![0, available, upcoming.map_or(-1, |expiry| expiry - now)]
    }

    /// `expirable_release.lua` at `now`: `[released, of which still within their lease]`;
    /// every id still recorded goes back to the count.
    pub(crate) fn expirable_release(
        &mut self,
        scripts: Scripts,
        now: i64,
        ids: &[Member],
    ) -> [i64; 2] {
        let (mut released, mut live) = (0, 0);
        for id in ids {
            match self.timeouts.remove(id) {
                Some(expiry) => {
                    released += 1;
                    if expiry > now {
                        live += 1;
                    }
                }
                None if scripts == Scripts::Broken(Defect::ReleaseIgnoresRecord) => released += 1,
                None => {}
            }
        }
        if released > 0 {
            self.incrby(released);
        }
        [released, live]
    }

    /// `expirable_settle.lua` at `now` for the acquire of `receipt` that asked for `ids`:
    /// the recorded ones go back (`[released, of which still within their lease]`), and a
    /// marker makes a late copy of the acquire take nothing. [`Scripts::Before`]: the
    /// give-back by id alone.
    pub(crate) fn expirable_settle(
        &mut self,
        scripts: Scripts,
        now: i64,
        receipt: Member,
        ids: &[Member],
    ) -> [i64; 2] {
        let released = self.expirable_release(scripts, now, ids);
        let marks = !matches!(
            scripts,
            Scripts::Before | Scripts::Broken(Defect::SettleLeavesNoMarker)
        );
        if marks {
            self.receipts.entry(receipt).or_insert(Receipt::Settled);
        }
        released
    }

    /// `renew.lua` at `now`: one answer per id, 1 renewed to `now + lease`, 0 gone or
    /// already expired (left as it is).
    pub(crate) fn renew(
        &mut self,
        scripts: Scripts,
        now: i64,
        lease: u64,
        ids: &[Member],
    ) -> Vec<i64> {
        let broken = scripts == Scripts::Broken(Defect::RenewIgnoresRecord);
        ids.iter()
            .map(|id| {
                let live = self.timeouts.get(id).is_some_and(|&expiry| expiry > now);
                if live || broken {
                    self.timeouts.insert(*id, now + lease as i64);
                    1
                } else {
                    0
                }
            })
            .collect()
    }
}
