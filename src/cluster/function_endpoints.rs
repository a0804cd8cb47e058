//! Where the cluster's composition functions answer, and the client certificate they
//! require, as Crossplane itself finds them (functions.md §2): two watches, started only
//! when [`super::ClusterOptions::function_calls`] asks for them.
//!
//! - **FunctionRevisions** (`functionrevisions.pkg.crossplane.io`, v1, cluster scoped): a
//!   Function's active revision is one with the label `pkg.crossplane.io/package=<function>`
//!   and `spec.desiredState: Active`; its `status.endpoint` (`dns:///<service>.<namespace>:9443`)
//!   is where Crossplane dials it. Only each revision's name, uid, resourceVersion, that
//!   label, the desired state and the endpoint are kept. When two revisions of a Function
//!   are active at once (a moment of an upgrade), the first by name whose endpoint can be
//!   dialled is called (Crossplane takes whichever its cache lists first).
//! - **The client certificate Secret** (`crossplane-tls-client` in Crossplane's namespace,
//!   watched alone by `fieldSelector=metadata.name=crossplane-tls-client`, so a Secret filled
//!   or replaced later is followed): its `tls.crt`, `tls.key` and `ca.crt`, kept in memory
//!   for mTLS, as function servers require a client certificate their CA signed. The key is
//!   never logged nor shown.
//!
//! Reviews never wait for either: [`FunctionEndpoints::resolve`] answers from what the
//! watches hold now, or says why it cannot ([`Unavailable`]): not listed yet, refused by
//! RBAC, not served (no Crossplane: 404), no active revision, no endpoint yet, the Secret
//! missing or incomplete. After a first list, a broken watch keeps the last one.
//! [`FunctionEndpoints::generation`] changes whenever what `resolve` answers for any function
//! may have changed, for the verdict cache.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use kube::runtime::watcher::{self, Event};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Deserializer, Serialize};

use super::ListStatus;
use super::definitions::slim_metadata;
use super::entries::{EntryError, ErrorClass, rfc3339};
use crate::model::function::PKG_GROUP;
use crate::runner::{ClientTls, Config};

/// The FunctionRevisions' resource, as RBAC rules and metrics name it.
pub const REVISIONS_PLURAL: &str = "functionrevisions";
/// The Secrets' resource, as RBAC rules and metrics name it.
pub const SECRETS_PLURAL: &str = "secrets";
/// The label naming a revision's Function (its parent package).
pub const PACKAGE_LABEL: &str = "pkg.crossplane.io/package";
/// The Secret holding Crossplane's client certificate, key and CA.
pub const CLIENT_SECRET: &str = "crossplane-tls-client";
/// Crossplane's namespace when nothing says otherwise (its Helm chart's).
pub const DEFAULT_NAMESPACE: &str = "crossplane-system";
/// The Secret's keys, as Crossplane's initializer writes them.
const SECRET_KEYS: [&str; 3] = ["tls.crt", "tls.key", "ca.crt"];

/// Calls to the cluster's functions: where to find the client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionCallOptions {
    /// Crossplane's namespace, which holds Secret `crossplane-tls-client`.
    pub namespace: String,
}

