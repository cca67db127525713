//! TLS for an MQTT client (the daemon's connection to an external broker,
//! the Termux companion's to the home broker): rustls with the `ring`
//! provider, and either a CA file of the person's or the Mozilla roots
//! built into the binary. One set-up for both, so they cannot differ.

use std::path::Path;
use std::sync::Arc;

/// A client configuration trusting the certificates in the PEM file `ca`,
/// or, without one, the Mozilla roots.
///
/// # Errors
/// The file cannot be read, holds no usable certificate, or rustls refuses
/// the set-up; the message names the file.
pub fn client_config(ca: Option<&Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let err = |e: String| format!("{}: {e}", path.display());
            let pem = std::fs::read(path).map_err(|e| err(e.to_string()))?;
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                roots
                    .add(cert.map_err(|e| err(e.to_string()))?)
                    .map_err(|e| err(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(err("no certificate in the file".into()));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    // The ring provider is chosen explicitly: adb_client already builds it,
    // and relying on a process-wide default panics when two are compiled in.
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_ca_file_is_named_and_the_roots_work() {
        assert!(client_config(None).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "").unwrap();
        let e = client_config(Some(&empty)).unwrap_err();
        assert!(e.contains("ca.pem") && e.contains("no certificate"), "{e}");
        let e = client_config(Some(&dir.path().join("nope.pem"))).unwrap_err();
        assert!(e.contains("nope.pem"), "{e}");
    }
}
