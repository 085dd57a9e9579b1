//! TLS material read once at start, so a bad file is a clear error at
//! boot rather than a reconnection loop (rustls with the ring provider:
//! no C build).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A consumer that cannot be built from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A PEM file that cannot be read or holds nothing usable.
    #[error("{path}: {what}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// rustls refused the material (a key that does not match, …).
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// No CA file given and no system root could be loaded.
    #[error("no CA file given and the system has no usable root certificate")]
    NoRoots,
    /// A setting the transport cannot honour.
    #[error("{0}")]
    Setting(String),
}

fn pem_error(path: &Path, what: impl std::fmt::Display) -> SetupError {
    SetupError::Pem {
        path: path.to_owned(),
        what: what.to_string(),
    }
}

/// Every certificate of a PEM file; at least one.
pub(crate) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, SetupError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(pem_error(path, "no PEM certificate in the file"));
    }
    Ok(certs)
}

/// The text of a PEM CA bundle, checked to hold a certificate (lapin takes
/// the PEM text itself).
pub(crate) fn ca_pem_text(path: &Path) -> Result<String, SetupError> {
    certificates(path)?;
    std::fs::read_to_string(path).map_err(|e| pem_error(path, e))
}

/// A rustls client configuration: roots from `ca_file` (else the
/// system's), and a client certificate when `client` is given.
pub(crate) fn client_config(
    ca_file: Option<&Path>,
    client: Option<(&Path, &Path)>,
) -> Result<Arc<rustls::ClientConfig>, SetupError> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(path) = ca_file {
        for cert in certificates(path)? {
            roots
                .add(cert)
                .map_err(|e| pem_error(path, format!("not a usable CA certificate: {e}")))?;
        }
    } else {
        let native = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(native.certs);
        if added == 0 {
            return Err(SetupError::NoRoots);
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = certificates(cert)?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error(key, e))?;
            builder.with_client_auth_cert(chain, key)?
        }
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let e = client_config(Some(&missing), None).unwrap_err();
        assert!(e.to_string().contains("missing.pem"), "{e}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client_config(Some(&empty), None).unwrap_err();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        assert!(ca_pem_text(&empty).is_err());
        let garbled = dir.path().join("garbled.pem");
        std::fs::write(
            &garbled,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = client_config(Some(&garbled), None).unwrap_err();
        assert!(e.to_string().contains("garbled.pem"), "{e}");
    }
}
