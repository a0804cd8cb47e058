//! Keeps this server's self-signed CA in the `caBundle` of its own
//! ValidatingWebhookConfiguration (`serve --self-signed --webhook-configuration NAME`), so
//! the API server trusts it without cert-manager.
//!
//! Every replica generates its own CA, so a bundle holds one CA per replica: each replica
//! adds its own, replaces the CA of an earlier run of the same pod (same common name), drops
//! expired certificates and keeps at most [`MAX_OWN_CAS`] of this webhook's CAs, the newest.
//! It looks again every interval, so a CA removed by a re-applied manifest or pruned by
//! another replica comes back. It only gets and patches that one object, with the
//! resourceVersion it read as a precondition, so replicas patching at once never lose each
//! other's CA.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};

use super::describe_api_error;

/// The common name of every CA this webhook generates starts with this.
pub const CA_NAME_PREFIX: &str = "composition-webhook CA";

/// At most this many of this webhook's CAs stay in a `caBundle`: a rolling update of two
/// replicas has at most four pods alive at once.
pub const MAX_OWN_CAS: usize = 8;

/// Conflicting patches (another replica patched between our get and patch) retried at once.
const CONFLICT_RETRIES: usize = 5;

/// Why the CA could not be published.
#[derive(Debug, thiserror::Error)]
pub enum CaBundleError {
    /// The webhook configuration is not in the cluster.
    #[error("ValidatingWebhookConfiguration {name} does not exist")]
    NotFound {
        /// Its name.
        name: String,
    },
    /// RBAC refused the call.
    #[error(
        "the API server refused to {verb} ValidatingWebhookConfiguration {name}: {status} (RBAC must allow get and patch on validatingwebhookconfigurations named {name})"
    )]
    Forbidden {
        /// `get` or `patch`.
        verb: &'static str,
        /// The object's name.
        name: String,
        /// The API server's status, e.g. `403 Forbidden`.
        status: String,
    },
    /// The object has no webhook to put the CA in.
    #[error("ValidatingWebhookConfiguration {name} has no webhooks")]
    NoWebhooks {
        /// Its name.
        name: String,
    },
    /// Other replicas kept patching between our get and patch.
    #[error(
        "ValidatingWebhookConfiguration {name} changed under every patch ({CONFLICT_RETRIES} tries)"
    )]
    Conflicts {
        /// Its name.
        name: String,
    },
    /// Any other failure of the call (unreachable API server, 5xx, a rejected patch).
    #[error("cannot {verb} ValidatingWebhookConfiguration {name}: {detail}")]
    Api {
        /// `get` or `patch`.
        verb: &'static str,
        /// The object's name.
        name: String,
        /// What the API server or the client said.
        detail: String,
    },
    /// The CA generated at start is not a certificate (a bug).
    #[error("the generated CA certificate does not parse: {0}")]
    OwnCa(String),
}

/// What one look at the webhook configuration found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every webhook's `caBundle` already held the CA as wanted.
    Unchanged,
    /// The bundles were patched.
    Patched,
}

/// A failed look: the error, and whether the CA was already in every webhook's bundle (the
/// API server trusts this server meanwhile), when the get told.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong.
    pub error: CaBundleError,
    /// `Some(true)` when the CA was in every bundle, `None` when the get failed.
    pub present: Option<bool>,
}

/// The webhook configurations' API.
pub fn api(client: kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client,
        &ApiResource::erase::<ValidatingWebhookConfiguration>(&()),
    )
}

