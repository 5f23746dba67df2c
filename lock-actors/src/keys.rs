//! Lock names and the Redis keys and channels derived from them (Redisson's layout), and
//! the client's key namespace that maps a name before any key is derived from it.
//!
//! This is the only place that builds a key or channel name from a lock name.

use crate::config::check_namespace;
use crate::error::LockError;
use std::fmt::Write as _;
use std::sync::Arc;

/// A validated lock name: non-empty, at most the configured length, no control characters,
/// possibly mapped into a namespace (see [`ClientConfig::namespace`]).
///
/// The mapped name is the Redis key of the lock's hash, as in Redisson (its `getRawName()`);
/// every derived key and channel keeps Redisson's layout around the mapped name. The name
/// as the caller gave it stays available (Redisson's `getName()`). Without a namespace the
/// two are the same. Braces are kept as written: they are Redis Cluster hash tags.
///
/// [`ClientConfig::namespace`]: crate::ClientConfig::namespace
///
/// # Example
///
/// ```
/// use actix_distributed_lock::LockName;
///
/// let name = LockName::new("order:42", 4096).unwrap();
/// assert_eq!(name.as_str(), "order:42");
/// assert_eq!(name.unlock_channel(), "redisson_lock__channel:{order:42}");
/// assert!(LockName::new("", 4096).is_err());
/// assert!(LockName::new("a\nb", 4096).is_err());
///
/// let mapped = LockName::namespaced("billing", "order:42", 4096).unwrap();
/// assert_eq!(mapped.as_str(), "billing:order:42");
/// assert_eq!(mapped.unmapped(), "order:42");
/// assert_eq!(mapped.unlock_channel(), "redisson_lock__channel:{billing:order:42}");
/// ```
#[derive(Clone)]
pub struct LockName(
    /// The mapped name (the key) followed by one ASCII byte: the length of the namespace
    /// prefix (`billing:`, 0 without a namespace), at most 127 so the string stays UTF-8.
    /// One allocation and 16 bytes per name, as before namespaces existed: a name is kept
    /// in every watched hold, and the watchdog's memory per held lock is budgeted.
    Arc<str>,
);

impl LockName {
    /// Checks `name` and wraps it; `max_len` is in bytes.
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// assert!(LockName::new("x".repeat(65).as_str(), 64).is_err());
    /// ```
    pub fn new(name: &str, max_len: usize) -> Result<Self, LockError> {
        check_name(name, max_len)?;
        Ok(Self::build(None, name))
    }

    /// Checks `name` and maps it into `namespace`: the key is `namespace:name`, as a
    /// Redisson client whose `NameMapper` maps `name` to `"billing:" + name` writes it.
    /// `max_len` bounds the name without the namespace. A bad namespace (empty, longer
    /// than [`MAX_NAMESPACE_LEN`](crate::MAX_NAMESPACE_LEN), control characters, braces, a
    /// trailing `:`) is [`LockError::InvalidConfig`].
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// let n = LockName::namespaced("billing", "{order}:7", 64).unwrap();
    /// assert_eq!(n.as_str(), "billing:{order}:7");
    /// assert_eq!(n.fair_queue_key(), "redisson_lock_queue:billing:{order}:7");
    /// assert_eq!(n.namespace(), Some("billing"));
    /// assert!(LockName::namespaced("", "a", 64).is_err());
    /// ```
    pub fn namespaced(namespace: &str, name: &str, max_len: usize) -> Result<Self, LockError> {
        check_namespace(namespace)?;
        check_name(name, max_len)?;
        Ok(Self::build(Some(namespace), name))
    }

    fn build(namespace: Option<&str>, name: &str) -> Self {
        let prefix = namespace.map_or(0, |ns| ns.len() + 1);
        // check_namespace bounds the prefix well below 128: it fits one ASCII byte.
        let marker = char::from(u8::try_from(prefix).unwrap_or(0) & 0x7f);
        let mut stored = String::with_capacity(prefix + name.len() + 1);
        if let Some(ns) = namespace {
            stored.push_str(ns);
            stored.push(':');
        }
        stored.push_str(name);
        stored.push(marker);
        LockName(Arc::from(stored))
    }

    /// The mapped name: the key of the lock's hash, and what every derived key and channel
    /// is built around (Redisson's `getRawName()`). Without a namespace, the name as given.
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// assert_eq!(LockName::new("a", 8).unwrap().as_str(), "a");
    /// assert_eq!(LockName::namespaced("ns", "a", 8).unwrap().as_str(), "ns:a");
    /// ```
    pub fn as_str(&self) -> &str {
        // The marker is one ASCII byte, so this is a char boundary.
        &self.0[..self.0.len() - 1]
    }

