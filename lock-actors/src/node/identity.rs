//! Which Redis server a node is, as the server itself reports it (not as its URL spells it).

use crate::config::{ClientConfig, Deployment};
use crate::node::connection::{info_per_node, Connection, Link};
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{IntoConnectionInfo, RedisResult, Value};
use std::sync::Arc;

/// The servers behind one node: the `run_id` of each (every primary of a cluster), read
/// once when the client connects, and the database the client uses.
///
/// Two clients of one server have the same `run_id` however their URLs spell the host
/// (`localhost`, `127.0.0.1`, a DNS alias). A server that restarts gets a new `run_id`;
/// a client keeps the one it read at connect, so a client connected before a restart and
/// one connected after it are not recognised as the same server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerIdentity {
    /// Sorted; empty when the server would not tell (e.g. an ACL user without `INFO`).
    run_ids: Arc<[String]>,
    db: i64,
}

impl ServerIdentity {
    /// Reads the identity of the servers `conn` reaches. Never fails: a server that refuses
    /// `INFO` leaves the identity unknown, and nodes are then told apart by URL alone.
    pub(crate) async fn read(conn: &mut Connection, config: &ClientConfig, label: &str) -> Self {
        let run_ids = match run_ids(conn).await {
            Ok(ids) => ids,
            Err(error) => {
                tracing::debug!(node = %label, kind = ?error.kind(),
                    "INFO server refused: this node is told apart from others by its URL only");
                Vec::new()
            }
        };
        let db = match config.deployment() {
            Deployment::Cluster { .. } => 0,
            _ => match &config.server {
                Some(info) => info.redis_settings().db(),
                None => config
                    .url()
                    .into_connection_info()
                    .map_or(0, |info| info.redis_settings().db()),
            },
        };
        ServerIdentity {
            run_ids: run_ids.into(),
            db,
        }
    }

    /// True when both share a server (whatever database each uses): they are not
    /// independent, whatever their URLs say.
    pub(crate) fn shares_server(&self, other: &ServerIdentity) -> bool {
        self.run_ids.iter().any(|id| other.run_ids.contains(id))
    }

    /// True when both are one keyspace: a common server and the same database.
    pub(crate) fn same_keyspace(&self, other: &ServerIdentity) -> bool {
        self.db == other.db && self.shares_server(other)
    }

    /// The `run_id`s, for messages.
    pub(crate) fn run_ids(&self) -> &[String] {
        &self.run_ids
    }
}

/// `run_id` of every server `conn` sends lock scripts to, from `INFO server`.
async fn run_ids(conn: &mut Connection) -> RedisResult<Vec<String>> {
    let mut info = redis::cmd("INFO");
    info.arg("server");
    let reply = match conn.link_mut() {
        Link::Cluster(cluster) => {
            let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
            cluster.route_command(info, all).await?
        }
        _ => conn.send(&info).await?,
    };
    let mut ids = Vec::new();
    collect_run_ids(&reply, &mut ids);
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Every `run_id` of an INFO reply (one text per node, in a map on a cluster).
fn collect_run_ids(value: &Value, ids: &mut Vec<String>) {
    ids.extend(
        info_per_node(value)
            .iter()
            .filter_map(|info| info.get::<String>("run_id"))
            .map(|id| id.trim().to_string()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(ids: &[&str], db: i64) -> ServerIdentity {
        ServerIdentity {
            run_ids: ids.iter().map(|id| id.to_string()).collect(),
            db,
        }
    }

    #[test]
    fn finds_every_nodes_run_id() {
        let reply = Value::Map(vec![
            (
                Value::SimpleString("a:1".into()),
                Value::BulkString(b"# Server\r\nrun_id:aaa\r\ntcp_port:1\r\n".to_vec()),
            ),
            (
                Value::SimpleString("b:2".into()),
                Value::VerbatimString {
                    format: redis::VerbatimFormat::Text,
                    text: "run_id:bbb\r\n".into(),
                },
            ),
        ]);
        let mut ids = Vec::new();
        collect_run_ids(&reply, &mut ids);
        assert_eq!(ids, ["aaa", "bbb"]);
    }

    #[test]
    fn a_shared_server_is_shared_whatever_the_database() {
        assert!(identity(&["a", "b"], 0).shares_server(&identity(&["b"], 3)));
        assert!(!identity(&["a"], 0).same_keyspace(&identity(&["a"], 3)));
        assert!(identity(&["a"], 3).same_keyspace(&identity(&["a"], 3)));
        assert!(
            !identity(&[], 0).shares_server(&identity(&[], 0)),
            "unknown is no match"
        );
    }
}
