//! Namespaces: one Redis shared by several environments or tenants, each with a prefix of
//! its own on every key and channel.

use super::ClientConfig;
use crate::error::LockError;

impl ClientConfig {
    /// Maps every lock and semaphore name of this client into `namespace`, as Redisson's
    /// `NameMapper` does: the key of lock `order:1` becomes `billing:order:1`, and every
    /// derived key and channel keeps Redisson's layout around that mapped name
    /// (`redisson_lock__channel:{billing:order:1}`, `redisson_lock_queue:{billing:order:1}`,
    /// `redisson_sc:{billing:pool}`, ...). Two clients with different namespaces never
    /// share a lock of the same name; a Java service whose `NameMapper` maps `name` to
    /// `"billing:" + name` shares this client's locks (see "Namespaces" in the repository's
    /// docs/production.md).
    ///
    /// The namespace follows the rules of a lock name, at most
    /// [`MAX_NAMESPACE_LEN`] bytes, with no braces and no
    /// trailing `:` (the separator is added); [`validate`](ClientConfig::validate) refuses
    /// any other with [`LockError::InvalidConfig`]. Errors and tracing events name a lock
    /// as the caller gave it, without the namespace.
    ///
    /// ```
    /// use actix_distributed_lock::ClientConfig;
    ///
    /// let config = ClientConfig::new("redis://127.0.0.1/").namespace("billing");
    /// assert!(config.validate().is_ok());
    /// assert_eq!(config.namespace_value(), Some("billing"));
    /// assert!(ClientConfig::new("redis://h/").namespace("").validate().is_err());
    /// assert!(ClientConfig::new("redis://h/").namespace("billing:").validate().is_err());
    /// ```
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The namespace in force, if any (see [`namespace`](ClientConfig::namespace)).
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// assert_eq!(ClientConfig::new("redis://h/").namespace_value(), None);
    /// ```
    pub fn namespace_value(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
}

/// The longest namespace accepted, in bytes (see [`ClientConfig::namespace`]).
///
/// ```
/// use actix_distributed_lock::{ClientConfig, MAX_NAMESPACE_LEN};
///
/// let config = |len| ClientConfig::new("redis://127.0.0.1/").namespace("n".repeat(len));
/// assert!(config(MAX_NAMESPACE_LEN).validate().is_ok());
/// assert!(config(MAX_NAMESPACE_LEN + 1).validate().is_err());
/// ```
pub const MAX_NAMESPACE_LEN: usize = 100;

/// The rules of a namespace: those of a lock name, at most [`MAX_NAMESPACE_LEN`] bytes, no
/// braces (a brace in the namespace would become the hash tag of every lock and put them
/// all in one cluster slot, overriding the names' own tags) and no trailing `:` (the
/// separator is added).
pub(crate) fn check_namespace(namespace: &str) -> Result<(), LockError> {
    let refuse = |why: String| Err(LockError::invalid_config(format!("namespace {why}")));
    if namespace.is_empty() {
        return refuse("is empty; leave it unset for none".into());
    }
    if namespace.len() > MAX_NAMESPACE_LEN {
        return refuse(format!(
            "is {} bytes long; the limit is {MAX_NAMESPACE_LEN}",
            namespace.len()
        ));
    }
    if let Some(pos) = namespace.chars().position(char::is_control) {
        return refuse(format!(
            "{namespace:?} has a control character at position {pos}"
        ));
    }
    if namespace.contains(['{', '}']) {
        return refuse(format!(
            "{namespace:?} has a brace: it would be the cluster hash tag of every lock; leave \
             braces to the lock names"
        ));
    }
    if namespace.ends_with(':') {
        return refuse(format!(
            "{namespace:?} ends with `:`; give it without the separator, which is added \
             (`billing` maps `order:1` to `billing:order:1`)"
        ));
    }
    Ok(())
}