    /// The name as the caller gave it, without the namespace (Redisson's `getName()`).
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// assert_eq!(LockName::namespaced("ns", "a", 8).unwrap().unmapped(), "a");
    /// assert_eq!(LockName::new("a", 8).unwrap().unmapped(), "a");
    /// ```
    pub fn unmapped(&self) -> &str {
        &self.as_str()[self.prefix_len()..]
    }

    /// The namespace the name was mapped into, if any.
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// assert_eq!(LockName::new("a", 8).unwrap().namespace(), None);
    /// ```
    pub fn namespace(&self) -> Option<&str> {
        match self.prefix_len() {
            0 => None,
            len => Some(&self.as_str()[..len - 1]),
        }
    }

    fn prefix_len(&self) -> usize {
        usize::from(self.0.as_bytes()[self.0.len() - 1])
    }

    /// The channel on which unlocks of this lock are published (`0` wakes one waiter).
    ///
    /// Redisson's rule for every derived key and channel: the name goes in braces (a Redis
    /// Cluster hash tag, so it lands on the lock's slot), unless it already has braces of
    /// its own, which then stay the only hash tag.
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// assert_eq!(LockName::new("a", 64).unwrap().unlock_channel(), "redisson_lock__channel:{a}");
    /// let n = LockName::new("{tag}x", 64).unwrap();
    /// assert_eq!(n.unlock_channel(), "redisson_lock__channel:{tag}x");
    /// ```
    pub fn unlock_channel(&self) -> String {
        self.prefixed(UNLOCK_CHANNEL)
    }

    /// The counter that fencing tokens of this lock are drawn from (it never expires).
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// let n = LockName::new("ledger", 64).unwrap();
    /// assert_eq!(n.fencing_token_key(), "redisson_lock_token:{ledger}");
    /// ```
    pub fn fencing_token_key(&self) -> String {
        self.prefixed(TOKEN_KEY)
    }

    /// The channel of a read-write lock (both sides): a freeing write unlock publishes `1`
    /// here, a freeing read unlock `0`.
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// let n = LockName::new("doc", 64).unwrap();
    /// assert_eq!(n.rwlock_channel(), "redisson_rwlock:{doc}");
    /// ```
    pub fn rwlock_channel(&self) -> String {
        self.prefixed(RWLOCK_CHANNEL)
    }

    /// The prefix of one reader's per-hold timeout keys, `{name}:<owner field>:rwlock_timeout`
    /// (hold `n` of that reader expires with key `<prefix>:n`).
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// let n = LockName::new("doc", 64).unwrap();
    /// assert_eq!(n.read_timeout_prefix("u:1"), "{doc}:u:1:rwlock_timeout");
    /// ```
    pub fn read_timeout_prefix(&self, owner_field: &str) -> String {
        format!("{}:{owner_field}:rwlock_timeout", self.hash_tagged())
    }

    /// The name as a hash tag, `{name}`, or the name itself when it has braces already: the
    /// part every reader's timeout key starts with.
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// assert_eq!(LockName::new("doc", 64).unwrap().hash_tagged(), "{doc}");
    /// assert_eq!(LockName::new("{t}doc", 64).unwrap().hash_tagged(), "{t}doc");
    /// ```
    pub fn hash_tagged(&self) -> String {
        let mut tagged = String::with_capacity(self.0.len() + 1);
        self.push_hash_tagged(&mut tagged);
        tagged
    }

    /// Appends the name as a hash tag (see [`hash_tagged`](Self::hash_tagged)) to `out`.
    fn push_hash_tagged(&self, out: &mut String) {
        // Writing to a String cannot fail.
        let _ = self.write_hash_tagged(out);
    }

    /// Writes the name as a hash tag: as it is when it carries braces of its own, else in
    /// braces.
    fn write_hash_tagged(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
        let key = self.as_str();
        match key.contains('{') {
            true => out.write_str(key),
            false => write!(out, "{{{key}}}"),
        }
    }

    /// The fair lock's queue of waiting owners (a list, oldest first).
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// let n = LockName::new("q", 64).unwrap();
    /// assert_eq!(n.fair_queue_key(), "redisson_lock_queue:{q}");
    /// ```
    pub fn fair_queue_key(&self) -> String {
        self.prefixed("redisson_lock_queue")
    }

    /// The fair lock's waiter deadlines (a sorted set: owner → time in ms it ages out).
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// let n = LockName::new("q", 64).unwrap();
    /// assert_eq!(n.fair_timeout_key(), "redisson_lock_timeout:{q}");
    /// ```
    pub fn fair_timeout_key(&self) -> String {
        self.prefixed("redisson_lock_timeout")
    }