impl Default for FunctionCallOptions {
    fn default() -> Self {
        FunctionCallOptions {
            namespace: DEFAULT_NAMESPACE.to_string(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// What the watches read

/// A FunctionRevision as the watch keeps it.
#[derive(Debug, Clone, Deserialize)]
pub struct RevisionObject {
    /// Name, uid, resourceVersion and the label `pkg.crossplane.io/package` alone.
    #[serde(deserialize_with = "revision_metadata", default)]
    pub metadata: ObjectMeta,
    /// `spec.desiredState`.
    #[serde(default)]
    pub spec: RevisionSpec,
    /// `status.endpoint`.
    #[serde(default)]
    pub status: Option<RevisionStatus>,
}

/// The part of a revision's spec kept.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSpec {
    /// `Active` or `Inactive`.
    #[serde(default)]
    pub desired_state: Option<String>,
}

/// The part of a revision's status kept.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RevisionStatus {
    /// Where the revision's function answers: `dns:///<service>.<namespace>:9443`.
    #[serde(default)]
    pub endpoint: Option<String>,
}

/// The metadata kept: no managed fields, no annotation, no label but the package's.
fn revision_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Slim {
        name: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        #[serde(default)]
        labels: Option<BTreeMap<String, String>>,
    }
    let s = Slim::deserialize(d)?;
    let labels = s
        .labels
        .and_then(|mut l| l.remove_entry(PACKAGE_LABEL))
        .map(|(k, v)| BTreeMap::from([(k, v)]));
    Ok(ObjectMeta {
        name: s.name,
        uid: s.uid,
        resource_version: s.resource_version,
        labels,
        ..ObjectMeta::default()
    })
}

impl kube::Resource for RevisionObject {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("FunctionRevision")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(PKG_GROUP)
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(REVISIONS_PLURAL)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The client certificate Secret as the watch keeps it: its three keys, nothing else.
#[derive(Clone, Deserialize)]
pub struct SecretObject {
    /// Name, uid and resourceVersion.
    #[serde(deserialize_with = "slim_metadata", default)]
    pub metadata: ObjectMeta,
    /// `tls.crt`, `tls.key` and `ca.crt`, decoded from base64; other keys are skipped.
    #[serde(default)]
    data: Option<SecretData>,
}

#[derive(Clone, Default, Deserialize)]
struct SecretData {
    #[serde(rename = "tls.crt")]
    tls_crt: Option<ByteString>,
    #[serde(rename = "tls.key")]
    tls_key: Option<ByteString>,
    #[serde(rename = "ca.crt")]
    ca_crt: Option<ByteString>,
}

impl std::fmt::Debug for SecretObject {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretObject")
            .field("metadata", &self.metadata)
            .finish_non_exhaustive()
    }
}

impl kube::Resource for SecretObject {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Secret")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(SECRETS_PLURAL)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

// ---------------------------------------------------------------------------------------
// The public API

/// How to call one function now.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// [`Config::insecure`]'s limits, the address `https://<service>.<namespace>:9443` and
    /// mTLS with the client certificate Secret, the server certificate checked against the
    /// endpoint's host (`<service>.<namespace>`, one of its names).
    pub config: Config,
    /// What is called: the revision's name, `@`, its `status.endpoint`
    /// (`function-auto-ready-1a2b3c@dns:///function-auto-ready.crossplane-system:9443`).
    pub revision: String,
}

impl Endpoint {
    /// The same function reached at `addr` (one pod of its headless Service, or a test's
    /// server): the server certificate is still checked against the endpoint's host name.
    pub fn at(&self, addr: SocketAddr) -> Endpoint {
        let mut endpoint = self.clone();
        endpoint.config.address = format!("https://{addr}");
        endpoint
    }
}

/// Why a function cannot be called now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// The first list of FunctionRevisions has not come (yet, or it failed to connect).
    #[error("FunctionRevisions are not listed yet{}", why(.reason))]
    RevisionsNotListed {
        /// The last attempt's error (`the API server is unreachable`).
        reason: Option<String>,
    },
    /// The API server refused to list FunctionRevisions (RBAC).
    #[error("FunctionRevisions are not readable: {error}")]
    RevisionsNotReadable {
        /// Its answer: `403 Forbidden: functionrevisions.pkg.crossplane.io is forbidden: ...`.
        error: String,
    },
    /// The API server does not serve FunctionRevisions: Crossplane is not installed.
    #[error(
        "the API server does not serve functionrevisions.pkg.crossplane.io v1: Crossplane is not installed"
    )]
    RevisionsNotServed,
    /// No revision of the Function is active.
    #[error(
        "no active FunctionRevision of Function {function:?} (label {PACKAGE_LABEL}={function}, spec.desiredState: Active)"
    )]
    NoActiveRevision {
        /// The Function.
        function: String,
    },
    /// Its active revisions have no endpoint yet (the package runtime has not made the
    /// Service).
    #[error(
        "no active FunctionRevision of Function {function:?} (label {PACKAGE_LABEL}={function}, spec.desiredState: Active) has a status.endpoint yet: {}",
        .revisions.join(", ")
    )]
    NoEndpoint {
        /// The Function.
        function: String,
        /// Its active revisions.
        revisions: Vec<String>,
    },
    /// The active revision's endpoint cannot be dialled.
    #[error(
        "FunctionRevision {revision:?} has status.endpoint {endpoint:?}, which is not dns:///host:port or host:port"
    )]
    BadEndpoint {
        /// The revision.
        revision: String,
        /// Its `status.endpoint`.
        endpoint: String,
    },
    /// The Secret has not been read yet (or reading it failed to connect).
    #[error(
        "the client certificate Secret {namespace}/{CLIENT_SECRET} is not read yet{}",
        why(.reason)
    )]
    SecretNotListed {
        /// Crossplane's namespace.
        namespace: String,
        /// The last attempt's error.
        reason: Option<String>,
    },
    /// The API server refused to read the Secret (RBAC).
    #[error("the client certificate Secret {namespace}/{CLIENT_SECRET} is not readable: {error}")]
    SecretNotReadable {
        /// Crossplane's namespace.
        namespace: String,
        /// Its answer: `403 Forbidden: secrets "crossplane-tls-client" is forbidden: ...`.
        error: String,
    },
    /// No such Secret in Crossplane's namespace.
    #[error(
        "the client certificate Secret {namespace}/{CLIENT_SECRET} is missing: functions in the cluster require mTLS"
    )]
    SecretMissing {
        /// Crossplane's namespace.
        namespace: String,
    },
    /// The Secret lacks a key (Crossplane's chart creates it empty; its init container
    /// fills it).
    #[error(
        "the client certificate Secret {namespace}/{CLIENT_SECRET} lacks {} (it needs tls.crt, tls.key and ca.crt): functions in the cluster require mTLS",
        .missing.join(", ")
    )]
    SecretIncomplete {
        /// Crossplane's namespace.
        namespace: String,
        /// The keys missing or empty.
        missing: Vec<&'static str>,
    },
    /// A key of the Secret holds no usable PEM.
    #[error("the client certificate Secret {namespace}/{CLIENT_SECRET}: {key} {problem}")]
    SecretUnusable {
        /// Crossplane's namespace.
        namespace: String,
        /// `tls.crt`, `tls.key` or `ca.crt`.
        key: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

fn why(reason: &Option<String>) -> String {
    reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default()
}

/// Where the cluster's functions answer and how to authenticate to them; cheap to clone
/// (one shared state behind an `Arc`).
#[derive(Clone)]
pub struct FunctionEndpoints {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FunctionEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionEndpoints")
            .field("namespace", &self.inner.namespace)
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

struct Inner {
    namespace: String,
    state: Mutex<State>,
}

impl FunctionEndpoints {
    /// Nothing listed yet; the Secret looked for in `options.namespace`.
    pub fn new(options: &FunctionCallOptions) -> Self {
        let namespace = options.namespace.clone();
        let state = State::new(&namespace);
        FunctionEndpoints {
            inner: Arc::new(Inner {
                namespace,
                state: Mutex::new(state),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a few assignments: a poisoned lock still holds consistent data.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Crossplane's namespace, where the client certificate Secret is read.
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// How to call `function` now: its active revision's endpoint with the client
    /// certificate, or why it cannot be called. Never waits.
    pub fn resolve(&self, function: &str) -> Result<Endpoint, Unavailable> {
        let state = self.lock();
        let published = &state.published;
        let active = match &published.revisions {
            Err(e) => return Err(e.clone()),
            Ok(functions) => match functions.get(function) {
                None => {
                    return Err(Unavailable::NoActiveRevision {
                        function: function.to_string(),
                    });
                }
                Some(Err(e)) => return Err(e.clone()),
                Some(Ok(active)) => active,
            },
        };
        let pems = published.secret.as_ref().map_err(Clone::clone)?;
        let mut config = Config::insecure(active.target.address());
        config.tls = Some(ClientTls {
            ca_pem: pems.ca.clone(),
            cert_pem: pems.cert.clone(),
            key_pem: pems.key.clone(),
            server_name: active.target.host.clone(),
        });
        Ok(Endpoint {
            config,
            revision: format!("{}@{}", active.revision, active.endpoint),
        })
    }

    /// Changes whenever what [`FunctionEndpoints::resolve`] answers for any function may
    /// have changed: an active revision or its endpoint, the client Secret, or why either is
    /// unavailable (for the verdict cache). 0 at start.
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// What `/debug/schemas` shows: both watches and each Function's endpoint; no PEM.
    pub fn view(&self) -> FunctionEndpointsView {
        let state = self.lock();
        let functions = match &state.published.revisions {
            Ok(functions) => functions
                .iter()
                .map(|(function, active)| match active {
                    Ok(a) => FunctionEndpointView {
                        function: function.clone(),
                        revision: Some(a.revision.clone()),
                        endpoint: Some(a.endpoint.clone()),
                        error: None,
                    },
                    Err(e) => FunctionEndpointView {
                        function: function.clone(),
                        revision: None,
                        endpoint: None,
                        error: Some(e.to_string()),
                    },
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        FunctionEndpointsView {
            generation: state.generation,
            revisions: RevisionsView {
                resource: REVISIONS_PLURAL,
                objects: state.revisions.len(),
                status: state.revisions_status.clone(),
                functions,
                error: state
                    .published
                    .revisions
                    .as_ref()
                    .err()
                    .map(ToString::to_string),
            },
            client_secret: SecretView {
                namespace: self.inner.namespace.clone(),
                name: CLIENT_SECRET,
                status: state.secret_status.clone(),
                resource_version: state.secret.as_ref().map(|s| s.resource_version.clone()),
                usable: state.published.secret.is_ok(),
                error: state
                    .published
                    .secret
                    .as_ref()
                    .err()
                    .map(ToString::to_string),
            },
        }
    }

    /// A list or watch of `resource` (`functionrevisions`, `secrets`) succeeded: its
    /// transient error is over.
    pub(crate) fn contact_restored(&self, resource: &str) {
        let mut state = self.lock();
        let status = match resource {
            REVISIONS_PLURAL => &mut state.revisions_status,
            SECRETS_PLURAL => &mut state.secret_status,
            _ => return,
        };
        if status
            .last_error
            .take_if(|e| e.class == ErrorClass::Transient)
            .is_some()
        {
            tracing::info!(resource, "API server reachable again");
            state.publish();
        }
    }

    // The watches' events.

    fn revisions_listed(&self, list: Vec<Revision>) -> u64 {
        let mut state = self.lock();
        state.revisions = list.into_iter().map(|r| (r.name.clone(), r)).collect();
        let status = &mut state.revisions_status;
        listed(status);
        let lists = status.lists;
        state.publish();
        lists
    }

    fn revision_applied(&self, revision: Revision) {
        let mut state = self.lock();
        state.revisions_status.last_error = None;
        state.revisions.insert(revision.name.clone(), revision);
        state.publish();
    }

    fn revision_deleted(&self, name: &str) {
        let mut state = self.lock();
        state.revisions_status.last_error = None;
        state.revisions.remove(name);
        state.publish();
    }

    fn revisions_failed(&self, error: &watcher::Error) {
        let (class, message, detail, code) = super::watch::describe(error, "FunctionRevisions");
        let absent = matches!(error, watcher::Error::InitialListFailed(_)) && code == Some(404);
        let mut guard = self.lock();
        let state = &mut *guard;
        let status = &mut state.revisions_status;
        if absent {
            if !status.absent {
                tracing::info!(
                    resource = REVISIONS_PLURAL,
                    "not served by the API server: no Crossplane, no function to call"
                );
            }
            status.synced = false;
            state.revisions.clear();
        } else if code == Some(410) {
            tracing::info!(resource = REVISIONS_PLURAL, error = %message, "watch expired: relisting");
        } else {
            tracing::warn!(resource = REVISIONS_PLURAL, error = %message, detail = detail.as_deref().unwrap_or_default(), "watch failed: the last list of FunctionRevisions is kept");
        }
        let status = &mut state.revisions_status;
        status.absent = absent;
        status.last_error = Some(EntryError::now(class, message).with_detail(detail));
        state.revisions_refusal = refusal(error);
        state.publish();
    }

    fn secret_listed(&self, secret: Option<ClientSecret>) -> u64 {
        let mut state = self.lock();
        state.secret = secret;
        let status = &mut state.secret_status;
        listed(status);
        let lists = status.lists;
        state.publish();
        lists
    }

    fn secret_applied(&self, secret: Option<ClientSecret>) {
        let mut state = self.lock();
        state.secret_status.last_error = None;
        state.secret = secret;
        state.publish();
    }

    fn secret_failed(&self, error: &watcher::Error) {
        let (class, message, detail, code) =
            super::watch::describe(error, "the client certificate Secret");
        if code == Some(410) {
            tracing::info!(resource = SECRETS_PLURAL, error = %message, "watch expired: relisting");
        } else {
            tracing::warn!(resource = SECRETS_PLURAL, error = %message, detail = detail.as_deref().unwrap_or_default(), "watch failed: the last client certificate Secret is kept");
        }
        let mut state = self.lock();
        state.secret_status.last_error = Some(EntryError::now(class, message).with_detail(detail));
        state.secret_refusal = refusal(error);
        state.publish();
    }
}

/// A full list arrived on `status`.
fn listed(status: &mut ListStatus) {
    status.synced = true;
    status.absent = false;
    status.lists += 1;
    status.listed_at = Some(rfc3339(std::time::SystemTime::now()));
    status.last_error = None;
}

/// The API server's refusal of a list or watch (401, 403; a 404 for the Secret), in its
/// own words: `403 Forbidden: secrets "crossplane-tls-client" is forbidden: User ...`.
fn refusal(error: &watcher::Error) -> Option<String> {
    match error {
        watcher::Error::InitialListFailed(e @ kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(e @ kube::Error::Api(s))
        | watcher::Error::WatchFailed(e @ kube::Error::Api(s))
            if super::error_class(s.code) == ErrorClass::Data =>
        {
            Some(super::describe_kube_error(e))
        }
        _ => None,
    }
}

/// `/debug/schemas`' view of the function endpoints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionEndpointsView {
    /// [`FunctionEndpoints::generation`].
    pub generation: u64,
    /// The FunctionRevisions' watch and each Function's active endpoint.
    pub revisions: RevisionsView,
    /// The client certificate Secret's watch.
    pub client_secret: SecretView,
}

/// The FunctionRevisions' watch.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionsView {
    /// `functionrevisions`.
    pub resource: &'static str,
    /// Revisions listed.
    pub objects: usize,
    /// The watch.
    #[serde(flatten)]
    pub status: ListStatus,
    /// Each Function with an active revision.
    pub functions: Vec<FunctionEndpointView>,
    /// Why no Function can be called, if none can.
    pub error: Option<String>,
}

/// One Function's active revision.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionEndpointView {
    /// The Function (the revisions' `pkg.crossplane.io/package` label).
    pub function: String,
    /// The revision called.
    pub revision: Option<String>,
    /// Its `status.endpoint`.
    pub endpoint: Option<String>,
    /// Why it cannot be called.
    pub error: Option<String>,
}

/// The client certificate Secret's watch; never its data.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretView {
    /// Crossplane's namespace.
    pub namespace: String,
    /// `crossplane-tls-client`.
    pub name: &'static str,
    /// The watch.
    #[serde(flatten)]
    pub status: ListStatus,
    /// The Secret's resourceVersion, when there is one.
    pub resource_version: Option<String>,
    /// Whether its certificate, key and CA can be used.
    pub usable: bool,
    /// Why they cannot.
    pub error: Option<String>,
}

// ---------------------------------------------------------------------------------------
// The state

/// One revision as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Revision {
    name: String,
    uid: String,
    resource_version: String,
    /// The `pkg.crossplane.io/package` label: its Function.
    function: Option<String>,
    active: bool,
    endpoint: Option<String>,
}

impl From<&RevisionObject> for Revision {
    fn from(r: &RevisionObject) -> Self {
        Revision {
            name: r.metadata.name.clone().unwrap_or_default(),
            uid: r.metadata.uid.clone().unwrap_or_default(),
            resource_version: r.metadata.resource_version.clone().unwrap_or_default(),
            function: r
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(PACKAGE_LABEL))
                .cloned(),
            active: r.spec.desired_state.as_deref() == Some("Active"),
            endpoint: r
                .status
                .as_ref()
                .and_then(|s| s.endpoint.clone())
                .filter(|e| !e.trim().is_empty()),
        }
    }
}

/// The Secret as listed.
#[derive(Clone, PartialEq, Eq)]
struct ClientSecret {
    resource_version: String,
    /// Each of [`SECRET_KEYS`], when present.
    cert: Option<Vec<u8>>,
    key: Option<Vec<u8>>,
    ca: Option<Vec<u8>>,
}

impl From<&SecretObject> for ClientSecret {
    fn from(s: &SecretObject) -> Self {
        let data = s.data.clone().unwrap_or_default();
        ClientSecret {
            resource_version: s.metadata.resource_version.clone().unwrap_or_default(),
            cert: data.tls_crt.map(|b| b.0),
            key: data.tls_key.map(|b| b.0),
            ca: data.ca_crt.map(|b| b.0),
        }
    }
}

/// The PEMs of a usable Secret.
#[derive(Clone, PartialEq, Eq)]
struct ClientPems {
    cert: Vec<u8>,
    key: Vec<u8>,
    ca: Vec<u8>,
}

impl ClientSecret {
    /// The PEMs, if each key holds what it should: certificates in `tls.crt` and `ca.crt`,
    /// a private key in `tls.key`.
    fn pems(&self, namespace: &str) -> Result<ClientPems, Unavailable> {
        let present = |v: &Option<Vec<u8>>| {
            v.as_ref()
                .filter(|b| !b.iter().all(u8::is_ascii_whitespace))
                .cloned()
        };
        let (cert, key, ca) = (present(&self.cert), present(&self.key), present(&self.ca));
        let missing: Vec<&'static str> = SECRET_KEYS
            .into_iter()
            .zip([cert.is_none(), key.is_none(), ca.is_none()])
            .filter_map(|(k, missing)| missing.then_some(k))
            .collect();
        let (Some(cert), Some(key), Some(ca)) = (cert, key, ca) else {
            return Err(Unavailable::SecretIncomplete {
                namespace: namespace.to_string(),
                missing,
            });
        };
        let unusable = |key: &'static str, problem: String| Unavailable::SecretUnusable {
            namespace: namespace.to_string(),
            key,
            problem,
        };
        for (name, pem) in [("tls.crt", &cert), ("ca.crt", &ca)] {
            let mut certificates = CertificateDer::pem_slice_iter(pem).peekable();
            match certificates.peek() {
                None => return Err(unusable(name, "holds no PEM certificate".to_string())),
                Some(Err(e)) => return Err(unusable(name, format!("is not PEM: {e}"))),
                Some(Ok(_)) => {}
            }
        }
        // Its error names no byte of the key.
        PrivateKeyDer::from_pem_slice(&key)
            .map_err(|e| unusable("tls.key", format!("holds no PEM private key: {e}")))?;
        Ok(ClientPems { cert, key, ca })
    }
}

/// Host and port of an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    host: String,
    port: u16,
}

impl Target {
    /// `dns:///host:port` (gRPC's DNS target, as Crossplane writes it), `dns://authority/host:port`
    /// or `host:port`; a port is required (Crossplane's is 9443).
    fn parse(endpoint: &str) -> Option<Target> {
        let endpoint = endpoint.trim();
        let authority = match endpoint.strip_prefix("dns:") {
            // `dns:///name` or `dns://resolver/name`: the name follows the third slash.
            Some(rest) => match rest.strip_prefix("//") {
                Some(rest) => rest.split_once('/')?.1,
                None => rest,
            },
            None => endpoint,
        };
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (host, rest) = v6.split_once(']')?;
                (host, rest.strip_prefix(':')?)
            }
            None => authority.rsplit_once(':')?,
        };
        let valid_host = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':'));
        let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
        valid_host.then(|| Target {
            host: host.to_string(),
            port,
        })
    }

    /// `https://host:port` (an IPv6 host in brackets).
    fn address(&self) -> String {
        if self.host.contains(':') {
            format!("https://[{}]:{}", self.host, self.port)
        } else {
            format!("https://{}:{}", self.host, self.port)
        }
    }
}

