//! What a client of the model knows of its holds: for each side of the lock (a lock actor
//! of its own in the library), the holds with their leases, the watchdog's deadline and its
//! renewal in flight. Plain arrays: the model copies and hashes them for every state.

/// The two sides of the lock, each a lock actor of its own in the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Side {
    Read,
    Write,
}

/// One hold as its client knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Hold {
    /// A fixed lease and when its acquire was sent; `None`: kept by the watchdog.
    pub(super) fixed: Option<(u32, i32)>,
}

/// The most holds one side of a client can have (the model's bound is lower).
pub(super) const MAX_HOLDS: usize = 3;

/// A side's holds, in a plain array (the first `len` slots): the model copies and hashes
/// them for every state it explores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Holds {
    len: u8,
    slots: [Option<Hold>; MAX_HOLDS],
}

impl Holds {
    pub(super) fn iter(&self) -> impl Iterator<Item = &Hold> + Clone + '_ {
        self.slots.iter().flatten()
    }

    pub(super) fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn last(&self) -> Option<&Hold> {
        self.iter().last()
    }

    pub(super) fn push(&mut self, hold: Hold) {
        self.slots[self.len()] = Some(hold);
        self.len += 1;
    }

    pub(super) fn remove(&mut self, i: usize) {
        let len = self.len();
        self.slots[i..len].rotate_left(1);
        self.slots[len - 1] = None;
        self.len -= 1;
    }

    pub(super) fn sort(&mut self) {
        let len = self.len();
        self.slots[..len].sort();
    }

    pub(super) fn fixed_mut(&mut self) -> impl Iterator<Item = &mut (u32, i32)> {
        self.slots
            .iter_mut()
            .flatten()
            .filter_map(|hold| hold.fixed.as_mut())
    }
}

/// One owner's holds of one side, as that side's lock actor keeps them: the holds, until
/// when the side's watchdog surely holds them (µs), the send time of its renewal in
/// flight, and ([`Rules::Before`] only) when the fixed-lease timer was last armed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Holder {
    pub(super) holds: Holds,
    pub(super) watched_until: Option<i64>,
    pub(super) renewing: Option<i64>,
    pub(super) armed: Option<i64>,
}

impl Holder {
    pub(super) fn watched(&self) -> bool {
        self.holds.iter().any(|hold| hold.fixed.is_none())
    }
}

/// One client: one owner, with its read side and its write side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Client {
    pub(super) read: Holder,
    pub(super) write: Holder,
}

impl Client {
    pub(super) fn side(&self, side: Side) -> &Holder {
        match side {
            Side::Read => &self.read,
            Side::Write => &self.write,
        }
    }

    pub(super) fn side_mut(&mut self, side: Side) -> &mut Holder {
        match side {
            Side::Read => &mut self.read,
            Side::Write => &mut self.write,
        }
    }
}
