//! TLS for the admission port (rustls, ring provider, TLS 1.2 and 1.3).
//!
//! The serving certificate comes from PEM files (a chain is allowed) and is reloaded without
//! a restart: the files are re-read on a timer and a changed, valid pair replaces the one
//! being served. Re-reading by content rather than waiting for file events catches every way
//! files change, including the atomic `..data` symlink swap of Kubernetes Secret volumes,
//! which changes no watched file. A pair that does not load (a half-written update, a key
//! that does not match) is logged and the previous certificate stays in service.
//!
//! `--self-signed` generates a CA and a serving certificate at start instead (rcgen).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::metrics::Metrics;

/// Why a certificate could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file holds no usable PEM.
    #[error("{path}: {what}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The key does not fit the certificate, or is of an unsupported kind.
    #[error("the key in {key} does not go with the certificate in {cert}: {reason}")]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        reason: String,
    },
    /// Generating a self-signed certificate failed.
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// Writing the CA bundle failed.
    #[error("cannot write the CA bundle to {path}: {source}")]
    WriteBundle {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No DNS name for a self-signed certificate.
    #[error("--self-signed needs at least one DNS name (--self-signed-dns-name)")]
    NoDnsName,
}

/// The process-wide crypto provider (ring), installed once, explicitly: rustls refuses to
/// guess when more than one provider is compiled in, and every TLS user (this server, later
/// the Kubernetes client) must agree.
pub fn provider() -> Arc<CryptoProvider> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// A serving certificate with what is worth logging about it.
#[derive(Clone)]
pub struct Loaded {
    /// The chain and key.
    pub key: Arc<CertifiedKey>,
    /// The leaf's DNS names.
    pub dns_names: Vec<String>,
    /// The leaf's notAfter as Unix time.
    pub not_after: i64,
}

impl fmt::Debug for Loaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loaded")
            .field("dns_names", &self.dns_names)
            .field("not_after", &self.not_after)
            .finish()
    }
}

impl Loaded {
    fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        provider: &CryptoProvider,
    ) -> Result<Self, String> {
        let leaf = chain.first().ok_or("no certificate")?.clone();
        let certified = CertifiedKey::from_der(chain, key, provider).map_err(|e| e.to_string())?;
        let (_, parsed) =
            x509_parser::parse_x509_certificate(&leaf).map_err(|e| format!("certificate: {e}"))?;
        let dns_names = parsed
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Loaded {
            key: Arc::new(certified),
            dns_names,
            not_after: parsed.validity().not_after.timestamp(),
        })
    }
}

/// The bytes of a certificate file and of a key file, as read.
pub type PemFiles = (Vec<u8>, Vec<u8>);

/// Reads a certificate chain and its key from PEM files. Also returns the bytes read, which
/// [`watch_files`] tells later changes by.
pub fn load_files(
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
) -> Result<(Loaded, PemFiles), TlsError> {
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    let loaded = load_pem(cert, &cert_pem, key, &key_pem, provider)?;
    Ok((loaded, (cert_pem, key_pem)))
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn load_pem(
    cert: &Path,
    cert_pem: &[u8],
    key: &Path,
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<Loaded, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: cert.to_path_buf(),
            what: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: cert.to_path_buf(),
            what: "no CERTIFICATE block".into(),
        });
    }
    let private = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem {
        path: key.to_path_buf(),
        what: format!("no usable private key: {e}"),
    })?;
    Loaded::new(chain, private, provider).map_err(|reason| TlsError::Mismatch {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        reason,
    })
}

/// Serves the current certificate to every handshake; [`watch_files`] replaces it.
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertResolver {
    /// A resolver serving `key`.
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        CertResolver {
            current: RwLock::new(key),
        }
    }

    fn set(&self, key: Arc<CertifiedKey>) {
        match self.current.write() {
            Ok(mut g) => *g = key,
            Err(poisoned) => *poisoned.into_inner() = key,
        }
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        })
    }
}

