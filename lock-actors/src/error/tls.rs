//! What a failed TLS handshake is called in errors: the rustls error found in a redis
//! error's chain of sources, said as advice. Apart from the connection building so that the
//! error type can use it without importing connection code.

/// What a failed TLS handshake means, for the error's reason: `None` when `err` is no TLS
/// failure.
#[cfg(feature = "tls")]
pub(crate) fn describe_failure(err: &redis::RedisError) -> Option<String> {
    let tls_error = tls_error_in(err)?;
    let advice = match tls_error {
        rustls::Error::InvalidCertificate(problem) => format!(
            "TLS certificate verification failed: the server's certificate was refused \
             ({problem:?}); give the CA that signed it with ClientConfig::tls_ca_certificate"
        ),
        rustls::Error::AlertReceived(alert) => format!(
            "TLS handshake refused by the server (alert: {alert:?}); if the server requires \
             client certificates (tls-auth-clients yes), give one with \
             ClientConfig::tls_client_certificate"
        ),
        other => format!("TLS handshake failed: {other}"),
    };
    Some(advice)
}

/// The rustls error somewhere in `err`'s chain of sources: inside an I/O error (where
/// tokio-rustls puts it), which the redis crate keeps behind an `Arc`.
#[cfg(feature = "tls")]
fn tls_error_in(err: &redis::RedisError) -> Option<&rustls::Error> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(mut current) = next {
        if let Some(shared) = current.downcast_ref::<Shared>() {
            current = shared.as_ref();
        }
        if let Some(found) = current.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(inner) = current
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            if let Some(found) = inner.downcast_ref::<rustls::Error>() {
                return Some(found);
            }
        }
        next = current.source();
    }
    None
}
