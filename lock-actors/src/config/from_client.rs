//! A [`ClientConfig`] from a `redis::Client` the application already built: the client's
//! address, TLS settings (its certificates included), user, password and database are
//! used as they are, so nothing is configured twice.

use super::ClientConfig;
use redis::{ConnectionAddr, ConnectionInfo};

impl ClientConfig {
    /// Settings for the one server `client` connects to, with the library's defaults for
    /// everything else: the connections the lock client opens use `client`'s connection
    /// settings as they are (address, `rediss://` with the certificates it was built with,
    /// user, password, database), so an application configures Redis once.
    ///
    /// [`url`](ClientConfig::url) is then the address without the password, for logs. The
    /// library opens its own two connections from these settings (one for commands, one for
    /// subscriptions), whatever `client` has open; see `docs/production.md` for why no pool
    /// is needed. For a cluster or a Sentinel-followed primary, use
    /// [`cluster`](ClientConfig::cluster) or [`sentinel`](ClientConfig::sentinel).
    ///
    /// ```
    /// use actix_distributed_lock::{redis, ClientConfig, Deployment};
    ///
    /// let client = redis::Client::open("redis://app:secret@127.0.0.1:6379/2").unwrap();
    /// let config = ClientConfig::from_client(&client);
    /// assert_eq!(config.url(), "redis://app@127.0.0.1:6379/2"); // never the password
    /// assert_eq!(config.deployment(), &Deployment::Standalone);
    /// assert!(config.validate().is_ok());
    /// ```
    pub fn from_client(client: &redis::Client) -> Self {
        let info = client.get_connection_info().clone();
        let mut config = ClientConfig::new(address_url(&info));
        config.server = Some(info);
        config
    }
}

/// A URL naming where `info` points (scheme, user, address, database), without its
/// password: what `url()` shows and logs name for a config built from a client.
fn address_url(info: &ConnectionInfo) -> String {
    let settings = info.redis_settings();
    let user = settings
        .username()
        .map_or(String::new(), |user| format!("{user}@"));
    let db = settings.db();
    let host = |host: &str| match host.contains(':') {
        true => format!("[{host}]"),
        false => host.to_string(),
    };
    match info.addr() {
        ConnectionAddr::Tcp(h, port) => format!("redis://{user}{}:{port}/{db}", host(h)),
        ConnectionAddr::TcpTls { host: h, port, .. } => {
            format!("rediss://{user}{}:{port}/{db}", host(h))
        }
        ConnectionAddr::Unix(path) => format!("unix://{}?db={db}", path.display()),
        other => format!("redis://{user}{other}/{db}"),
    }
}

#[cfg(test)]
mod tests {
    use super::address_url;
    use redis::IntoConnectionInfo;

    fn url_of(url: &str) -> String {
        address_url(&url.into_connection_info().unwrap())
    }

    #[test]
    fn the_address_url_names_the_server_and_never_the_password() {
        assert_eq!(
            url_of("redis://127.0.0.1:6380/"),
            "redis://127.0.0.1:6380/0"
        );
        assert_eq!(
            url_of("redis://app:s3cret@10.0.0.1:6379/3"),
            "redis://app@10.0.0.1:6379/3"
        );
        assert_eq!(url_of("redis://:s3cret@h:1/"), "redis://h:1/0");
        assert_eq!(url_of("redis://[::1]:6379/"), "redis://[::1]:6379/0");
        assert_eq!(
            url_of("unix:///tmp/redis.sock?db=2"),
            "unix:///tmp/redis.sock?db=2"
        );
    }
}
