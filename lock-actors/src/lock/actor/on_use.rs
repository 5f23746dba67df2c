//! A part of a lock actor made on its first use.
//!
//! Most lock actors live their whole life without a waiter, a doubt or a hold of their own:
//! the lock is taken and released on the fast path while the actor only stands by (see
//! `super::super::direct`). Their wait queue and their machine would be a third of the bytes
//! a held lock costs; kept behind one pointer each, they are made when first touched.

use std::cell::OnceCell;
use std::ops::{Deref, DerefMut};

/// What a part is made from: a small value the actor has at its start.
pub(crate) trait Made {
    type Seed: Copy;

    fn make(seed: Self::Seed) -> Self;
}

/// `T`, made from its seed the first time it is read or changed.
pub(crate) struct OnUse<T: Made> {
    part: OnceCell<Box<T>>,
    seed: T::Seed,
}

impl<T: Made> OnUse<T> {
    pub(crate) fn new(seed: T::Seed) -> Self {
        OnUse {
            part: OnceCell::new(),
            seed,
        }
    }

    /// The part if it was made: for looks that must not make it (is anything waiting?).
    pub(crate) fn made(&self) -> Option<&T> {
        self.part.get().map(Box::as_ref)
    }

    /// The part if it was made, to change or empty it.
    pub(crate) fn made_mut(&mut self) -> Option<&mut T> {
        self.part.get_mut().map(Box::as_mut)
    }
}

impl<T: Made> Deref for OnUse<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.part.get_or_init(|| Box::new(T::make(self.seed)))
    }
}

impl<T: Made> DerefMut for OnUse<T> {
    fn deref_mut(&mut self) -> &mut T {
        let seed = self.seed;
        self.part.get_or_init(|| Box::new(T::make(seed)));
        self.part.get_mut().expect("made just now")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        static MADE: Cell<u32> = const { Cell::new(0) };
    }

    struct Part(u8);

    impl Made for Part {
        type Seed = u8;

        fn make(seed: u8) -> Self {
            MADE.with(|made| made.set(made.get() + 1));
            Part(seed)
        }
    }

    #[test]
    fn a_part_is_made_once_on_first_use_from_its_seed() {
        let mut part = OnUse::<Part>::new(7);
        assert!(part.made().is_none());
        assert!(part.made_mut().is_none());
        assert_eq!(MADE.with(Cell::get), 0, "a look does not make it");
        assert_eq!(part.0, 7);
        part.0 += 1;
        assert_eq!(part.made().map(|p| p.0), Some(8));
        assert_eq!(MADE.with(Cell::get), 1, "made once");
    }
}
