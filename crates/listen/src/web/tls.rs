//! `tls_server_config` into a rustls server configuration: the server's
//! certificate chain and key, the toolkit's five client-authentication
//! policies, its versions, cipher suites and curves, and the client SANs
//! a connection must carry.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{ring, CryptoProvider};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

use super::file::{resolve, RawTls};

/// What a TLS listener needs per connection.
#[derive(Debug)]
pub(crate) struct Tls {
    pub config: Arc<ServerConfig>,
    /// `client_allowed_sans`: a client certificate must name one of these.
    pub allowed_sans: Option<Vec<String>>,
}

/// The toolkit's `client_auth_type` values (Go's `tls.ClientAuthType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    NoClientCert,
    RequestClientCert,
    RequireAnyClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    const ALL: [(&'static str, ClientAuth); 5] = [
        ("NoClientCert", ClientAuth::NoClientCert),
        ("RequestClientCert", ClientAuth::RequestClientCert),
        ("RequireAnyClientCert", ClientAuth::RequireAnyClientCert),
        (
            "VerifyClientCertIfGiven",
            ClientAuth::VerifyClientCertIfGiven,
        ),
        (
            "RequireAndVerifyClientCert",
            ClientAuth::RequireAndVerifyClientCert,
        ),
    ];

    fn parse(s: Option<&str>) -> Result<ClientAuth, String> {
        let Some(s) = s.filter(|s| !s.is_empty()) else {
            return Ok(ClientAuth::NoClientCert);
        };
        ClientAuth::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, a)| *a)
            .ok_or_else(|| {
                let names: Vec<&str> = ClientAuth::ALL.iter().map(|(n, _)| *n).collect();
                format!(
                    "tls_server_config.client_auth_type: {s:?} is not a policy; expected one of {}",
                    names.join(", ")
                )
            })
    }

    fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
        )
    }
}

/// PEM text, inline (`key`) or from a file (`key_file`, relative to
/// `dir`); the file is added to `files`.
fn pem(
    dir: &Path,
    inline: Option<&String>,
    file: Option<&String>,
    key: &str,
    files: &mut Vec<PathBuf>,
) -> Result<Option<(Vec<u8>, String)>, String> {
    match (inline, file) {
        (Some(_), Some(_)) => Err(format!(
            "tls_server_config: both {key} and {key}_file are set; expected one of them"
        )),
        (Some(text), None) => Ok(Some((
            text.clone().into_bytes(),
            format!("tls_server_config.{key}"),
        ))),
        (None, Some(name)) => {
            let path = resolve(dir, name);
            files.push(path.clone());
            let bytes = std::fs::read(&path)
                .map_err(|e| format!("tls_server_config.{key}_file: {}: {e}", path.display()))?;
            Ok(Some((
                bytes,
                format!("tls_server_config.{key}_file: {}", path.display()),
            )))
        }
        (None, None) => Ok(None),
    }
}

fn certificates(bytes: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what}: not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{what}: no CERTIFICATE block; expected PEM certificates"
        ));
    }
    Ok(certs)
}

/// TLS versions by the toolkit's names; TLS 1.0 and 1.1 are not spoken
/// here (rustls), so a minimum below 1.2 is 1.2.
fn version(s: Option<&str>, key: &str, default: u8) -> Result<u8, String> {
    match s.unwrap_or("") {
        "" => Ok(default),
        "TLS10" => Ok(10),
        "TLS11" => Ok(11),
        "TLS12" => Ok(12),
        "TLS13" => Ok(13),
        other => Err(format!(
            "tls_server_config.{key}: {other:?} is not a TLS version; expected TLS10, TLS11, TLS12 or TLS13"
        )),
    }
}

/// Go's name for a TLS 1.2 suite as rustls names it (Go also accepts the
/// `ChaCha` suites without their `_SHA256`).
fn suite_matches(rustls_name: &str, go: &str) -> bool {
    rustls_name == go || rustls_name.strip_suffix("_SHA256") == Some(go)
}

