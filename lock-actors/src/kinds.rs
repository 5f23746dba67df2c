//! The one list of kinds: every lock, semaphore and latch kind the crate offers, by the
//! name users read everywhere (`#[distributed_lock(kind = …)]`, the `kind` label of
//! metrics and spans, the docs). Everything else that knows kinds derives from it:
//!
//! - the attribute names a [`Kind`] variant (its spelling table must name one, or the
//!   expansion does not compile) and the runtime matches it exhaustively;
//! - telemetry's `kind` label is [`Kind::name`], its static metric keys are built from
//!   [`with_kinds!`];
//! - each lock kind's rules (`lock::kind`), each semaphore kind (`semaphore::kind`) and the
//!   inspector's reading of keys (`inspect::model`) map onto it, and a test beside each of
//!   them fails when one of them knows a kind this list does not (or the other way round).
//!
//! `docs/design.md` ("Adding a kind") lists the files a new kind touches.

/// The list itself: `with_kinds!(then)` expands to `then!(Variant "name" Family, ...)`, and
/// `with_kinds!(then, arg)` to `then!(arg; Variant "name" Family, ...)`.
macro_rules! with_kinds {
    ($then:ident $(, $arg:expr)?) => {
        $then! {$($arg;)?
            Reentrant "reentrant" Lock,
            Fenced "fenced" Lock,
            Fair "fair" Lock,
            Read "read" Lock,
            Write "write" Lock,
            Fast "fast" Lock,
            Spin "spin" Lock,
            Semaphore "semaphore" Semaphore,
            ExpirableSemaphore "expirable_semaphore" Semaphore,
            Latch "latch" Latch
        }
    };
}

/// What a kind is: a lock (held by an owner), a semaphore (permits) or a latch (a count).
///
/// ```
/// use actix_distributed_lock::__private::{Family, Kind};
/// assert_eq!(Kind::Spin.family(), Family::Lock);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Held by one owner (or by readers), with a lease.
    Lock,
    /// Permits of a semaphore.
    Semaphore,
    /// A count-down latch: waited on, never held.
    Latch,
}

macro_rules! kind_enum {
    ($($variant:ident $name:literal $family:ident),+) => {
        /// Every kind of lock, semaphore and latch, in the order the docs list them.
        ///
        /// The attribute turns `kind = fair` into the path `Kind::Fair` at compile time, so a
        /// kind is checked by the compiler, never matched from a string at run time; it also
        /// refuses at compile time the options a kind cannot take (`lease` on a plain
        /// semaphore, `permits` on a lock) and the latch (nothing to hold).
        ///
        /// ```
        /// use actix_distributed_lock::__private::Kind;
        /// assert_eq!(Kind::ExpirableSemaphore.name(), "expirable_semaphore");
        /// assert!(Kind::ALL.contains(&Kind::Fenced));
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kind {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant
            ),+
        }

        impl Kind {
            /// Every kind, in index order (the metric keys' tables follow it).
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),+];

            /// How many kinds there are.
            pub const COUNT: usize = Kind::ALL.len();

            /// Its name: the attribute's `kind = …`, the `kind` label, the docs' word.
            ///
            /// ```
            /// # use actix_distributed_lock::__private::Kind;
            /// assert_eq!(Kind::Fenced.name(), "fenced");
            /// ```
            pub const fn name(self) -> &'static str {
                match self {
                    $(Kind::$variant => $name),+
                }
            }

            /// Whether it is a lock, a semaphore or a latch.
            pub const fn family(self) -> Family {
                match self {
                    $(Kind::$variant => Family::$family),+
                }
            }
        }
    };
}

with_kinds!(kind_enum);

impl Kind {
    /// Whether `#[distributed_lock(kind = …)]` can take it: every lock and semaphore kind
    /// (a latch is waited on, not held).
    ///
    /// ```
    /// # use actix_distributed_lock::__private::Kind;
    /// assert!(Kind::Spin.in_attribute());
    /// assert!(!Kind::Latch.in_attribute());
    /// ```
    pub const fn in_attribute(self) -> bool {
        !matches!(self.family(), Family::Latch)
    }

    /// Whether it takes permits of a semaphore rather than a lock.
    ///
    /// ```
    /// # use actix_distributed_lock::__private::Kind;
    /// assert!(!Kind::Fair.is_semaphore());
    /// ```
    pub const fn is_semaphore(self) -> bool {
        matches!(self.family(), Family::Semaphore)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_name() {
        let names: std::collections::HashSet<_> = Kind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), Kind::COUNT);
        for (index, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(
                *kind as usize,
                index,
                "{} is out of index order",
                kind.name()
            );
        }
    }
}
