//! Every lock kind by the name the tests (and the attribute's `kind =`) give it.

use actix_distributed_lock::{Lock, LockClient};

/// The lock kinds a hold can be taken as.
pub const KINDS: [&str; 7] = [
    "reentrant",
    "fenced",
    "fast",
    "fair",
    "spin",
    "read",
    "write",
];

/// `client`'s handle of lock `name` as `kind` (one of [`KINDS`]).
pub fn lock_of_kind(client: &LockClient, kind: &str, name: &str) -> Lock {
    match kind {
        "reentrant" => client.lock(name),
        "fenced" => client.fenced_lock(name),
        "fast" => client.fast_lock(name),
        "fair" => client.fair_lock(name),
        "spin" => client.spin_lock(name),
        "read" => client.read_write_lock(name).map(|rw| rw.read().clone()),
        "write" => client.read_write_lock(name).map(|rw| rw.write().clone()),
        other => panic!("no kind {other}"),
    }
    .unwrap()
}
