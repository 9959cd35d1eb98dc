//! A TLS front for a relay: the https origin a page installs the app from, with the
//! test certificate (`relay/tests/fixtures/tls`). Shared by the bridge's browser tests
//! and `terminull-bench` (included there by path), so it uses nothing else of the
//! tests' support.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

/// The SHA-256 of the test certificate's public key (`openssl x509 -pubkey | openssl pkey
/// -pubin -outform der | openssl dgst -sha256 -binary | base64`), for Chromium's
/// `--ignore-certificate-errors-spki-list`.
pub const TEST_CERT_SPKI: &str = "HG+yUi65SchNN8Hx8lkngFki6fwb/Ww7cGO80zGbcMA=";

/// Serves TLS on 127.0.0.1 with the certificate in `fixtures` (`cert.pem`, `key.pem`),
/// each connection forwarded to the relay at `relay`. Returns `https://127.0.0.1:port`.
pub async fn tls_front(relay: SocketAddr, fixtures: &Path) -> Result<String, String> {
    let certs = CertificateDer::pem_file_iter(fixtures.join("cert.pem"))
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("the test certificate in {}: {e}", fixtures.display()))?;
    let key = PrivateKeyDer::from_pem_file(fixtures.join("key.pem"))
        .map_err(|e| format!("the test key in {}: {e}", fixtures.display()))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| format!("the TLS configuration: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("binding: {e}"))?;
    let origin = format!("https://{}", listener.local_addr().map_err(|e| format!("its address: {e}"))?);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut upstream) = tokio::net::TcpStream::connect(relay).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
            });
        }
    });
    Ok(origin)
}