/// Publishes `ca_pem` in the webhook configuration `name` until the task is dropped:
/// `report(trusted, detail)` says when the API server trusts this server (every webhook's
/// bundle holds the CA) and when it stops or starts doing so.
pub async fn keep(
    api: Api<DynamicObject>,
    name: String,
    ca_pem: String,
    interval: Duration,
    report: impl Fn(bool, String) + Send + 'static,
) {
    let ours = match CertificateDer::from_pem_slice(ca_pem.as_bytes()) {
        Ok(der) => der.to_vec(),
        Err(e) => {
            let error = CaBundleError::OwnCa(e.to_string());
            tracing::error!(error = %error, "cannot publish the CA");
            report(false, error.to_string());
            return;
        }
    };
    let mut trusted = None;
    let mut backoff = Duration::from_secs(1);
    loop {
        let wait = match reconcile(&api, &name, &ours, now()).await {
            Ok(outcome) => {
                if outcome == Outcome::Patched {
                    tracing::info!(webhook_configuration = %name, "CA added to caBundle");
                }
                if trusted != Some(true) {
                    report(
                        true,
                        format!(
                            "the caBundle of ValidatingWebhookConfiguration {name} holds this server's CA"
                        ),
                    );
                    trusted = Some(true);
                }
                backoff = Duration::from_secs(1);
                interval
            }
            Err(failure) => {
                tracing::warn!(error = %failure.error, webhook_configuration = %name, "cannot publish the CA");
                // An unreachable API server calls nobody: a CA already published stays so.
                let now_trusted = failure.present.or(trusted).unwrap_or(false);
                if !now_trusted {
                    report(
                        false,
                        format!(
                            "this server's CA is not in the caBundle yet: {}",
                            failure.error
                        ),
                    );
                }
                trusted = Some(now_trusted);
                let wait = backoff;
                backoff = (backoff * 2).min(interval);
                wait
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// One look: gets the webhook configuration and, when a bundle lacks the CA `ours` (DER) or
/// holds certificates to drop, patches every webhook's bundle at the resourceVersion read.
pub async fn reconcile(
    api: &Api<DynamicObject>,
    name: &str,
    ours: &[u8],
    now: i64,
) -> Result<Outcome, Failure> {
    for _ in 0..CONFLICT_RETRIES {
        let object = api.get(name).await.map_err(|e| Failure {
            error: call_error("get", name, e),
            present: None,
        })?;
        let webhooks = match object.data.get("webhooks").and_then(Value::as_array) {
            Some(w) if !w.is_empty() => w.clone(),
            _ => {
                return Err(Failure {
                    error: CaBundleError::NoWebhooks { name: name.into() },
                    present: Some(false),
                });
            }
        };
        let mut patched = webhooks.clone();
        let mut present = true;
        let mut changed = false;
        for webhook in patched.iter_mut().filter(|w| w.is_object()) {
            let current = webhook
                .pointer("/clientConfig/caBundle")
                .and_then(Value::as_str)
                .and_then(|b| STANDARD.decode(b).ok())
                .unwrap_or_default();
            present &= certificates(&current).iter().any(|c| c == ours);
            if let Some(bundle) = merged(&current, ours, now)? {
                webhook["clientConfig"]["caBundle"] = Value::String(STANDARD.encode(bundle));
                changed = true;
            }
        }
        if !changed {
            return Ok(Outcome::Unchanged);
        }
        let patch = json!({
            "metadata": {"resourceVersion": object.metadata.resource_version},
            "webhooks": patched,
        });
        let params = PatchParams {
            field_manager: Some("composition-webhook".into()),
            ..PatchParams::default()
        };
        match api.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(Outcome::Patched),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => {
                return Err(Failure {
                    error: call_error("patch", name, e),
                    present: Some(present),
                });
            }
        }
    }
    Err(Failure {
        error: CaBundleError::Conflicts { name: name.into() },
        present: None,
    })
}

fn call_error(verb: &'static str, name: &str, error: kube::Error) -> CaBundleError {
    match error {
        kube::Error::Api(status) if status.code == 404 && verb == "get" => {
            CaBundleError::NotFound { name: name.into() }
        }
        kube::Error::Api(status) if matches!(status.code, 401 | 403) => CaBundleError::Forbidden {
            verb,
            name: name.into(),
            status: describe_api_error(&status),
        },
        kube::Error::Api(status) => CaBundleError::Api {
            verb,
            name: name.into(),
            detail: format!("{}: {}", describe_api_error(&status), status.message),
        },
        other => CaBundleError::Api {
            verb,
            name: name.into(),
            detail: other.to_string(),
        },
    }
}

impl From<CaBundleError> for Failure {
    fn from(error: CaBundleError) -> Self {
        Failure {
            error,
            present: None,
        }
    }
}

/// The certificates (DER) of a PEM bundle; none when it is not PEM.
fn certificates(pem: &[u8]) -> Vec<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem)
        .map_while(Result::ok)
        .map(|c| c.to_vec())
        .collect()
}

/// A certificate of a bundle, as far as merging needs it.
struct Held {
    der: Vec<u8>,
    common_name: Option<String>,
    not_before: i64,
    not_after: i64,
}

impl Held {
    fn parse(der: Vec<u8>) -> Option<Held> {
        let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
        let common_name = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_owned);
        let validity = cert.validity();
        let (not_before, not_after) = (
            validity.not_before.timestamp(),
            validity.not_after.timestamp(),
        );
        Some(Held {
            der,
            common_name,
            not_before,
            not_after,
        })
    }

    fn own(&self) -> bool {
        self.common_name
            .as_deref()
            .is_some_and(|cn| cn.starts_with(CA_NAME_PREFIX))
    }
}

