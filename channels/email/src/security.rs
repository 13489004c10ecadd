//! How a mail connection is protected, shared by IMAP and SMTP.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// Transport security of an IMAP or SMTP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Security {
    /// TLS from the first byte (IMAPS 993, SMTPS 465).
    Tls,
    /// Plain connection upgraded with STARTTLS before login (IMAP 143, submission 587);
    /// fails when the server does not offer it.
    StartTls,
    /// No encryption: only for servers on loopback, such as the test mail stack.
    Plain,
}

/// A rustls connector trusting the webpki roots, with the ring provider chosen explicitly (so
/// it does not depend on a process-wide default provider).
pub(crate) fn tls_connector() -> Result<TlsConnector, tokio_rustls::rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}
