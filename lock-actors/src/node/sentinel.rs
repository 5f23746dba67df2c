//! The primary that Sentinel names: its connection, found again after a failover.

use super::manager::{config_error, manager, Failure};
use super::tls::{self, UrlRole};
use crate::config::{ClientConfig, Deployment};
use crate::error::LockError;
use redis::aio::ConnectionManager;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::RedisResult;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A connection to the primary that the sentinels name. A request that fails in a way a
/// failover explains (no connection, no answer, `READONLY` from a demoted primary) makes
/// the next one ask the sentinels again; requests are never retried here, since a lock
/// script that may have run must be reconciled by its caller, not sent twice.
///
/// The connection is replaced only when the sentinels name another server. A request that
/// got no answer may still be on its way to the server it was sent to; the caller's
/// reconcile must not overtake it there. On the same connection it cannot (one connection's
/// commands run in order); on a second connection to the same server it could, and would
/// then settle against a state the late request changes afterwards. On another server the
/// late request can only touch the demoted primary's data, which the new primary does not
/// share.
pub(crate) struct SentinelPrimary {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// The generation (bumped at each switch), the primary's address, its connection.
    current: Mutex<(u64, String, ConnectionManager)>,
    config: ClientConfig,
    label: String,
    /// When the sentinels were last asked again: at most once per interval.
    last_asked: Mutex<Option<Instant>>,
}

/// How often a failing sentinel-followed connection may ask the sentinels again.
const REDISCOVER_EVERY: Duration = Duration::from_millis(100);

impl SentinelPrimary {
    pub(super) async fn open(config: &ClientConfig, label: &str) -> Result<Self, Failure> {
        let mut sentinels = sentinel_client(config, label)?;
        let client = sentinels.async_get_client().await?;
        let address = client.get_connection_info().addr().to_string();
        let conn = manager(client, config, Some(config.response_timeout)).await?;
        Ok(SentinelPrimary {
            sentinels: tokio::sync::Mutex::new(sentinels),
            current: Mutex::new((0, address, conn)),
            config: config.clone(),
            label: label.to_string(),
            last_asked: Mutex::new(None),
        })
    }

    pub(super) fn current(&self) -> (u64, ConnectionManager) {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        (current.0, current.2.clone())
    }

    /// Passes `reply` on; when it is a failure a failover explains, first asks the
    /// sentinels for the primary and switches to it (once, however many requests failed).
    pub(super) async fn check<T>(&self, generation: u64, reply: RedisResult<T>) -> RedisResult<T> {
        let Err(err) = &reply else {
            return reply;
        };
        let failover_sign = err.is_io_error()
            || err.is_connection_refusal()
            || err.is_connection_dropped()
            || err.is_timeout()
            || err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
        if failover_sign {
            self.rediscover(generation).await;
        }
        reply
    }

    fn is_current(&self, address: &str) -> bool {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current.1 == address
    }

    async fn rediscover(&self, failed_generation: u64) {
        // Someone else is already asking: their answer serves this request too.
        let Ok(mut sentinels) = self.sentinels.try_lock() else {
            return;
        };
        if self.current().0 != failed_generation {
            return;
        }
        {
            let mut last = self.last_asked.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < REDISCOVER_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let found = async {
            let client = sentinels.async_get_client().await?;
            let address = client.get_connection_info().addr().to_string();
            if self.is_current(&address) {
                // Still the same server: keep the connection (see the type's doc); it
                // reconnects by itself if the server closed it.
                return Ok(None);
            }
            let timeout = Some(self.config.response_timeout);
            Ok::<_, Failure>(Some((
                address,
                manager(client, &self.config, timeout).await?,
            )))
        };
        match tokio::time::timeout(self.config.connect_timeout, found).await {
            Ok(Ok(None)) => {
                tracing::debug!(node = %self.label,
                    "the sentinels still name the same primary; its connection stays")
            }
            Ok(Ok(Some((address, conn)))) => {
                tracing::info!(node = %self.label, primary = %address,
                    "connected to the primary the sentinels name");
                crate::telemetry::reconnected(crate::telemetry::Connection::Primary);
                let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
                *current = (current.0 + 1, address, conn);
            }
            Ok(Err(failure)) => {
                tracing::warn!(node = %self.label, error = %failure.describe(),
                    "the sentinels named no reachable primary yet")
            }
            Err(_) => tracing::warn!(node = %self.label, "asking the sentinels timed out"),
        }
    }
}

pub(super) fn sentinel_client(
    config: &ClientConfig,
    label: &str,
) -> Result<SentinelClient, Failure> {
    let Deployment::Sentinel { sentinels, service } = config.deployment() else {
        return Err(Failure::Lock(LockError::invalid_config(
            "not a sentinel deployment",
        )));
    };
    let data_nodes = match config.url() {
        "" => None,
        url => Some(tls::connection_info(
            url,
            config,
            label,
            UrlRole::SentinelDataNodes,
        )?),
    };
    let sentinel_infos = sentinels
        .iter()
        .filter(|s| !s.is_empty())
        .map(|url| tls::connection_info(url, config, label, UrlRole::Server))
        .collect::<Result<Vec<_>, _>>()?;
    #[cfg(feature = "tls")]
    {
        let is_tls = |info: &redis::ConnectionInfo| {
            matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
        };
        if sentinel_infos.iter().any(is_tls) || data_nodes.as_ref().is_some_and(is_tls) {
            return tls::sentinel_client(&sentinel_infos, data_nodes.as_ref(), service, config)
                .map_err(|e| Failure::Lock(config_error(label, &e)));
        }
    }
    let mut node_info = SentinelNodeConnectionInfo::default();
    if let Some(info) = &data_nodes {
        node_info = node_info.set_redis_connection_info(info.redis_settings().clone());
    }
    SentinelClient::build(
        sentinel_infos,
        service.clone(),
        Some(node_info),
        SentinelServerType::Master,
    )
    .map_err(|e| Failure::Lock(config_error(label, &e)))
}
