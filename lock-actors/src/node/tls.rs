//! TLS on the wire (`rediss://`, behind the `tls` feature): how a client's TLS settings
//! (`config::tls`) go onto every connection it opens (command, subscription, cluster,
//! Sentinel).
//!
//! rustls does the TLS, with the `ring` crypto provider: the first connection installs it as
//! the process default unless the application installed one (then that one is used), so no
//! set-up is asked of the user and nothing panics when two providers are compiled in.

use crate::config::ClientConfig;
use crate::error::LockError;
use redis::{ConnectionInfo, IntoConnectionInfo};

/// Where a URL is used, for the check that TLS settings have a `rediss://` URL to go on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum UrlRole {
    /// A server, seed node or sentinel: TLS settings need it to be `rediss://`.
    Server,
    /// A Sentinel deployment's data-node URL (credentials and database): may be plain
    /// while the sentinels use TLS.
    SentinelDataNodes,
}

/// Parses `url` (named `label` in errors: the URL itself may hold a password) and puts
/// `config`'s TLS settings on it.
pub(crate) fn connection_info(
    url: &str,
    config: &ClientConfig,
    label: &str,
    role: UrlRole,
) -> Result<ConnectionInfo, LockError> {
    #[cfg(not(feature = "tls"))]
    if is_tls_url(url) {
        return Err(LockError::invalid_config(format!(
            "{label} is a TLS URL (rediss://), which needs the `tls` feature of \
             actix-distributed-lock"
        )));
    }
    let info = url
        .into_connection_info()
        .map_err(|e| url_error(label, &e))?;
    #[cfg(feature = "tls")]
    let info = with_tls(info, config, label, role)?;
    #[cfg(not(feature = "tls"))]
    let _ = (config, role);
    Ok(info)
}

/// The one server's connection settings (a standalone deployment, or a Sentinel's data
/// nodes): those of the application's `redis::Client` when the config was built from one
/// (with the config's TLS settings put on them, if any), else parsed from its URL.
pub(crate) fn server_info(
    config: &ClientConfig,
    label: &str,
    role: UrlRole,
) -> Result<ConnectionInfo, LockError> {
    match &config.server {
        #[cfg(feature = "tls")]
        Some(info) => with_tls(info.clone(), config, label, role),
        #[cfg(not(feature = "tls"))]
        Some(info) => {
            if matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }) {
                return Err(LockError::invalid_config(format!(
                    "{label} uses TLS, which needs the `tls` feature of actix-distributed-lock"
                )));
            }
            Ok(info.clone())
        }
        None => connection_info(config.url(), config, label, role),
    }
}

/// Whether `url`'s scheme asks for TLS (`rediss://`, `valkeys://`).
#[cfg(not(feature = "tls"))]
fn is_tls_url(url: &str) -> bool {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
}

/// The error for a URL the redis crate refuses: what was wrong as far as can be told
/// without quoting the URL (its text may hold a password; `label` is the redacted URL),
/// and the forms that are accepted.
pub(crate) fn url_error(label: &str, e: &redis::RedisError) -> LockError {
    let scheme = label.split_once("://").map(|(scheme, _)| scheme);
    // `redis:/host` or `redis:host`: a Redis scheme without its `//` (but `redis:6379` is a
    // host named redis, with a port).
    let short_scheme = label
        .split_once(':')
        .filter(|(scheme, rest)| {
            let port = rest.split('/').next().unwrap_or_default();
            let host_and_port = port.parse::<u16>().is_ok() && !rest.starts_with('/');
            ACCEPTED_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) && !host_and_port
        })
        .map(|(scheme, _)| scheme);
    let problem = match (scheme, short_scheme) {
        (None, Some(short)) => {
            format!("its scheme {short}: is not followed by `//` (write {short}://host:port/)")
        }
        (None, None) => "it has no scheme (write redis://host:port/)".to_string(),
        (Some(scheme), _) => return scheme_error(label, scheme, e),
    };
    LockError::invalid_config(format!(
        "cannot use Redis URL {label}: {problem}; {ACCEPTED}"
    ))
}

/// The forms of URL the redis crate accepts, for the error that refuses one.
const ACCEPTED: &str = "accepted: redis://[user:password@]host[:port][/db], rediss://… (TLS, \
     with the `tls` feature), redis+unix:///path/to.sock or unix:///path/to.sock (valkey:// \
     and valkeys:// too)";

/// [`url_error`] for a URL that has a scheme.
fn scheme_error(label: &str, scheme: &str, e: &redis::RedisError) -> LockError {
    let problem = match scheme {
        scheme if !ACCEPTED_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) => {
            format!("the scheme {scheme}:// is not a Redis scheme")
        }
        // The redis crate's kind only: its text may quote the URL, password and all.
        _ => format!("{:?}", e.kind()),
    };
    LockError::invalid_config(format!(
        "cannot use Redis URL {label}: {problem}; {ACCEPTED}"
    ))
}

/// The URL schemes the redis crate accepts.
const ACCEPTED_SCHEMES: [&str; 6] = ["redis", "rediss", "valkey", "valkeys", "redis+unix", "unix"];