    /// The channel on which one fair lock waiter, `owner_field`, is told it is next.
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// let n = LockName::new("q", 64).unwrap();
    /// assert_eq!(n.fair_waiter_channel("u:1"), "redisson_lock__channel:{q}:u:1");
    /// ```
    pub fn fair_waiter_channel(&self, owner_field: &str) -> String {
        format!("{}:{owner_field}", self.unlock_channel())
    }

    /// Whether every key and channel of this lock hashes to the name's own Redis Cluster
    /// slot. Only a name with unbalanced or empty braces (`a{b`, `x{}y`) fails: its hash
    /// tag would differ between the lock's key and the keys derived from it.
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// assert!(LockName::new("order:42", 64).unwrap().shares_one_slot());
    /// assert!(LockName::new("order:{42}:pay", 64).unwrap().shares_one_slot());
    /// assert!(!LockName::new("x{}y", 64).unwrap().shares_one_slot());
    /// ```
    pub fn shares_one_slot(&self) -> bool {
        use redis::cluster_routing::Slot;
        let slot = Slot::for_key(self.as_str());
        [
            self.unlock_channel(),
            self.fair_queue_key(),
            self.read_timeout_prefix("u:1"),
        ]
        .iter()
        .all(|derived| Slot::for_key(derived) == slot)
    }

    /// The channel of the count-down latch of this name,
    /// `redisson_countdownlatch__channel__{name}`: `0` is published on it when the count
    /// reaches zero, `1` when a count is set.
    ///
    /// Unlike every other derived name, Redisson wraps the whole name in braces here, even a
    /// name with braces of its own: see [`latch_shares_one_slot`](Self::latch_shares_one_slot).
    pub(crate) fn latch_channel(&self) -> String {
        format!("redisson_countdownlatch__channel__{{{}}}", self.as_str())
    }

    /// Whether a count-down latch of this name has its key and its channel on one Redis
    /// Cluster slot; in practice, when the name has no brace (the channel's hash tag is the
    /// whole name, while a key with braces hashes by the part its own braces hold).
    pub(crate) fn latch_shares_one_slot(&self) -> bool {
        use redis::cluster_routing::Slot;
        Slot::for_key(self.as_str()) == Slot::for_key(self.latch_channel())
    }

    /// `prefix:` then the name as a hash tag (Redisson's `prefixName`).
    /// `<prefix>:{name}` (see [`push_hash_tagged`](Self::push_hash_tagged)) as text to
    /// write where it goes (a command's buffer), without a `String` of its own.
    pub(crate) fn prefixed_text(&self, prefix: &'static str) -> Prefixed<'_> {
        Prefixed {
            prefix,
            name: self,
            suffix: "",
        }
    }

    /// The fast lock's mark that someone waits for it, `redisson_lock__channel:{name}:waiting`
    /// (a busy try sets it for as long as the holder's key lives; the unlock that finds it
    /// wakes the waiters and deletes it). Named under the channel's prefix, so a user's ACL
    /// rules for the channel key cover it.
    ///
    /// ```
    /// # use actix_distributed_lock::LockName;
    /// let n = LockName::new("job", 64).unwrap();
    /// assert_eq!(n.fast_waiting_key(), "redisson_lock__channel:{job}:waiting");
    /// ```
    pub fn fast_waiting_key(&self) -> String {
        self.fast_waiting_text().to_string()
    }

    /// [`fast_waiting_key`](Self::fast_waiting_key) as text to write where it goes.
    pub(crate) fn fast_waiting_text(&self) -> Prefixed<'_> {
        Prefixed {
            prefix: UNLOCK_CHANNEL,
            name: self,
            suffix: ":waiting",
        }
    }

    fn prefixed(&self, prefix: &'static str) -> String {
        let mut key = String::with_capacity(prefix.len() + self.0.len() + 2);
        // Writing to a String cannot fail.
        let _ = write!(key, "{}", self.prefixed_text(prefix));
        key
    }
}

/// The prefix of a lock's unlock channel (`<prefix>:{name}`).
pub(crate) const UNLOCK_CHANNEL: &str = "redisson_lock__channel";
/// The prefix of a read-write lock's channel.
pub(crate) const RWLOCK_CHANNEL: &str = "redisson_rwlock";
/// The prefix of a lock's fencing token counter.
pub(crate) const TOKEN_KEY: &str = "redisson_lock_token";

/// `<prefix>:{name}<suffix>`, written where it is shown (see [`LockName::prefixed_text`]).
pub(crate) struct Prefixed<'a> {
    prefix: &'static str,
    name: &'a LockName,
    suffix: &'static str,
}

