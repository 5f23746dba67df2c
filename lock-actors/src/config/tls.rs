//! What a client's TLS settings are (trusted CA, client certificate, insecure mode), their
//! checks, and the [`ClientConfig`](super::ClientConfig) methods that set them (behind the `tls` feature). Data
//! only: putting them on connections is the node layer's job (`node::tls`).

use crate::error::LockError;

/// The TLS settings of one [`ClientConfig`](super::ClientConfig): all unset by default (then `rediss://` trusts
/// the system's CA store and sends no client certificate).
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// CA certificates (PEM) trusted instead of the system's.
    #[cfg(feature = "tls")]
    pub(crate) ca_pem: Option<Vec<u8>>,
    /// Client certificate chain and private key (PEM), for mutual TLS.
    #[cfg(feature = "tls")]
    pub(crate) client_identity: Option<(Vec<u8>, Vec<u8>)>,
    /// No certificate verification at all (tests only).
    #[cfg(feature = "tls")]
    pub(crate) accept_invalid_certificates: bool,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("TlsSettings");
        // Whether each is set, never its contents (a private key among them).
        #[cfg(feature = "tls")]
        out.field("ca_certificate", &self.ca_pem.is_some())
            .field("client_certificate", &self.client_identity.is_some())
            .field(
                "accept_invalid_certificates",
                &self.accept_invalid_certificates,
            );
        out.finish()
    }
}

impl TlsSettings {
    /// Whether any TLS setting was made.
    #[cfg(feature = "tls")]
    pub(crate) fn any(&self) -> bool {
        self.ca_pem.is_some() || self.client_identity.is_some() || self.accept_invalid_certificates
    }

    /// Checks the PEM given (the client refuses to start with unreadable certificates).
    pub(crate) fn validate(&self) -> Result<(), LockError> {
        #[cfg(feature = "tls")]
        {
            use rustls::pki_types::pem::PemObject;
            use rustls::pki_types::{CertificateDer, PrivateKeyDer};
            let certificates = |what: &str, pem: &[u8]| {
                let found = CertificateDer::pem_slice_iter(pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| {
                        LockError::invalid_config(format!("{what}: unreadable PEM ({e})"))
                    })?;
                if found.is_empty() {
                    return Err(LockError::invalid_config(format!(
                        "{what}: no PEM CERTIFICATE block found"
                    )));
                }
                Ok(())
            };
            if let Some(pem) = &self.ca_pem {
                certificates("tls_ca_certificate", pem)?;
            }
            if let Some((cert, key)) = &self.client_identity {
                certificates("tls_client_certificate (certificate)", cert)?;
                PrivateKeyDer::from_pem_slice(key).map_err(|e| {
                    LockError::invalid_config(format!(
                        "tls_client_certificate (key): no readable PEM private key ({e})"
                    ))
                })?;
            }
        }
        Ok(())
    }

    /// The certificates for the redis crate, if a CA or a client certificate was given.
    #[cfg(feature = "tls")]
    pub(crate) fn certificates(&self) -> Option<redis::TlsCertificates> {
        if self.ca_pem.is_none() && self.client_identity.is_none() {
            return None;
        }
        Some(redis::TlsCertificates {
            client_tls: self
                .client_identity
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.ca_pem.clone(),
        })
    }

    /// The TLS mode of connections the redis crate makes from addresses it discovers
    /// (cluster nodes, the primary a sentinel names).
    #[cfg(feature = "tls")]
    pub(crate) fn mode(&self) -> redis::TlsMode {
        if self.accept_invalid_certificates {
            redis::TlsMode::Insecure
        } else {
            redis::TlsMode::Secure
        }
    }
}

#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
impl super::ClientConfig {
    /// Trusts the CA certificate(s) in `pem` (one or more PEM `CERTIFICATE` blocks) for
    /// `rediss://` connections, instead of the system's trust store: for servers whose
    /// certificates a private CA signed. Every node of a cluster and every sentinel and
    /// data node of a Sentinel deployment is checked against it.
    ///
    /// ```no_run
    /// use actix_distributed_lock::{ClientConfig, LockClient};
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let ca_pem = std::fs::read("/etc/redis/tls/ca.crt")?;
    /// let config = ClientConfig::new("rediss://redis.internal:6380/").tls_ca_certificate(ca_pem);
    /// let client = LockClient::connect(config).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn tls_ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca_pem = Some(pem.into());
        self
    }

    /// Presents this client certificate (chain, PEM) and its private key (PEM: PKCS#8,
    /// PKCS#1 or SEC1) to servers that ask for one: mutual TLS, as a redis-server with
    /// `tls-auth-clients yes` requires.
    ///
    /// ```no_run
    /// use actix_distributed_lock::ClientConfig;
    ///
    /// let config = ClientConfig::new("rediss://redis.internal:6380/")
    ///     .tls_ca_certificate(std::fs::read("/etc/redis/tls/ca.crt")?)
    ///     .tls_client_certificate(
    ///         std::fs::read("/etc/redis/tls/client.crt")?,
    ///         std::fs::read("/etc/redis/tls/client.key")?,
    ///     );
    /// assert!(config.validate().is_ok());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn tls_client_certificate(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client_identity = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// **For tests only: turns off every check of the servers' certificates** on
    /// `rediss://` connections (any certificate is accepted, for any host). The traffic is
    /// still encrypted, but anyone who can intercept it can read and change it, passwords
    /// and locks included. Never use this in production: give the client the server's CA
    /// with [`tls_ca_certificate`](Self::tls_ca_certificate) instead.
    ///
    /// This is the only way to turn verification off: Redis's `rediss://host/#insecure`
    /// URL fragment is refused with [`LockError::InvalidConfig`], so a URL copied from an
    /// environment variable cannot turn it off unseen.
    ///
    /// [`LockError::InvalidConfig`]: crate::LockError::InvalidConfig
    ///
    /// ```
    /// use actix_distributed_lock::ClientConfig;
    ///
    /// // A test against a server with a throw-away self-signed certificate.
    /// let config = ClientConfig::new("rediss://127.0.0.1:6380/").danger_accept_invalid_certificates();
    /// assert!(config.validate().is_ok());
    /// ```
    pub fn danger_accept_invalid_certificates(mut self) -> Self {
        self.tls.accept_invalid_certificates = true;
        self
    }
}