#[cfg(feature = "tls")]
fn with_tls(
    info: ConnectionInfo,
    config: &ClientConfig,
    label: &str,
    role: UrlRole,
) -> Result<ConnectionInfo, LockError> {
    use redis::ConnectionAddr;
    let settings = &config.tls;
    let redis::ConnectionAddr::TcpTls { insecure, .. } = info.addr() else {
        if settings.any() && role == UrlRole::Server {
            return Err(LockError::invalid_config(format!(
                "TLS settings were given, but {label} is not a rediss:// URL"
            )));
        }
        return Ok(info);
    };
    if *insecure && !settings.accept_invalid_certificates {
        return Err(LockError::invalid_config(format!(
            "{label}: the #insecure URL fragment would turn TLS certificate verification off; \
             give the server's CA with ClientConfig::tls_ca_certificate, or, in tests only, \
             call ClientConfig::danger_accept_invalid_certificates()"
        )));
    }
    install_crypto_provider();
    let mut info = match settings.certificates() {
        Some(certificates) => redis::Client::build_with_tls(info, certificates)
            .map_err(|e| url_error(label, &e))?
            .get_connection_info()
            .clone(),
        None => info,
    };
    if settings.accept_invalid_certificates {
        if let ConnectionAddr::TcpTls {
            host,
            port,
            tls_params,
            ..
        } = info.addr().clone()
        {
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure: true,
                tls_params,
            });
        }
    }
    Ok(info)
}

/// Makes ring the process's rustls crypto provider, unless one is installed already (by the
/// application, or by an earlier client): the redis crate builds its rustls configurations
/// with the process default, and rustls panics when it has none and cannot tell from its
/// features which one to pick (both ring and aws-lc-rs compiled in, or neither enabled).
#[cfg(feature = "tls")]
pub(crate) fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Err: another thread installed one in between; that one serves as well.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// For a cluster: puts the TLS settings on the client builder, for the nodes it discovers
/// (the seeds carry them already from [`connection_info`]).
#[cfg(feature = "tls")]
pub(crate) fn cluster_builder(
    builder: redis::cluster::ClusterClientBuilder,
    settings: &crate::config::TlsSettings,
    seeds_use_tls: bool,
) -> redis::cluster::ClusterClientBuilder {
    if !seeds_use_tls {
        return builder;
    }
    let builder = match settings.certificates() {
        Some(certificates) => builder.certs(certificates),
        None => builder,
    };
    builder.tls(settings.mode())
}

/// For Sentinel: a client that reaches TLS sentinels and/or TLS data nodes with the TLS
/// settings. `sentinels` come from [`connection_info`]; `data_nodes` is the data-node URL's
/// (credentials, database), if one was given; the data nodes use TLS when that URL is
/// `rediss://`, or, without one, when the sentinels' URLs are.
#[cfg(feature = "tls")]
pub(crate) fn sentinel_client(
    sentinels: &[ConnectionInfo],
    data_nodes: Option<&ConnectionInfo>,
    service: &str,
    config: &ClientConfig,
) -> redis::RedisResult<redis::sentinel::SentinelClient> {
    use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
    let is_tls =
        |info: &ConnectionInfo| matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
    let addresses = sentinels.iter().map(|info| info.addr().clone());
    let mut builder = SentinelClientBuilder::new(addresses, service, SentinelServerType::Master)?;
    // The sentinels share one user and password (the first URL that names them).
    if let Some(user) = sentinels.iter().find_map(|i| i.redis_settings().username()) {
        builder = builder.set_client_to_sentinel_username(user);
    }
    if let Some(password) = sentinels.iter().find_map(|i| i.redis_settings().password()) {
        builder = builder.set_client_to_sentinel_password(password);
    }
    let data_tls = match data_nodes {
        Some(info) => {
            let settings = info.redis_settings();
            if let Some(user) = settings.username() {
                builder = builder.set_client_to_redis_username(user);
            }
            if let Some(password) = settings.password() {
                builder = builder.set_client_to_redis_password(password);
            }
            builder = builder
                .set_client_to_redis_db(settings.db())
                .set_client_to_redis_protocol(settings.protocol());
            is_tls(info)
        }
        None => sentinels.first().is_some_and(is_tls),
    };
    if data_tls {
        builder = builder.set_client_to_redis_tls_mode(config.tls.mode());
        if let Some(certificates) = config.tls.certificates() {
            builder = builder.set_client_to_redis_certificates(certificates);
        }
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rediss_url_needs_the_tls_feature() {
        let config = ClientConfig::new("rediss://127.0.0.1:6380/");
        let parsed = connection_info(config.url(), &config, "the node", UrlRole::Server);
        #[cfg(feature = "tls")]
        assert!(parsed.is_ok());
        #[cfg(not(feature = "tls"))]
        assert!(
            matches!(&parsed, Err(LockError::InvalidConfig { reason }) if reason.contains("`tls` feature")),
            "{parsed:?}"
        );
    }

    #[cfg(feature = "tls")]
    #[test]
    fn debug_output_never_shows_the_certificates_or_the_key() {
        let config = ClientConfig::new("rediss://h/")
            .tls_ca_certificate("CA-PEM-TEXT")
            .tls_client_certificate("CERT-PEM-TEXT", "KEY-PEM-TEXT");
        let shown = format!("{config:?}");
        for secret in ["CA-PEM-TEXT", "CERT-PEM-TEXT", "KEY-PEM-TEXT"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("client_certificate: true"), "{shown}");
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_plain_url_with_tls_settings_is_refused_but_a_sentinel_data_url_may_be_plain() {
        let config = ClientConfig::new("redis://h/").danger_accept_invalid_certificates();
        let as_server = connection_info(config.url(), &config, "the node", UrlRole::Server);
        assert!(matches!(as_server, Err(LockError::InvalidConfig { .. })));
        let as_data = connection_info(
            config.url(),
            &config,
            "the node",
            UrlRole::SentinelDataNodes,
        );
        assert!(as_data.is_ok());
    }
}
