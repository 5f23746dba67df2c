//! Reading a node's keyspace server by server: the servers whose keys a `SCAN` must visit
//! (the one server, the primary Sentinel names, or every primary of a cluster), each with
//! `SCAN` and pipelines sent to that server alone. Used by the lock inspector.

use crate::error::LockError;
use crate::node::connection::{Connection, Link};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Pipeline, Value};

/// One server of a node whose keys are read together: its `SCAN` cursor and pipelines
/// stay on it.
#[derive(Clone)]
pub(crate) struct Shard {
    conn: Connection,
    /// The cluster primary's address; `None` for a single server or Sentinel's primary.
    address: Option<(String, u16)>,
    label: String,
}

impl super::Commands {
    /// The servers holding this node's keys: one, or every primary of a cluster (from
    /// `CLUSTER SLOTS`, as the cluster reports their addresses).
    pub(crate) async fn shards(&self) -> Result<Vec<Shard>, LockError> {
        let Link::Cluster(conn) = self.conn.link() else {
            return Ok(vec![Shard {
                conn: self.conn.clone(),
                address: None,
                label: self.label().to_string(),
            }]);
        };
        let mut conn = conn.clone();
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary);
        let slots = conn
            .route_command(redis::cmd("CLUSTER").arg("SLOTS").clone(), routing)
            .await
            .map_err(|e| crate::denied::from_redis(&e, "", self.label()))?;
        let mut primaries = primaries_of(&slots);
        primaries.sort();
        primaries.dedup();
        Ok(primaries
            .into_iter()
            .map(|(host, port)| Shard {
                conn: self.conn.clone(),
                label: format!("{host}:{port}"),
                address: Some((host, port)),
            })
            .collect())
    }
}

impl Shard {
    /// Sends `pipe` to this server and returns one reply per command; a command's error
    /// reply stays in its place (as [`Value::ServerError`]), a failed connection is an error.
    pub(crate) async fn pipeline(&mut self, pipe: &Pipeline) -> Result<Vec<Value>, LockError> {
        let count = pipe.len();
        let replies = match (self.conn.link_mut(), &self.address) {
            (Link::Cluster(conn), Some((host, port))) => {
                let route = SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                };
                conn.route_pipeline(pipe.clone(), 0, count, route).await
            }
            _ => {
                redis::aio::ConnectionLike::req_packed_commands(&mut self.conn, pipe, 0, count)
                    .await
            }
        };
        replies.map_err(|e| crate::denied::from_redis(&e, "", &self.label))
    }

    /// One `SCAN cursor MATCH pattern COUNT count` step: the next cursor (0 when done) and
    /// the keys, as raw bytes (keys need not be UTF-8).
    pub(crate) async fn scan(
        &mut self,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> Result<(u64, Vec<Vec<u8>>), LockError> {
        let mut pipe = redis::pipe();
        pipe.cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        let reply = self.pipeline(&pipe).await?;
        let step = reply
            .into_iter()
            .next()
            .ok_or_else(|| self.unexpected("no reply to SCAN"))?;
        let step = step
            .extract_error()
            .map_err(|e| crate::denied::from_redis(&e, "", &self.label))?;
        redis::from_redis_value::<(u64, Vec<Vec<u8>>)>(step)
            .map_err(|e| self.unexpected(&format!("SCAN replied {e}")))
    }

    fn unexpected(&self, what: &str) -> LockError {
        LockError::Unavailable {
            node: self.label.clone(),
            reason: what.to_string(),
        }
    }
}

/// The `(host, port)` of the primary of every slot range in a `CLUSTER SLOTS` reply.
fn primaries_of(slots: &Value) -> Vec<(String, u16)> {
    let Value::Array(ranges) = slots else {
        return Vec::new();
    };
    ranges
        .iter()
        .filter_map(|range| match range {
            Value::Array(parts) => match parts.get(2) {
                Some(Value::Array(primary)) => {
                    let host = primary.first().and_then(text)?;
                    let port = match primary.get(1)? {
                        Value::Int(port) => u16::try_from(*port).ok()?,
                        _ => return None,
                    };
                    Some((host, port))
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_primary_of_every_slot_range() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let slots = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
                node("10.0.0.4", 7003),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                node("10.0.0.2", 7001),
            ]),
        ]);
        assert_eq!(
            primaries_of(&slots),
            vec![
                ("10.0.0.1".to_string(), 7000),
                ("10.0.0.2".to_string(), 7001)
            ]
        );
        assert!(primaries_of(&Value::Nil).is_empty());
    }
}
