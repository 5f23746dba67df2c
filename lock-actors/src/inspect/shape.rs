//! Which stored values are locks: the shapes of Redisson's and this crate's lock keys,
//! read from plain replies (no I/O here).

use super::model::{Holder, InspectedKind, Waiter};
use redis::Value;

/// Redisson's score for a permit that never expires.
const NEVER: i64 = 922_337_203_685_477;

/// Prefixes of keys that belong to a lock whose own key is elsewhere.
const COMPANION_PREFIXES: [&str; 4] = [
    "redisson_lock_token:",
    "redisson_lock_timeout:",
    "redisson_lock__channel",
    "redisson_rwlock:",
];

/// The prefix of a fair lock's queue key.
pub(super) const QUEUE_PREFIX: &str = "redisson_lock_queue:";

/// True for keys that are part of a lock stored under another key (a fencing counter, a
/// fair lock's timeouts, a read hold's timeout, a plain semaphore acquire's receipt): never
/// listed as locks of their own.
pub(super) fn is_companion(key: &str) -> bool {
    COMPANION_PREFIXES.iter().any(|p| key.starts_with(p))
        || key
            .rsplit_once(":rwlock_timeout:")
            .is_some_and(|(_, n)| n.parse::<u64>().is_ok())
        || key
            .rsplit_once(":semaphore_acquire:")
            .is_some_and(|(_, id)| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The lock name inside a derived key `prefix:{name}` (or `prefix:name` when the name
/// carries its own hash tag), as `LockName`'s derived keys are built.
pub(super) fn name_of_derived(key: &str, prefix: &str) -> Option<String> {
    let rest = key.strip_prefix(prefix)?;
    let inner = rest
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .filter(|inner| !inner.contains('{') && !inner.contains('}'));
    Some(inner.unwrap_or(rest).to_string()).filter(|name| !name.is_empty())
}

/// A lock hash's mode (`Some` for a read-write lock) and holders, or `None` when the hash
/// is not a lock: every field but `mode` must be `<client id>:<number>[:write]` with a
/// positive hold count.
pub(super) fn hash_lock(fields: &[(String, String)]) -> Option<(Option<String>, Vec<Holder>)> {
    let mut mode = None;
    let mut holders = Vec::new();
    for (field, value) in fields {
        if field == "mode" {
            if value != "read" && value != "write" {
                return None;
            }
            mode = Some(value.clone());
            continue;
        }
        let count = value.parse::<u64>().ok().filter(|c| *c > 0)?;
        let holder = Holder::from_field(field, count, None);
        holder.owner?;
        holders.push(holder);
    }
    if holders.is_empty() && mode.is_none() {
        return None;
    }
    if mode.is_none() && holders.iter().any(|h| h.write) {
        return None;
    }
    holders.sort_by(|a, b| a.field.cmp(&b.field));
    Some((mode, holders))
}

/// What a string key holds: a fast lock's holder, or a permit count.
pub(super) enum StringLock {
    Fast(Holder),
    Permits(i64),
}

/// Reads a string value as a lock, or `None`.
pub(super) fn string_lock(value: &str) -> Option<StringLock> {
    if let Ok(permits) = value.parse::<i64>() {
        return Some(StringLock::Permits(permits));
    }
    let holder = Holder::from_field(value, 1, None);
    (holder.owner.is_some() && !holder.write).then_some(StringLock::Fast(holder))
}

/// A fair queue's waiters, in order, with their deadlines from the timeout set's scores.
pub(super) fn waiters(queue: &[String], timeouts: &[(String, i64)], now_ms: i64) -> Vec<Waiter> {
    queue
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let holder = Holder::from_field(field, 1, None);
            Waiter {
                position: i + 1,
                field: field.clone(),
                client_id: holder.client_id,
                owner: holder.owner,
                deadline_ms: timeouts
                    .iter()
                    .find(|(f, _)| f == field)
                    .map(|(_, score)| score - now_ms),
            }
        })
        .collect()
}

/// An expirable semaphore's permits, as holders: the id (hex when not printable text) and
/// what is left of its lease (`None` for a permit without one).
pub(super) fn permits(entries: &[(Vec<u8>, i64)], now_ms: i64) -> Vec<Holder> {
    entries
        .iter()
        .map(|(id, expiry)| Holder {
            field: printable(id),
            client_id: None,
            owner: None,
            write: false,
            count: 1,
            ttl_ms: (*expiry < NEVER).then(|| u64::try_from(expiry - now_ms).unwrap_or(0)),
        })
        .collect()
}

/// Printable ASCII as text; anything else (Redisson's 16 random bytes) as hex, as
/// `PermitGuard::permit_id` spells it.
fn printable(bytes: &[u8]) -> String {
    if !bytes.is_empty() && bytes.iter().all(|b| b.is_ascii_graphic()) {
        String::from_utf8_lossy(bytes).into_owned()
    } else {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The kind of a lock hash that is not a read-write lock, from its companions.
pub(super) fn hash_kind(token: Option<i64>, queued: bool) -> InspectedKind {
    if queued {
        InspectedKind::Fair
    } else if token.is_some() {
        InspectedKind::Fenced
    } else {
        InspectedKind::Reentrant
    }
}

/// A `PTTL` reply as a TTL: `None` for no expiry (-1) or a reply that is no number.
pub(super) fn ttl(value: &Value) -> Option<u64> {
    match value {
        Value::Int(ms) if *ms >= 0 => Some(*ms as u64),
        _ => None,
    }
}

/// The server's clock in ms from a `TIME` reply.
pub(super) fn time_ms(value: &Value) -> Option<i64> {
    let (secs, micros): (i64, i64) = redis::from_redis_value_ref(value).ok()?;
    Some(secs * 1000 + micros / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    const ID: &str = "0c5f3d2e-8a1b-4c6d-9e0f-112233445566";

    #[test]
    fn lock_hashes_and_their_look_alikes() {
        let (mode, holders) = hash_lock(&pairs(&[(&format!("{ID}:7"), "2")])).unwrap();
        assert_eq!(mode, None);
        assert_eq!(holders[0].owner, Some(7));
        assert_eq!(holders[0].count, 2);
        let rw = pairs(&[("mode", "write"), (&format!("{ID}:7:write"), "1")]);
        assert_eq!(hash_lock(&rw).unwrap().0.as_deref(), Some("write"));
        // Look-alikes: no owner shape, a zero or non-numeric count, a bad mode, empty.
        assert!(hash_lock(&pairs(&[("name", "bob")])).is_none());
        assert!(hash_lock(&pairs(&[("a", "1")])).is_none());
        assert!(hash_lock(&pairs(&[(&format!("{ID}:7"), "0")])).is_none());
        assert!(hash_lock(&pairs(&[(&format!("{ID}:7"), "x")])).is_none());
        assert!(hash_lock(&pairs(&[("mode", "shared")])).is_none());
        assert!(hash_lock(&pairs(&[(&format!("{ID}:7:write"), "1")])).is_none());
        assert!(hash_lock(&[]).is_none());
    }

    #[test]
    fn strings_derived_keys_and_companions() {
        assert!(matches!(string_lock("12"), Some(StringLock::Permits(12))));
        assert!(matches!(
            string_lock(&format!("{ID}:3")),
            Some(StringLock::Fast(_))
        ));
        assert!(string_lock("hello").is_none());
        assert!(string_lock("a:b").is_none());
        assert_eq!(
            name_of_derived("redisson_lock_queue:{q}", QUEUE_PREFIX).as_deref(),
            Some("q")
        );
        assert_eq!(
            name_of_derived("redisson_lock_queue:{t}x", QUEUE_PREFIX).as_deref(),
            Some("{t}x")
        );
        assert!(is_companion("redisson_lock_token:{a}"));
        assert!(is_companion(&format!("{{doc}}:{ID}:1:rwlock_timeout:2")));
        assert!(!is_companion("order:42"));
        let receipt = format!("{{pool}}:semaphore_acquire:{}", "ab".repeat(16));
        assert!(is_companion(&receipt));
        assert!(!is_companion("pool:semaphore_acquire:mine"));
    }

    #[test]
    fn waiters_in_order_with_deadlines_and_permits() {
        let queue = vec![format!("{ID}:1"), format!("{ID}:2")];
        let timeouts = vec![(format!("{ID}:2"), 1_500), (format!("{ID}:1"), 1_200)];
        let found = waiters(&queue, &timeouts, 1_000);
        assert_eq!(found[0].position, 1);
        assert_eq!(found[0].deadline_ms, Some(200));
        assert_eq!(found[1].owner, Some(2));
        assert_eq!(found[1].deadline_ms, Some(500));
        let held = permits(&[(vec![0xde, 0xad], 3_000), (b"p1".to_vec(), NEVER)], 1_000);
        assert_eq!(held[0].field, "dead");
        assert_eq!(held[0].ttl_ms, Some(2_000));
        assert_eq!(held[1].field, "p1");
        assert_eq!(held[1].ttl_ms, None);
    }
}
