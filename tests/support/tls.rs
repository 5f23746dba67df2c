//! TLS for the test servers: a throw-away CA with a server certificate (for `127.0.0.1` and
//! `localhost`) and a client certificate, made with rcgen at run time and written to a temp
//! dir for `redis-server`; and the record of which ports serve TLS only, so the support's
//! own start-up checks and connections (`RedisServer::conn`, the topology's questions) talk
//! TLS to them.
//!
//! Compiled with the facade's `tls` feature only.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// A CA, a server certificate and key it signed (also good as a client certificate: the
/// nodes of a TLS cluster present it to each other), and a client certificate and key it
/// signed, as PEM text and as files in a temp dir (removed on drop).
pub struct TlsMaterial {
    dir: PathBuf,
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// A client certificate the CA signed, PEM (for mutual TLS).
    pub client_cert_pem: String,
    /// The client certificate's private key, PEM.
    pub client_key_pem: String,
}

impl TlsMaterial {
    /// A fresh CA named `name`, with its server and client certificates.
    pub fn generate(name: &str) -> Arc<TlsMaterial> {
        let dir = super::fresh_temp_dir();
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).expect("self-signed CA");

        let leaf = |common_name: &str, usages: Vec<ExtendedKeyUsagePurpose>| {
            let key = KeyPair::generate().expect("leaf key");
            let mut params =
                CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                    .expect("leaf params");
            params
                .distinguished_name
                .push(DnType::CommonName, common_name);
            params.extended_key_usages = usages;
            let cert = params.signed_by(&key, &ca).expect("sign leaf");
            (cert.pem(), key.serialize_pem())
        };
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        let (server_cert, server_key) = leaf("redis test server", vec![ServerAuth, ClientAuth]);
        let (client_cert, client_key) = leaf("lock test client", vec![ClientAuth]);

        let material = TlsMaterial {
            dir,
            ca_pem: ca.pem(),
            client_cert_pem: client_cert,
            client_key_pem: client_key,
        };
        for (file, text) in [
            ("ca.crt", material.ca_pem.as_str()),
            ("server.crt", server_cert.as_str()),
            ("server.key", server_key.as_str()),
            ("client.crt", material.client_cert_pem.as_str()),
            ("client.key", material.client_key_pem.as_str()),
        ] {
            let path = material.dir.join(file);
            fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        }
        Arc::new(material)
    }

    /// The CA certificate's file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// `redis-server` arguments for TLS with these certificates (the caller adds
    /// `--tls-port`); `auth_clients`: whether clients must present a certificate the CA
    /// signed (`--tls-auth-clients`).
    pub fn server_args(&self, auth_clients: bool) -> Vec<String> {
        [
            ("--tls-cert-file", self.file("server.crt")),
            ("--tls-key-file", self.file("server.key")),
            ("--tls-ca-cert-file", self.file("ca.crt")),
            (
                "--tls-auth-clients",
                if auth_clients { "yes" } else { "no" }.to_string(),
            ),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_string(), value])
        .collect()
    }

    /// `redis-cli` arguments to talk TLS to a server started with [`server_args`]
    /// (with the client certificate, so also where clients must present one).
    ///
    /// [`server_args`]: TlsMaterial::server_args
    pub fn cli_args(&self) -> Vec<String> {
        vec![
            "--tls".to_string(),
            "--cacert".to_string(),
            self.file("ca.crt"),
            "--cert".to_string(),
            self.file("client.crt"),
            "--key".to_string(),
            self.file("client.key"),
        ]
    }

    /// The redis crate's certificates for the support's own connections: this CA, and the
    /// client certificate.
    pub fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: self.client_cert_pem.clone().into_bytes(),
                client_key: self.client_key_pem.clone().into_bytes(),
            }),
            root_cert: Some(self.ca_pem.clone().into_bytes()),
        }
    }
}

impl Drop for TlsMaterial {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Ports that serve TLS only, with the certificates their servers use.
fn tls_ports() -> &'static Mutex<HashMap<u16, Arc<TlsMaterial>>> {
    static PORTS: OnceLock<Mutex<HashMap<u16, Arc<TlsMaterial>>>> = OnceLock::new();
    PORTS.get_or_init(Default::default)
}

/// Records that `port` serves TLS only, with `material`'s certificates.
pub fn register(port: u16, material: &Arc<TlsMaterial>) {
    tls_ports()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(port, material.clone());
}

/// Forgets `port` (its server is gone; another test may take the port for a plain one).
pub fn unregister(port: u16) {
    tls_ports()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&port);
}

/// The certificates of the TLS server on `port`, if it is one.
pub fn material_for(port: u16) -> Option<Arc<TlsMaterial>> {
    tls_ports()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&port)
        .cloned()
}

/// A TLS `redis::Client` for the support's own questions to `port`, if it serves TLS.
pub fn client_for(port: u16) -> Option<redis::Client> {
    let material = material_for(port)?;
    // The support's connections may come before any client's (which installs it too).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = redis::Client::build_with_tls(
        format!("rediss://127.0.0.1:{port}/"),
        material.certificates(),
    )
    .expect("a TLS client for a test server");
    Some(client)
}
