//! What a client's TLS settings are (trusted CA, client certificate, insecure mode), and
//! their checks: data only, kept apart from the connection building in the parent module so
//! that the configuration can hold them without importing connection code.

use crate::error::LockError;

/// The TLS settings of one [`ClientConfig`]: all unset by default (then `rediss://` trusts
/// the system's CA store and sends no client certificate).
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// CA certificates (PEM) trusted instead of the system's.
    #[cfg(feature = "tls")]
    pub(super) ca_pem: Option<Vec<u8>>,
    /// Client certificate chain and private key (PEM), for mutual TLS.
    #[cfg(feature = "tls")]
    pub(super) client_identity: Option<(Vec<u8>, Vec<u8>)>,
    /// No certificate verification at all (tests only).
    #[cfg(feature = "tls")]
    pub(super) accept_invalid_certificates: bool,
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
    pub(super) fn any(&self) -> bool {
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
    pub(super) fn certificates(&self) -> Option<redis::TlsCertificates> {
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
    pub(super) fn mode(&self) -> redis::TlsMode {
        if self.accept_invalid_certificates {
            redis::TlsMode::Insecure
        } else {
            redis::TlsMode::Secure
        }
    }
}