/// The bundle `existing` (PEM) with the CA `ours` (DER) in it, at time `now` (Unix seconds):
/// expired certificates and earlier CAs of the same name dropped, at most [`MAX_OWN_CAS`] of
/// this webhook's CAs (the newest) kept, other certificates kept in their order. `None`
/// when `existing` is that already.
pub fn merged(existing: &[u8], ours: &[u8], now: i64) -> Result<Option<String>, CaBundleError> {
    let ours = Held::parse(ours.to_vec())
        .ok_or_else(|| CaBundleError::OwnCa("not an X.509 certificate".into()))?;
    let before = certificates(existing);
    let mut kept: Vec<Held> = Vec::new();
    let mut found = false;
    for der in &before {
        match Held::parse(der.clone()) {
            Some(held) if held.der == ours.der => {
                found = true;
                kept.push(held);
            }
            Some(held) if held.not_after < now => {}
            Some(held) if held.common_name.is_some() && held.common_name == ours.common_name => {}
            Some(held) => kept.push(held),
            // Not ours to judge: kept as it is.
            None => kept.push(Held {
                der: der.clone(),
                common_name: None,
                not_before: i64::MIN,
                not_after: i64::MAX,
            }),
        }
    }
    let mut own: Vec<(i64, usize)> = kept
        .iter()
        .enumerate()
        .filter(|(_, h)| h.own() && h.der != ours.der)
        .map(|(i, h)| (h.not_before, i))
        .collect();
    // Room for ours beside the others.
    if own.len() >= MAX_OWN_CAS {
        own.sort_unstable();
        let drop: Vec<usize> = own[..=own.len() - MAX_OWN_CAS]
            .iter()
            .map(|&(_, i)| i)
            .collect();
        kept = kept
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !drop.contains(i))
            .map(|(_, h)| h)
            .collect();
    }
    if !found {
        kept.push(ours);
    }
    let after: Vec<&Vec<u8>> = kept.iter().map(|h| &h.der).collect();
    if after.len() == before.len() && after.iter().zip(&before).all(|(a, b)| *a == b) {
        return Ok(None);
    }
    Ok(Some(pem(&after)))
}