/// Builds the configuration; `warnings` gets what the file asks for that
/// this listener cannot honour but can safely ignore.
pub(crate) fn build(
    raw: &RawTls,
    dir: &Path,
    files: &mut Vec<PathBuf>,
    warnings: &mut Vec<String>,
) -> Result<Tls, String> {
    let cert = pem(
        dir,
        raw.cert.as_ref(),
        raw.cert_file.as_ref(),
        "cert",
        files,
    )?
    .ok_or("tls_server_config: no cert_file (or cert); expected the server's PEM certificate")?;
    let key = pem(dir, raw.key.as_ref(), raw.key_file.as_ref(), "key", files)?
        .ok_or("tls_server_config: no key_file (or key); expected the server's PEM private key")?;
    let ca = pem(
        dir,
        raw.client_ca.as_ref(),
        raw.client_ca_file.as_ref(),
        "client_ca",
        files,
    )?;
    let chain = certificates(&cert.0, &cert.1)?;
    let private = PrivateKeyDer::from_pem_slice(&key.0).map_err(|e| {
        format!(
            "{}: no usable private key ({e}); expected PKCS#8, PKCS#1 or SEC1 PEM",
            key.1
        )
    })?;

    let auth = ClientAuth::parse(raw.client_auth_type.as_deref())?;
    if ca.is_some() && auth == ClientAuth::NoClientCert {
        return Err(
            "tls_server_config: client_ca_file is set but client_auth_type is NoClientCert; \
                    expected RequireAndVerifyClientCert (or VerifyClientCertIfGiven)"
                .to_owned(),
        );
    }
    if auth.verifies() && ca.is_none() {
        return Err(format!(
            "tls_server_config: client_auth_type {auth:?} needs client_ca_file; expected the CA that signs the clients' certificates"
        ));
    }
    let allowed_sans = raw.client_allowed_sans.clone().filter(|s| !s.is_empty());
    if allowed_sans.is_some()
        && !matches!(
            auth,
            ClientAuth::RequireAnyClientCert | ClientAuth::RequireAndVerifyClientCert
        )
    {
        return Err(format!(
            "tls_server_config.client_allowed_sans: needs client_auth_type RequireAnyClientCert or \
             RequireAndVerifyClientCert (it is {auth:?}, which lets a client connect without a certificate)"
        ));
    }

    let provider = provider(raw, warnings)?;
    let versions = versions(raw, warnings)?;

    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let builder = match auth {
        ClientAuth::NoClientCert => builder.with_no_client_auth(),
        ClientAuth::RequestClientCert | ClientAuth::RequireAnyClientCert => builder
            .with_client_cert_verifier(Arc::new(AnyClientCert {
                mandatory: auth == ClientAuth::RequireAnyClientCert,
                provider: provider.clone(),
            })),
        ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert => {
            let (bytes, what) = ca.expect("checked above");
            let mut roots = RootCertStore::empty();
            for c in certificates(&bytes, &what)? {
                roots
                    .add(c)
                    .map_err(|e| format!("{what}: not a usable CA certificate: {e}"))?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let verifier = if auth == ClientAuth::VerifyClientCertIfGiven {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| format!("{what}: {e}"))?)
        }
    };
    let mut config = builder.with_single_cert(chain, private).map_err(|e| {
        format!(
            "{}: the key does not go with the certificate {}: {e}",
            key.1, cert.1
        )
    })?;
    config.ignore_client_order = raw.prefer_server_cipher_suites.unwrap_or(true);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        config: Arc::new(config),
        allowed_sans,
    })
}

/// The versions spoken, from `min_version` and `max_version`.
fn versions(
    raw: &RawTls,
    warnings: &mut Vec<String>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let min = version(raw.min_version.as_deref(), "min_version", 12)?;
    let max = version(raw.max_version.as_deref(), "max_version", 13)?;
    if min > max {
        return Err(format!(
            "tls_server_config: min_version TLS{min} is above max_version TLS{max}"
        ));
    }
    if max < 12 {
        return Err(format!(
            "tls_server_config.max_version: TLS{max} is not spoken here; expected TLS12 or TLS13"
        ));
    }
    if min < 12 {
        warnings.push(format!(
            "tls_server_config.min_version: TLS{min} is not spoken here; the listener accepts TLS 1.2 and up"
        ));
    }
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(v, _)| (min.max(12)..=max).contains(v))
            .map(|(_, v)| v)
            .collect();

    Ok(versions)
}

