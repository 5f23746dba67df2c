//! How many replicas each primary behind a node has: what the default replica sync waits
//! for. Read when the client connects and again every [`REFRESH`] (a failover, a replica
//! added or gone), never on an acquire: a primary without replicas costs nothing more.

use crate::node::connection::{info_per_node, Connection, Link};
use arc_swap::ArcSwap;
use redis::{RedisResult, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the counts are read again.
pub(crate) const REFRESH: Duration = Duration::from_secs(1);

/// The replica counts of one node's primaries, as last read.
#[derive(Debug, Default)]
pub(crate) struct ReplicaCounts {
    /// One server or the Sentinels' primary: its `connected_slaves`.
    primary: AtomicUsize,
    /// A cluster: the replicas listed for each slot range's primary.
    slots: ArcSwap<Vec<SlotReplicas>>,
}

/// The replicas of the primary serving slots `first..=last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SlotReplicas {
    first: u16,
    last: u16,
    replicas: usize,
}

impl ReplicaCounts {
    /// The replicas of the primary that serves `key`, on a node reached by `link`.
    pub(crate) fn for_key(&self, link: &Link, key: &str) -> usize {
        match link {
            Link::Cluster(_) => {
                let slot = key_slot(key.as_bytes());
                self.slots
                    .load()
                    .iter()
                    .find(|range| (range.first..=range.last).contains(&slot))
                    .map_or(0, |range| range.replicas)
            }
            _ => self.primary.load(Ordering::Relaxed),
        }
    }

    /// Reads the counts again through `conn`. On an error the last counts stay.
    pub(crate) async fn refresh(&self, conn: &mut Connection) -> RedisResult<()> {
        if matches!(conn.link(), Link::Cluster(_)) {
            let mut slots = redis::cmd("CLUSTER");
            slots.arg("SLOTS");
            let reply = conn.send(&slots).await?;
            let ranges = slot_replicas(&reply);
            self.slots.store(Arc::new(ranges));
        } else {
            let mut info = redis::cmd("INFO");
            info.arg("replication");
            let reply = conn.send(&info).await?;
            let connected = info_per_node(&reply)
                .first()
                .and_then(|info| info.get::<usize>("connected_slaves"))
                .unwrap_or(0);
            self.primary.store(connected, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// The cluster slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key without
/// one, modulo 16384 (the cluster specification's rule).
fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) % 16384
}

/// The replica count of each slot range in a `CLUSTER SLOTS` reply: each entry is the
/// range's first and last slot, its primary, then one entry per replica.
fn slot_replicas(reply: &Value) -> Vec<SlotReplicas> {
    let Value::Array(entries) = reply else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let Value::Array(items) = entry else {
                return None;
            };
            let slot = |i: usize| match items.get(i) {
                Some(Value::Int(n)) => u16::try_from(*n).ok(),
                _ => None,
            };
            Some(SlotReplicas {
                first: slot(0)?,
                last: slot(1)?,
                replicas: items.len().saturating_sub(3),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(b"127.0.0.1".to_vec()),
            Value::Int(port),
        ])
    }

    #[test]
    fn counts_the_replicas_listed_for_each_slot_range() {
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(0), Value::Int(5460), node(1), node(4)]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                node(2),
                node(5),
                node(6),
            ]),
            Value::Array(vec![Value::Int(10923), Value::Int(16383), node(3)]),
            Value::Nil,
        ]);
        let ranges = slot_replicas(&reply);
        let counts: Vec<usize> = ranges.iter().map(|r| r.replicas).collect();
        assert_eq!(counts, [1, 2, 0]);
        assert_eq!((ranges[1].first, ranges[1].last), (5461, 10922));
        assert!(slot_replicas(&Value::Nil).is_empty());
    }

    #[test]
    fn finds_the_slot_the_cluster_finds() {
        use redis::cluster_routing::Slot;
        for key in [
            "a",
            "order:42",
            "{user1}:x",
            "x{}y",
            "{a}{b}",
            "lock:{tag}",
            "{",
        ] {
            let ours = Slot::new(key_slot(key.as_bytes())).unwrap();
            assert_eq!(ours, Slot::for_key(key), "{key}");
        }
    }
}