/// PEM text of certificates.
fn pem(ders: &[&Vec<u8>]) -> String {
    let mut out = String::new();
    for der in ders {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let encoded = STANDARD.encode(der);
        for line in encoded.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, IsCa, KeyPair};

    /// A CA named `name`, valid from `from` to `to` (Unix seconds).
    fn ca(name: &str, from: i64, to: i64) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.not_before = time::OffsetDateTime::from_unix_timestamp(from).expect("time");
        params.not_after = time::OffsetDateTime::from_unix_timestamp(to).expect("time");
        let key = KeyPair::generate().expect("key");
        params.self_signed(&key).expect("cert").der().to_vec()
    }

    fn bundle(ders: &[&Vec<u8>]) -> Vec<u8> {
        pem(ders).into_bytes()
    }

    fn names(pem: &str) -> Vec<String> {
        certificates(pem.as_bytes())
            .into_iter()
            .filter_map(Held::parse)
            .filter_map(|h| h.common_name)
            .collect()
    }

    const NOW: i64 = 1_800_000_000;
    const YEAR: i64 = 365 * 86_400;

    #[test]
    fn an_empty_or_unreadable_bundle_gets_our_ca() {
        let ours = ca("composition-webhook CA pod-a", NOW - 60, NOW + YEAR);
        for existing in [&b""[..], b"\n", b"not PEM"] {
            let merged = merged(existing, &ours, NOW)
                .expect("merge")
                .expect("changed");
            assert_eq!(names(&merged), ["composition-webhook CA pod-a"]);
        }
    }

    #[test]
    fn a_bundle_holding_our_ca_is_left_alone() {
        let ours = ca("composition-webhook CA pod-a", NOW - 60, NOW + YEAR);
        let other = ca("composition-webhook CA pod-b", NOW - 30, NOW + YEAR);
        let existing = bundle(&[&other, &ours]);
        assert_eq!(merged(&existing, &ours, NOW).expect("merge"), None);
    }

    #[test]
    fn other_replicas_and_foreign_cas_stay_while_earlier_runs_and_expired_ones_go() {
        let ours = ca("composition-webhook CA pod-a", NOW - 60, NOW + YEAR);
        let earlier_run = ca("composition-webhook CA pod-a", NOW - 600, NOW + YEAR);
        let sibling = ca("composition-webhook CA pod-b", NOW - 30, NOW + YEAR);
        let expired = ca("composition-webhook CA pod-c", NOW - 2 * YEAR, NOW - 1);
        let admins = ca("corporate root", NOW - YEAR, NOW + YEAR);
        let existing = bundle(&[&admins, &earlier_run, &expired, &sibling]);
        let merged = merged(&existing, &ours, NOW)
            .expect("merge")
            .expect("changed");
        assert_eq!(
            names(&merged),
            [
                "corporate root",
                "composition-webhook CA pod-b",
                "composition-webhook CA pod-a"
            ]
        );
    }

    #[test]
    fn at_most_eight_of_our_cas_stay_the_newest_and_ours_always() {
        let ours = ca("composition-webhook CA pod-new", NOW - 3_600, NOW + YEAR);
        let olds: Vec<Vec<u8>> = (0..10)
            .map(|i| {
                // Pod 9 is newer than ours, pod 0 the oldest.
                ca(
                    &format!("composition-webhook CA pod-{i}"),
                    NOW - 10_000 + i * 1_000,
                    NOW + YEAR,
                )
            })
            .collect();
        let existing = bundle(&olds.iter().collect::<Vec<_>>());
        let merged = merged(&existing, &ours, NOW)
            .expect("merge")
            .expect("changed");
        let names = names(&merged);
        assert_eq!(names.len(), MAX_OWN_CAS);
        assert_eq!(
            names,
            [
                "composition-webhook CA pod-3",
                "composition-webhook CA pod-4",
                "composition-webhook CA pod-5",
                "composition-webhook CA pod-6",
                "composition-webhook CA pod-7",
                "composition-webhook CA pod-8",
                "composition-webhook CA pod-9",
                "composition-webhook CA pod-new",
            ]
        );
        // Merging again changes nothing.
        let again = super::merged(merged.as_bytes(), &ours, NOW).expect("merge");
        assert_eq!(again, None);
    }
}
