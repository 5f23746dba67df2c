//! What every connection of a node is built from: the reconnecting connection to one
//! server, and how a connection step fails.

use super::tls;
use crate::config::ClientConfig;
use crate::error::LockError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::time::Duration;

/// A connection step's failure: a Redis error (mapped with the node label later) or one
/// of ours.
pub(crate) enum Failure {
    Redis(redis::RedisError),
    Lock(LockError),
}

impl From<redis::RedisError> for Failure {
    fn from(e: redis::RedisError) -> Self {
        Failure::Redis(e)
    }
}

impl From<LockError> for Failure {
    fn from(e: LockError) -> Self {
        Failure::Lock(e)
    }
}

impl Failure {
    pub(super) fn describe(&self) -> String {
        match self {
            Failure::Redis(e) => format!("{:?}", e.kind()),
            Failure::Lock(e) => e.to_string(),
        }
    }
}

/// A configuration error about the node `label`, naming only the redacted label.
pub(super) fn config_error(label: &str, e: &redis::RedisError) -> LockError {
    tls::url_error(label, e)
}

/// A reconnecting connection to one server, bounded by the connect timeout and, if given,
/// `response_timeout`.
pub(super) async fn manager(
    client: redis::Client,
    config: &ClientConfig,
    response_timeout: Option<Duration>,
) -> Result<ConnectionManager, Failure> {
    let manager_config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(response_timeout)
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(200));
    Ok(ConnectionManager::new_with_config(client, manager_config).await?)
}
