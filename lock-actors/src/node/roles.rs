//! The primary of a listed group of servers (a managed Redis with replicas and no
//! Sentinel), found by asking every server its role (`INFO replication`).

use super::manager::Failure;
use super::tls::{self, UrlRole};
use crate::config::ClientConfig;
use crate::error::LockError;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, InfoDict};
use std::time::Duration;

/// How often the roles are read when nothing failed (Redisson's `scanInterval`).
pub(crate) const SCAN_EVERY: Duration = Duration::from_secs(1);

/// The listed servers, each with its connection for role checks (opened on first use,
/// dropped after a failure).
pub(crate) struct RoleScan {
    nodes: Vec<Listed>,
    label: String,
    config: AsyncConnectionConfig,
}

struct Listed {
    client: redis::Client,
    address: String,
    conn: Option<MultiplexedConnection>,
}

/// What one server said of its role.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Role {
    master: bool,
    /// Its replication id, and the one it followed before it was promoted (`master_replid2`).
    replid: String,
    replid2: String,
    replicas: usize,
}

impl RoleScan {
    pub(super) fn new(
        nodes: &[String],
        config: &ClientConfig,
        label: &str,
    ) -> Result<Self, Failure> {
        let mut listed = Vec::with_capacity(nodes.len());
        for url in nodes.iter().filter(|n| !n.is_empty()) {
            let info = tls::connection_info(url, config, label, UrlRole::Server)?;
            let client = redis::Client::open(info)
                .map_err(|e| Failure::Lock(super::manager::config_error(label, &e)))?;
            listed.push(Listed {
                address: client.get_connection_info().addr().to_string(),
                client,
                conn: None,
            });
        }
        Ok(RoleScan {
            nodes: listed,
            label: label.to_string(),
            // A server that does not answer within a scan's interval counts as not the
            // primary this time: one dead or blackholed server must not hold up finding the
            // primary among the others.
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(config.connect_timeout.min(SCAN_EVERY)))
                .set_response_timeout(Some(config.response_timeout.min(SCAN_EVERY))),
        })
    }

    /// The primary now. `current` (the address followed so far) stays while it is a
    /// primary, unless another primary was promoted from it (its `master_replid2` is the
    /// current one's replication id: the group's own failover, which has not demoted the
    /// old primary yet). Otherwise the one primary found; of several, the one with the most
    /// replicas (then the first listed).
    pub(super) async fn primary(
        &mut self,
        current: Option<&str>,
    ) -> Result<redis::Client, Failure> {
        let config = &self.config;
        let roles =
            futures_util::future::join_all(self.nodes.iter_mut().map(|n| n.role(config))).await;
        let masters: Vec<(usize, &Role)> = roles
            .iter()
            .enumerate()
            .filter_map(|(i, role)| role.as_ref().filter(|r| r.master).map(|r| (i, r)))
            .collect();
        let current = current.and_then(|address| {
            masters
                .iter()
                .find(|(i, _)| self.nodes[*i].address == address)
                .copied()
        });
        let chosen = match current {
            Some((at, role)) => masters
                .iter()
                .find(|(i, r)| *i != at && r.replid2 == role.replid)
                .map_or(at, |(i, _)| *i),
            None => {
                if masters.len() > 1 {
                    tracing::warn!(node = %self.label, masters = masters.len(),
                        "more than one listed server says it is a primary; following the one \
                         with the most replicas");
                }
                let most = masters.iter().map(|(_, r)| r.replicas).max();
                masters
                    .iter()
                    .find(|(_, r)| Some(r.replicas) == most)
                    .map(|(i, _)| *i)
                    .ok_or_else(|| {
                        Failure::Lock(LockError::Unavailable {
                            node: self.label.clone(),
                            reason: format!(
                                "none of the {} listed servers answered as a primary",
                                self.nodes.len()
                            ),
                        })
                    })?
            }
        };
        Ok(self.nodes[chosen].client.clone())
    }
}

impl Listed {
    /// Its role, or `None` when it cannot be read now.
    async fn role(&mut self, config: &AsyncConnectionConfig) -> Option<Role> {
        if self.conn.is_none() {
            let opened = self
                .client
                .get_multiplexed_async_connection_with_config(config)
                .await;
            match opened {
                Ok(conn) => self.conn = Some(conn),
                Err(error) => {
                    tracing::debug!(server = %self.address, kind = ?error.kind(),
                        "cannot reach a listed server to read its role");
                    return None;
                }
            }
        }
        let conn = self.conn.as_mut()?;
        let reply: redis::RedisResult<InfoDict> = redis::cmd("INFO")
            .arg("replication")
            .query_async(conn)
            .await;
        match reply {
            Ok(info) => Some(Role::of(&info)),
            Err(error) => {
                tracing::debug!(server = %self.address, kind = ?error.kind(),
                    "cannot read a listed server's role");
                self.conn = None;
                None
            }
        }
    }
}

impl Role {
    fn of(info: &InfoDict) -> Role {
        let text = |key: &str| info.get::<String>(key).unwrap_or_default();
        Role {
            master: text("role") == "master",
            replid: text("master_replid"),
            replid2: text("master_replid2"),
            replicas: info.get("connected_slaves").unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_role_off_info_replication() {
        let info: InfoDict = redis::from_redis_value(redis::Value::BulkString(
            b"# Replication\r\nrole:master\r\nconnected_slaves:2\r\nmaster_replid:abc\r\n\
              master_replid2:0000000000000000000000000000000000000000\r\n"
                .to_vec(),
        ))
        .unwrap();
        let role = Role::of(&info);
        assert!(role.master);
        assert_eq!(role.replicas, 2);
        assert_eq!(role.replid, "abc");
        let replica: InfoDict = redis::from_redis_value(redis::Value::BulkString(
            b"role:slave\r\nmaster_host:127.0.0.1\r\n".to_vec(),
        ))
        .unwrap();
        assert!(!Role::of(&replica).master);
    }
}
