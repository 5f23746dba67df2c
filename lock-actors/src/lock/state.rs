//! Reads what Redis holds for a lock: whether it is locked, its remaining lease, and one
//! owner's hold count.

use super::kind::LockKind;
use super::LockState;
use crate::error::LockError;
use crate::keys::LockName;
use crate::node::Commands;
use std::time::Duration;

/// Reads a lock's state: key type (to refuse non-lock data), PTTL, and one owner's holds.
pub(crate) async fn read_state(
    commands: Commands,
    kind: LockKind,
    name: LockName,
    field: Option<String>,
) -> Result<LockState, LockError> {
    let mut pipe = redis::pipe();
    pipe.cmd("TYPE")
        .arg(name.as_str())
        .cmd("PTTL")
        .arg(name.as_str());
    let (kind_found, pttl): (String, i64) = commands.clone().query(pipe, name.clone()).await?;
    let (key_type, locked) = (kind.key_type(), kind_found == kind.key_type());
    if kind_found != key_type && kind_found != "none" {
        return Err(LockError::WrongType {
            name: name.to_string(),
        });
    }
    let hold_count = match field {
        Some(field) if locked => {
            let mut pipe = redis::pipe();
            kind.read_holds(&mut pipe, &name, &field);
            let (reply,): (Option<String>,) = commands.query(pipe, name.clone()).await?;
            kind.holds_in(reply.as_deref(), &field)
        }
        _ => 0,
    };
    Ok(LockState {
        locked,
        ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
        hold_count,
    })
}
