//! Certificates made like Crossplane's (`../shared/research/functions.md` §2.2), with rcgen:
//! for tests that call functions over mTLS as Crossplane does.

#![allow(dead_code)]

/// A CA, a server certificate for `server_names` and a client certificate, as Crossplane
/// makes them (functions.md §2.2), though with ECDSA P-256 keys (ring makes no RSA keys).
pub struct Certificates {
    /// The CA's certificate.
    pub ca: String,
    /// The CA, to sign more.
    pub issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    /// The server certificate and key.
    pub server: (String, String),
    /// The client certificate and key (Secret `crossplane-tls-client`'s).
    pub client: (String, String),
}

pub fn crossplane(server_names: &[String]) -> Certificates {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(vec!["crossplane-root-ca".to_string()]).expect("CA");
    ca.distinguished_name.push(DnType::CommonName, "Crossplane");
    ca.distinguished_name
        .push(DnType::OrganizationName, "Crossplane");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().expect("a key");
    let ca_cert = ca.self_signed(&ca_key).expect("self-signed");
    let issuer = Issuer::new(ca, ca_key);
    let server = leaf(&issuer, server_names, ExtendedKeyUsagePurpose::ServerAuth);
    let client = leaf(
        &issuer,
        &["crossplane.crossplane-system".to_string()],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    Certificates {
        ca: ca_cert.pem(),
        issuer,
        server,
        client,
    }
}

/// A certificate for `names` with `usage`, and its key, both PEM.
pub fn leaf(
    issuer: &rcgen::Issuer<'static, rcgen::KeyPair>,
    names: &[String],
    usage: rcgen::ExtendedKeyUsagePurpose,
) -> (String, String) {
    use rcgen::{CertificateParams, KeyPair, KeyUsagePurpose};
    let mut params = CertificateParams::new(names.to_vec()).expect("params");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().expect("a key");
    let cert = params.signed_by(&key, issuer).expect("signed");
    (cert.pem(), key.serialize_pem())
}
