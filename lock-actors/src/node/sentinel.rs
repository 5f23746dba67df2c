//! The sentinels that name a followed primary (see [`super::followed`]).

use super::manager::{config_error, Failure};
use super::tls::{self, UrlRole};
use crate::config::{ClientConfig, Deployment};
use crate::error::LockError;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};

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
