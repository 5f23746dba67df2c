//! The client id: the first half of every owner field a client writes (`<client-id>:<owner>`),
//! a fresh uuid unless configured, so that processes can share owners.

use super::ClientConfig;
use crate::error::LockError;

/// The longest client id accepted, in bytes.
const MAX_CLIENT_ID_LEN: usize = 100;

impl ClientConfig {
    /// Writes `id` before every owner this client holds with (`<id>:<owner-id>` in Redis),
    /// instead of a uuid of its own.
    ///
    /// Clients with one id share their owners: a hold that one process took for
    /// [`LockOwner::from_id(42)`](crate::LockOwner::from_id) is the hold of owner 42 in
    /// every process whose client has the same id, which may check it
    /// ([`Lock::is_held_by`](crate::Lock::is_held_by)), release it
    /// ([`Lock::unlock_as`](crate::Lock::unlock_as)) or re-enter it. Give it a Redisson
    /// client's id (`RedissonClient.getId()`) to act on that client's holds by thread id,
    /// as Redisson's `unlockAsync(threadId)` does, and the other way round.
    ///
    /// Owners made with [`LockOwner::new`](crate::LockOwner::new) stay apart across such
    /// processes: each process draws them from a random point of a range of 2^52 ids (and
    /// Redisson's thread ids are far below it). Ids you choose for `from_id` are shared on
    /// purpose; keep them below 2^52.
    ///
    /// The id is at most 100 bytes of printable ASCII with no `:` (the separator), no
    /// braces (cluster hash tags) and no spaces; [`validate`](ClientConfig::validate)
    /// refuses any other with [`LockError::InvalidConfig`].
    ///
    /// ```
    /// use actix_distributed_lock::ClientConfig;
    ///
    /// let config = ClientConfig::new("redis://127.0.0.1/").client_id("billing-workers");
    /// assert!(config.validate().is_ok());
    /// assert_eq!(config.client_id_value(), Some("billing-workers"));
    /// assert!(ClientConfig::new("redis://h/").client_id("a:b").validate().is_err());
    /// ```
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// The configured client id, if any (see [`client_id`](ClientConfig::client_id));
    /// without one each client makes a uuid of its own
    /// ([`LockClient::id`](crate::LockClient::id) tells it).
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// assert_eq!(ClientConfig::new("redis://h/").client_id_value(), None);
    /// ```
    pub fn client_id_value(&self) -> Option<&str> {
        self.client_id.as_deref()
    }
}

/// The rules of a client id (see [`ClientConfig::client_id`]).
pub(super) fn check_client_id(id: &str) -> Result<(), LockError> {
    let refuse = |why: String| Err(LockError::invalid_config(format!("client id {why}")));
    if id.is_empty() {
        return refuse("is empty; leave it unset for a uuid of the client's own".into());
    }
    if id.len() > MAX_CLIENT_ID_LEN {
        return refuse(format!(
            "is {} bytes long; the limit is {MAX_CLIENT_ID_LEN}",
            id.len()
        ));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, ':' | '{' | '}'))
    {
        return refuse(format!(
            "{id:?} has {bad:?}: use printable ASCII without `:` (it separates the owner id), \
             braces (cluster hash tags) or spaces"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_client_id;

    #[test]
    fn a_uuid_or_a_plain_word_is_a_client_id_and_separators_are_not() {
        assert!(check_client_id("0c5f3d2e-8a1b-4c6d-9e0f-112233445566").is_ok());
        assert!(check_client_id("workers_1.eu").is_ok());
        for bad in ["", "a:b", "{a}", "a b", "a\nb", "é"] {
            assert!(check_client_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_client_id(&"x".repeat(101)).is_err());
    }
}