/// The rustls configuration of the admission port: TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1.
pub fn server_config(
    provider: Arc<CryptoProvider>,
    resolver: Arc<CertResolver>,
) -> Result<ServerConfig, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Re-reads the certificate and key every `interval` and serves a changed pair once it
/// loads. `served` is the bytes of the pair in service, as [`load_files`] read them: a change
/// made after that load but before this task first runs is a change too. Runs until the
/// process ends.
pub async fn watch_files(
    cert: PathBuf,
    key: PathBuf,
    interval: Duration,
    served: PemFiles,
    resolver: Arc<CertResolver>,
    provider: Arc<CryptoProvider>,
    metrics: Arc<Metrics>,
) {
    let mut last = served;
    // Why the files could not be read, once said (a deleted file is said once, not at every
    // tick).
    let mut unreadable: Option<String> = None;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let (c, k) = match (read(&cert), read(&key)) {
            (Ok(c), Ok(k)) => (c, k),
            // Mid-swap, or gone for now: keep serving, look again next time.
            (Err(e), _) | (_, Err(e)) => {
                let why = e.to_string();
                if unreadable.as_ref() != Some(&why) {
                    tracing::warn!(error = %why, "serving certificate files unreadable; the certificate in service stays");
                    metrics.certificate(None);
                    unreadable = Some(why);
                }
                continue;
            }
        };
        if unreadable.take().is_some() {
            tracing::info!(cert = %cert.display(), "serving certificate files readable again");
        }
        if last.0 == c && last.1 == k {
            continue;
        }
        match load_pem(&cert, &c, &key, &k, &provider) {
            Ok(loaded) => {
                tracing::info!(
                    cert = %cert.display(),
                    dns_names = ?loaded.dns_names,
                    not_after = loaded.not_after,
                    "serving certificate reloaded"
                );
                metrics.certificate(Some(loaded.not_after));
                resolver.set(loaded.key);
            }
            Err(e) => {
                tracing::warn!(error = %e, "serving certificate not reloaded; the previous one stays in service");
                metrics.certificate(None);
            }
        }
        last = (c, k);
    }
}

/// A self-signed CA and a serving certificate it signed, for `dns_names`.
pub struct SelfSigned {
    /// The serving certificate (leaf and CA) and key.
    pub loaded: Loaded,
    /// The CA certificate in PEM: the `caBundle` of the webhook configuration.
    pub ca_pem: String,
    /// The CA, to issue the next serving certificate before this one expires.
    pub issuer: SelfSignedIssuer,
}

/// How long a generated serving certificate is valid; it is replaced after two thirds.
const SELF_SIGNED_LEAF_DAYS: i64 = 365;

/// The generated CA (valid ten years) and what its serving certificates are for.
pub struct SelfSignedIssuer {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_der: CertificateDer<'static>,
    dns_names: Vec<String>,
}

impl SelfSignedIssuer {
    /// A new serving certificate (valid `SELF_SIGNED_LEAF_DAYS` days from an hour before `now`)
    /// chained to the CA.
    pub fn issue(
        &self,
        now: time::OffsetDateTime,
        provider: &CryptoProvider,
    ) -> Result<Loaded, TlsError> {
        use rcgen::{CertificateParams, DnType, KeyPair, KeyUsagePurpose};
        let first = self.dns_names.first().ok_or(TlsError::NoDnsName)?;
        let mut params = CertificateParams::new(self.dns_names.clone())?;
        params.distinguished_name.push(DnType::CommonName, first);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(SELF_SIGNED_LEAF_DAYS);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        let chain = vec![cert.der().clone(), self.ca_der.clone()];
        let private = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| TlsError::Pem {
            path: PathBuf::from("<generated>"),
            what: e.to_string(),
        })?;
        Loaded::new(chain, private, provider).map_err(|reason| TlsError::Mismatch {
            cert: PathBuf::from("<generated>"),
            key: PathBuf::from("<generated>"),
            reason,
        })
    }
}

/// Generates a CA named `ca_common_name` (valid ten years) and a serving certificate (one
/// year) for `dns_names`.
pub fn self_signed(
    dns_names: &[String],
    ca_common_name: &str,
    provider: &CryptoProvider,
) -> Result<SelfSigned, TlsError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    if dns_names.is_empty() {
        return Err(TlsError::NoDnsName);
    }
    let now = time::OffsetDateTime::now_utc();
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_common_name);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.not_before = now - time::Duration::hours(1);
    ca_params.not_after = now + time::Duration::days(3650);
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = SelfSignedIssuer {
        issuer: rcgen::Issuer::new(ca_params, ca_key),
        ca_der: ca_cert.der().clone(),
        dns_names: dns_names.to_vec(),
    };
    Ok(SelfSigned {
        loaded: issuer.issue(now, provider)?,
        ca_pem: ca_cert.pem(),
        issuer,
    })
}

