//! TLS termination: a rustls server configuration (ring provider) from PEM files.

use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

use crate::config::TlsFiles;
use crate::error::RelayError;

/// The acceptor for `files`.
pub(crate) fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, RelayError> {
    let cert_path = files.cert_chain.display();
    let key_path = files.private_key.display();
    let certs = CertificateDer::pem_file_iter(&files.cert_chain)
        .map_err(|e| RelayError::Tls(format!("reading the certificate chain {cert_path}: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| RelayError::Tls(format!("parsing the certificate chain {cert_path}: {e}")))?;
    if certs.is_empty() {
        return Err(RelayError::Tls(format!("{cert_path} holds no PEM certificate")));
    }
    let key = PrivateKeyDer::from_pem_file(&files.private_key)
        .map_err(|e| RelayError::Tls(format!("reading the private key {key_path}: {e}")))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| RelayError::Tls(format!("protocol versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| RelayError::Tls(format!("the certificate and key in {cert_path} and {key_path}: {e}")))?;
    // One protocol: WebSocket upgrades are HTTP/1.1.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
