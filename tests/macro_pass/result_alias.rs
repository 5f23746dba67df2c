// What the return type check lets through: a `Result` behind a type alias, an error type
// of one's own with `From<LockError>`, `on_fail`, and an `impl Trait` in the `Ok` type.
use actix_distributed_lock::{distributed_lock, LockClient, LockError};
use std::fmt::Display;

type Answer<T> = Result<T, LockError>;

#[derive(Debug)]
enum PayError {
    Lock(LockError),
}

impl From<LockError> for PayError {
    fn from(error: LockError) -> Self {
        PayError::Lock(error)
    }
}

fn refused(error: LockError) -> String {
    error.to_string()
}

#[distributed_lock("order:<id>", client = client)]
async fn aliased(client: &LockClient, id: u64) -> Answer<u64> {
    Ok(id)
}

#[distributed_lock("order:<id>", client = client)]
async fn own_error(client: &LockClient, id: u64) -> Result<u64, PayError> {
    Ok(id)
}

#[distributed_lock("order:<id>", client = client, on_fail = refused)]
async fn with_on_fail(client: &LockClient, id: u64) -> Result<u64, String> {
    Ok(id)
}

#[distributed_lock("order:<id>", client = client)]
async fn shown(client: &LockClient, id: u64) -> Result<impl Display, LockError> {
    Ok(id)
}

pub fn check() {
    // Compiling is the check; nothing needs to run.
    let _ = (aliased, own_error, with_on_fail, shown);
    let PayError::Lock(error) = PayError::from(LockError::Shutdown);
    assert_eq!(error, LockError::Shutdown);
}