/// The revision a Function's calls go to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Active {
    revision: String,
    endpoint: String,
    target: Target,
}

/// What [`FunctionEndpoints::resolve`] answers from: each Function's revision (a Function
/// without an active revision is absent), and the client PEMs.
#[derive(Clone, PartialEq, Eq)]
struct Published {
    revisions: Result<BTreeMap<String, Result<Active, Unavailable>>, Unavailable>,
    secret: Result<ClientPems, Unavailable>,
}

struct State {
    namespace: String,
    revisions_status: ListStatus,
    /// The API server's refusal of the last list of FunctionRevisions, in its words.
    revisions_refusal: Option<String>,
    revisions: BTreeMap<String, Revision>,
    secret_status: ListStatus,
    secret_refusal: Option<String>,
    /// `None`: no such Secret (or not listed yet).
    secret: Option<ClientSecret>,
    published: Published,
    generation: u64,
}

impl State {
    fn new(namespace: &str) -> State {
        // `published` is computed from the rest at once; this first value is never read.
        let mut state = State {
            namespace: namespace.to_string(),
            revisions_status: ListStatus::default(),
            revisions_refusal: None,
            revisions: BTreeMap::new(),
            secret_status: ListStatus::default(),
            secret_refusal: None,
            secret: None,
            published: Published {
                revisions: Err(Unavailable::RevisionsNotListed { reason: None }),
                secret: Err(Unavailable::SecretMissing {
                    namespace: String::new(),
                }),
            },
            generation: 0,
        };
        state.published = state.answers();
        state
    }