/// How long until a serving certificate valid from `not_before` to `not_after` (Unix
/// seconds) is replaced: two thirds into its life, counted from `now`.
fn renewal_delay(not_before: i64, not_after: i64, now: i64) -> Duration {
    let renew_at = not_before + (not_after - not_before) * 2 / 3;
    Duration::from_secs(u64::try_from(renew_at - now).unwrap_or(0))
}

/// Replaces the generated serving certificate with a new one from the same CA two thirds
/// into its life, so a long-running replica never serves an expired one and its CA (in the
/// `caBundle`) stays the same. Runs until the process ends.
pub async fn renew_self_signed(
    issuer: SelfSignedIssuer,
    mut current: Loaded,
    resolver: Arc<CertResolver>,
    provider: Arc<CryptoProvider>,
    metrics: Arc<Metrics>,
) {
    loop {
        let now = time::OffsetDateTime::now_utc();
        let not_before = current.not_after - SELF_SIGNED_LEAF_DAYS * 86_400 - 3_600;
        tokio::time::sleep(renewal_delay(
            not_before,
            current.not_after,
            now.unix_timestamp(),
        ))
        .await;
        match issuer.issue(time::OffsetDateTime::now_utc(), &provider) {
            Ok(loaded) => {
                tracing::info!(
                    not_after = loaded.not_after,
                    "self-signed serving certificate renewed"
                );
                metrics.certificate(Some(loaded.not_after));
                resolver.set(loaded.key.clone());
                current = loaded;
            }
            Err(e) => {
                tracing::warn!(error = %e, "self-signed serving certificate not renewed; retrying in an hour");
                tokio::time::sleep(Duration::from_secs(3_600)).await;
            }
        }
    }
}

/// Writes the CA bundle (PEM) where the webhook configuration's `caBundle` can be made from.
pub fn write_bundle(path: &Path, pem: &str) -> Result<(), TlsError> {
    std::fs::write(path, pem).map_err(|source| TlsError::WriteBundle {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generated(provider: &CryptoProvider) -> SelfSigned {
        self_signed(
            &["webhook.example.svc".into()],
            "composition-webhook CA test",
            provider,
        )
        .unwrap()
    }

    #[test]
    fn a_renewed_self_signed_certificate_chains_to_the_same_ca() {
        let provider = provider();
        let s = generated(&provider);
        let later = time::OffsetDateTime::now_utc() + time::Duration::days(250);
        let renewed = s.issuer.issue(later, &provider).unwrap();
        assert_ne!(renewed.key.cert[0], s.loaded.key.cert[0]);
        assert_eq!(renewed.key.cert[1], s.loaded.key.cert[1]);
        assert_eq!(renewed.dns_names, ["webhook.example.svc"]);
        assert!(renewed.not_after > s.loaded.not_after + 249 * 86_400);
        // Two thirds into a year's life, from when it was made.
        let day = 86_400;
        assert_eq!(
            renewal_delay(0, 366 * day, 0),
            Duration::from_secs(244 * day as u64)
        );
        assert_eq!(renewal_delay(0, 366 * day, 244 * day + 1), Duration::ZERO);
    }

    #[test]
    fn self_signed_chain_loads_and_round_trips_through_files() {
        let provider = provider();
        let s = generated(&provider);
        assert_eq!(s.loaded.dns_names, ["webhook.example.svc"]);
        assert_eq!(s.loaded.key.cert.len(), 2);
        assert!(s.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(matches!(
            self_signed(&[], "composition-webhook CA test", &provider),
            Err(TlsError::NoDnsName)
        ));
    }

    #[test]
    fn mismatched_and_missing_files_are_explained() {
        let provider = provider();
        let dir = std::env::temp_dir().join(format!("cw-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = load_files(&dir.join("nope.crt"), &dir.join("nope.key"), &provider)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("cannot read "), "{err}");
        let a = rcgen::generate_simple_self_signed(vec!["a".to_string()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b".to_string()]).unwrap();
        std::fs::write(dir.join("a.crt"), a.cert.pem()).unwrap();
        std::fs::write(dir.join("b.key"), b.signing_key.serialize_pem()).unwrap();
        let err = load_files(&dir.join("a.crt"), &dir.join("b.key"), &provider)
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not go with the certificate"), "{err}");
        std::fs::write(dir.join("empty.crt"), "hello").unwrap();
        let err = load_files(&dir.join("empty.crt"), &dir.join("b.key"), &provider)
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("no CERTIFICATE block"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