impl std::fmt::Display for Prefixed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:", self.prefix)?;
        self.name.write_hash_tagged(f)?;
        f.write_str(self.suffix)
    }
}

/// Shows the name as the caller gave it (without the namespace): what errors and tracing
/// events call the lock.
impl std::fmt::Display for LockName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.unmapped())
    }
}

impl std::fmt::Debug for LockName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.namespace() {
            None => write!(f, "LockName({:?})", self.as_str()),
            Some(ns) => write!(f, "LockName({:?} in namespace {ns:?})", self.unmapped()),
        }
    }
}

/// Two names are one lock when they are one key.
impl PartialEq for LockName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for LockName {}

impl std::hash::Hash for LockName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

fn check_name(name: &str, max_len: usize) -> Result<(), LockError> {
    if name.is_empty() {
        return Err(LockError::InvalidName {
            reason: "the name is empty".into(),
        });
    }
    if name.len() > max_len {
        return Err(LockError::InvalidName {
            reason: format!(
                "`{}` is {} bytes long; the limit is {max_len} (see ClientConfig::max_name_len)",
                preview(name),
                name.len()
            ),
        });
    }
    if let Some(pos) = name.chars().position(char::is_control) {
        return Err(LockError::InvalidName {
            reason: format!(
                "`{}` has a control character at position {pos}",
                preview(name)
            ),
        });
    }
    Ok(())
}

/// The start of a refused name, escaped, for an error message that must stay short.
fn preview(name: &str) -> String {
    const SHOWN: usize = 64;
    let mut shown: String = name
        .chars()
        .take(SHOWN)
        .flat_map(char::escape_debug)
        .collect();
    if name.chars().nth(SHOWN).is_some() {
        shown.push('…');
    }
    shown
}

/// The message published on an unlock channel when a lock is freed (wakes one waiter).
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// The message published when a write lock is freed or turns into a read lock (wakes every
/// waiter: they may all be readers).
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

/// Bytes an [`OwnerField`] holds on the stack: a client id of a UUID (36), `:`, an owner id
/// (at most 20 digits) and a kind's suffix (`:write`) fit with room to spare.
const FIELD_INLINE: usize = 80;

/// An owner's field, `<client id>:<owner id>` and a kind's suffix (see
/// `KindRules::field_suffix`), written on the stack when it fits: the fast path makes one on
/// every acquire and unlock, and copies it into the command it sends.
pub(crate) enum OwnerField {
    Inline {
        bytes: [u8; FIELD_INLINE],
        len: u8,
    },
    /// A client id longer than a UUID.
    Heap(String),
}

impl OwnerField {
    pub(crate) fn new(client_id: &str, owner: u64, suffix: &str) -> Self {
        let fits = client_id.len() + suffix.len() + 21 <= FIELD_INLINE;
        if !fits {
            return OwnerField::Heap(format!("{client_id}:{owner}{suffix}"));
        }
        let mut text = InlineText {
            bytes: [0; FIELD_INLINE],
            len: 0,
        };
        // Fits: the length was checked above (a u64 has at most 20 digits).
        let _ = write!(text, "{client_id}:{owner}{suffix}");
        OwnerField::Inline {
            bytes: text.bytes,
            len: text.len as u8,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Written from `str`s only.
            OwnerField::Inline { bytes, len } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            OwnerField::Heap(text) => text,
        }
    }
}

/// A fixed buffer `OwnerField::new` writes into.
struct InlineText {
    bytes: [u8; FIELD_INLINE],
    len: usize,
}

impl std::fmt::Write for InlineText {
    fn write_str(&mut self, part: &str) -> std::fmt::Result {
        let end = self.len + part.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(part.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::OwnerField;

    #[test]
    fn an_owner_field_reads_as_the_formatted_field_inline_or_not() {
        let uuid = "0b5c1f0e-8a53-4b9e-9a55-0e0f2b7c9d11";
        let field = OwnerField::new(uuid, u64::MAX, ":write");
        assert!(matches!(field, OwnerField::Inline { .. }));
        assert_eq!(field.as_str(), format!("{uuid}:{}:write", u64::MAX));
        let long = "x".repeat(70);
        let field = OwnerField::new(&long, 7, "");
        assert!(matches!(field, OwnerField::Heap(_)));
        assert_eq!(field.as_str(), format!("{long}:7"));
    }

    #[test]
    fn prefixed_text_reads_as_the_prefixed_key() {
        for name in ["a", "{tag}x", "x{tag}"] {
            let name = super::LockName::new(name, 64).unwrap();
            let text = name.prefixed_text(super::UNLOCK_CHANNEL).to_string();
            assert_eq!(text, name.unlock_channel());
        }
    }
}
