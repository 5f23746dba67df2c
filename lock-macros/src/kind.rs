//! `kind = …`: the names the attribute accepts and the runtime's `Kind` variant each stands
//! for. The expansion names the variant (`…::macro_support::Kind::Fair`), so the runtime's
//! enum is the one list of kinds: a name here without a variant there fails to compile.

use proc_macro2::{Ident, Span};

/// One kind, as the attribute spells it and as the runtime names it.
#[derive(Clone, Copy)]
pub(crate) struct KindName {
    pub(crate) name: &'static str,
    variant: &'static str,
    /// Permits of a semaphore, not a lock: no owner, `permits = …` allowed.
    pub(crate) semaphore: bool,
}

const fn lock(name: &'static str, variant: &'static str) -> KindName {
    KindName {
        name,
        variant,
        semaphore: false,
    }
}

const fn semaphore(name: &'static str, variant: &'static str) -> KindName {
    KindName {
        name,
        variant,
        semaphore: true,
    }
}

pub(crate) const KINDS: &[KindName] = &[
    lock("reentrant", "Reentrant"),
    lock("fair", "Fair"),
    lock("read", "Read"),
    lock("write", "Write"),
    lock("fenced", "Fenced"),
    lock("fast", "Fast"),
    lock("spin", "Spin"),
    semaphore("semaphore", "Semaphore"),
    semaphore("expirable_semaphore", "ExpirableSemaphore"),
];

/// The default, `kind = reentrant`.
pub(crate) const DEFAULT: KindName = KINDS[0];

/// The kind `ident` names, or an error on it that lists the kinds.
pub(crate) fn lookup(ident: &Ident) -> syn::Result<KindName> {
    let name = ident.to_string();
    KINDS
        .iter()
        .find(|kind| kind.name == name)
        .copied()
        .ok_or_else(|| {
            let all: Vec<&str> = KINDS.iter().map(|kind| kind.name).collect();
            syn::Error::new(
                ident.span(),
                format!(
                    "unknown lock kind `{name}`; the kinds are: {}",
                    all.join(", ")
                ),
            )
        })
}

impl KindName {
    /// The runtime variant's name, to put after `Kind::`.
    pub(crate) fn variant(self, span: Span) -> Ident {
        Ident::new(self.variant, span)
    }
}
