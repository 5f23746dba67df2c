//! The one list of lock kinds `#[distributed_lock]` accepts, shared by the attribute
//! (which names a variant at compile time) and the runtime (which matches it exhaustively).
//! The attribute's own table of spellings is tied to it both ways: a spelling without a
//! variant here does not compile, and `tests/macro_attribute.rs` uses the attribute with every
//! kind in [`Kind::ALL`] by its [`name`](Kind::name).

use crate::lock::LockKind;

macro_rules! attribute_kinds {
    ($(#[$kind_doc:meta])* pub enum Kind {
        $($(#[$doc:meta])* $variant:ident = $name:literal,)+
    }) => {
        $(#[$kind_doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kind {
            $($(#[$doc])* $variant,)+
        }

        impl Kind {
            /// Every kind, in the order the attribute lists them in its errors.
            ///
            /// ```
            /// # use actix_distributed_lock::__private::Kind;
            /// assert_eq!(Kind::ALL[0], Kind::Reentrant);
            /// ```
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),+];

            /// How `kind = …` spells it.
            ///
            /// ```
            /// # use actix_distributed_lock::__private::Kind;
            /// assert_eq!(Kind::ExpirableSemaphore.name(), "expirable_semaphore");
            /// ```
            pub const fn name(self) -> &'static str {
                match self {
                    $(Kind::$variant => $name),+
                }
            }
        }
    };
}

attribute_kinds! {
    /// What `kind = …` names: the one list of kinds the attribute accepts.
    ///
    /// The attribute turns `kind = fair` into the path `Kind::Fair` at compile time, so a kind
    /// is checked by the compiler, never matched from a string at run time; the attribute also
    /// refuses at compile time the options a kind cannot take (`lease` on a plain semaphore,
    /// `permits` on a lock).
    ///
    /// ```
    /// use actix_distributed_lock::__private::Kind;
    /// assert!(Kind::ExpirableSemaphore.is_semaphore());
    /// assert_eq!(Kind::Fenced.lock_kind(), Some(actix_distributed_lock::LockKind::Reentrant));
    /// ```
    pub enum Kind {
        /// `kind = reentrant` (the default): [`LockClient::lock`](crate::LockClient::lock).
        Reentrant = "reentrant",
        /// `kind = fair`: [`LockClient::fair_lock`](crate::LockClient::fair_lock).
        Fair = "fair",
        /// `kind = read`: the read side of [`LockClient::read_write_lock`](crate::LockClient::read_write_lock).
        Read = "read",
        /// `kind = write`: the write side of [`LockClient::read_write_lock`](crate::LockClient::read_write_lock).
        Write = "write",
        /// `kind = fenced`: [`LockClient::fenced_lock`](crate::LockClient::fenced_lock), a reentrant lock whose holds draw a token.
        Fenced = "fenced",
        /// `kind = fast`: [`LockClient::fast_lock`](crate::LockClient::fast_lock), not reentrant.
        Fast = "fast",
        /// `kind = spin`: [`LockClient::spin_lock`](crate::LockClient::spin_lock), no pub/sub (waiters back off).
        Spin = "spin",
        /// `kind = semaphore`: permits of [`LockClient::semaphore`](crate::LockClient::semaphore) (no lease, no owner).
        Semaphore = "semaphore",
        /// `kind = expirable_semaphore`: permits of [`LockClient::expirable_semaphore`](crate::LockClient::expirable_semaphore).
        ExpirableSemaphore = "expirable_semaphore",
    }
}

impl Kind {
    /// Whether the attribute takes permits of a semaphore rather than a lock.
    ///
    /// ```
    /// # use actix_distributed_lock::__private::Kind;
    /// assert!(!Kind::Fair.is_semaphore());
    /// ```
    pub const fn is_semaphore(self) -> bool {
        matches!(self, Kind::Semaphore | Kind::ExpirableSemaphore)
    }

    /// The lock kind a lock `Kind` stores in Redis (`None` for the semaphores).
    ///
    /// ```
    /// # use actix_distributed_lock::{__private::Kind, LockKind};
    /// assert_eq!(Kind::Write.lock_kind(), Some(LockKind::Write));
    /// assert_eq!(Kind::Semaphore.lock_kind(), None);
    /// ```
    pub const fn lock_kind(self) -> Option<LockKind> {
        match self {
            Kind::Reentrant | Kind::Fenced => Some(LockKind::Reentrant),
            Kind::Fair => Some(LockKind::Fair),
            Kind::Read => Some(LockKind::Read),
            Kind::Write => Some(LockKind::Write),
            Kind::Fast => Some(LockKind::Fast),
            Kind::Spin => Some(LockKind::Spin),
            Kind::Semaphore | Kind::ExpirableSemaphore => None,
        }
    }
}
