//! A registry of live actors by key: hands out the live actor of a key (starting one when
//! there is none) and lets a stopping actor leave under the same lock, so it never hands
//! out an actor that is stopping. Knows nothing of what the actors do.

use actix::{Actor, Addr, WeakAddr};
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// One registered actor: its id (so a stopping actor removes only its own entry), its
/// address, and what it shares with callers that bypass it (`S`).
struct Entry<A: Actor, S> {
    id: u64,
    addr: WeakAddr<A>,
    shared: S,
}

/// The live actors of type `A` by key `K`, each with a shared value `S`.
pub(crate) struct Registry<K, A: Actor, S = ()> {
    entries: Mutex<HashMap<K, Entry<A, S>>>,
    next_id: AtomicU64,
    /// Or-ed into every id, so two registries never hand out the same id (actor ids are
    /// also subscriber ids on the node's pub/sub routes).
    tag: u64,
}

impl<K: Hash + Eq, A: Actor, S: Clone> Registry<K, A, S> {
    /// An empty registry whose ids carry `tag` (ids start at 1).
    pub(crate) fn new(tag: u64) -> Self {
        Registry {
            entries: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            tag,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, Entry<A, S>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live actor of `key`; if there is none, `start(id)` starts one (under the
    /// registry's lock, so two callers never start two).
    pub(crate) fn get_or_start(
        &self,
        key: K,
        start: impl FnOnce(u64) -> (Addr<A>, S),
    ) -> (Addr<A>, S) {
        let mut entries = self.lock();
        if let Some(entry) = entries.get(&key) {
            if let Some(addr) = entry.addr.upgrade() {
                if addr.connected() {
                    return (addr, entry.shared.clone());
                }
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) | self.tag;
        let (addr, shared) = start(id);
        let entry = Entry {
            id,
            addr: addr.downgrade(),
            shared: shared.clone(),
        };
        entries.insert(key, entry);
        (addr, shared)
    }

    /// Called by actor `id` about to stop: it may, and leaves the registry, unless
    /// `still_wanted` (someone took its address meanwhile) says otherwise.
    pub(crate) fn retire(&self, key: &K, id: u64, still_wanted: impl FnOnce() -> bool) -> bool {
        let mut entries = self.lock();
        if still_wanted() {
            return false;
        }
        if entries.get(key).is_some_and(|entry| entry.id == id) {
            entries.remove(key);
        }
        true
    }

    /// Drops the entry of `key` if its actor is `addr` or gone (it turned out stopped).
    pub(crate) fn evict(&self, key: &K, addr: &Addr<A>) {
        let mut entries = self.lock();
        let stale = entries
            .get(key)
            .is_some_and(|entry| entry.addr.upgrade().is_none_or(|live| &live == addr));
        if stale {
            entries.remove(key);
        }
    }

    /// The live actors whose key `wanted` picks (a snapshot: actors may start or stop
    /// right after).
    pub(crate) fn live_where(&self, wanted: impl Fn(&K) -> bool) -> Vec<Addr<A>> {
        self.lock()
            .iter()
            .filter(|(key, _)| wanted(key))
            .filter_map(|(_, entry)| entry.addr.upgrade())
            .filter(Addr::connected)
            .collect()
    }

    /// How many actors are registered (live or stopping).
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Empties the registry; the entries are dropped outside its lock (dropping a shared
    /// value may drop the last handle of something that takes the lock again).
    pub(crate) fn clear(&self) {
        let entries = std::mem::take(&mut *self.lock());
        drop(entries);
    }
}