    /// Recomputes what `resolve` answers; bumps the generation when it changed.
    fn publish(&mut self) {
        let answers = self.answers();
        if answers != self.published {
            self.published = answers;
            self.generation += 1;
        }
    }

    fn answers(&self) -> Published {
        Published {
            revisions: self.revision_answers(),
            secret: self.secret_answer(),
        }
    }

    fn revision_answers(
        &self,
    ) -> Result<BTreeMap<String, Result<Active, Unavailable>>, Unavailable> {
        let status = &self.revisions_status;
        if !status.synced {
            return Err(if status.absent {
                Unavailable::RevisionsNotServed
            } else if let Some(error) = &self.revisions_refusal {
                Unavailable::RevisionsNotReadable {
                    error: error.clone(),
                }
            } else {
                Unavailable::RevisionsNotListed {
                    reason: status.last_error.as_ref().map(|e| e.message.clone()),
                }
            });
        }
        // Each Function's active revisions, by name.
        let mut active: BTreeMap<&str, Vec<&Revision>> = BTreeMap::new();
        for r in self.revisions.values().filter(|r| r.active) {
            if let Some(function) = &r.function {
                active.entry(function).or_default().push(r);
            }
        }
        let answers = active
            .into_iter()
            .map(|(function, revisions)| {
                // The first whose endpoint can be dialled; else why none can.
                let callable = revisions.iter().find_map(|r| {
                    let endpoint = r.endpoint.as_ref()?;
                    Target::parse(endpoint).map(|target| Active {
                        revision: r.name.clone(),
                        endpoint: endpoint.clone(),
                        target,
                    })
                });
                let answer = callable.ok_or_else(|| {
                    match revisions
                        .iter()
                        .find_map(|r| Some((r, r.endpoint.as_ref()?)))
                    {
                        Some((r, endpoint)) => Unavailable::BadEndpoint {
                            revision: r.name.clone(),
                            endpoint: endpoint.clone(),
                        },
                        None => Unavailable::NoEndpoint {
                            function: function.to_string(),
                            revisions: revisions.iter().map(|r| r.name.clone()).collect(),
                        },
                    }
                });
                (function.to_string(), answer)
            })
            .collect();
        Ok(answers)
    }

