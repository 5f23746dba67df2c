//! How an annotated fn that is not an actix-web handler answers a lock it could not take:
//! as the `Err` of its `Result`. The expansion goes through [`LockResult`] rather than
//! writing `Err(…)` itself, so a fn that returns something else gets one message that says
//! what is wrong (on its return type), not rustc's "expected `u32`, found `Result`" on the
//! attribute. The check is on the type, not on how it is written: a type alias of a
//! `Result` passes.

use crate::error::LockError;

/// A return type `#[distributed_lock]` can answer a failure with: a `Result`.
#[diagnostic::on_unimplemented(
    message = "#[distributed_lock] needs this fn to return `Result<_, E>` where `E: From<LockError>`, not `{Self}`",
    label = "not a `Result`",
    note = "a lock that cannot be taken (the wait runs out, Redis is unreachable, or it is lost under `on_lost = stop`) is returned as `Err(E::from(error))`, or as `Err(on_fail(error))` with `on_fail = …`",
    note = "only an actix-web handler may return something else: its failures become HTTP responses"
)]
pub trait LockResult<E>: Sized {
    /// `Err(error)`.
    fn failed(error: E) -> Self;
}

impl<T, E> LockResult<E> for Result<T, E> {
    fn failed(error: E) -> Self {
        Err(error)
    }
}

/// The `E` of an annotated fn's `Result<_, E>` when no `on_fail = …` is given: made from
/// the `LockError` with `From`. (A trait of our own rather than a `From` bound, so that a
/// type without that `From` is told what the attribute does with it.)
#[diagnostic::on_unimplemented(
    message = "#[distributed_lock] returns a lock it cannot take as `Err(E::from(error))`, but `{Self}` does not implement `From<LockError>`",
    label = "its error type does not implement `From<LockError>`",
    note = "implement `From<LockError>` for `{Self}`, or pass `on_fail = path` with a `fn(LockError) -> {Self}`"
)]
pub trait FromLockError {
    /// `Self::from(error)`.
    fn from_lock_error(error: LockError) -> Self;
}

impl<E: From<LockError>> FromLockError for E {
    fn from_lock_error(error: LockError) -> Self {
        E::from(error)
    }
}

/// `Err(E::from(error))` as the annotated fn's return type `R`.
///
/// ```
/// use actix_distributed_lock::__private::fail_from;
/// use actix_distributed_lock::LockError;
/// let lost = LockError::Lost { name: "order:42".into() };
/// let answer: Result<u32, LockError> = fail_from(lost);
/// assert!(answer.is_err());
/// ```
pub fn fail_from<R: LockResult<E>, E: FromLockError>(error: LockError) -> R {
    R::failed(E::from_lock_error(error))
}

/// `Err(error)` as the annotated fn's return type `R`. (`E` is a parameter of the trait, not
/// an associated type, so that an `R` that is not a `Result` is one error, not two.)
///
/// ```
/// use actix_distributed_lock::__private::fail;
/// use actix_distributed_lock::LockError;
/// let lost = LockError::Lost { name: "order:42".into() };
/// let answer: Result<u32, LockError> = fail(lost);
/// assert!(answer.is_err());
/// ```
pub fn fail<R: LockResult<E>, E>(error: E) -> R {
    R::failed(error)
}