/// ring's provider with the file's cipher suites (TLS 1.2; TLS 1.3's are
/// not configurable, as in Go) and curves, in the file's order.
fn provider(raw: &RawTls, warnings: &mut Vec<String>) -> Result<Arc<CryptoProvider>, String> {
    let mut provider = ring::default_provider();
    if let Some(names) = raw.cipher_suites.as_ref().filter(|n| !n.is_empty()) {
        let all = provider.cipher_suites.clone();
        let mut chosen: Vec<_> = Vec::new();
        for name in names {
            match all
                .iter()
                .find(|s| s.tls13().is_none() && suite_matches(&format!("{:?}", s.suite()), name))
            {
                Some(s) => chosen.push(*s),
                None => warnings.push(format!(
                    "tls_server_config.cipher_suites: {name} is not offered here; ignored"
                )),
            }
        }
        if chosen.is_empty() {
            let offered: Vec<String> = all
                .iter()
                .filter(|s| s.tls13().is_none())
                .map(|s| format!("{:?}", s.suite()))
                .collect();
            return Err(format!(
                "tls_server_config.cipher_suites: none of {names:?} is offered here; expected some of {}",
                offered.join(", ")
            ));
        }
        chosen.extend(all.iter().filter(|s| s.tls13().is_some()).copied());
        provider.cipher_suites = chosen;
    }
    if let Some(names) = raw.curve_preferences.as_ref().filter(|n| !n.is_empty()) {
        let all = provider.kx_groups.clone();
        let mut chosen = Vec::new();
        for name in names {
            let rustls_name = match name.as_str() {
                "CurveP256" => "secp256r1",
                "CurveP384" => "secp384r1",
                "X25519" => "X25519",
                "CurveP521" | "X25519MLKEM768" => {
                    warnings.push(format!(
                        "tls_server_config.curve_preferences: {name} is not offered here; ignored"
                    ));
                    continue;
                }
                other => {
                    return Err(format!(
                        "tls_server_config.curve_preferences: {other:?} is not a curve; expected CurveP256, CurveP384, CurveP521, X25519 or X25519MLKEM768"
                    ))
                }
            };
            if let Some(g) = all
                .iter()
                .find(|g| format!("{:?}", g.name()).eq_ignore_ascii_case(rustls_name))
            {
                chosen.push(*g);
            }
        }
        if chosen.is_empty() {
            return Err(
                "tls_server_config.curve_preferences: none is offered here; expected some of CurveP256, CurveP384, X25519"
                    .to_owned(),
            );
        }
        provider.kx_groups = chosen;
    }
    Ok(Arc::new(provider))
}

/// `RequestClientCert` and `RequireAnyClientCert`: a certificate is asked
/// for (required by the second) and its signature of the handshake
/// checked, but not its chain — what Go's policies of those names do.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Whether the client's certificate names one of `allowed` among its
/// DNS, IP, e-mail or URI subject alternative names (exact match; an IP
/// compared as an address).
pub(crate) fn sans_allowed(cert: &CertificateDer<'_>, allowed: &[String]) -> bool {
    use x509_parser::extensions::GeneralName;
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return false;
    };
    let Ok(Some(san)) = parsed.subject_alternative_name() else {
        return false;
    };
    san.value.general_names.iter().any(|name| match name {
        GeneralName::DNSName(s) | GeneralName::RFC822Name(s) | GeneralName::URI(s) => {
            allowed.iter().any(|a| a == s)
        }
        GeneralName::IPAddress(bytes) => {
            let ip = match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes).ok().map(IpAddr::from),
                16 => <[u8; 16]>::try_from(*bytes).ok().map(IpAddr::from),
                _ => None,
            };
            ip.is_some_and(|ip| allowed.iter().any(|a| a.parse::<IpAddr>() == Ok(ip)))
        }
        _ => false,
    })
}