    fn secret_answer(&self) -> Result<ClientPems, Unavailable> {
        let namespace = self.namespace.clone();
        let status = &self.secret_status;
        if !status.synced {
            return Err(match &self.secret_refusal {
                Some(error) => Unavailable::SecretNotReadable {
                    namespace,
                    error: error.clone(),
                },
                None => Unavailable::SecretNotListed {
                    namespace,
                    reason: status.last_error.as_ref().map(|e| e.message.clone()),
                },
            });
        }
        match &self.secret {
            None => Err(Unavailable::SecretMissing { namespace }),
            Some(secret) => secret.pems(&namespace),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The watches

/// Watches FunctionRevisions until the task is aborted (kube-runtime's watcher, default
/// backoff).
pub(crate) async fn run_revisions(
    endpoints: FunctionEndpoints,
    client: kube::Client,
    page_size: u32,
) {
    let api = kube::Api::<RevisionObject>::all(client);
    let mut stream = super::watch::watch(api, page_size);
    let mut listing: Vec<Revision> = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(r)) => listing.push(Revision::from(&r)),
            Ok(Event::InitDone) => {
                let list = std::mem::take(&mut listing);
                let objects = list.len();
                let lists = endpoints.revisions_listed(list);
                tracing::info!(resource = REVISIONS_PLURAL, objects, lists, "listed");
            }
            Ok(Event::Apply(r)) => {
                let r = Revision::from(&r);
                tracing::debug!(resource = REVISIONS_PLURAL, name = %r.name, function = r.function.as_deref().unwrap_or_default(), active = r.active, endpoint = r.endpoint.as_deref().unwrap_or_default(), "changed");
                endpoints.revision_applied(r);
            }
            Ok(Event::Delete(r)) => {
                let name = r.metadata.name.unwrap_or_default();
                tracing::debug!(resource = REVISIONS_PLURAL, name = %name, "deleted");
                endpoints.revision_deleted(&name);
            }
            Err(e) => endpoints.revisions_failed(&e),
        }
    }
}

/// Watches the client certificate Secret, alone by its name, until the task is aborted.
pub(crate) async fn run_secret(endpoints: FunctionEndpoints, client: kube::Client) {
    let api = kube::Api::<SecretObject>::namespaced(client, endpoints.namespace());
    let fields = format!("metadata.name={CLIENT_SECRET}");
    // One object at most: any page size holds it.
    let mut stream = super::watch::watch_selected(api, 50, Some(&fields));
    let mut listing: Option<ClientSecret> = None;
    let is_ours = |s: &SecretObject| s.metadata.name.as_deref() == Some(CLIENT_SECRET);
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => listing = None,
            Ok(Event::InitApply(s)) if is_ours(&s) => listing = Some(ClientSecret::from(&s)),
            Ok(Event::InitDone) => {
                let secret = listing.take();
                let resource_version = secret
                    .as_ref()
                    .map(|s| s.resource_version.clone())
                    .unwrap_or_default();
                let found = secret.is_some();
                let lists = endpoints.secret_listed(secret);
                tracing::info!(
                    resource = SECRETS_PLURAL,
                    namespace = endpoints.namespace(),
                    name = CLIENT_SECRET,
                    found,
                    resource_version,
                    lists,
                    "listed"
                );
            }
            Ok(Event::Apply(s)) if is_ours(&s) => {
                let secret = ClientSecret::from(&s);
                tracing::info!(resource = SECRETS_PLURAL, namespace = endpoints.namespace(), name = CLIENT_SECRET, resource_version = %secret.resource_version, "client certificate Secret changed");
                endpoints.secret_applied(Some(secret));
            }
            Ok(Event::Delete(s)) if is_ours(&s) => {
                tracing::warn!(
                    resource = SECRETS_PLURAL,
                    namespace = endpoints.namespace(),
                    name = CLIENT_SECRET,
                    "client certificate Secret deleted: functions cannot be called"
                );
                endpoints.secret_applied(None);
            }
            // Another Secret: the field selector lets none through.
            Ok(Event::InitApply(_) | Event::Apply(_) | Event::Delete(_)) => {}
            Err(e) => endpoints.secret_failed(&e),
        }
    }
}

impl crate::runner::steps::Resolve for FunctionEndpoints {
    /// The active revision's endpoint, with mTLS; a revision is the key, so a new one gets
    /// a new client.
    fn resolve(&self, function: &str) -> Result<crate::runner::steps::Resolved, Option<String>> {
        FunctionEndpoints::resolve(self, function)
            .map(|e| crate::runner::steps::Resolved {
                key: e.revision,
                config: e.config,
            })
            .map_err(|why| match why {
                // Where the webhook cannot know (no Crossplane, no RBAC, not listed yet, a
                // Function not installed, which the Functions check reports): the step
                // stays unrendered, as without function calls.
                Unavailable::RevisionsNotListed { .. }
                | Unavailable::RevisionsNotReadable { .. }
                | Unavailable::RevisionsNotServed
                | Unavailable::NoActiveRevision { .. }
                | Unavailable::SecretNotListed { .. }
                | Unavailable::SecretNotReadable { .. } => None,
                other => Some(other.to_string()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_keeps_its_name_label_state_and_endpoint_only() {
        let json = r#"{"apiVersion":"pkg.crossplane.io/v1","kind":"FunctionRevision",
            "metadata":{"name":"function-auto-ready-1a2b3c","uid":"u","resourceVersion":"9",
              "labels":{"pkg.crossplane.io/package":"function-auto-ready",
                        "pkg.crossplane.io/parent":"x"},
              "annotations":{"a":"b"},"ownerReferences":[{"name":"function-auto-ready"}]},
            "spec":{"desiredState":"Active","image":"xpkg.crossplane.io/x:v1","revision":2},
            "status":{"endpoint":"dns:///function-auto-ready.crossplane-system:9443",
              "conditions":[{"type":"Healthy","status":"True"}]}}"#;
        let r: RevisionObject = serde_json::from_str(json).expect("parses");
        assert_eq!(r.metadata.annotations, None);
        assert_eq!(r.metadata.labels.as_ref().map(BTreeMap::len), Some(1));
        assert_eq!(
            Revision::from(&r),
            Revision {
                name: "function-auto-ready-1a2b3c".into(),
                uid: "u".into(),
                resource_version: "9".into(),
                function: Some("function-auto-ready".into()),
                active: true,
                endpoint: Some("dns:///function-auto-ready.crossplane-system:9443".into()),
            }
        );
        assert_eq!(
            <RevisionObject as kube::Resource>::url_path(&(), None),
            "/apis/pkg.crossplane.io/v1/functionrevisions"
        );
        assert_eq!(
            <SecretObject as kube::Resource>::url_path(&(), Some("crossplane-system")),
            "/api/v1/namespaces/crossplane-system/secrets"
        );
    }

    #[test]
    fn a_secret_keeps_its_three_keys_and_never_shows_them() {
        let json = r#"{"apiVersion":"v1","kind":"Secret",
            "metadata":{"name":"crossplane-tls-client","resourceVersion":"4",
              "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{...}"}},
            "type":"Opaque",
            "data":{"tls.crt":"Y2VydA==","tls.key":"c2VjcmV0LWtleQ==","ca.crt":"Y2E=","other":"eA=="}}"#;
        let s: SecretObject = serde_json::from_str(json).expect("parses");
        assert!(!format!("{s:?}").contains("secret-key"));
        let secret = ClientSecret::from(&s);
        assert_eq!(secret.key.as_deref(), Some(&b"secret-key"[..]));
        assert_eq!(secret.resource_version, "4");
        let empty: SecretObject =
            serde_json::from_str(r#"{"metadata":{"name":"crossplane-tls-client"},"data":null}"#)
                .expect("parses");
        assert_eq!(
            ClientSecret::from(&empty).pems("crossplane-system").err().map(|e| e.to_string()),
            Some("the client certificate Secret crossplane-system/crossplane-tls-client lacks tls.crt, tls.key, ca.crt (it needs tls.crt, tls.key and ca.crt): functions in the cluster require mTLS".to_string())
        );
        assert_eq!(
            secret.pems("crossplane-system").err().map(|e| e.to_string()),
            Some("the client certificate Secret crossplane-system/crossplane-tls-client: tls.crt holds no PEM certificate".to_string())
        );
    }

    #[test]
    fn endpoints_are_parsed_as_grpc_targets() {
        let t = |s: &str| Target::parse(s).map(|t| (t.host.clone(), t.port, t.address()));
        let svc = "function-x.crossplane-system";
        assert_eq!(
            t("dns:///function-x.crossplane-system:9443"),
            Some((svc.into(), 9443, format!("https://{svc}:9443")))
        );
        assert_eq!(
            t("dns://8.8.8.8/function-x.crossplane-system:9443"),
            Some((svc.into(), 9443, format!("https://{svc}:9443")))
        );
        assert_eq!(
            t("function-x.crossplane-system:9443"),
            Some((svc.into(), 9443, format!("https://{svc}:9443")))
        );
        assert_eq!(
            t("[::1]:9443"),
            Some(("::1".into(), 9443, "https://[::1]:9443".into()))
        );
        for bad in [
            "function-x.crossplane-system",
            "dns:///function-x:port",
            "https://function-x:9443",
            "dns:///:9443",
            "function-x:0",
            "dns://function-x:9443",
        ] {
            assert_eq!(t(bad), None, "{bad}");
        }
    }

    fn revision(name: &str, function: &str, active: bool, endpoint: Option<&str>) -> Revision {
        Revision {
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: "1".into(),
            function: Some(function.into()),
            active,
            endpoint: endpoint.map(Into::into),
        }
    }

    #[test]
    fn the_first_active_revision_with_an_endpoint_is_called() {
        let endpoints = FunctionEndpoints::new(&FunctionCallOptions::default());
        assert_eq!(
            endpoints.resolve("fx").expect_err("not listed").to_string(),
            "FunctionRevisions are not listed yet"
        );
        assert_eq!(endpoints.generation(), 0);
        endpoints.revisions_listed(vec![
            revision(
                "fx-1",
                "fx",
                false,
                Some("dns:///old.crossplane-system:9443"),
            ),
            revision("fx-2", "fx", true, None),
            revision("fx-3", "fx", true, Some("dns:///fx.crossplane-system:9443")),
            revision("fy-1", "fy", true, None),
            revision("fz-1", "fz", true, Some("fz")),
        ]);
        let generation = endpoints.generation();
        assert_eq!(generation, 1);
        // The Secret is not read yet: every function waits for it.
        assert_eq!(
            endpoints.resolve("fx").expect_err("no secret").to_string(),
            "the client certificate Secret crossplane-system/crossplane-tls-client is not read yet"
        );
        let state = endpoints.lock();
        let Ok(functions) = &state.published.revisions else {
            panic!("listed");
        };
        assert_eq!(
            functions["fx"].as_ref().map(|a| a.revision.as_str()),
            Ok("fx-3")
        );
        assert_eq!(
            functions["fy"]
                .as_ref()
                .expect_err("no endpoint")
                .to_string(),
            "no active FunctionRevision of Function \"fy\" (label pkg.crossplane.io/package=fy, spec.desiredState: Active) has a status.endpoint yet: fy-1"
        );
        assert_eq!(
            functions["fz"].as_ref().expect_err("bad").to_string(),
            "FunctionRevision \"fz-1\" has status.endpoint \"fz\", which is not dns:///host:port or host:port"
        );
        drop(state);
        // A new resourceVersion of the same revision answers the same: no new generation.
        endpoints.revision_applied(Revision {
            resource_version: "2".into(),
            ..revision("fx-3", "fx", true, Some("dns:///fx.crossplane-system:9443"))
        });
        assert_eq!(endpoints.generation(), generation);
        assert_eq!(
            endpoints.resolve("nothing").expect_err("none").to_string(),
            "no active FunctionRevision of Function \"nothing\" (label pkg.crossplane.io/package=nothing, spec.desiredState: Active)"
        );
    }
}
